"""Soak of the MCP HTTP server: its resident memory over minutes of calls (spec §8, "Bounded
state"; docs/reliability.md, "Bounded state").

Starts ``actrone-pg mcp --transport http`` on a free loopback port, over a throw-away embedded
PostgreSQL (``--backend postgres``, the default) or the in-memory store, and runs ``--clients``
MCP clients against it for ``--minutes``. Each client opens a session, makes ``--calls-per-session``
tool calls (store_turn, retrieve_context, search_memories, inject_memory, get_recent_turns,
list_memories) and closes it; about one time in five it opens a session and abandons it instead
(an initialize, no DELETE), which the server's idle-session bound (``--session-idle-seconds``)
must close. Sessions cycle through
``--sessions`` ids per agent, so the data stays bounded by the store's own limits (turns per
session; memories grow in PostgreSQL, not in the server's process). Every ``--sample`` seconds
the server's RSS (``/proc/PID/status``, VmRSS) is printed with the calls and errors so far.

    python benchmarks/mcp_soak.py --minutes 10
    python benchmarks/mcp_soak.py --minutes 1 --backend memory --json soak.json
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "soak-token-0123456789abcdef0123"
AGENTS = ("soak-a", "soak-b", "soak-c", "soak-d")
WORDS = (
    "tea coffee garden bicycle harbour violin winter lemon museum river mountain letter "
    "kitchen window forest island market candle"
).split()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rss_kb(pid: int) -> int:
    """The process's resident set, in kB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


@contextlib.contextmanager
def store_args(backend: str) -> Iterator[list[str]]:
    """The server's store options: a throw-away embedded PostgreSQL, or the in-memory store."""
    if backend == "memory":
        yield ["--backend", "memory"]
        return
    sys.path.insert(0, str(ROOT))
    from actrone_pg._embedded import temporary_server

    with temporary_server(prefix="actrone-mcp-soak-") as dsn:
        yield ["--backend", "postgres", "--dsn", dsn, "--schema", "soak"]


@contextlib.contextmanager
def mcp_server(args: argparse.Namespace, store: list[str], log: Path) -> Iterator[tuple[str, int]]:
    port = free_port()
    command = [sys.executable, "-m", "actrone_pg.cli", "mcp", "--transport", "http"]
    command += ["--port", str(port), "--embedder", "hashing", *store]
    command += ["--session-idle-seconds", str(args.session_idle_seconds)]
    for agent in AGENTS:
        command += ["--agent", agent]
    with log.open("wb") as err:
        proc = subprocess.Popen(
            command,
            env={**os.environ, "ACTRONE_MCP_TOKEN": TOKEN, "PYTHONPATH": str(ROOT)},
            cwd=ROOT,
            stderr=err,
        )
        try:
            deadline = time.monotonic() + 120
            while True:
                if proc.poll() is not None:
                    raise SystemExit(f"the server exited:\n{log.read_text()}")
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)
            yield f"http://127.0.0.1:{port}/mcp", proc.pid
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


class Tally:
    def __init__(self) -> None:
        self.calls = 0
        self.sessions = 0
        self.abandoned = 0
        self.errors: Counter[str] = Counter()


async def one_session(
    url: str, rng: random.Random, tally: Tally, calls: int, sessions: int
) -> None:
    agent = rng.choice(AGENTS)
    session = f"s{rng.randrange(sessions)}"
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        tally.sessions += 1
        for _ in range(calls):
            words = " ".join(rng.sample(WORDS, 4))
            choices: list[tuple[str, dict[str, Any]]] = [
                ("store_turn", {"session_id": session, "user_message": f"I like {words}",
                                "assistant_message": f"Noted: {words}"}),
                ("retrieve_context", {"session_id": session, "query": words,
                                      "token_budget": 400}),
                ("search_memories", {"query": words}),
                ("inject_memory", {"content": f"The user mentioned {words}."}),
                ("get_recent_turns", {"session_id": session}),
                ("list_memories", {}),
            ]  # fmt: skip
            tool, arguments = rng.choice(choices)
            result = await client.call_tool(tool, {"agent_id": agent, **arguments})
            tally.calls += 1
            if result.is_error:
                tally.errors[f"{tool}: {str(result.content)[:80]}"] += 1


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "soak", "version": "1"},
    },
}


async def abandon_session(url: str, tally: Tally) -> None:
    """Open a session and go away without closing it (a client that crashed)."""
    async with httpx2.AsyncClient(timeout=60) as http:
        response = await http.post(
            url,
            json=INITIALIZE,
            headers={
                "Authorization": f"Bearer {TOKEN}",
                "Accept": "application/json, text/event-stream",
            },
        )
    response.raise_for_status()
    tally.abandoned += 1


async def client_loop(
    url: str, seed: int, until: float, tally: Tally, calls: int, sessions: int
) -> None:
    rng = random.Random(seed)
    while time.monotonic() < until:
        try:
            if rng.random() < 0.2:
                await abandon_session(url, tally)
            else:
                await one_session(url, rng, tally, calls, sessions)
        except Exception as exc:  # counted, and the soak goes on
            tally.errors[f"{type(exc).__name__}: {str(exc)[:80]}"] += 1
            await asyncio.sleep(0.5)


def _line(row: dict[str, Any]) -> str:
    return (
        f"{row['elapsed_s']:>9}  {row['calls']:>7}  {row['sessions']:>8}  "
        f"{row['abandoned']:>9}  {row['errors']:>6}  {row['rss_mb']:>13}"
    )


async def soak(args: argparse.Namespace, url: str, pid: int) -> list[dict[str, Any]]:
    tally = Tally()
    start = time.monotonic()
    until = start + args.minutes * 60
    loops = [
        asyncio.create_task(
            client_loop(url, seed, until, tally, args.calls_per_session, args.sessions)
        )
        for seed in range(args.clients)
    ]
    rows: list[dict[str, Any]] = []
    print(f"{'elapsed s':>9}  {'calls':>7}  {'sessions':>8}  {'abandoned':>9}  {'errors':>6}"
          f"  {'server RSS MB':>13}", flush=True)  # fmt: skip
    while True:
        row = {
            "elapsed_s": round(time.monotonic() - start),
            "calls": tally.calls,
            "sessions": tally.sessions,
            "abandoned": tally.abandoned,
            "errors": sum(tally.errors.values()),
            "rss_mb": round(rss_kb(pid) / 1024, 1),
        }
        rows.append(row)
        print(_line(row), flush=True)
        if time.monotonic() >= until:
            break
        await asyncio.sleep(min(args.sample, max(0.0, until - time.monotonic())))
    await asyncio.gather(*loops)
    # once the idle bound has passed, the abandoned sessions are closed
    await asyncio.sleep(args.session_idle_seconds + 5)
    rows.append(
        {
            "elapsed_s": round(time.monotonic() - start),
            "calls": tally.calls,
            "sessions": tally.sessions,
            "abandoned": tally.abandoned,
            "errors": sum(tally.errors.values()),
            "rss_mb": round(rss_kb(pid) / 1024, 1),
            "after_idle_bound": True,
        }
    )
    print(f"after the idle bound ({args.session_idle_seconds} s): server RSS "
          f"{rows[-1]['rss_mb']} MB", flush=True)  # fmt: skip
    for error, n in tally.errors.most_common(10):
        print(f"  error x{n}: {error}")
    return rows


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--calls-per-session", type=int, default=10)
    parser.add_argument("--sessions", type=int, default=20, help="session ids per agent")
    parser.add_argument("--sample", type=float, default=30.0, help="seconds between samples")
    parser.add_argument("--session-idle-seconds", type=int, default=30)
    parser.add_argument("--backend", choices=["postgres", "memory"], default="postgres")
    parser.add_argument("--json", type=Path, help="write the samples here")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with (
        tempfile.TemporaryDirectory(prefix="actrone-mcp-soak-log-") as folder,
        store_args(args.backend) as store,
        mcp_server(args, store, Path(folder) / "server.log") as (url, pid),
    ):
        rows = asyncio.run(soak(args, url, pid))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
