"""Overload against a healthy PostgreSQL: what 500 concurrent calls on a pool of 4 are told.

Each call holds its connection for ``--sleep`` seconds (``SELECT pg_sleep``); with a connect
timeout of 0.5 s most of them cannot get one. Every outcome is counted: success, the
``PoolSaturatedError`` a saturated pool raises, a "server may be down", a "server closed the
connection unexpectedly"; and how many connections the pool opened in all (4: none severed or
replaced). ``--checked 0`` makes every checkout check its connection, as after a pause.
The server is a temporary embedded one (docs/reliability.md, "Overload is not an outage").

    python benchmarks/experiments/pool_saturation.py --rounds 2
"""

from __future__ import annotations

import argparse
import asyncio
from collections import Counter

from actrone_pg._embedded import temporary_server
from actrone_pg.migrations import migrate
from actrone_pg.stores.postgres import PostgresSettings, PostgresStore, connection

#: The store's own window in which a connection used just now is not checked again.
CHECKED_RECENTLY = connection._CHECKED_RECENTLY


def outcome(result: BaseException | None) -> str:
    """A call's result in one word or phrase."""
    if result is None:
        return "ok"
    text = str(result)
    if "server closed" in text:
        return "server closed"
    if "may be down" in text:
        return "may be down"
    return type(result).__name__


async def run(dsn: str, *, calls: int, sleep: float, checked: float) -> str:
    connection._CHECKED_RECENTLY = checked
    settings = PostgresSettings(
        dsn, schema="probe", pool_min_size=4, pool_max_size=4, connect_timeout=0.5
    )
    store = PostgresStore(settings)
    await store.setup()

    async def call() -> None:
        async with store.db.conn() as conn:
            await conn.execute("SELECT pg_sleep(%s)", (sleep,))

    try:
        results = await asyncio.gather(*(call() for _ in range(calls)), return_exceptions=True)
        assert store.db.pool is not None
        opened = store.db.pool.get_stats()["connections_num"]
    finally:
        await store.close()
    counts = Counter(outcome(r) for r in results)
    return f"checked={checked:g} {dict(sorted(counts.items()))} opened={opened}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--sleep", type=float, default=0.005)
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    with temporary_server("actrone-saturation-") as dsn:
        migrate(dsn, "probe")
        for _ in range(args.rounds):
            for checked in (CHECKED_RECENTLY, 0.0):
                print(asyncio.run(run(dsn, calls=args.calls, sleep=args.sleep, checked=checked)))


if __name__ == "__main__":
    main()
