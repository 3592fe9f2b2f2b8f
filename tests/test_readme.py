"""The README's quickstart runs as written (against the test server, in a scratch schema)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).parent.parent / "README.md"


@pytest.mark.postgres
def test_quickstart_runs(
    postgres_dsn: str,
    scratch_schema: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The snippet sets backend="postgres" in code; the environment supplies the server, as a
    # deployment would (ACTRONE_POSTGRES_DSN), and keeps it out of other tests' schema.
    monkeypatch.setenv("ACTRONE_POSTGRES_DSN", postgres_dsn)
    monkeypatch.setenv("ACTRONE_POSTGRES_SCHEMA", scratch_schema)
    monkeypatch.setenv("ACTRONE_EMBEDDING_PROVIDER", "hashing")
    match = re.search(r"## Quickstart\n\n```python\n(.*?)```", README.read_text(), re.S)
    assert match is not None
    exec(compile(match.group(1), "README quickstart", "exec"), {"__name__": "quickstart"})
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "Plan dinner? -> Sure, for how many?"
    # tokens used / shares of the 2,000-token budget: the turn is ceil(12/4) + ceil(19/4) = 8;
    # the hashing embedder shares no word between the query and the memory, so L2 uses 0
    assert out[-1] == "8 / 700 0 / 500"
