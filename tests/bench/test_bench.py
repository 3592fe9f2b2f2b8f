"""``actrone-pg bench`` at a tiny size on the in-memory backend, and the pieces it is built from.

No assertion here is about time: the benchmark reports latencies, it never judges them.
"""

from __future__ import annotations

import json
import math
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest

from actrone_pg.bench.reference import reference_result, write_reference_data
from actrone_pg.bench.workload import (
    EPOCH,
    DatasetSpec,
    FixedVectorEmbedder,
    LatencyStats,
    build_dataset,
    exact_candidates,
    in_turn,
    schedule,
    tie_keys,
    unit_rows,
)
from actrone_pg.cli import main

TINY = ["--backend", "memory", "--agents", "2", "--per-agent", "300", "--queries", "20"]


def test_bench_json_structure_and_exact_recall(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", *TINY, "--warmup", "2", "--repeat", "2", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    (result,) = report["results"]
    assert result["backend"] == "memory"
    assert (result["agents"], result["per_agent"], result["memories"]) == (2, 300, 600)
    # two timed passes of 20 queries; the headline p50 is the median of the passes' p50s
    assert result["retrieve"]["n"] == result["search"]["n"] == 40
    assert len(result["retrieve"]["p50_runs"]) == len(result["search"]["p99_runs"]) == 2
    for stats in (result["retrieve"], result["search"]):
        assert 0 < stats["min"] <= stats["p50"] <= stats["p99"] <= stats["max"]
    assert result["ingest_rate"] > 0
    # The in-memory store scans exactly, so its candidates are the exact scan's: an invariant.
    assert result["recall_mean"] == 1.0 and result["recall_min"] == 1.0
    assert result["recall_queries"] == 20  # recall is measured on the first pass
    # 300 memories in one cluster; the threshold is set so a typical query admits 150 of them
    # (admit_target is capped at half the agent), all below the 500-candidate cap.
    assert 100 <= result["admitted_median"] <= 200
    assert result["returned_median"] == result["admitted_median"]
    assert 0 < result["threshold"] < 1
    assert any("query embedding excluded" in n for n in result["notes"])
    # the physical floor of spec §7, timed over the same queries and passes
    assert result["floor_name"] == "numpy top-500"
    assert result["floor"]["n"] == 40 and len(result["floor"]["p50_runs"]) == 2
    assert 0 < result["floor"]["min"] <= result["floor"]["p50"] <= result["floor"]["max"]
    # each pass's ratio to the floor, and search_memories at its default limit (10) too
    assert len(result["retrieve_floor_ratios"]) == 2
    assert all(r > 0 for r in result["retrieve_floor_ratios"])
    assert result["search_default"]["n"] == 40


def test_bench_tables(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", *TINY, "--queries", "5", "--warmup", "0", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    for label in (
        "ingest (memories/s)",
        "retrieve_context p50 (ms)",
        "candidate recall mean",
        "floor p50 (ms)",
        "retrieve_context p50 ÷ floor p50",
    ):
        assert label in out


def test_scaling_series_writes_growth_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["bench", "--backend", "memory", "--scaling", "--scaling-sizes", "200,400"]
    args += ["--queries", "5", "--warmup", "1", "--repeat", "1"]
    args += ["--out-dir", str(tmp_path), "--json"]
    assert main(args) == 0
    report = json.loads(capsys.readouterr().out)
    growth = report["scaling"]["growth"]
    assert [row["per_agent"] for row in growth] == [200, 400]
    assert [row["size_factor"] for row in growth] == [1.0, 2.0]
    assert growth[0]["retrieve_p50_growth"] == 1.0
    saved = json.loads((tmp_path / "scaling-memory.json").read_text())
    assert saved["scaling"]["growth"] == growth
    plot = tmp_path / "scaling-memory.png"
    assert plot.exists() or "matplotlib is not installed" in report["scaling"]["plot"]


def test_dataset_is_deterministic_and_unit_length() -> None:
    spec = DatasetSpec(agents=2, per_agent=50, queries=4, dimensions=16, seed=3)
    a, b = build_dataset(spec), build_dataset(spec)
    assert a.threshold == b.threshold
    for x, y in zip(a.agents, b.agents, strict=True):
        assert x.texts == y.texts and x.query_texts == y.query_texts
        assert np.array_equal(x.vectors, y.vectors)
        assert np.allclose(np.linalg.norm(x.vectors, axis=1), 1.0, atol=1e-6)
    assert len(set(a.agents[0].texts)) == 50  # unique: the embedder looks vectors up by text
    other = build_dataset(DatasetSpec(agents=2, per_agent=50, queries=4, dimensions=16, seed=4))
    assert not np.array_equal(a.agents[0].vectors, other.agents[0].vectors)
    # two queries per agent, round-robin over agents
    assert schedule(a, 5) == [(0, 0), (1, 0), (0, 1), (1, 1), (0, 0)]


def test_exact_candidates_by_hand() -> None:
    s = 1 / math.sqrt(2)
    vectors = np.array([[1, 0], [0, 1], [s, s], [-1, 0]], dtype=np.float32)
    query = np.array([1, 0], dtype=np.float32)
    # cosines: 1, 0, 0.707, -1 -> two pass 0.5; the nearest one is index 0
    count, nearest = exact_candidates(vectors, query, 0.5, limit=1)
    assert count == 2 and nearest.tolist() == [0]
    count, nearest = exact_candidates(vectors, query, 0.5, limit=10)
    assert count == 2 and sorted(nearest.tolist()) == [0, 2]


def test_exact_candidates_break_equal_cosines_as_the_stores_do() -> None:
    ds = build_dataset(DatasetSpec(agents=1, per_agent=4, queries=1, dimensions=2, seed=3))
    agent = ds.agents[0]
    agent.ids[:] = ["m-b", "m-a", "m-c", "m-d"]
    day = timedelta(days=1)
    agent.created_at[:] = [EPOCH, EPOCH, EPOCH + day, EPOCH - day]
    # Four equal cosines: the newest (m-c) first, then m-a before m-b (same instant, id order),
    # the oldest (m-d) last.
    vectors = np.array([[1, 0]] * 4, dtype=np.float32)
    query = np.array([1, 0], dtype=np.float32)
    _, nearest = exact_candidates(vectors, query, 0.5, 3, tie_keys(agent))
    assert [agent.ids[int(i)] for i in nearest] == ["m-c", "m-a", "m-b"]
    _, by_index = exact_candidates(vectors, query, 0.5, 3)
    assert by_index.tolist() == [0, 1, 2]


def test_latency_percentiles_nearest_rank() -> None:
    stats = LatencyStats.of([float(i) for i in range(100, 0, -1)])
    assert (stats.n, stats.p50, stats.p99, stats.min, stats.max) == (100, 50.0, 99.0, 1.0, 100.0)
    assert stats.mean == 50.5


def test_repeated_runs_report_the_median_of_their_percentiles() -> None:
    runs = [[1.0, 2.0, 3.0], [10.0, 20.0, 30.0], [4.0, 5.0, 6.0]]
    stats = LatencyStats.of_runs(runs)
    # per-run p50s 2, 20, 5 -> median 5; per-run p99s 3, 30, 6 -> median 6
    assert (stats.p50, stats.p99, stats.n, stats.min, stats.max) == (5.0, 6.0, 9, 1.0, 30.0)
    assert stats.p50_runs == [2.0, 20.0, 5.0]


async def test_fixed_vector_embedder_returns_registered_vectors() -> None:
    emb = FixedVectorEmbedder(3)
    vecs = unit_rows([[1, 2, 2], [0, 0, 5]])
    emb.add(["a", "b"], vecs)
    out = await emb.embed_batch(["b", "a"])
    assert np.array_equal(out, vecs[[1, 0]]) and emb.name == "bench-fixed-3"


def test_reference_result_uses_the_same_exact_scan(tmp_path: Path) -> None:
    ds = build_dataset(DatasetSpec(agents=1, per_agent=40, queries=2, dimensions=8, seed=1))
    write_reference_data(ds, tmp_path, queries=2, warmup=1, limit=500)
    meta = json.loads((tmp_path / "meta.json").read_text())
    assert meta["schedule"] == [[0, 0], [0, 1]] and meta["threshold"] == ds.threshold
    raw_vectors = np.fromfile(tmp_path / "vectors_0.f32", dtype="<f4").reshape(40, 8)
    assert np.array_equal(raw_vectors, ds.agents[0].vectors)
    agent = ds.agents[0]
    exact = [
        exact_candidates(
            unit_rows(agent.vectors),
            unit_rows(agent.query_vectors[q : q + 1])[0],
            ds.threshold,
            500,
        )[1].tolist()
        for q in range(2)
    ]
    raw = {
        "system": "actrone-memory",
        "version": "0.3.0",
        "stores": "PostgresStore (L1) + PgVectorStore (L2)",
        "server": "test",
        "memories": 40,
        "ingest_seconds": 2.0,
        "ingest_rate": 20.0,
        "retrieve_ms": [3.0, 1.0],
        "search_ms": [2.0, 4.0],
        # the first search found everything, the second nothing
        "search_hits": [exact[0], []],
        "context_sizes": [5, 0],
    }
    result = reference_result(raw, ds, queries=2, warmup=1, limit=500)
    assert result.backend == "actrone-memory 0.3.0"
    assert (result.recall_mean, result.recall_min) == (0.5, 0.0)
    assert (result.retrieve.p50, result.search.p99) == (1.0, 4.0)


def test_comparison_ratios_by_hand() -> None:
    from actrone_pg.bench.tables import comparison_rows
    from actrone_pg.bench.workload import BenchResult

    def result(rate: float, p50: float, p99: float) -> BenchResult:
        stats = LatencyStats(n=10, p50=p50, p99=p99, mean=p50, min=p50, max=p99)
        return BenchResult(
            backend="x", agents=1, per_agent=10, dimensions=8, threshold=0.5, seed=1,
            memories=10, ingest_seconds=1.0, ingest_rate=rate, retrieve=stats, search=stats,
            recall_mean=1.0, recall_min=1.0, recall_queries=10, admitted_median=5,
            admitted_min=5, admitted_max=5, returned_median=5, context_memories_median=5,
            warmup=0,
        )  # fmt: skip

    rows = comparison_rows(result(5000.0, 4.0, 10.0), result(250.0, 48.0, 60.0))
    ratios = {r["metric"]: r["ratio"] for r in rows}
    # ingest: ours / reference; latencies: reference / ours (how many times better ours is)
    assert ratios["ingest (memories/s)"] == 20.0
    assert ratios["retrieve_context p50 (ms)"] == 12.0
    assert ratios["search_memories p99 (ms)"] == 6.0
    assert ratios["candidate recall (mean)"] is None


def test_filters_and_versions_passes(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["bench", *TINY, "--warmup", "1", "--repeat", "2", "--filters", "--versions", "2"]
    assert main([*args, "--json"]) == 0
    (result,) = json.loads(capsys.readouterr().out)["results"]
    # memory i carries "p1" when i % 100 == 0, "p10" when i % 10 == 0, "p50" when i % 2 == 0
    # and "p100" always: 3, 30, 150 and 300 of 300
    assert result["filter_share"] == {"p1": 0.01, "p10": 0.1, "p50": 0.5, "p100": 1.0}
    for tag, tagged in (("p1", 3), ("p10", 30), ("p50", 150), ("p100", 300)):
        stats = result["retrieve_filtered"][tag]
        assert stats["n"] == 40 and len(stats["p50_runs"]) == 2
        assert 0 < stats["min"] <= stats["p50"] <= stats["p99"] <= stats["max"]
        # the filter restricts L2: never more memories in context than carry the tag
        assert 0 <= result["filter_context_median"][tag] <= tagged
    medians = result["filter_context_median"]
    assert medians["p1"] <= medians["p10"] <= medians["p100"]
    # every fifth memory (i % 5 == 1) of each agent, updated twice
    assert (result["versions"], result["versioned_memories"]) == (2, 120)
    assert result["update_rate"] > 0
    for key in ("retrieve_versioned", "search_versioned"):
        stats = result[key]
        assert stats["n"] == 40
        assert 0 < stats["min"] <= stats["p50"] <= stats["p99"] <= stats["max"]
    # metadata-only updates change no content or vector: searches see the same candidates
    assert result["versioned_same_candidates"] == 1.0

    assert (
        main(["bench", *TINY, "--warmup", "0", "--repeat", "1", "--filters", "--versions", "1"])
        == 0
    )
    out = capsys.readouterr().out
    for label in (
        'tags_any ["p1"] (1%) p50',
        'tags_any ["p10"] (10%) p99',
        'tags_any ["p100"] (100%) p50',
        "p50 ÷ floor p50 (p10)",
        "retrieve_context after updates p50",
        "search_memories after updates p99",
    ):
        assert label in out


def test_versions_must_not_be_negative(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", *TINY, "--versions", "-1"]) == 2
    assert "ValidationError: --versions must be 0 or more" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--agents", "0", "--agents must be at least 1"),
        ("--per-agent", "-5", "--per-agent must be at least 1"),
        ("--warmup", "-1", "--warmup must be 0 or more"),
        ("--scaling-sizes", "10,x", "--scaling-sizes takes numbers like 10000,30000"),
    ],
)
def test_a_bad_number_exits_2_naming_the_error_like_every_command(
    option: str, value: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    extra = ["--scaling"] if option == "--scaling-sizes" else []
    assert main(["bench", *TINY, *extra, option, value]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line == f"actrone-pg bench: ValidationError: {message}"


async def test_the_numpy_floor_is_the_exact_top_of_the_same_vectors() -> None:
    from actrone_pg import MemoryConfig, MemoryManager
    from actrone_pg.bench.floor import floor_for, nearest_for

    dataset = build_dataset(DatasetSpec(agents=1, per_agent=300, queries=3))
    embedder = FixedVectorEmbedder(dataset.spec.dimensions)
    mm = await MemoryManager.create(
        MemoryConfig(relevance_threshold=dataset.threshold), embedder=embedder
    )
    try:
        floor = floor_for(mm, dataset, 50)
        assert floor is not None and floor.name == "numpy top-50"
        assert nearest_for(mm, dataset, 50) is None  # the numpy floor already is a bare top-50
        agent = dataset.agents[0]
        top = np.asarray(await floor.call(agent, 1))
        # the store's own arithmetic: chunked float32 products of the normalised query
        scores = unit_rows(agent.vectors) @ unit_rows(agent.query_vectors[1:2])[0]
        assert list(top) == list(np.argsort(-scores, kind="stable")[:50])
    finally:
        await mm.close()


@pytest.mark.postgres
async def test_the_postgres_floor_reads_every_vector_of_the_agent(
    postgres_dsn: str, postgres_schema: str
) -> None:
    from actrone_pg import MemoryConfig, MemoryManager
    from actrone_pg.bench.floor import floor_for, nearest_for
    from actrone_pg.bench.workload import ingest

    dataset = build_dataset(DatasetSpec(agents=2, per_agent=120, queries=2))
    embedder = FixedVectorEmbedder(dataset.spec.dimensions)
    config = MemoryConfig(
        backend="postgres",
        postgres_dsn=postgres_dsn,
        postgres_schema=postgres_schema,
        relevance_threshold=dataset.threshold,
    )
    mm = await MemoryManager.create(config, embedder=embedder)
    try:
        for agent in dataset.agents:
            embedder.add(agent.texts, agent.vectors)
            await mm.erase_agent(agent.agent_id)
        await ingest(mm, dataset, batch_size=100)
        floor = floor_for(mm, dataset, 500)
        assert floor is not None and floor.name.startswith("bare read")
        assert await floor.call(dataset.agents[0], 0) == (120,)
        # The plain nearest-neighbour query beside it: the agent's nearest 10, nearest first.
        nearest = nearest_for(mm, dataset, 10)
        assert nearest is not None and nearest.name.startswith("ORDER BY embedding <=> q")
        agent = dataset.agents[0]
        got = [row[0] for row in await nearest.call(agent, 0)]  # type: ignore[attr-defined]
        scores = unit_rows(agent.vectors) @ unit_rows(agent.query_vectors[0:1])[0]
        assert got == [agent.ids[int(i)] for i in np.argsort(-scores, kind="stable")[:10]]
    finally:
        for agent in dataset.agents:
            await mm.erase_agent(agent.agent_id)
        await mm.close()


def test_the_bench_consolidates_nothing_of_its_own_turns(
    caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each agent stores TURNS_PER_AGENT turns, as many as consolidate_after_turns' default: a
    background consolidation would embed text the fixed-vector embedder has no vector for (a
    warning on every run) and, had it an embedder, add memories the exact scan does not know.
    At this size one agent's turns hold a sentence the extractive consolidator keeps."""
    caplog.set_level("WARNING", logger="actrone_pg")
    args = ["--backend", "memory", "--agents", "10", "--per-agent", "1000", "--queries", "10"]
    assert main(["bench", *args, "--warmup", "0", "--repeat", "1"]) == 0
    capsys.readouterr()
    assert [r.getMessage() for r in caplog.records] == []


def test_calls_in_turn_take_every_place_equally_often() -> None:
    calls = ["search", "plain", "bare"]
    assert in_turn(calls, 0) == calls
    assert in_turn(calls, 1) == ["plain", "bare", "search"]
    assert in_turn(calls, 4) == in_turn(calls, 1)
    for place in range(len(calls)):
        assert sorted(in_turn(calls, k)[place] for k in range(len(calls))) == sorted(calls)
    assert calls == ["search", "plain", "bare"]  # the given order is left as it is
