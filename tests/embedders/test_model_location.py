"""One model location: where scripts/export_test_model.py puts MiniLM, the library looks."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from actrone_pg import MemoryConfig
from actrone_pg.embedders import OnnxEmbedder, create_embedder
from actrone_pg.embedders import onnx as onnx_module
from tests.models import VOCAB, build_tiny_encoder

SCRIPT = Path(__file__).parents[2] / "scripts" / "export_test_model.py"


@pytest.fixture
def export_script(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location("export_test_model", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.delenv("ACTRONE_TEST_MODEL_DIR", raising=False)
    models = tmp_path / "user-cache" / "models"
    monkeypatch.setattr(onnx_module, "models_dir", lambda: models)
    return module


def _tiny_384(directory: Path) -> Path:
    table = np.random.default_rng(5).normal(size=(len(VOCAB), 384)).astype(np.float32)
    return build_tiny_encoder(directory, table=table)


def test_the_export_lands_where_the_local_provider_looks(
    export_script: ModuleType, isolated_model_caches: Path
) -> None:
    out = export_script.default_output_dir()
    assert out == onnx_module.models_dir() / "all-MiniLM-L6-v2"
    _tiny_384(out)  # stands in for the export; the path is what is tested
    emb = create_embedder(MemoryConfig(embedding_provider="local"))
    assert isinstance(emb, OnnxEmbedder)
    assert emb.model_path == out / "model.onnx"


def test_the_tests_directory_still_overrides_the_output(
    export_script: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("ACTRONE_TEST_MODEL_DIR", str(tmp_path / "elsewhere"))
    assert export_script.default_output_dir() == tmp_path / "elsewhere"


def test_an_earlier_export_is_copied_not_redone(
    export_script: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    legacy = _tiny_384(tmp_path / "test-models" / "all-MiniLM-L6-v2")
    monkeypatch.setattr(export_script, "LEGACY_DIR", legacy)
    out = export_script.default_output_dir()
    assert export_script.copy_legacy(out)
    assert (out / "model.onnx").read_bytes() == (legacy / "model.onnx").read_bytes()
    assert (out / "tokenizer.json").is_file()
    assert not list(out.parent.glob(".copy-*"))  # the temporary directory is gone
    shutil.rmtree(legacy)
    assert not export_script.copy_legacy(out)  # nothing to copy: the caller exports
