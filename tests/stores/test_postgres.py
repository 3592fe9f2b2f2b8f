"""PostgreSQL specifics beyond the shared conformance suite: bad input, SQL access, statistics."""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from dataclasses import replace

import numpy as np
import psycopg
import pytest
from psycopg import sql

from actrone_pg import MemoryConfig, MemoryManager, migrations
from actrone_pg.budget import pack_costs
from actrone_pg.errors import (
    ConfigurationError,
    DimensionMismatchError,
    SchemaError,
    StoreError,
    StoreUnavailableError,
    ValidationError,
)
from actrone_pg.ranking import CorpusStats, tokenize
from actrone_pg.stores.base import FENCED_LOCK
from actrone_pg.stores.postgres import PostgresSettings, PostgresStore, builders
from tests.factories import NOW, ago, record, request, turn
from tests.helpers import FixedEmbedder
from tests.oracle import bm25_score

pytestmark = pytest.mark.postgres


async def test_dimension_mismatch_on_write_and_search_and_nothing_written(
    store_postgres: PostgresStore,
) -> None:
    await store_postgres.upsert_memories([record("a", "m1", "coffee", [1, 0, 0, 0])])
    bad = record("a", "m2", "tea", [1, 0, 0, 0, 0, 0, 0, 1])
    with pytest.raises(DimensionMismatchError, match="4-dimensional"):
        await store_postgres.upsert_memories([bad])
    assert await store_postgres.count_memories("a") == 1
    with pytest.raises(DimensionMismatchError, match="query vector has 8"):
        await store_postgres.search(request("a", "tea", [1, 0, 0, 0, 0, 0, 0, 1]))


async def test_dimension_mismatch_is_seen_by_a_second_store_process(
    store_postgres: PostgresStore, postgres_dsn: str, postgres_schema: str
) -> None:
    # The registry lives in the database: a store with an empty cache still refuses.
    await store_postgres.upsert_memories([record("a", "m1", "coffee", [1, 0, 0, 0])])
    other = PostgresStore(PostgresSettings(postgres_dsn, schema=postgres_schema))
    await other.setup()
    try:
        with pytest.raises(DimensionMismatchError):
            await other.upsert_memories([record("b", "x", "tea", [1, 0, 0, 0, 0, 1])])
        assert await other.count_memories("b") == 0
    finally:
        await other.close()


async def test_new_embedder_of_another_dimension_needs_no_rebuild(
    store_postgres: PostgresStore,
) -> None:
    await store_postgres.upsert_memories([record("a", "m1", "coffee", [1, 0, 0, 0])])
    await store_postgres.upsert_memories(
        [record("a", "m2", "coffee", [1, 0, 0, 0, 0, 0, 0, 0], embedder="big")]
    )
    small = (await store_postgres.search(request("a", "coffee", [1, 0, 0, 0]))).hits
    big = (
        await store_postgres.search(
            request("a", "coffee", [1, 0, 0, 0, 0, 0, 0, 0], embedder="big")
        )
    ).hits
    assert [h.memory.id for h in small] == ["m1"]
    assert [h.memory.id for h in big] == ["m2"]


@pytest.mark.parametrize(
    "query",
    [
        "coffee & !tea | (milk <-> sugar):* 'quoted'",
        "((((",
        "'\\\\' \" ; -- DROP TABLE memories; /* */",
        "%_% \\x00 ::vector",
        "café crème brûlée",
    ],
)
async def test_tsquery_syntax_and_punctuation_are_plain_text(
    store_postgres: PostgresStore, query: str
) -> None:
    await store_postgres.upsert_memories(
        [
            record("a", "m1", "coffee with milk and sugar", [1, 0, 0, 0], created_at=ago(days=1)),
            record("a", "m2", "café crème", [1, 0.1, 0, 0]),
        ]
    )
    hits = (await store_postgres.search(request("a", query, [1, 0, 0, 0]))).hits
    assert sorted(h.memory.id for h in hits) == ["m1", "m2"]
    terms = set(tokenize(query))
    for h in hits:
        shares = bool(terms & set(tokenize(h.memory.content)))
        assert (h.explain.lexical_rank is not None) == shares


async def test_nul_bytes_are_refused_before_anything_is_written(
    postgres_dsn: str, postgres_schema: str, store_postgres: PostgresStore
) -> None:
    mm = await MemoryManager.create(
        MemoryConfig(backend="postgres"), store=store_postgres, embedder=FixedEmbedder()
    )
    with pytest.raises(ValidationError, match="NUL"):
        await mm.inject_memories("a", ["fine", "bad\x00text"])
    with pytest.raises(ValidationError, match="NUL"):
        await mm.store_turn("a", "s", "hi\x00", "there")
    assert await store_postgres.count_memories("a") == 0
    assert await store_postgres.recent_turns("a", "s", limit=5, ttl_seconds=60) == []


# Its budget: about 20 s on a quiet 2-core machine, and several times that on a busy one. Nearly
# all of it is the English analyzer stemming ~126,000 distinct made-up tokens (~160,000 with
# the stem cache's bound) with Snowball in pure Python, 50-90 us a token (docs/reliability.md,
# "Bounded state"); agent_write's term statistics of those terms take about 2 s (16 us a term).
@pytest.mark.slow
@pytest.mark.timeout(900)
async def test_megabyte_texts_round_trip(store_postgres: PostgresStore) -> None:
    rng = random.Random(3)
    words = [f"w{rng.randrange(200_000)}" for _ in range(200_000)]
    big = " ".join(words)  # about 1.5 MB with ~150,000 distinct terms
    assert len(big) > 1_000_000
    same = [1.0, 0, 0, 0]
    mm = await MemoryManager.create(
        MemoryConfig(backend="postgres", max_text_chars=3_000_000),
        store=store_postgres,
        embedder=FixedEmbedder({big: same, words[7]: same}, dimensions=4),
    )
    mid = await mm.inject_memory("a", big)
    await mm.store_turn("a", "s", big, "ok")
    got = await mm.get_memory("a", mid)
    assert got is not None and got.content == big
    turns = await mm.get_recent_turns("a", "s")
    assert turns[0].user_message == big
    hits = await mm.search_memories("a", words[7], explain=True)
    assert hits and hits[0].id == mid and hits[0].explain is not None
    assert hits[0].explain.lexical_rank == 1


async def test_a_memory_of_a_few_sentences_is_stored_as_written(
    store_postgres: PostgresStore, postgres_dsn: str, postgres_schema: str
) -> None:
    # Migration 0023: at PostgreSQL's default toast_tuple_target such a row (its vector, about
    # 40 words) had its terms and content compressed and its vector moved out of line; each
    # search decompressed the terms of every candidate it scored. A megabyte memory is still
    # compressed and moved out (test_megabyte_texts_round_trip reads it back).
    await record_sizes_as_written(store_postgres, postgres_dsn, postgres_schema)


async def record_sizes_as_written(store: PostgresStore, dsn: str, schema: str) -> None:
    """A 384-d memory of 40 words, written, is inline and uncompressed (the Citus suite's too:
    ``memories`` read through the coordinator, from the shard's rows)."""
    rng = random.Random(9)
    words = "meeting doctor sister brother holiday museum concert train river garden".split()
    text = " ".join(rng.choice(words) + str(i) for i in range(40))
    await store.upsert_memories([record("a", "long", text, [1.0] * 384)])
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            sql.SQL(
                "SELECT pg_column_compression(term_freqs), pg_column_compression(content),"
                " pg_column_size(embedding), pg_column_size(m.*) FROM {} AS m"
                " WHERE agent_id = 'a' AND id = 'long'"
            ).format(sql.Identifier(schema, "memories"))
        ).fetchone()
    assert row is not None
    compressed_terms, compressed_content, vector_size, row_size = row
    assert (compressed_terms, compressed_content) == (None, None)
    assert row_size > 2_100 and vector_size == 384 * 4 + 8  # over the old target, whole


async def test_bm25_statistics_match_a_recount_after_random_writes(
    store_postgres: PostgresStore, postgres_dsn: str, postgres_schema: str
) -> None:
    # Every batch is one agent_write() call (over the schema's tables on one server) and a COPY.
    await random_writes_match_a_recount(store_postgres, postgres_dsn, postgres_schema)


async def random_writes_match_a_recount(store: PostgresStore, dsn: str, schema: str) -> None:
    """Random batches of new and replaced memories, and deletes, of one agent; then its
    statistics rows against a count from the texts kept (also the Citus suite's)."""
    rng = random.Random(5)
    vocab = "alpha beta gamma delta epsilon zeta eta theta".split()
    live: dict[str, str] = {}
    for step in range(40):
        if live and rng.random() < 0.3:
            victim = rng.choice(sorted(live))
            assert await store.delete_memory("a", victim)
            del live[victim]
            continue
        batch = []
        for _ in range(rng.randint(1, 4)):
            mid = f"m{rng.randrange(30)}"
            if any(r.memory.id == mid for r in batch):
                continue
            text = " ".join(rng.choice(vocab) for _ in range(rng.randint(0, 6))) or "."
            batch.append(record("a", mid, text, [1, step, 0, 1]))
            live[mid] = text
        await store.upsert_memories(batch)
    df: Counter[str] = Counter()

    def terms(text: str) -> list[str]:  # each memory's document: its text, then its date
        return store.analyzer.document_terms(text, NOW)

    for text in live.values():
        df.update(set(terms(text)))
    total = sum(len(terms(t)) for t in live.values())
    stats, doc_freqs = agent_statistics(dsn, schema, "a")
    assert stats == (len(live), total)
    assert doc_freqs == dict(df)
    assert await store.count_memories("a") == len(live)


def agent_statistics(
    dsn: str, schema: str, agent_id: str
) -> tuple[tuple[int, int] | None, dict[str, int]]:
    """The agent's statistics rows as stored: ``(n_docs, total_length)`` (``None`` without a
    row) and each term's document frequency."""
    with psycopg.connect(dsn) as conn:
        stats = conn.execute(
            sql.SQL("SELECT n_docs, total_length FROM {} WHERE agent_id = %s").format(
                sql.Identifier(schema, "agent_stats")
            ),
            (agent_id,),
        ).fetchone()
        rows = conn.execute(
            sql.SQL("SELECT term, df FROM {} WHERE agent_id = %s").format(
                sql.Identifier(schema, "term_stats")
            ),
            (agent_id,),
        ).fetchall()
    return (None if stats is None else (int(stats[0]), int(stats[1]))), dict(rows)


async def test_bm25_adds_its_terms_in_query_order_bit_for_bit(
    store_postgres: PostgresStore,
) -> None:
    # Floating-point addition is not associative: with eight terms of different IDFs, a sum in
    # another order differs in the last bits for some documents. hybrid_search must add them in
    # query-term order, as ranking.bm25_score does (migration 0008 relies on a CTE's order).
    rng = random.Random(11)
    words = "alpha beta gamma delta epsilon zeta eta theta".split()
    texts = {
        f"m{i}": " ".join(rng.choice(words[: rng.randint(2, 8)]) for _ in range(rng.randint(3, 12)))
        for i in range(60)
    }
    await store_postgres.upsert_memories(
        [record("a", mid, text, [1, 0, 0, 0]) for mid, text in texts.items()]
    )
    counts = {
        mid: store_postgres.analyzer.document_counts(text, NOW) for mid, text in texts.items()
    }
    df: Counter[str] = Counter()
    for tf, _ in counts.values():
        df.update(tf.keys())
    stats = CorpusStats(len(texts), sum(n for _, n in counts.values()), dict(df))
    query = "theta eta zeta epsilon delta gamma beta alpha"
    hits = (await store_postgres.search(request("a", query, [1, 0, 0, 0], limit=500))).hits
    assert len(hits) == len(texts)
    terms = store_postgres.analyzer.query_terms(query)
    reordered = 0
    for hit in hits:
        assert hit.explain is not None
        tf, length = counts[hit.memory.id]
        assert hit.explain.bm25 == bm25_score(terms, tf, length, stats), hit.memory.id
        reordered += bm25_score(terms[::-1], tf, length, stats) != hit.explain.bm25
    assert reordered > 0  # the data can tell the two orders apart


def test_pack_positions_chooses_as_pack_costs_does(postgres_dsn: str, postgres_schema: str) -> None:
    rng = random.Random(3)
    cases: list[tuple[list[int], int | None, int | None]] = [
        ([], 10, None),
        ([5, 3, 10, 2, 1], 8, None),
        ([5, 3, 10, 2, 1], None, 2),
        ([5, 3, 10, 2, 1], None, None),
        ([5, 3, 10, 2, 1], 100, 0),
        ([0, 0, 7], 0, None),
    ]
    for _ in range(300):
        costs = [rng.choice([0, 1, 5, 20, 80, 300]) for _ in range(rng.randint(0, 40))]
        budget = rng.choice([None, 0, 10, 100, 1000, 10**10])
        cases.append((costs, budget, rng.choice([None, 0, 1, 3, 10, 500])))
    function = sql.Identifier(postgres_schema, "pack_positions")
    with psycopg.connect(postgres_dsn) as conn:
        for costs, budget, max_items in cases:
            row = conn.execute(
                sql.SQL("SELECT {}(%s::int[], %s::bigint, %s::int)").format(function),
                (costs, budget, max_items),
            ).fetchone()
            assert row is not None
            taken, _ = pack_costs(costs, budget, max_items)
            assert row[0] == [i + 1 for i in taken], (costs, budget, max_items)


def test_array_literals_read_back_as_the_values_they_were_made_of(postgres_dsn: str) -> None:
    # retrieve()'s terms and weights travel as array literals (builders.array_literal): whatever
    # a term holds (a lexeme of a non-'simple' configuration may hold anything but NUL), the
    # server must read the same array back, and every float bit for bit.
    terms = ["plain", 'q"uote', "back\\slash", "{br,ace}", "NULL", "", " sp ", "ünï", "x'y", "\t"]
    weights = [1.0, 0.1, 4.0, 1e-300, 2.0**60, 1 / 3, 0.0]
    with psycopg.connect(postgres_dsn) as conn:
        for prepare in (False, True):
            row = conn.execute(
                "SELECT %s::text[], %s::float8[], %s::text[]",
                (
                    builders.array_literal(terms),
                    builders.array_literal(weights),
                    builders.array_literal([]),
                ),
                prepare=prepare,
            ).fetchone()
            assert row == (terms, weights, [])


async def test_hybrid_search_is_callable_from_plain_sql(
    store_postgres: PostgresStore, postgres_dsn: str, postgres_schema: str
) -> None:
    await store_postgres.upsert_memories(
        [
            record(
                "a",
                "m1",
                "The user drinks coffee every morning",
                [1, 0, 0, 0],
                created_at=ago(days=2),
            ),
            record(
                "a", "m2", "Coffee makes the user jittery", [0.9, 0.4, 0, 0], created_at=ago(days=1)
            ),
            record("a", "m3", "The user has a cat", [0.8, 0, 0.6, 0]),
            record("b", "x1", "coffee coffee coffee", [1, 0, 0, 0]),
        ]
    )
    expected = (await store_postgres.search(request("a", "coffee?", [1, 0, 0, 0], now=NOW))).hits
    schema = sql.Identifier(postgres_schema)
    query = sql.SQL(
        "SELECT id, dense_rank, lexical_rank, recency_rank, fused_score FROM {}.hybrid_search("
        "'a', 'test-embedder', tsvector_to_array(to_tsvector('english', 'coffee?')), '[1,0,0,0]',"
        " p_threshold => 0.0,"
        " p_now => '2026-11-01 12:00:00+00')"
    ).format(schema, schema)
    with psycopg.connect(postgres_dsn) as conn:
        rows = conn.execute(query).fetchall()
    # By hand: dense m1 > m2 > m3; BM25 favours the shorter m2; m3 is the newest.
    assert [r[0] for r in rows] == [h.memory.id for h in expected] == ["m2", "m1", "m3"]
    assert [(r[1], r[2], r[3]) for r in rows] == [(2, 1, 2), (1, 2, 3), (3, None, 1)]
    assert rows[0][4] == 1 / 62 + 1 / 61 + 1 / 62
    assert rows[1][4] == 1 / 61 + 1 / 62 + 1 / 63
    # The docs' form: a stored memory's vector as the query ("memories like this one").
    like = sql.SQL(
        "SELECT id, content FROM {}.hybrid_search('a', 'test-embedder', ARRAY[]::text[],"
        " (SELECT embedding FROM {}.memories WHERE agent_id = 'a' AND id = 'm3'),"
        " p_threshold => 0.9, p_limit => 500)"
    ).format(schema, schema)
    with psycopg.connect(postgres_dsn) as conn:
        assert conn.execute(like).fetchall() == [("m3", "The user has a cat")]


async def test_query_terms_in_sql_match_the_python_tokenizer(
    store_postgres: PostgresStore, postgres_dsn: str, postgres_schema: str
) -> None:
    text = "Don't e-mail me! x_y 42nd  DROP; 'a' & b:*"
    with psycopg.connect(postgres_dsn) as conn:
        row = conn.execute(
            sql.SQL("SELECT {}.query_terms(%s)").format(sql.Identifier(postgres_schema)), (text,)
        ).fetchone()
    assert row is not None
    assert row[0] == list(dict.fromkeys(tokenize(text)))
    assert row[0] == ["don", "t", "e", "mail", "me", "x", "y", "42nd", "drop", "a", "b"]


async def test_views_are_readable(
    store_postgres: PostgresStore, postgres_dsn: str, postgres_schema: str
) -> None:
    mm = await MemoryManager.create(
        MemoryConfig(backend="postgres"), store=store_postgres, embedder=FixedEmbedder(dimensions=6)
    )
    await mm.store_turn("a", "s", "hello there", "hi")
    await mm.store_turn("a", "s", "second", "turn")
    await mm.inject_memory("a", "The user likes tea", source="chat")
    with psycopg.connect(postgres_dsn) as conn:

        def q(view: str, cols: str) -> list[tuple[object, ...]]:
            return conn.execute(
                sql.SQL("SELECT " + cols + " FROM {} WHERE agent_id = 'a' ORDER BY 1").format(
                    sql.Identifier(postgres_schema, view)
                )
            ).fetchall()

        assert q("session_overview", "session_id, turn_count, tokens") == [("s", 2, 7)]
        assert q("recent_turns", "turns_ago, user_message") == [
            (1, "second"),
            (2, "hello there"),
        ]
        assert q("memory_overview", "embedder, dimensions, source, tokens, content") == [
            ("fixed", 6, "chat", 5, "The user likes tea")
        ]


async def test_schema_names_are_validated_before_any_sql() -> None:
    for bad in ('x"; DROP SCHEMA public CASCADE; --', "Upper", "a-b", "", "1abc", "a" * 64):
        with pytest.raises(ValidationError, match="plain identifier"):
            PostgresStore(PostgresSettings("postgresql://nowhere.invalid/db", schema=bad))
        with pytest.raises(ConfigurationError, match="postgres_schema"):
            MemoryConfig(backend="postgres", postgres_schema=bad)


async def test_unreachable_server_fails_fast_with_a_typed_error() -> None:
    store = PostgresStore(
        PostgresSettings("postgresql://postgres@127.0.0.1:1/none", connect_timeout=1.0)
    )
    started = time.monotonic()
    with pytest.raises(StoreUnavailableError):
        await store.setup()
    assert time.monotonic() - started < 5.0
    await store.close()


# As a Citus coordinator raised them (XX000, no SQLSTATE of their own) when benchmarks/faults.py's
# kill9_worker killed a worker during a COPY; the 08006 and 58030 ones are OperationalErrors.
CITUS_WORKER_LOST = (
    "server closed the connection unexpectedly\n\tThis probably means the server terminated"
    " abnormally\n\tbefore or while processing the request.\nCONTEXT:  while executing command"
    " on 127.0.0.1:41203\nCOPY memories, line 1",
    'failure on connection marked as essential: 127.0.0.1:41203\nCONTEXT:  COPY t, line 7: "a1"',
    # A worker's backend ending, its FATAL relayed by the coordinator as XX000 (Citus's COPY
    # relays a worker's message without its SQLSTATE): the killed worker's postmaster went
    # first, an administrator stopped the worker, or another of its processes crashed.
    "terminating connection due to unexpected postmaster exit\nCONTEXT:  COPY memories, line 4",
    "terminating connection due to administrator command\nCONTEXT:  while executing command"
    " on 127.0.0.1:41203",
    "terminating connection because of crash of another server process\nDETAIL:  The postmaster"
    " has commanded this server process to roll back the current transaction and exit, because"
    " another server process exited abnormally and possibly corrupted shared memory.",
    # The same words in libpq's message of the connection, with the worker's severity.
    "FATAL:  terminating connection due to unexpected postmaster exit\nserver closed the"
    " connection unexpectedly\nCONTEXT:  while executing command on 127.0.0.1:41203",
)
NOT_WORKER_LOST = (
    # A worker's own internal error, relayed: the worker answered.
    "could not find shard 102008\nCONTEXT:  while executing command on 127.0.0.1:41203",
    # libpq's words without a worker in the context: not Citus's.
    "server closed the connection unexpectedly",
)


@pytest.mark.parametrize("message", CITUS_WORKER_LOST)
async def test_a_citus_worker_lost_during_a_call_is_store_unavailable(
    store_postgres: PostgresStore, message: str
) -> None:
    # A fault one server cannot produce: the coordinator's error is raised where the server's
    # would be, inside the call's connection block.
    with pytest.raises(StoreUnavailableError, match="a Citus worker was lost during the call"):
        async with store_postgres.db.conn():
            raise psycopg.errors.InternalError_(message)
    assert await store_postgres.count_memories("a") == 0  # the next call is served


async def test_a_commit_a_citus_worker_lost_is_unavailable_and_says_retry_with_the_same_id(
    store_postgres: PostgresStore,
) -> None:
    # The coordinator could not commit on the shard's worker: whether the write is there is not
    # known, and the retry of a write by its id is what settles it.
    message = "could not commit transaction for shard 102008 on at least one active node"
    with pytest.raises(StoreUnavailableError, match="retry it with the same id") as raised:
        async with store_postgres.db.conn():
            raise psycopg.errors.InternalError_(message)
    assert "may or may not have been committed" in str(raised.value)
    assert "shard 102008" in str(raised.value)
    assert await store_postgres.count_memories("a") == 0


async def _raised_by_the_server(store: PostgresStore, statement: str) -> StoreError:
    """The error of ``statement``, run through the store's connection handling."""
    with pytest.raises(StoreError) as raised:
        async with store.db.conn() as conn:
            await conn.execute(statement)
    return raised.value


async def test_plain_postgres_shutdown_errors_keep_their_own_mapping(
    store_postgres: PostgresStore,
) -> None:
    # On one server these words come with their own SQLSTATE (57P01, 57P02), operational
    # errors: the server was lost, not a worker.
    for error in (psycopg.errors.AdminShutdown, psycopg.errors.CrashShutdown):
        with pytest.raises(StoreUnavailableError, match="PostgreSQL connection failed"):
            async with store_postgres.db.conn():
                raise error("terminating connection due to administrator command")
    assert await store_postgres.count_memories("a") == 0
    # The same words raised by a function (P0001, not XX000): the function's error.
    raised = await _raised_by_the_server(
        store_postgres,
        "DO $$ BEGIN RAISE EXCEPTION 'terminating connection due to administrator command'; END $$",
    )
    assert not isinstance(raised, StoreUnavailableError)


@pytest.mark.parametrize("message", NOT_WORKER_LOST)
async def test_other_internal_errors_stay_store_errors(
    store_postgres: PostgresStore, message: str
) -> None:
    with pytest.raises(StoreError) as raised:
        async with store_postgres.db.conn():
            raise psycopg.errors.InternalError_(message)
    assert not isinstance(raised.value, StoreUnavailableError)
    # Raised by the server itself, with the words of a lost worker but none named: the same.
    raised_by_server = await _raised_by_the_server(
        store_postgres,
        "DO $$ BEGIN RAISE EXCEPTION USING ERRCODE = 'XX000',"
        " MESSAGE = 'server closed the connection unexpectedly'; END $$",
    )
    assert not isinstance(raised_by_server, StoreUnavailableError)


async def test_schema_behind_without_auto_migrate_says_run_migrate(postgres_dsn: str) -> None:
    store = PostgresStore(
        PostgresSettings(postgres_dsn, schema="actrone_never_migrated", auto_migrate=False)
    )
    with pytest.raises(SchemaError, match="actrone-pg migrate"):
        await store.setup()
    with psycopg.connect(postgres_dsn) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_namespace WHERE nspname = 'actrone_never_migrated'"
        ).fetchone()
    assert row == (0,)


async def test_float_vectors_rank_like_numpy(store_postgres: PostgresStore) -> None:
    # 300 random 32-d unit vectors: the dense order matches numpy's wherever cosines differ.
    rng = np.random.default_rng(1)
    vecs = rng.normal(size=(300, 32)).astype(np.float32)
    recs = [record("a", f"m{i:03d}", "x", vecs[i]) for i in range(300)]
    await store_postgres.upsert_memories(recs)
    q = rng.normal(size=32)
    hits = (await store_postgres.search(request("a", "x", q, limit=50))).hits
    qn = (q / np.linalg.norm(q)).astype(np.float32)
    mat = np.stack([r.vector for r in recs])
    cos = mat @ qn
    order = [f"m{i:03d}" for i in np.argsort(-cos, kind="stable")[:50]]
    assert [h.memory.id for h in hits] == [h.memory.id for h in hits]
    assert [h.memory.id for h in sorted(hits, key=lambda h: h.explain.dense_rank or 0)] == order
    for h in hits:
        assert h.explain.cosine == pytest.approx(float(cos[int(h.memory.id[1:])]), abs=1e-6)


async def test_english_config_stems_terms_and_drops_stop_words(
    postgres_dsn: str, scratch_schema: str
) -> None:
    migrations.migrate(postgres_dsn, scratch_schema)
    store = PostgresStore(
        PostgresSettings(postgres_dsn, schema=scratch_schema, text_search_config="english")
    )
    await store.setup()
    try:
        await store.upsert_memories(
            [
                record("a", "m1", "The cats were running home", [1, 0, 0, 0]),
                record("a", "m2", "A dog sleeps", [0.9, 0.1, 0, 0]),
            ]
        )
        hits = {
            h.memory.id: h
            for h in (await store.search(request("a", "cat RUNS", [1, 0, 0, 0]))).hits
        }
        assert hits["m1"].explain.lexical_rank == 1  # cats -> cat, running/runs -> run
        assert hits["m2"].explain.lexical_rank is None
        with psycopg.connect(postgres_dsn) as conn:
            stats = conn.execute(
                sql.SQL("SELECT n_docs, total_length FROM {}").format(
                    sql.Identifier(scratch_schema, "agent_stats")
                )
            ).fetchone()
        assert stats == (2, 5)  # "cat run home" + "dog sleep": stop words are not counted
    finally:
        await store.close()
    # The statistics were built with 'english': a store configured otherwise must refuse.
    other = PostgresStore(PostgresSettings(postgres_dsn, schema=scratch_schema))
    with pytest.raises(ConfigurationError, match="built with 'english'"):
        await other.setup()


async def test_unknown_or_malformed_text_search_config_is_refused(
    store_postgres: PostgresStore, postgres_dsn: str, postgres_schema: str
) -> None:
    with pytest.raises(ConfigurationError, match="postgres_text_search_config"):
        PostgresStore(
            PostgresSettings(postgres_dsn, schema=postgres_schema, text_search_config="english; --")
        )
    store = PostgresStore(
        PostgresSettings(postgres_dsn, schema=postgres_schema, text_search_config="klingon")
    )
    with pytest.raises(ConfigurationError, match="no text search configuration 'klingon'"):
        await store.setup()


async def test_statement_timeout_is_a_typed_error_and_writes_nothing(
    store_postgres: PostgresStore, postgres_dsn: str, postgres_schema: str
) -> None:
    store = PostgresStore(
        PostgresSettings(postgres_dsn, schema=postgres_schema, statement_timeout=0.5)
    )
    await store.setup()
    blocker = await psycopg.AsyncConnection.connect(postgres_dsn)
    try:
        # Another session holds the agent's statistics row: writers of that agent must wait.
        await blocker.execute(
            sql.SQL("INSERT INTO {} VALUES ('a', 0, 0)").format(
                sql.Identifier(postgres_schema, "agent_stats")
            )
        )
        started = time.monotonic()
        with pytest.raises(StoreUnavailableError, match="postgres_statement_timeout"):
            await store.upsert_memories([record("a", "m1", "waits", [1, 0, 0, 0])])
        assert time.monotonic() - started < 3.0
    finally:
        await blocker.rollback()
        await blocker.close()
    assert await store.count_memories("a") == 0
    await store.close()


async def test_a_saturated_pool_is_load_not_an_outage_and_hands_out_no_severed_connection(
    store_postgres: PostgresStore,
    postgres_dsn: str,
    postgres_schema: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Spec §8, issue 38 item 3: 500 concurrent calls on a pool of 4 against a healthy server.
    # Each holds its connection 10 ms, so at most ~200 get one within the 0.5 s wait: the rest
    # must be told the pool is saturated (not that the server may be down), and no call may get
    # a connection whose socket a deadline shut down as its check answered ("server closed the
    # connection unexpectedly"). Every checkout checks its connection, as after a pause.
    from actrone_pg.errors import PoolSaturatedError
    from actrone_pg.stores.postgres import connection

    monkeypatch.setattr(connection, "_CHECKED_RECENTLY", 0.0)
    store = PostgresStore(
        PostgresSettings(
            postgres_dsn,
            schema=postgres_schema,
            pool_min_size=4,
            pool_max_size=4,
            connect_timeout=0.5,
        )
    )
    await store.setup()

    async def call() -> None:
        async with store.db.conn() as conn:  # the connection every method of the store takes
            await conn.execute("SELECT pg_sleep(0.01)")

    try:
        results = await asyncio.gather(*(call() for _ in range(500)), return_exceptions=True)
        assert store.db.pool is not None
        opened = store.db.pool.get_stats()["connections_num"]
        lost = store.db.server_lost
        assert await store.count_memories("a") == 0  # served at once afterwards
    finally:
        await store.close()
    errors = [r for r in results if r is not None]
    assert [r for r in errors if not isinstance(r, PoolSaturatedError)] == []
    assert 300 <= len(errors) < 500
    assert not [e for e in errors if "server closed" in str(e) or "may be down" in str(e)]
    assert "postgres_pool_max_size" in str(errors[0])
    assert (opened, lost) == (4, False)  # no connection severed, replaced, or taken for lost


async def test_erase_waits_for_a_write_in_progress_and_leaves_no_orphans(
    store_postgres: PostgresStore, postgres_dsn: str, postgres_schema: str
) -> None:
    import asyncio

    await store_postgres.upsert_memories([record("other", "x", "registers the embedder", [1, 0])])
    writer = await psycopg.AsyncConnection.connect(postgres_dsn)
    s = sql.Identifier(postgres_schema)
    try:
        # A writer mid-transaction, exactly as upsert_memories does it: statistics row locked,
        # memory row inserted, not yet committed.
        await writer.execute(
            sql.SQL(
                "INSERT INTO {}.agent_stats VALUES ('a', 1, 2) ON CONFLICT (agent_id) DO UPDATE"
                " SET n_docs = {}.agent_stats.n_docs + 1"
            ).format(s, s)
        )
        await writer.execute(
            sql.SQL(
                "INSERT INTO {}.memories (agent_id, id, content, content_type, importance, tags,"
                " source, sensitivity, created_at, metadata, embedder, token_count, doc_len,"
                " term_freqs, embedding) VALUES ('a', 'm1', 'in flight', 'fact', 0.5, '{{}}',"
                " 'test', 'none', now(), '{{}}', 'test-embedder', 3, 2,"
                " '{{\"in\": 1, \"flight\": 1}}', '[1,0]')"
            ).format(s)
        )
        erase = asyncio.create_task(store_postgres.erase_agent("a"))
        await asyncio.sleep(0.3)
        assert not erase.done()  # it waits for the writer
        await writer.commit()
        await erase
    finally:
        await writer.close()
    assert await store_postgres.count_memories("a") == 0
    with psycopg.connect(postgres_dsn) as conn:
        row = conn.execute(
            sql.SQL("SELECT count(*) FROM {}.agent_stats WHERE agent_id = 'a'").format(s)
        ).fetchone()
    assert row == (0,)


async def test_a_lock_taken_while_the_agent_is_erased_waits_for_the_erase(
    store_postgres: PostgresStore, postgres_dsn: str, postgres_schema: str
) -> None:
    # A consolidation's writes are fenced by its lock, which the erase deletes. A lock taken
    # after the erase's delete of the locks and before its commit used to survive the erase (a
    # new row its delete did not see), and with it the consolidation's writes (the fault
    # harness once found 90 rows of an erased agent). The erase claims the lock's key first: a
    # lock taken meanwhile waits for the erase's commit, and then finds the agent gone.
    await store_postgres.upsert_memories([record("a", "m1", "erased soon", [1, 0])])
    await store_postgres.append_turn(turn("a", "s1", "t0"), max_turns=50, ttl_seconds=3600)
    blocker = await psycopg.AsyncConnection.connect(postgres_dsn)
    sessions = sql.Identifier(postgres_schema, "sessions")
    try:
        # The erase stops at its delete of the sessions: after its claim, before its commit.
        await blocker.execute(
            sql.SQL("SELECT 1 FROM {} WHERE agent_id = 'a' FOR UPDATE").format(sessions)
        )
        erase = asyncio.create_task(store_postgres.erase_agent("a"))
        await asyncio.sleep(0.3)
        assert not erase.done()
        taken = asyncio.create_task(store_postgres.acquire_lock("a", FENCED_LOCK, "late", 60))
        await asyncio.sleep(0.3)
        assert not taken.done()  # it waits for the erase
        await blocker.rollback()
        await erase
        assert await taken  # free once the erase committed
    finally:
        await blocker.close()
    assert await store_postgres.get_session("a", "s1", ttl_seconds=3600) is None
    assert await store_postgres.count_memories("a") == 0


async def test_vectors_too_large_for_the_candidate_index_are_searched_too(
    store_postgres: PostgresStore,
) -> None:
    # 1536 dimensions (6 kB) do not fit in a btree entry: the primary-key branch serves them.
    rng = np.random.default_rng(2)
    vecs = rng.normal(size=(30, 1536))
    await store_postgres.upsert_memories(
        [record("a", f"m{i:02d}", f"note {i}", vecs[i], embedder="wide") for i in range(30)]
    )
    q = vecs[7] + 0.01 * rng.normal(size=1536)
    hits = (await store_postgres.search(request("a", "note", q, embedder="wide", limit=5))).hits
    assert len(hits) == 5
    nearest = next(h for h in hits if h.explain.dense_rank == 1)
    assert nearest.memory.id == "m07"
    assert nearest.explain.cosine == pytest.approx(
        float(np.dot(vecs[7], q) / np.linalg.norm(vecs[7]) / np.linalg.norm(q)), abs=1e-5
    )


async def test_a_schema_from_a_newer_release_is_refused(
    postgres_dsn: str, scratch_schema: str
) -> None:
    migrations.migrate(postgres_dsn, scratch_schema)
    with psycopg.connect(postgres_dsn) as conn:
        conn.execute(
            sql.SQL("UPDATE {} SET version_num = '9999'").format(
                sql.Identifier(scratch_schema, migrations.VERSION_TABLE)
            )
        )
    store = PostgresStore(PostgresSettings(postgres_dsn, schema=scratch_schema))
    with pytest.raises(SchemaError, match="newer release"):
        await store.setup()


async def _maintenance_counts(dsn: str, schema: str) -> tuple[int, int]:
    """(ANALYZE runs, VACUUM runs) of the memories table, by anyone, so far."""
    async with await psycopg.AsyncConnection.connect(dsn) as conn:
        cur = await conn.execute(
            "SELECT analyze_count + autoanalyze_count, vacuum_count + autovacuum_count"
            " FROM pg_stat_user_tables WHERE schemaname = %s AND relname = 'memories'",
            (schema,),
        )
        row = await cur.fetchone()
        assert row is not None
        return int(row[0]), int(row[1])


async def test_statistics_are_refreshed_after_a_bulk_load(
    store_postgres: PostgresStore, postgres_dsn: str, postgres_schema: str
) -> None:
    # The fixture truncates between tests; reltuples stays from earlier runs, so look at the
    # analyze counter, which only this store's ANALYZE (or autovacuum) moves.
    async def analyze_count() -> int:
        return (await _maintenance_counts(postgres_dsn, postgres_schema))[0]

    store_postgres.db.maintenance.written = 0
    store_postgres.db.maintenance.next_analyze = 1_000
    before = await analyze_count()
    rng = np.random.default_rng(0)
    batch = [record("a", f"m{i}", f"note {i}", rng.normal(size=4).tolist()) for i in range(999)]
    await store_postgres.upsert_memories(batch)
    await store_postgres.upsert_memories([record("a", "last", "note", [1, 0, 0, 0])])
    # statistics views lag by up to a moment; poll briefly
    for _ in range(50):
        if await analyze_count() > before:
            break
        await asyncio.sleep(0.05)
    assert await analyze_count() > before
    assert store_postgres.db.maintenance.next_analyze == 4_000


async def test_a_burst_of_writes_is_vacuumed_once_writes_pause(
    store_postgres: PostgresStore, postgres_dsn: str, postgres_schema: str
) -> None:
    # Between two steps of the x4 schedule: only the pause after the writes can trigger it.
    store_postgres.db.maintenance.written = 2_000
    store_postgres.db.maintenance.next_analyze = 4_000
    store_postgres.db.maintenance.unmaintained = 0
    store_postgres.db.maintenance.settle_seconds = 0.3
    before = await _maintenance_counts(postgres_dsn, postgres_schema)
    rng = np.random.default_rng(1)
    for start in range(0, 1_200, 400):  # three writes, each well within the pause
        batch = [
            record("a", f"m{i}", f"note {i}", rng.normal(size=4).tolist())
            for i in range(start, start + 400)
        ]
        await store_postgres.upsert_memories(batch)
    task = store_postgres.db.maintenance.settle_task
    assert task is not None and not task.done()  # waiting for the pause
    assert store_postgres.db.maintenance.unmaintained == 1_200
    await asyncio.wait_for(task, 10)
    assert store_postgres.db.maintenance.unmaintained == 0
    for _ in range(50):  # statistics views lag by up to a moment
        after = await _maintenance_counts(postgres_dsn, postgres_schema)
        if after[0] > before[0] and after[1] > before[1]:
            break
        await asyncio.sleep(0.05)
    assert after[0] > before[0] and after[1] > before[1]


async def test_fewer_writes_than_the_minimum_start_no_maintenance(
    store_postgres: PostgresStore,
) -> None:
    store_postgres.db.maintenance.written = 2_000
    store_postgres.db.maintenance.next_analyze = 4_000
    store_postgres.db.maintenance.unmaintained = 0
    await store_postgres.upsert_memories([record("a", "m1", "note", [1, 0, 0, 0])])
    assert store_postgres.db.maintenance.settle_task is None


async def test_closing_the_store_cancels_a_pending_maintenance(
    postgres_dsn: str, postgres_schema: str
) -> None:
    store = PostgresStore(PostgresSettings(postgres_dsn, schema=postgres_schema, pool_max_size=2))
    await store.setup()
    store.db.maintenance.written = 2_000
    store.db.maintenance.next_analyze = 10**9
    store.db.maintenance.settle_seconds = 60.0
    rng = np.random.default_rng(2)
    batch = [record("z", f"m{i}", "note", rng.normal(size=4).tolist()) for i in range(1_000)]
    try:
        await store.upsert_memories(batch)
        task = store.db.maintenance.settle_task
        assert task is not None and not task.done()
    finally:
        await store.close()
    assert task.cancelled()
    assert store.db.maintenance.settle_task is None


BIG_FLOATS = {"f60": 2.0**60, "f16": 1e16, "neg": -1e23, "huge": 1.5e300, "small": 1e-7, "x": 0.1}


async def test_json_floats_of_any_size_read_back_as_the_same_floats(
    store_postgres: PostgresStore,
) -> None:
    # jsonb keeps numbers as numeric, which printed json's 1.152921504606847e+18 (2.0**60) as
    # 1152921504606847000: an int, and another number.
    nested = {**BIG_FLOATS, "list": [2.0**60, {"deep": -(2.0**70)}], "text": "1e+16"}
    await store_postgres.upsert_memories([record("a", "m1", "floats", [1, 0, 0], metadata=nested)])
    got = await store_postgres.get_memory("a", "m1")
    assert got is not None
    assert got.metadata == nested
    assert type(got.metadata["f60"]) is float and type(got.metadata["list"][0]) is float
    await store_postgres.append_turn(
        replace(turn("a", "s", "t1"), tool_results=[BIG_FLOATS]), max_turns=10, ttl_seconds=3600
    )
    turns = await store_postgres.recent_turns("a", "s", limit=10, ttl_seconds=3600)
    assert turns[0].tool_results == [BIG_FLOATS]
    await store_postgres.set_session_metadata("a", "s", BIG_FLOATS, ttl_seconds=3600)
    info = await store_postgres.get_session("a", "s", ttl_seconds=3600)
    assert info is not None and info.metadata == BIG_FLOATS
    assert all(type(v) is float for v in info.metadata.values())


async def test_new_connections_leave_psycopg_adapter_cache_flat(
    store_postgres: PostgresStore, postgres_dsn: str, postgres_schema: str
) -> None:
    # The pool makes a new connection exactly so (its kwargs, then its configure callback)
    # whenever it replaces one: hourly, and after an outage. psycopg caches every adapter class
    # it has seen, class-wide and for ever: a registration per connection grew it (and the
    # process, ~25 KB a connection) without bound.
    from psycopg.adapt import AdaptersMap

    pool = store_postgres.db.pool
    assert pool is not None

    async def churn(n: int) -> None:
        for _ in range(n):
            conn = await psycopg.AsyncConnection.connect(pool.conninfo, **pool.kwargs)
            async with conn:
                await store_postgres.db._configure(conn)
                cur = await conn.execute("SELECT '[1,2,3]'::vector, %s", (np.ones(3),))
                row = await cur.fetchone()
                assert row is not None
                # Vectors still load as pgvector's type, and numpy arrays still dump as vectors.
                assert row[0].to_list() == [1.0, 2.0, 3.0] and row[1].to_list() == [1.0] * 3

    await churn(3)
    before = len(AdaptersMap._optimised)
    await churn(40)
    assert len(AdaptersMap._optimised) == before
    # A second store of the same database looks the type up once more, and only once.
    other = PostgresStore(PostgresSettings(postgres_dsn, schema=postgres_schema, pool_max_size=2))
    await other.setup()
    try:
        await store_postgres.upsert_memories([record("a", "m1", "coffee", [1, 0, 0, 0])])
        got = await other.get_memory("a", "m1")
        assert got is not None and got.content == "coffee"
    finally:
        await other.close()


async def test_a_search_without_explanations_returns_the_same_hits_without_them(
    store_postgres: PostgresStore,
) -> None:
    # SearchRequest.explain=False (a retrieve_context that shows none): the same memories, turns
    # and counts, each hit's explain None instead of made.
    rng = np.random.default_rng(2)
    vecs = rng.normal(size=(60, 16)).astype(np.float32)
    await store_postgres.upsert_memories(
        [record("a", f"m{i:02d}", f"note {i} about tea", vecs[i]) for i in range(60)]
    )
    await store_postgres.append_turn(turn("a", "s", "hi there"), max_turns=50, ttl_seconds=3600)
    asked = replace(request("a", "tea", rng.normal(size=16)), budget=200)
    bare = replace(asked, explain=False)
    searched = [await store_postgres.search(r) for r in (asked, bare)]
    fetched = [
        await store_postgres.fetch_context("a", "s", limit=20, ttl_seconds=3600.0, request=r)
        for r in (asked, bare)
    ]
    assert len(fetched[0][0]) == 1 and fetched[0][0] == fetched[1][0]
    for full, without in (searched, [packed for _, packed in fetched]):
        assert full.hits and [h.memory for h in without.hits] == [h.memory for h in full.hits]
        assert all(h.explain is not None for h in full.hits)
        assert all(h.explain is None for h in without.hits)
        assert (without.candidates_considered, without.tokens) == (
            full.candidates_considered,
            full.tokens,
        )


async def test_read_column_names_are_decoded_once_per_column_list(
    store_postgres: PostgresStore,
) -> None:
    # fetch_tuples keeps the decoded names of each column list it read (retrieve()'s, on every
    # search): the same names for the same list, each list its own.
    db = store_postgres.db
    async with db.conn() as conn:
        first, found = await db.fetch_tuples(conn, "SELECT 1 AS a, 'x' AS \"é b\"", ())
        again, _ = await db.fetch_tuples(conn, "SELECT 2 AS a, 'y' AS \"é b\"", ())
        other, _ = await db.fetch_tuples(conn, "SELECT 3 AS b", ())
    assert first == ("a", "é b") and found == [(1, "x")]
    assert again is first and other == ("b",)
