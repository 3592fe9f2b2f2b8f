"""What the ONNX embedder and the ONNX cross-encoder share: finding, fetching and loading a model.

Private: both :mod:`actrone_pg.embedders.onnx` and :mod:`actrone_pg.rerankers.cross_encoder`
import from here, neither from the other.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Protocol

from actrone_pg.errors import MissingDependencyError, ModelNotAvailableError

__all__ = [
    "HOW_TO_GET_A_MODEL",
    "MODEL_INPUTS",
    "ONNX_FILES",
    "find_onnx",
    "hub_snapshot",
    "import_runtime",
    "inference_session",
    "load_tokenizer",
    "looks_like_path",
    "max_length",
    "models_dir",
    "read_json",
]

#: Where a model directory keeps its ONNX file, in the order looked for.
ONNX_FILES = ("model.onnx", "onnx/model.onnx")
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")
# Small files that refine pooling and length; fetched from the hub when present, never required.
_HUB_OPTIONAL_FILES = (
    "config.json",
    "tokenizer_config.json",
    "sentence_bert_config.json",
    "1_Pooling/config.json",
)


class _Preset(Protocol):
    """What :func:`max_length` reads of a model preset (``embedders.onnx.Preset``)."""

    @property
    def max_length(self) -> int: ...


def import_runtime() -> tuple[Any, Any]:
    """``onnxruntime`` and ``tokenizers``, or the ``[onnx]`` extra's install line."""
    try:
        import onnxruntime
    except ImportError:
        raise MissingDependencyError("onnx", "onnxruntime") from None
    try:
        import tokenizers
    except ImportError:
        raise MissingDependencyError("onnx", "tokenizers") from None
    return onnxruntime, tokenizers


#: The inputs a supported model may take; ``input_ids`` is required.
MODEL_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def load_tokenizer(tokenizers: Any, path: str | os.PathLike[str], *, what: str) -> Any:
    """The tokenizer in ``path``, its own padding and truncation off (the caller sets its own).

    A file may carry settings of its own (MiniLM's pads every text to 128).
    """
    try:
        tokenizer = tokenizers.Tokenizer.from_file(str(path))
    except Exception as exc:
        raise ModelNotAvailableError(f"cannot load the {what} {path}: {exc}") from None
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return tokenizer


def inference_session(
    ort: Any, model_path: str | os.PathLike[str], *, threads: int, what: str
) -> tuple[Any, list[str]]:
    """A CPU session of ``model_path`` and its input names (a subset of :data:`MODEL_INPUTS`).

    ``threads`` intra-op threads (0: onnxruntime's choice) and one inter-op thread: one request
    at a time per call; parallelism comes from intra-op threads.
    """
    options = ort.SessionOptions()
    if threads:
        options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    try:
        session = ort.InferenceSession(
            str(model_path), sess_options=options, providers=["CPUExecutionProvider"]
        )
    except Exception as exc:
        raise ModelNotAvailableError(f"cannot load the {what} {model_path}: {exc}") from None
    inputs = [i.name for i in session.get_inputs()]
    if not set(inputs) <= set(MODEL_INPUTS) or "input_ids" not in inputs:
        raise ModelNotAvailableError(
            f"the {what} {model_path} has inputs {inputs}; expected input_ids and optionally "
            "attention_mask and token_type_ids"
        )
    return session, inputs


def read_json(path: Path) -> dict[str, Any]:
    """The JSON object in ``path``, or ``{}`` if it is missing or not an object."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def find_onnx(directory: Path) -> Path | None:
    """The model directory's ONNX file, or ``None``."""
    for name in ONNX_FILES:
        if (directory / name).is_file():
            return directory / name
    return None


def max_length(directory: Path, meta: dict[str, Any], preset: _Preset | None) -> int:
    """The longest input in tokens: the model's own files first, then the preset's, then 512."""
    positions = read_json(directory / "config.json").get("max_position_embeddings")
    length: Any = meta.get("max_length")
    if not length:
        length = read_json(directory / "sentence_bert_config.json").get("max_seq_length")
    if not length and preset is not None:
        length = preset.max_length
    if not length:
        tok_max = read_json(directory / "tokenizer_config.json").get("model_max_length")
        # Tokenizers without a limit store a huge sentinel (1e30); ignore it.
        if isinstance(tok_max, int) and tok_max < 100_000:
            length = tok_max
    if not length:
        length = positions or 512
    if isinstance(positions, int) and positions > 0:
        length = min(int(length), positions)
    return int(length)


def looks_like_path(model: str) -> bool:
    """Whether ``model`` names a directory rather than a hub id."""
    return (
        model.startswith(("/", ".", "~"))
        or os.sep in model.strip("/")
        and not _HUB_ID.fullmatch(model)
        or Path(model).expanduser().exists()
    )


def models_dir() -> Path:
    """Where actrone_pg looks for model directories by name: ``<user cache>/actrone-pg/models``.

    ``~/.cache/actrone-pg/models/all-MiniLM-L6-v2`` (holding ``model.onnx`` and
    ``tokenizer.json``) is found without any setting.
    """
    try:
        import platformdirs

        base = Path(platformdirs.user_cache_dir("actrone-pg"))
    except ImportError:  # pragma: no cover - platformdirs is a core dependency
        base = Path.home() / ".cache" / "actrone-pg"
    return base / "models"


def hub_snapshot(
    model_id: str,
    *,
    revision: str | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    local_files_only: bool = False,
) -> Path:
    """The hub-cache directory holding ``model_id``'s ONNX file and ``tokenizer.json``.

    The cache is tried first, with no network; only if the files are not there (and
    ``local_files_only`` is false) are they downloaded, once, into the standard cache layout
    (``models--org--name/snapshots/<revision>/``). ``HF_HUB_OFFLINE=1`` forbids the download.
    """
    try:
        from huggingface_hub import hf_hub_download
    except ImportError:
        raise MissingDependencyError("onnx", "huggingface_hub") from None

    def fetch(filename: str, offline: bool) -> Path:
        return Path(
            hf_hub_download(
                model_id,
                filename,
                revision=revision,
                cache_dir=None if cache_dir is None else Path(cache_dir),
                local_files_only=offline,
            )
        )

    def fetch_all(offline: bool) -> Path:
        tokenizer = fetch("tokenizer.json", offline)
        errors: list[str] = []
        for name in ONNX_FILES:
            try:
                fetch(name, offline)
                break
            except Exception as exc:  # the hub raises many types; any means "not this one"
                errors.append(f"{name}: {type(exc).__name__}")
        else:
            raise FileNotFoundError("no ONNX file (" + "; ".join(errors) + ")")
        for name in _HUB_OPTIONAL_FILES:
            try:
                fetch(name, offline)
            except Exception:
                pass  # optional: pooling and length have preset defaults
        return tokenizer.parent

    try:
        return fetch_all(offline=True)
    except Exception as cached_exc:
        if local_files_only:
            raise ModelNotAvailableError(
                f"{model_id} is not in the hub cache ({type(cached_exc).__name__}); "
                + HOW_TO_GET_A_MODEL
            ) from None
    _check_hub_reachable(model_id)
    try:
        return fetch_all(offline=False)
    except Exception as exc:
        raise ModelNotAvailableError(
            f"cannot download {model_id} from the model hub ({type(exc).__name__}: {exc}); "
            + HOW_TO_GET_A_MODEL
        ) from None


def _check_hub_reachable(model_id: str, timeout: float = 3.0) -> None:
    """Fail at once when the hub cannot be reached, instead of after the hub client's retries.

    Without a network, huggingface_hub retries each request with backoff, for tens of seconds
    (docs/notes/benchmarks.md, "Measurements behind the code"); one TCP connection attempt
    answers the same question in milliseconds. Skipped behind a proxy, where a direct connection
    proves nothing.
    """
    import socket
    from urllib.parse import urlparse

    if any(os.environ.get(v) for v in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")):
        return
    try:
        from huggingface_hub import constants

        if constants.HF_HUB_OFFLINE:
            return  # the hub client refuses at once by itself; no connection attempt at all
        endpoint = urlparse(constants.ENDPOINT)
    except (ImportError, AttributeError, ValueError):
        return
    host = endpoint.hostname
    if not host:
        return
    port = endpoint.port or (443 if endpoint.scheme == "https" else 80)
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as exc:
        raise ModelNotAvailableError(
            f"cannot download {model_id}: the model hub ({host}) is not reachable ({exc}); "
            + HOW_TO_GET_A_MODEL
        ) from None


#: What to do when no model can be found or fetched; ends every such error message.
HOW_TO_GET_A_MODEL = (
    "to get a model either (a) put a directory holding model.onnx (or onnx/model.onnx) and "
    "tokenizer.json somewhere and set ACTRONE_EMBEDDING_MODEL=/that/directory (or place it in "
    f"{models_dir()}/<model-name>), or (b) allow one download from the Hugging Face hub "
    '(pip install "actrone-pg[onnx]"; the files are cached and later runs work offline)'
)
