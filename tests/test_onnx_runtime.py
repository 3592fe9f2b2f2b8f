"""actrone_pg._onnx: the one way the ONNX embedder and the cross-encoder load a model."""

from __future__ import annotations

from pathlib import Path

import pytest

from actrone_pg.embedders import OnnxEmbedder
from actrone_pg.errors import ModelNotAvailableError
from actrone_pg.rerankers.cross_encoder import CrossEncoderReranker
from tests.models import _tokenizer_json


def model_with_inputs(directory: Path, names: tuple[str, ...]) -> Path:
    """A model directory whose graph takes ``names`` (INT64 [batch, seq]) and echoes the first."""
    import onnx
    from onnx import TensorProto, helper

    directory.mkdir(parents=True)
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT64, ["b", "s"]) for n in names]
    out = helper.make_tensor_value_info("out", TensorProto.INT64, ["b", "s"])
    graph = helper.make_graph(
        [helper.make_node("Identity", [names[0]], ["out"])], "inputs", inputs, [out]
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(directory / "model.onnx"))
    _tokenizer_json(directory / "tokenizer.json")
    return directory


@pytest.mark.parametrize(
    "names", [("input_ids", "position_ids"), ("attention_mask",)], ids=["unknown", "no-ids"]
)
def test_both_refuse_a_model_with_unsupported_inputs_alike(
    tmp_path: Path, names: tuple[str, ...]
) -> None:
    directory = model_with_inputs(tmp_path / "m", names)
    expected = (
        f"has inputs {list(names)}; expected input_ids and optionally attention_mask and "
        "token_type_ids"
    )
    with pytest.raises(ModelNotAvailableError, match="the ONNX model .*" + _escaped(expected)):
        OnnxEmbedder.from_directory(directory)
    with pytest.raises(ModelNotAvailableError, match="the reranker model .*" + _escaped(expected)):
        CrossEncoderReranker.from_directory(directory)


def test_both_name_a_file_that_is_not_a_model(tmp_path: Path) -> None:
    directory = tmp_path / "m"
    directory.mkdir()
    (directory / "model.onnx").write_bytes(b"not a model")
    _tokenizer_json(directory / "tokenizer.json")
    with pytest.raises(ModelNotAvailableError, match="cannot load the ONNX model"):
        OnnxEmbedder.from_directory(directory)
    with pytest.raises(ModelNotAvailableError, match="cannot load the reranker model"):
        CrossEncoderReranker.from_directory(directory)


def _escaped(text: str) -> str:
    import re

    return re.escape(text)
