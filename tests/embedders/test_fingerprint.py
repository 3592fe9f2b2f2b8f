"""A built-in model is recognised by what it computes, so its threshold follows it anywhere.

The mechanics (cosines, tolerance, the once-only notice) run on vectors and tiny encoders built
here; the claim that matters runs on the real all-MiniLM-L6-v2 export (marker ``model``): copied
under a neutral name it keeps its calibrated threshold, quantised to int8 it does not.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import numpy as np
import pytest

from actrone_pg import MemoryConfig, MemoryManager
from actrone_pg.embedders import OnnxEmbedder, create_embedder
from actrone_pg.embedders import onnx as onnx_module
from actrone_pg.embedders._fingerprint import (
    FINGERPRINTS,
    PROBES,
    TOLERANCE,
    fingerprint,
    recognise,
)
from tests.models import VOCAB, build_tiny_encoder

MINILM = "sentence-transformers/all-MiniLM-L6-v2"

# -- the fingerprint itself --


def test_fingerprint_is_the_cosine_of_every_pair_in_order() -> None:
    # Probe i points along axis i, except probe 1, which is probe 0 turned by 60 degrees and
    # scaled by 3: cos(0, 1) = 0.5 and every other pair is orthogonal.
    vectors = np.eye(len(PROBES), 8)
    vectors[1] = 3 * np.array([0.5, np.sqrt(3) / 2, 0, 0, 0, 0, 0, 0])
    got = fingerprint(vectors)
    assert len(got) == len(PROBES) * (len(PROBES) - 1) // 2 == 15
    assert got[0] == 0.5  # the pair (0, 1) comes first
    assert got[1:] == (0.0,) * 14
    with pytest.raises(ValueError, match="one per probe"):
        fingerprint(vectors[:3])


def _vectors_with(gram_upper: tuple[float, ...]) -> np.ndarray:
    """Vectors whose pairwise cosines are ``gram_upper`` (Cholesky of the Gram matrix)."""
    n = len(PROBES)
    gram = np.eye(n)
    rows, cols = np.triu_indices(n, 1)
    gram[rows, cols] = gram_upper
    gram[cols, rows] = gram_upper
    return np.linalg.cholesky(gram)


def test_recognise_within_the_tolerance_and_not_beyond() -> None:
    recorded = FINGERPRINTS[MINILM]
    assert recognise(_vectors_with(recorded)) == MINILM
    # any rotation and scaling of the output space computes the same cosines
    rotation, _ = np.linalg.qr(np.random.default_rng(3).normal(size=(len(PROBES),) * 2))
    assert recognise(5 * _vectors_with(recorded) @ rotation) == MINILM
    near = list(recorded)
    near[7] += TOLERANCE - 0.002
    assert recognise(_vectors_with(tuple(near))) == MINILM
    far = list(recorded)
    far[7] += TOLERANCE + 0.002
    assert recognise(_vectors_with(tuple(far))) is None


# -- recognition in OnnxEmbedder --


def _random_table(dim: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(len(VOCAB), dim)).astype(np.float32)


def test_a_model_named_like_minilm_that_computes_something_else_is_not_minilm(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    directory = build_tiny_encoder(tmp_path / "all-MiniLM-L6-v2", table=_random_table(384, 1))
    with caplog.at_level(logging.WARNING, logger="actrone_pg.embedders"):
        emb = OnnxEmbedder.from_directory(directory)
        again = OnnxEmbedder.from_directory(directory)
    # the name stays what the id says (vectors stored under it remain found) ...
    assert emb.name == again.name == f"onnx:{MINILM}"
    # ... but the threshold belongs to MiniLM's vectors, which these are not
    assert emb.relevance_threshold is None and emb.recognised_as is None
    notices = [r.getMessage() for r in caplog.records if "no calibrated threshold" in r.message]
    assert len(notices) == 1, notices  # once, not per construction
    assert f"is named like {MINILM}" in notices[0]
    assert "0.72" in notices[0]
    assert f"actrone-pg calibrate --embedder onnx:{directory}" in notices[0]


def test_an_unknown_model_says_once_which_threshold_it_gets(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    directory = build_tiny_encoder(tmp_path / "acme-encoder")
    with caplog.at_level(logging.WARNING, logger="actrone_pg.embedders"):
        emb = OnnxEmbedder.from_directory(directory)
        OnnxEmbedder.from_directory(directory)
        mine = OnnxEmbedder.from_directory(directory, relevance_threshold=0.4)
    assert emb.relevance_threshold is None and mine.relevance_threshold == 0.4
    (notice,) = [r.getMessage() for r in caplog.records if "no calibrated threshold" in r.message]
    assert "is not a built-in model" in notice and "else 0.72" in notice


def test_bge_small_is_still_recognised_by_its_id(tmp_path: Path) -> None:
    # No fingerprint of bge-small is recorded (its weights were not reachable), so its id decides.
    directory = build_tiny_encoder(tmp_path / "bge", table=_random_table(384, 2))
    emb = OnnxEmbedder.from_directory(directory, "cls", model_id="BAAI/bge-small-en-v1.5")
    assert (emb.recognised_as, emb.recognised_by) == ("BAAI/bge-small-en-v1.5", "model id")
    assert emb.relevance_threshold == onnx_module.BGE_SMALL_THRESHOLD
    assert emb.name == "onnx:BAAI/bge-small-en-v1.5"


# -- the real all-MiniLM-L6-v2 --


def _bare_copy(minilm_dir: Path, target: Path) -> Path:
    """Only the ONNX file and the tokenizer: nothing in the copy names the model."""
    target.mkdir()
    for name in ("model.onnx", "tokenizer.json"):
        shutil.copy2(minilm_dir / name, target / name)
    return target


@pytest.mark.model
async def test_minilm_under_a_neutral_name_keeps_its_calibrated_threshold(
    minilm_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copy = _bare_copy(minilm_dir, tmp_path / "encoder")
    emb = OnnxEmbedder.from_directory(copy)
    assert (emb.recognised_as, emb.recognised_by) == (MINILM, "vectors")
    assert emb.relevance_threshold == onnx_module.MINILM_THRESHOLD
    assert emb.name == "onnx:encoder"  # the stored name is unchanged: existing data stays found
    # nothing in the copy gives a length: the recognised model's own (not its 512 positions)
    assert emb.max_length == 256
    long_text = "word " * 400
    original = OnnxEmbedder.from_directory(minilm_dir)
    assert np.allclose(emb.embed_sync([long_text]), original.embed_sync([long_text]), atol=1e-5)
    # the same through the configuration a user writes, up to the manager's threshold
    monkeypatch.setenv("ACTRONE_EMBEDDING_MODEL", str(copy))
    assert create_embedder(MemoryConfig(embedding_provider="onnx")).relevance_threshold == (
        onnx_module.MINILM_THRESHOLD
    )
    async with await MemoryManager.create(MemoryConfig(embedding_provider="onnx")) as mm:
        assert mm.relevance_threshold == onnx_module.MINILM_THRESHOLD


@pytest.mark.model
def test_the_recorded_minilm_fingerprint_is_what_the_export_computes(minilm_dir: Path) -> None:
    emb = OnnxEmbedder.from_directory(minilm_dir, batch_size=1)  # no padding at all
    got = np.asarray(fingerprint(emb.embed_sync(list(PROBES))))
    assert float(np.max(np.abs(got - np.asarray(FINGERPRINTS[MINILM])))) < 1e-3


@pytest.mark.model
def test_minilm_quantised_to_int8_is_a_different_model(
    minilm_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    target = tmp_path / "all-MiniLM-L6-v2"  # even under the original's name
    target.mkdir()
    shutil.copy2(minilm_dir / "tokenizer.json", target / "tokenizer.json")
    quantize_dynamic(minilm_dir / "model.onnx", target / "model.onnx", weight_type=QuantType.QInt8)
    with caplog.at_level(logging.WARNING, logger="actrone_pg.embedders"):
        emb = OnnxEmbedder.from_directory(target)
    assert emb.recognised_as is None and emb.relevance_threshold is None
    assert any("its vectors differ" in r.getMessage() for r in caplog.records)
