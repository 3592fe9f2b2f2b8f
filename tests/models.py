"""Models for the tests: tiny ONNX graphs built here, and the exported all-MiniLM-L6-v2.

The tiny models are real ONNX files run by onnxruntime, built with ``onnx.helper`` and a word-level
``tokenizers`` tokenizer, so every number they produce can be worked out by hand:

* the **encoder** maps each token to a fixed row of ``EMBEDDINGS`` (``last_hidden_state``); mean
  pooling then averages the rows of the real tokens;
* the **cross-encoder** scores a (query, text) pair as the sum of ``WEIGHTS[token]`` over the
  tokens of the *text* segment (token type 1), so its ranking is known in advance.

``minilm_dir`` is the real all-MiniLM-L6-v2 export made by ``scripts/export_test_model.py``
(``ACTRONE_TEST_MODEL_DIR``, else ``all-MiniLM-L6-v2`` in the library's models directory, else
where earlier versions put it, ``~/.cache/actrone-pg/test-models/``); tests that need it carry the
``model`` marker and skip, saying how to prepare it, when it is absent. Every test runs with the
library's models directory pointed at an empty one (``_no_user_models``), so a model the user
installed never changes which embedder ``embedding_provider="local"`` picks in a test.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pytest

from actrone_pg.embedders.onnx import models_dir as _user_models_dir

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]
WORDS = [
    "user",
    "is",
    "allergic",
    "to",
    "peanuts",
    "likes",
    "jazz",
    "coffee",
    "lives",
    "in",
    "lisbon",
    "food",
    "allergies",
    "a",
    "b",
    "c",
    "d",
]
VOCAB = SPECIALS + WORDS
DIM = 6
#: Row i is the vector of token id i (seeded, so every run builds the same model).
EMBEDDINGS = np.random.default_rng(7).normal(size=(len(VOCAB), DIM)).astype(np.float32)
#: Cross-encoder weight of each word of the text segment; unlisted tokens weigh 0.
WEIGHTS = {"peanuts": 5.0, "allergic": 3.0, "coffee": 2.0, "jazz": 1.0, "lisbon": 0.5}


def token_ids(text: str) -> list[int]:
    """The ids the tiny tokenizer gives ``text`` (lower-cased words; [CLS] ... [SEP])."""
    ids = [VOCAB.index(w) if w in VOCAB else 1 for w in text.lower().replace(".", " ").split()]
    return [2, *ids, 3]


def _tokenizer_json(path: Path) -> None:
    from tokenizers import Tokenizer, normalizers, pre_tokenizers, processors
    from tokenizers.models import WordLevel

    tok = Tokenizer(WordLevel({w: i for i, w in enumerate(VOCAB)}, unk_token="[UNK]"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", 2), ("[SEP]", 3)],
    )
    tok.save(str(path))


def build_tiny_encoder(
    directory: Path, *, onnx_subdir: bool = False, table: np.ndarray = EMBEDDINGS
) -> Path:
    """A tiny encoder directory: ``model.onnx`` (token -> ``table`` row) + ``tokenizer.json``.

    ``table`` has a row per token of ``VOCAB``; its width is the model's dimension.
    """
    dim = int(table.shape[1])
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    directory.mkdir(parents=True, exist_ok=True)
    ids = helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"])
    mask = helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"])
    out = helper.make_tensor_value_info(
        "last_hidden_state", TensorProto.FLOAT, ["batch", "seq", dim]
    )
    # The mask is an input (as in real encoders) but the rows do not depend on it; pooling does.
    nodes = [
        helper.make_node("Gather", ["table", "input_ids"], ["rows"]),
        helper.make_node("Cast", ["attention_mask"], ["mask_f"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["mask_f", "axis2"], ["mask3"]),
        helper.make_node("Mul", ["mask3", "zero"], ["zeros"]),
        helper.make_node("Add", ["rows", "zeros"], ["last_hidden_state"]),
    ]
    graph = helper.make_graph(
        nodes,
        "tiny_encoder",
        [ids, mask],
        [out],
        initializer=[
            numpy_helper.from_array(table.astype(np.float32), "table"),
            numpy_helper.from_array(np.array([2], dtype=np.int64), "axis2"),
            numpy_helper.from_array(np.zeros((1,), dtype=np.float32), "zero"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    target = directory / "onnx" / "model.onnx" if onnx_subdir else directory / "model.onnx"
    target.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(target))
    _tokenizer_json(directory / "tokenizer.json")
    return directory


def build_tiny_cross_encoder(directory: Path, weights: Mapping[str, float] = WEIGHTS) -> Path:
    """A tiny cross-encoder: logit = sum of ``weights`` over the tokens of the second segment."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    directory.mkdir(parents=True, exist_ok=True)
    table = np.zeros(len(VOCAB), dtype=np.float32)
    for word, w in weights.items():
        table[VOCAB.index(word)] = w
    inputs = [
        helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "seq"])
        for n in ("input_ids", "attention_mask", "token_type_ids")
    ]
    out = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 1])
    nodes = [
        helper.make_node("Gather", ["table", "input_ids"], ["w"]),
        helper.make_node("Mul", ["attention_mask", "token_type_ids"], ["in_text"]),
        helper.make_node("Cast", ["in_text"], ["in_text_f"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["w", "in_text_f"], ["contrib"]),
        helper.make_node("ReduceSum", ["contrib", "axes"], ["logits"], keepdims=1),
    ]
    graph = helper.make_graph(
        nodes,
        "tiny_cross_encoder",
        inputs,
        [out],
        initializer=[
            numpy_helper.from_array(table, "table"),
            numpy_helper.from_array(np.array([1], dtype=np.int64), "axes"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(directory / "model.onnx"))
    _tokenizer_json(directory / "tokenizer.json")
    return directory


def cross_encoder_score(text: str, weights: Mapping[str, float] = WEIGHTS) -> float:
    """The tiny cross-encoder's score of ``text``, by hand."""
    return sum(weights.get(VOCAB[i], 0.0) for i in token_ids(text)[1:-1])


def mean_pooled(ids: Sequence[int]) -> np.ndarray:
    """The tiny encoder's normalised mean-pooled vector of ``ids``, by hand."""
    v = EMBEDDINGS[list(ids)].astype(np.float64).mean(axis=0)
    return v / np.linalg.norm(v)


def hub_cache_layout(cache: Path, model_id: str, files: Mapping[str, Path], rev: str) -> Path:
    """Lay ``files`` out as huggingface_hub does: ``models--org--name/snapshots/<rev>/...``.

    Files are symbolic links (the hub links snapshots to blobs the same way); ``refs/main``
    names the revision. Returns the snapshot directory.
    """
    repo = cache / ("models--" + model_id.replace("/", "--"))
    snapshot = repo / "snapshots" / rev
    for name, source in files.items():
        target = snapshot / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.symlink_to(source.resolve())
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text(rev)
    return snapshot


def _complete(path: Path) -> bool:
    return (path / "model.onnx").is_file() and (path / "tokenizer.json").is_file()


def minilm_path() -> Path:
    """Where the exported MiniLM model is expected."""
    env = os.environ.get("ACTRONE_TEST_MODEL_DIR")
    if env:
        return Path(env).expanduser()
    path = _user_models_dir() / "all-MiniLM-L6-v2"
    legacy = Path.home() / ".cache" / "actrone-pg" / "test-models" / "all-MiniLM-L6-v2"
    return legacy if not _complete(path) and _complete(legacy) else path


@pytest.fixture(scope="session")
def minilm_dir() -> Path:
    """The exported all-MiniLM-L6-v2 directory, or a skip saying how to make it."""
    path = minilm_path()
    if not _complete(path):
        pytest.skip(
            f"the MiniLM ONNX test model is not at {path}: run "
            "`python scripts/export_test_model.py` (scripts/test does) or set "
            "ACTRONE_TEST_MODEL_DIR"
        )
    return path


@pytest.fixture(autouse=True)
def _no_user_models(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The library's models directory is an empty one during every test.

    ``scripts/test`` and ``scripts/demo`` export MiniLM into the user's models directory, where
    ``embedding_provider="local"`` (the default) finds it; without this, whether a test ran with
    the hashing embedder or MiniLM would depend on the machine.
    """
    from actrone_pg.embedders import onnx as onnx_module

    empty = tmp_path_factory.getbasetemp() / "no-user-models"
    monkeypatch.setattr(onnx_module, "models_dir", lambda: empty)


@pytest.fixture(scope="session")
def tiny_encoder_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny encoder built once per session."""
    return build_tiny_encoder(tmp_path_factory.mktemp("tiny-encoder"))


@pytest.fixture(scope="session")
def tiny_cross_encoder_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny cross-encoder built once per session."""
    return build_tiny_cross_encoder(tmp_path_factory.mktemp("tiny-cross-encoder"))


@pytest.fixture
def isolated_model_caches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Empty hub cache and models directory, hub offline: no test reads the user's caches."""
    import huggingface_hub.constants as hf_constants

    from actrone_pg.embedders import onnx as onnx_module

    hub = tmp_path / "hub"
    hub.mkdir()
    monkeypatch.setattr(hf_constants, "HF_HUB_CACHE", str(hub))
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", True)
    models = tmp_path / "models"
    monkeypatch.setattr(onnx_module, "models_dir", lambda: models)
    return hub
