"""The lexical analyzer (ranking.Analyzer) and the analyzer each store records with its terms."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from actrone_pg import MemoryConfig, cli, migrations, ranking
from actrone_pg.errors import ConfigurationError
from actrone_pg.models import Memory
from actrone_pg.ranking import (
    STEM_CACHE_SIZE,
    Analyzer,
    analyzer,
    query_terms,
    term_counts,
    tokenize,
)
from actrone_pg.stores.base import MemoryRecord
from actrone_pg.stores.memory import InMemoryStore
from actrone_pg.stores.postgres import PostgresSettings, PostgresStore
from actrone_pg.stores.postgres.reindex import reindex
from actrone_pg.stores.postgres.statements import REINDEX_LOCK, REINDEX_LOCK_SHARDS
from actrone_pg.stores.redis_qdrant.layout import LAYOUT
from tests.backends.redis_qdrant import cleanup, redis_qdrant_settings, unique_prefix
from tests.factories import record, request

TEXTS = {
    "m1": "The cats were running after the mice",
    "m2": "A cat runs; the dog sleeps.",
    "m3": "Universities organise generous scholarships",
    "m4": "nothing in common here",
}
QUERY = "cat running"


def _records() -> list:  # type: ignore[type-arg]
    return [record("a", mid, text, [1, i, 0, 0]) for i, (mid, text) in enumerate(TEXTS.items())]


def test_english_stems_and_simple_keeps_tokens() -> None:
    english, simple = analyzer("english"), analyzer("simple")
    assert english.terms("The cats were running") == ["the", "cat", "were", "run"]
    assert english.query_terms("Running cats, running!") == ["run", "cat"]
    assert simple.terms("The cats were running") == tokenize("The cats were running")
    assert term_counts("cats cat CAT", "english") == ({"cat": 3}, 3)
    assert query_terms("cat & dog | cat:* !", "simple") == ["cat", "dog"]
    # every analyzer starts from the one tokenizer
    assert english.terms("Don't e-mail") == ["don", "t", "e", "mail"]
    with pytest.raises(ValueError, match="unknown analyzer"):
        Analyzer("klingon")


def test_unknown_analyzer_and_bm25_values_are_configuration_errors() -> None:
    with pytest.raises(ConfigurationError, match="text_analyzer"):
        MemoryConfig(text_analyzer="porter")
    with pytest.raises(ConfigurationError, match="bm25_b"):
        MemoryConfig(bm25_b=1.5)
    with pytest.raises(ConfigurationError, match="bm25_k1"):
        MemoryConfig(bm25_k1=0.0)


async def _ranked(store: object) -> list[tuple[str, float | None, int | None]]:
    hits = (await store.search(request("a", QUERY, [1, 0, 0, 0]))).hits  # type: ignore[attr-defined]
    return [(h.memory.id, h.explain.bm25, h.explain.lexical_rank) for h in hits]


async def _reference(name: str) -> list[tuple[str, float | None, int | None]]:
    store = InMemoryStore(text_analyzer=name)
    await store.upsert_memories(_records())
    return await _ranked(store)


@pytest.mark.postgres
async def test_a_store_running_while_its_schema_is_reindexed_refuses_its_old_terms(
    postgres_dsn: str, scratch_schema: str
) -> None:
    """A reindex commits while a store started before it runs (or waits on the tables): the
    store's next write of terms is refused whole, never mixed with the new analyzer's terms;
    restarted, the store follows what the schema records."""
    migrations.migrate(postgres_dsn, scratch_schema)
    await reindexed_while_running(postgres_dsn, scratch_schema)


async def reindexed_while_running(dsn: str, schema: str, **store: Any) -> None:
    """The test above on a migrated ``schema`` at ``dsn`` (also the Citus suite's, where a
    batch's writes run on the workers and the reindex's shard locks hold it off)."""
    records = _records()
    running = PostgresStore(PostgresSettings(dsn, schema=schema, text_analyzer="english", **store))
    await running.setup()
    try:
        await running.upsert_memories(records[:2])
        assert reindex(dsn, schema, "english", lexical_dates=False) == 2
        refused = r"re-indexed while this store ran.*'english', not 'english\+dates'"
        with pytest.raises(ConfigurationError, match=refused):
            await running.upsert_memories(records[2:])
        with pytest.raises(ConfigurationError, match=refused):
            await running.update_memory("a", "m1", _new_content)
        assert await running.count_memories("a") == 2

        # A write that waits on the reindex's locks (taken as reindex() takes them) sees its
        # analyzer once it commits.
        settings = sql.Identifier(schema, "settings")
        with psycopg.connect(dsn) as conn:
            if running.distributed:
                conn.execute(REINDEX_LOCK_SHARDS, (schema,))
            conn.execute(sql.SQL(REINDEX_LOCK).format(s=sql.Identifier(schema)))
            conn.execute(
                sql.SQL("UPDATE {} SET value = 'simple' WHERE name = 'text_analyzer'").format(
                    settings
                )
            )
            write = asyncio.create_task(running.upsert_memories(records[2:]))
            await asyncio.sleep(0.3)
            assert not write.done()  # waiting on the lock
            conn.commit()
        with pytest.raises(ConfigurationError, match=r"re-indexed while this store ran"):
            await write
    finally:
        await running.close()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("UPDATE {} SET value = 'english' WHERE name = 'text_analyzer'").format(settings)
        )
    restarted = PostgresStore(
        PostgresSettings(dsn, schema=schema, text_analyzer="english", **store)
    )
    await restarted.setup()
    try:
        await restarted.upsert_memories(records[2:])
        assert await _ranked(restarted) == await _reference_without_dates("english")
    finally:
        await restarted.close()


async def _new_content(current: Memory) -> MemoryRecord:
    return MemoryRecord(replace(current, content="changed"), [1.0, 0.0, 0.0, 0.0])


async def _reference_without_dates(name: str) -> list[tuple[str, float | None, int | None]]:
    store = InMemoryStore(text_analyzer=name, lexical_dates=False)
    await store.upsert_memories(_records())
    return await _ranked(store)


@pytest.mark.postgres
def test_the_stemmer_is_postgresql_english_stem(postgres_dsn: str) -> None:
    """Snowball's English stemmer as PostgreSQL ships it, on the words of the shipped data sets.

    PostgreSQL's english_stem drops its own stop words (an empty result); the analyzer keeps
    them. Two words differ from the Snowball release the analyzer pins (2.2): PostgreSQL 18
    carries a later fix for "added" / "adding".
    """
    data = resources.files("actrone_pg") / "data"
    text = " ".join(
        (data / name).read_text(encoding="utf-8")
        for name in ("eval_conversations.jsonl", "calibration.jsonl")
    )
    words = sorted(set(tokenize(text)))
    words += ["universities", "organise", "generously", "caresses", "dying", "news", "evening"]
    english = analyzer("english")
    with psycopg.connect(postgres_dsn) as conn:
        rows = conn.execute(
            "SELECT w, ts_lexize('english_stem', w) FROM unnest(%s::text[]) AS w", (words,)
        ).fetchall()
    differ = {w: (lx[0], (english.terms(w) or [w])[0]) for w, lx in rows if lx}
    differ = {w: pair for w, pair in differ.items() if pair[0] != pair[1]}
    assert len(rows) > 700
    assert set(differ) <= {"added", "adding"}, differ


@pytest.mark.postgres
async def test_postgres_records_its_analyzer_refuses_another_and_reindexes(
    postgres_dsn: str, scratch_schema: str
) -> None:
    migrations.migrate(postgres_dsn, scratch_schema)

    def store(name: str) -> PostgresStore:
        return PostgresStore(
            PostgresSettings(postgres_dsn, schema=scratch_schema, text_analyzer=name)
        )

    old = store("simple")
    await old.setup()
    await old.upsert_memories(_records())
    assert await _ranked(old) == await _reference("simple")
    await old.close()

    # A schema written before analyzers were recorded holds plain tokens: it reads as 'simple'.
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        settings = sql.Identifier(scratch_schema, "settings")
        conn.execute(sql.SQL("DELETE FROM {} WHERE name = 'text_analyzer'").format(settings))
    new = store("english")
    with pytest.raises(
        ConfigurationError, match=r"'simple', not 'english\+dates'.*actrone-pg reindex"
    ):
        await new.setup()

    assert reindex(postgres_dsn, scratch_schema, "english") == len(TEXTS)
    new = store("english")
    await new.setup()
    try:
        english = await _ranked(new)
        assert english == await _reference("english")
        # "cat running" now meets "cats ... running" and "cat runs"
        assert {m for m, bm25, _ in english if bm25} == {"m1", "m2"}
    finally:
        await new.close()
    # ... and a store still configured for the old analyzer is refused in turn.
    with pytest.raises(ConfigurationError, match=r"'english\+dates', not 'simple\+dates'"):
        await store("simple").setup()


@pytest.mark.postgres
def test_reindex_command(
    postgres_dsn: str, scratch_schema: str, capsys: pytest.CaptureFixture[str]
) -> None:
    migrations.migrate(postgres_dsn, scratch_schema)
    argv = ["reindex", "--backend", "postgres", "--dsn", postgres_dsn, "--schema", scratch_schema]
    assert cli.main([*argv, "--text-analyzer", "simple"]) == 0
    assert "re-indexed 0 memories with the analyzer 'simple', with date terms" in (
        capsys.readouterr().out
    )
    with psycopg.connect(postgres_dsn) as conn:
        row = conn.execute(
            sql.SQL("SELECT value FROM {} WHERE name = 'text_analyzer'").format(
                sql.Identifier(scratch_schema, "settings")
            )
        ).fetchone()
    assert row == ("simple+dates",)
    assert cli.main(["reindex", "--backend", "memory"]) == 2
    assert "nothing to re-index" in capsys.readouterr().err


@pytest.mark.redis
@pytest.mark.qdrant
async def test_redis_records_its_analyzer_refuses_another_and_reindexes(tmp_path: Path) -> None:
    from actrone_pg.stores.redis_qdrant import from_config

    prefix = unique_prefix()
    # Qdrant in local mode on a path: its points outlive each store object.
    settings = redis_qdrant_settings(prefix, qdrant_url=str(tmp_path / "qdrant"))

    def store(name: str):  # type: ignore[no-untyped-def]
        return from_config(MemoryConfig(**settings, text_analyzer=name))

    try:
        old = store("simple")
        await old.setup()
        await old.upsert_memories(_records())
        assert await _ranked(old) == await _reference("simple")
        await old.close()
        import redis.asyncio as aioredis

        client = aioredis.Redis.from_url(settings["redis_url"])
        try:  # written before analyzers were recorded: plain tokens, 'simple'
            await client.delete(f"{prefix}:{LAYOUT}:analyzer")
        finally:
            await client.aclose()
        with pytest.raises(ConfigurationError, match=r"'simple', not 'english\+dates'.*reindex"):
            await store("english").setup()
        assert await store("english").reindex() == len(TEXTS)
        new = store("english")
        await new.setup()
        try:
            assert await _ranked(new) == await _reference("english")
        finally:
            await new.close()
    finally:
        await cleanup(prefix)


def test_every_backend_builds_its_store_with_the_configured_analyzer() -> None:
    from actrone_pg.stores import create_store

    for backend in ("memory", "postgres", "redis_qdrant"):
        config = MemoryConfig(
            backend=backend, text_analyzer="simple", postgres_dsn="postgresql://x"
        )
        assert create_store(config).analyzer.name == "simple"  # type: ignore[attr-defined]
        undated = MemoryConfig(backend=backend, lexical_dates=False, postgres_dsn="postgresql://x")
        assert create_store(undated).analyzer.dates is False  # type: ignore[attr-defined]
        assert create_store(config).analyzer.index_name == "simple+dates"  # type: ignore[attr-defined]


# -- lexical_dates: recorded with the analyzer, rebuilt by reindex ------------------------------

DATED = {  # the same words, two months: only the date terms tell them apart
    "may": ("we painted the lake", datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
    "june": ("we painted the lake", datetime(2023, 6, 2, 9, 0, tzinfo=UTC)),
    "other": ("nothing in common", datetime(2023, 5, 9, 9, 0, tzinfo=UTC)),
}
DATED_QUERY = "what did we paint in May 2023"


def _dated_records() -> list:  # type: ignore[type-arg]
    return [
        record("a", mid, text, [1, i, 0, 0], created_at=created)
        for i, (mid, (text, created)) in enumerate(DATED.items())
    ]


async def _dated_ranked(store: object) -> list[tuple[str, float | None, int | None]]:
    req = request("a", DATED_QUERY, [1, 0, 0, 0])
    hits = (await store.search(req)).hits  # type: ignore[attr-defined]
    return [(h.memory.id, h.explain.bm25, h.explain.lexical_rank) for h in hits]


async def _dated_reference(dates: bool) -> list[tuple[str, float | None, int | None]]:
    store = InMemoryStore(lexical_dates=dates)
    await store.upsert_memories(_dated_records())
    return await _dated_ranked(store)


async def test_the_date_terms_change_the_lexical_ranking_only_with_the_option() -> None:
    with_dates, without = await _dated_reference(True), await _dated_reference(False)
    assert with_dates != without
    # without dates "may" and "june" tie on BM25; with them the May memory wins on "may"
    lexical = {m: bm25 for m, bm25, _ in without}
    assert lexical["may"] == lexical["june"]
    lexical = {m: bm25 for m, bm25, _ in with_dates}
    assert lexical["may"] > lexical["june"] > 0  # type: ignore[operator]
    assert lexical["other"] is not None  # "other" shares "may" and "2023", nothing else


def test_bad_lexical_dates_values_are_configuration_errors() -> None:
    with pytest.raises(ConfigurationError, match="lexical_dates: expected true or false"):
        MemoryConfig.from_env({"ACTRONE_LEXICAL_DATES": "sometimes"})
    with pytest.raises(ConfigurationError, match="lexical_dates"):
        MemoryConfig(lexical_dates="yes")  # type: ignore[arg-type]
    # the stores and reindex, built without a MemoryConfig, refuse it too (nothing connects)
    with pytest.raises(ConfigurationError, match="lexical_dates: expected true or false"):
        InMemoryStore(lexical_dates="yes")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="lexical_dates"):
        PostgresStore(PostgresSettings("postgresql://nowhere/x", lexical_dates=1))  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="lexical_dates"):
        reindex("postgresql://nowhere/x", "actrone", "english", lexical_dates="no")  # type: ignore[arg-type]
    assert MemoryConfig.from_env({"ACTRONE_LEXICAL_DATES": "false"}).lexical_dates is False
    # unset: on for a store that holds nothing yet (a store that does follows its record)
    assert MemoryConfig().lexical_dates is None
    assert InMemoryStore().analyzer.index_name == "english+dates"


@pytest.mark.postgres
async def test_postgres_records_lexical_dates_refuses_a_mix_and_reindexes(
    postgres_dsn: str,
    scratch_schema: str,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    migrations.migrate(postgres_dsn, scratch_schema)

    def store(dates: bool | None) -> PostgresStore:
        return PostgresStore(
            PostgresSettings(postgres_dsn, schema=scratch_schema, lexical_dates=dates)
        )

    old = store(False)  # as every schema written before the option: 'english', no dates
    await old.setup()
    await old.upsert_memories(_dated_records())
    assert await _dated_ranked(old) == await _dated_reference(False)
    await old.close()
    with pytest.raises(ConfigurationError) as refused:
        await store(True).setup()
    assert refused.value.field == "lexical_dates"
    assert "'english', not 'english+dates'" in str(refused.value)
    assert "actrone-pg reindex" in str(refused.value)
    # nothing was written by the refused store: the old one still ranks as before
    old = store(False)
    await old.setup()
    assert await _dated_ranked(old) == await _dated_reference(False)
    await old.close()
    # Left unset (the default), lexical_dates follows the schema: an upgrade keeps serving a
    # schema indexed before dates, without them, and says once how to add them.
    with caplog.at_level(logging.WARNING, logger="actrone_pg"):
        follower = store(None)
        await follower.setup()
    try:
        assert follower.analyzer.index_name == "english"
        assert "reindex --lexical-dates" in caplog.text
        assert await _dated_ranked(follower) == await _dated_reference(False)
    finally:
        await follower.close()

    argv = ["reindex", "--backend", "postgres", "--dsn", postgres_dsn, "--schema", scratch_schema]
    assert cli.main([*argv, "--lexical-dates"]) == 0
    assert "re-indexed 3 memories with the analyzer 'english', with date terms" in (
        capsys.readouterr().out
    )
    new = store(True)
    await new.setup()
    try:
        assert await _dated_ranked(new) == await _dated_reference(True)
    finally:
        await new.close()
    caplog.clear()
    follower = store(None)  # unset now follows the dated schema, silently
    await follower.setup()
    assert follower.analyzer.index_name == "english+dates"
    assert "reindex" not in caplog.text
    await follower.close()
    with pytest.raises(ConfigurationError, match=r"'english\+dates', not 'english'.*reindex"):
        await store(False).setup()
    # and back, with the plain function
    assert reindex(postgres_dsn, scratch_schema, "english", lexical_dates=False) == len(DATED)
    back = store(False)
    await back.setup()
    try:
        assert await _dated_ranked(back) == await _dated_reference(False)
    finally:
        await back.close()


@pytest.mark.redis
@pytest.mark.qdrant
async def test_redis_records_lexical_dates_refuses_a_mix_and_reindexes(tmp_path: Path) -> None:
    from actrone_pg.stores.redis_qdrant import from_config

    prefix = unique_prefix()
    settings = redis_qdrant_settings(prefix, qdrant_url=str(tmp_path / "qdrant"))

    def store(dates: bool | None):  # type: ignore[no-untyped-def]
        return from_config(MemoryConfig(**settings, lexical_dates=dates))

    try:
        old = store(False)
        await old.setup()
        await old.upsert_memories(_dated_records())
        assert await _dated_ranked(old) == await _dated_reference(False)
        await old.close()
        follower = store(None)  # unset: follows the prefix's record, as on PostgreSQL
        await follower.setup()
        assert follower.analyzer.index_name == "english"
        assert await _dated_ranked(follower) == await _dated_reference(False)
        await follower.close()
        with pytest.raises(ConfigurationError, match=r"'english', not 'english\+dates'.*reindex"):
            await store(True).setup()
        assert await store(True).reindex() == len(DATED)
        new = store(True)
        await new.setup()
        try:
            assert await _dated_ranked(new) == await _dated_reference(True)
            # the index rebuilt from Qdrant (Redis lost it) holds the date terms too
            assert await new.rebuild_index("a") == len(DATED)
            assert await _dated_ranked(new) == await _dated_reference(True)
        finally:
            await new.close()
        with pytest.raises(ConfigurationError, match=r"'english\+dates', not 'english'"):
            await store(False).setup()
    finally:
        await cleanup(prefix)


def test_the_stem_cache_keeps_the_most_recently_used_within_its_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A vocabulary larger than the bound (a megabyte of made-up tokens, or years of memories)
    # leaves at most STEM_CACHE_SIZE stems, the most recent ones: no growth with the
    # vocabulary, and no cliff where the whole cache is dropped at once. (A bound of 1,000
    # here: stemming costs 50-90 us a token.)
    monkeypatch.setattr(ranking, "STEM_CACHE_SIZE", 1000)
    small = Analyzer("english")
    assert small.terms("cats running") == ["cat", "run"]
    for start in range(0, 3000, 500):
        words = [f"walking{i}s" for i in range(start, start + 500)]
        assert small.terms(" ".join([*words, "cats"]))[-1] == "cat"
        assert small.stems_cached() <= 1000
    assert small.stems_cached() == 1000
    stemmed: list[str] = []
    real = Analyzer._stem

    def counted(self: Analyzer, token: str) -> str:
        stemmed.append(token)
        return real(self, token)

    monkeypatch.setattr(Analyzer, "_stem", counted)
    recent = Analyzer("english")  # (the cache wraps the method as it is at construction)
    recent.terms("cats walking0s")
    recent.terms("cats walking0s")
    assert stemmed == ["cats", "walking0s"]  # the second time from the cache


def test_the_shared_analyzers_stem_cache_has_the_documented_bound() -> None:
    english = analyzer("english")
    english.terms("cats")
    assert 1 <= english.stems_cached() <= STEM_CACHE_SIZE == 50_000
