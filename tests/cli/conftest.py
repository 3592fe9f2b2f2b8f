"""The embedded server of every CLI test is one in a directory of its own, never the user's.

Store commands default to the embedded PostgreSQL (``actrone_pg._cli._store.default_backend``),
so a command run without ``--dsn`` or ``--backend`` would otherwise start and use the server in
the user's data directory. Here that directory is an empty one: read-only commands refuse it
(``holds no embedded PostgreSQL``), and a test that wants a server names one.
"""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _own_embedded_data_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ACTRONE_POSTGRES_DATA_DIR", str(tmp_path / "no-embedded-server"))
    monkeypatch.delenv("ACTRONE_POSTGRES_DSN", raising=False)
    monkeypatch.delenv("ACTRONE_BACKEND", raising=False)
