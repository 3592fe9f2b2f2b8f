"""Running the reference system's driver: data written, driver run, answers scored like ours.

The driver here is a stand-in script (actrone-memory is not installed in the test environment)
that reads what the evaluation wrote and answers each question with the ids of the conversation's
turns in order, so every score can be worked out by hand. With ``ACTRONE_BENCH_REFERENCE_PYTHON``
pointing at an environment that has actrone-memory 0.3.0, the real driver runs too.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

from actrone_pg.embedders import HashingEmbedder
from actrone_pg.evaluation import OVERALL, CachingEmbedder, shipped_conversations
from actrone_pg.evaluation.reference import (
    ReferenceRunError,
    find_eval_driver,
    run_reference_eval,
    write_eval_data,
)

STAND_IN = """
import json, sys
from pathlib import Path
data = Path(sys.argv[sys.argv.index("--data") + 1])
meta = json.loads((data / "meta.json").read_text())
results = []
for conv in meta["conversations"]:
    ids = [t["id"] for t in conv["turns"]][: meta["limit"]]
    results += [{"ranked": ids, "ms": 1.0} for _ in conv["questions"]]
print(json.dumps({"system": "stand-in", "version": "1", "threshold": 0.5, "results": results}))
"""


async def warmed(captions: bool = True) -> CachingEmbedder:
    embedder = CachingEmbedder(HashingEmbedder())
    convs = shipped_conversations()
    await embedder.warm([t.content(captions=captions) for c in convs for t in c.turns])
    await embedder.warm([q.text for c in convs for q in c.questions])
    return embedder


async def test_data_written_for_the_driver(tmp_path: Path) -> None:
    convs = shipped_conversations()
    embedder = await warmed()
    write_eval_data(convs, embedder, tmp_path, captions=True)
    meta = json.loads((tmp_path / "meta.json").read_text())
    vectors = np.fromfile(tmp_path / "vectors.f32", dtype="<f4").reshape(-1, meta["dimensions"])
    assert vectors.shape == (len(meta["texts"]), 256)
    first = meta["conversations"][0]["turns"][0]
    assert (
        first["content"] == "Ana: Morning Ben! I finally signed the lease on a community "
        "garden plot near the river."
    )
    at = meta["texts"].index(first["content"])
    assert np.allclose(vectors[at], embedder.vector(first["content"]), atol=1e-6)


async def test_a_driver_run_is_scored_like_ours(tmp_path: Path) -> None:
    driver = tmp_path / "driver.py"
    driver.write_text(STAND_IN)
    convs = shipped_conversations()
    result = run_reference_eval(
        Path(sys.executable), driver, convs, await warmed(), captions=True, threshold=0.3
    )
    assert result.label == "stand-in 1 default (threshold 0.3)"
    assert len(result.results) == 34
    # "garden": the first ten turns are garden:1 .. garden:10, so "What is the name of Ben's
    # physiotherapist?" (evidence garden:6) has reciprocal rank 1/6.
    physio = next(r for r in result.results if r.relevant == frozenset({"garden:6"}))
    assert physio.ranked == tuple(f"garden:{i}" for i in range(1, 11))
    assert result.by_conversation()["garden"].questions == 11
    assert 0.0 < result.scores()[OVERALL].mrr < 1.0


def test_a_missing_python_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ReferenceRunError, match="does not exist"):
        run_reference_eval(
            tmp_path / "nope" / "python",
            tmp_path,
            shipped_conversations(),
            CachingEmbedder(HashingEmbedder()),
            captions=True,
        )


@pytest.mark.skipif(
    not os.environ.get("ACTRONE_BENCH_REFERENCE_PYTHON"),
    reason="no actrone-memory environment (ACTRONE_BENCH_REFERENCE_PYTHON)",
)
async def test_the_real_reference_driver() -> None:
    python = Path(os.environ["ACTRONE_BENCH_REFERENCE_PYTHON"])
    result = run_reference_eval(
        python, find_eval_driver(), shipped_conversations(), await warmed(), captions=True
    )
    assert result.label == "actrone-memory 0.3.0 default"
    assert len(result.results) == 34
    assert result.scores()[OVERALL].recall_at_10 > 0.5
