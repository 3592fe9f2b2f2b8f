"""PostgreSQL with its server frozen (SIGSTOP): the documented bound holds (issue 13, finding 6).

A frozen server keeps its connections open and answers nothing, so it cannot enforce its own
statement_timeout. Cancelling the waiting task made psycopg send a cancel request and wait for
the statement to end (5 s + 5 s more); the store now shuts the connection's socket down at the
deadline instead. Timings are not asserted (shared machine); what is asserted is the cause: the
error names the bound that fired and psycopg never tried a cancel request.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest

from actrone_pg.errors import StoreUnavailableError
from actrone_pg.stores.postgres import PostgresSettings, PostgresStore
from actrone_pg.stores.postgres.connection import _CHECKED_RECENTLY

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


@pytest.fixture
async def frozen_store(private_postgres: Any) -> AsyncIterator[PostgresStore]:
    store = PostgresStore(
        PostgresSettings(
            private_postgres.dsn, schema="frozen", connect_timeout=1.0, statement_timeout=2.0
        )
    )
    await store.setup()
    try:
        yield store
    finally:
        private_postgres.thaw()
        await store.close()


def cancel_requests(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "cancel" in r.getMessage()]


async def test_a_statement_on_a_frozen_server_fails_at_the_bound_without_a_cancel_request(
    frozen_store: PostgresStore, private_postgres: Any, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="psycopg"):
        with pytest.raises(StoreUnavailableError, match=r"within 3 s .*connection was closed"):
            async with frozen_store.db.conn() as conn:
                private_postgres.freeze()
                await conn.execute("SELECT 1")
    assert cancel_requests(caplog) == []
    private_postgres.thaw()
    assert await frozen_store.count_memories("a") == 0  # the same store, without a restart


async def test_a_checkout_from_a_frozen_server_fails_within_the_connect_timeout(
    frozen_store: PostgresStore, private_postgres: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # Past the window in which a connection a call just used is trusted without a check.
    await asyncio.sleep(_CHECKED_RECENTLY * 2)
    private_postgres.freeze()
    with caplog.at_level(logging.WARNING, logger="psycopg"):
        # The pooled connection's checkout check waits on the frozen server; it is cut off at
        # the connect timeout, not left to the whole call's deadline.
        with pytest.raises(StoreUnavailableError, match=r"no PostgreSQL connection within 1.0 s"):
            await frozen_store.count_memories("a")
    assert cancel_requests(caplog) == []
    private_postgres.thaw()
    assert await frozen_store.count_memories("a") == 0


async def test_a_connection_used_just_now_is_not_checked_and_fails_at_the_calls_bound(
    frozen_store: PostgresStore, private_postgres: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # Within the window the checkout skips its check (one round trip less per call): a server
    # frozen right then is found by the statement, at the call's bound, still typed.
    assert await frozen_store.count_memories("a") == 0
    private_postgres.freeze()
    with caplog.at_level(logging.WARNING, logger="psycopg"):
        with pytest.raises(StoreUnavailableError, match=r"within 3 s .*connection was closed"):
            await frozen_store.count_memories("a")
    assert cancel_requests(caplog) == []
    private_postgres.thaw()
    assert await frozen_store.count_memories("a") == 0


# -- spec §8: the next call after the server is back succeeds, without restarting anything --


@pytest.fixture
async def restart_store(private_postgres: Any) -> AsyncIterator[PostgresStore]:
    store = PostgresStore(
        PostgresSettings(
            private_postgres.dsn,
            schema="restarted",
            pool_min_size=4,
            pool_max_size=4,
            connect_timeout=1.0,
            statement_timeout=2.0,
        )
    )
    await store.setup()
    try:
        yield store
    finally:
        private_postgres.thaw()
        if not private_postgres.processes():
            private_postgres.start()
        await store.close()


async def test_the_first_call_after_a_restart_succeeds_despite_stale_pooled_connections(
    restart_store: PostgresStore, private_postgres: Any
) -> None:
    assert await restart_store.count_memories("a") == 0  # the pool holds 4 open connections
    private_postgres.kill9()
    private_postgres.start()  # no call in between: every pooled connection is now dead
    # The pool's own checkout check, after the second dead connection in a row, slept a second
    # before it tried the next one, so this call ran out of its 1 s checkout time.
    assert await restart_store.count_memories("a") == 0


async def test_the_first_call_after_a_long_outage_succeeds(
    restart_store: PostgresStore, private_postgres: Any
) -> None:
    assert await restart_store.count_memories("a") == 0
    private_postgres.kill9()
    failures = 0
    loop = asyncio.get_running_loop()
    until = loop.time() + 20.0
    while loop.time() < until:  # calls keep failing while the server is down
        with pytest.raises(StoreUnavailableError):
            await restart_store.count_memories("a")
        failures += 1
        await asyncio.sleep(0.2)
    private_postgres.start()
    # The pool's reconnection attempts were backing off (1, 2, 4, 8, 16 s): after 20 s down the
    # last ones ran 15-17 s in and the next are due 31-33 s in; calls failed until then.
    assert await restart_store.count_memories("a") == 0
    assert failures > 0
