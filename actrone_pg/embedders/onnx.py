"""Sentence embeddings from an ONNX model through onnxruntime and tokenizers (no torch).

Two presets carry calibrated thresholds (see ``docs/embeddings.md``):

* ``sentence-transformers/all-MiniLM-L6-v2``: mean pooling, 384 dimensions, 256 tokens;
* ``BAAI/bge-small-en-v1.5``: CLS pooling, 384 dimensions, 512 tokens.

A model is recognised as all-MiniLM-L6-v2 by what it computes (its vectors for a few fixed probe
sentences, :mod:`actrone_pg.embedders._fingerprint`), so the calibrated threshold follows the
model into any directory and any export; bge-small-en-v1.5, whose fingerprint is not recorded, is
recognised by its id. Any other BERT-like encoder exported to ONNX works given its pooling rule
(``"mean"`` or ``"cls"``); it declares no threshold, says so once in the log, and the library
default (0.72) applies until you calibrate it with ``actrone-pg calibrate``. Every vector is
L2-normalised.

A model is a directory holding ``model.onnx`` (or ``onnx/model.onnx``) and ``tokenizer.json``,
either given directly (:meth:`OnnxEmbedder.from_directory`) or fetched once from the Hugging Face
hub into its standard cache (:meth:`OnnxEmbedder.from_pretrained`); after the first download no
network is touched.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from actrone_pg._onnx import HOW_TO_GET_A_MODEL as _HOW_TO
from actrone_pg._onnx import find_onnx as _find_onnx
from actrone_pg._onnx import hub_snapshot, models_dir
from actrone_pg._onnx import import_runtime as _import_runtime
from actrone_pg._onnx import inference_session as _inference_session
from actrone_pg._onnx import load_tokenizer as _load_tokenizer
from actrone_pg._onnx import looks_like_path as _looks_like_path
from actrone_pg._onnx import max_length as _max_length
from actrone_pg._onnx import read_json as _read_json
from actrone_pg.embedders._fingerprint import FINGERPRINTS, PROBES, recognise
from actrone_pg.errors import (
    ConfigurationError,
    EmbedderError,
    MissingDependencyError,
    ModelNotAvailableError,
)
from actrone_pg.ranking import DEFAULT_RELEVANCE_THRESHOLD

if TYPE_CHECKING:
    from actrone_pg.config import MemoryConfig

__all__ = [
    "BGE_SMALL_THRESHOLD",
    "DEFAULT_MODEL",
    "MINILM_THRESHOLD",
    "PRESETS",
    "OnnxEmbedder",
    "Preset",
    "from_config",
    "hub_snapshot",
    "models_dir",
    "resolve_model_id",
]

logger = logging.getLogger("actrone_pg.embedders")

#: Measured here with ``actrone-pg calibrate --embedder minilm`` on the shipped set (48 relevant,
#: 528 unrelated pairs), best-F2 rule: precision 0.587, recall 0.917, F2 0.823 (TP 44, FP 31).
#: Relevant pairs score median 0.409 (0.161-0.684), unrelated median 0.058 (-0.135-0.501). The
#: best-F1 rule gave 0.351 (precision 0.787, recall 0.771), which ranked worse (docs/quality.md).
MINILM_THRESHOLD = 0.267
#: NOT measured: no model hub is reachable where this was built. An estimate from the seed's
#: observation that bge-small scores unrelated text around 0.48, with the threshold placed as far
#: (79 %) from the unrelated mean toward an assumed relevant mean of about 0.70 as MiniLM's
#: best-F1 threshold sat between its means (0.075 -> 0.351 -> 0.426). Replace it with
#: ``actrone-pg calibrate --embedder bge-small`` on a machine that has the model.
BGE_SMALL_THRESHOLD = 0.65

POOLINGS = ("mean", "cls")


@dataclass(frozen=True)
class Preset:
    """What is known about a built-in model: how to pool it and its calibrated threshold."""

    model_id: str
    pooling: str
    max_length: int
    dimensions: int
    relevance_threshold: float
    aliases: tuple[str, ...]


PRESETS: dict[str, Preset] = {
    p.model_id: p
    for p in (
        Preset(
            "sentence-transformers/all-MiniLM-L6-v2",
            "mean",
            256,
            384,
            MINILM_THRESHOLD,
            ("minilm", "all-minilm-l6-v2"),
        ),
        Preset(
            "BAAI/bge-small-en-v1.5",
            "cls",
            512,
            384,
            BGE_SMALL_THRESHOLD,
            ("bge-small", "bge-small-en-v1.5"),
        ),
    )
}
#: The model ``embedding_provider="onnx"``/``"local"`` uses when ``embedding_model`` is unset.
DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"

_UNSET: Any = object()


def resolve_model_id(model: str) -> str:
    """The hub id of ``model``: a preset alias (``"minilm"``, ``"bge-small"``) or the id itself."""
    low = model.strip().lower()
    for preset in PRESETS.values():
        if low == preset.model_id.lower() or low in preset.aliases:
            return preset.model_id
    return model.strip()


def _preset_for(model_id: str) -> Preset | None:
    low = model_id.lower()
    for preset in PRESETS.values():
        if low == preset.model_id.lower() or low in preset.aliases:
            return preset
        # A directory named after the model (".../all-MiniLM-L6-v2") is that model.
        if low == preset.model_id.split("/")[-1].lower():
            return preset
    return None


def _id_from_path(directory: Path) -> str:
    # A hub snapshot: .../models--org--name/snapshots/<revision>
    if directory.parent.name == "snapshots" and directory.parent.parent.name.startswith("models--"):
        return "/".join(directory.parent.parent.name[len("models--") :].split("--"))
    return directory.name


class OnnxEmbedder:
    """An ONNX sentence encoder: tokenise, run, pool (mean or CLS), L2-normalise.

    Build it with :meth:`from_directory` or :meth:`from_pretrained`. Inference runs in a worker
    thread (``asyncio.to_thread``), so the event loop keeps serving while a batch is encoded.
    Texts are sorted by length and encoded ``batch_size`` at a time, padded to the longest text of
    each batch and truncated at ``max_length`` tokens.
    """

    def __init__(
        self,
        model_path: str | os.PathLike[str],
        tokenizer_path: str | os.PathLike[str],
        *,
        model_id: str,
        pooling: str,
        max_length: int = 512,
        batch_size: int = 32,
        threads: int = 0,
        relevance_threshold: float | None = _UNSET,
        name: str | None = None,
    ) -> None:
        if pooling not in POOLINGS:
            raise ConfigurationError("pooling", f"must be one of {POOLINGS}, got {pooling!r}")
        if max_length < 2:
            raise ConfigurationError("max_length", f"must be at least 2, got {max_length}")
        if batch_size < 1:
            raise ConfigurationError("batch_size", f"must be at least 1, got {batch_size}")
        if threads < 0:
            raise ConfigurationError("threads", f"must be 0 (automatic) or more, got {threads}")
        ort, tokenizers = _import_runtime()
        self.model_id = model_id
        self.pooling = pooling
        self.max_length = max_length
        self.batch_size = batch_size
        self.model_path = Path(model_path)
        tokenizer = _load_tokenizer(tokenizers, tokenizer_path, what="tokenizer")
        tokenizer.enable_truncation(max_length=max_length)
        pad_id = tokenizer.token_to_id("[PAD]")
        pad_token = "[PAD]"
        if pad_id is None:
            pad_id = tokenizer.token_to_id("<pad>")
            pad_token = "<pad>"
        tokenizer.enable_padding(pad_id=pad_id or 0, pad_token=pad_token)
        self._tokenizer = tokenizer
        self._session, self._inputs = _inference_session(
            ort, model_path, threads=threads, what="ONNX model"
        )
        self._output, self._pooled = self._pick_output()
        self.dimensions = int(self._embed_sync(["dimension probe"]).shape[1])
        preset = _preset_for(model_id)
        # The name is stored with every vector: it stays what the id says, so data written
        # before models were recognised by their vectors is still found.
        self.name = name or f"onnx:{preset.model_id if preset else model_id}"
        if preset is not None and preset.dimensions != self.dimensions:
            raise ModelNotAvailableError(
                f"{model_path} claims to be {preset.model_id} but gives {self.dimensions} "
                f"dimensions, not {preset.dimensions}"
            )
        #: The built-in model this one is (a ``PRESETS`` id), or ``None``.
        self.recognised_as: str | None
        #: How it was recognised: ``"vectors"`` (its fingerprint) or ``"model id"``.
        self.recognised_by: str | None
        self.recognised_as, self.recognised_by = _recognise(self, preset)
        if relevance_threshold is _UNSET:
            known = PRESETS.get(self.recognised_as or "")
            relevance_threshold = known.relevance_threshold if known else None
            if known is None:
                _notice_unrecognised(self, preset)
        self.relevance_threshold: float | None = relevance_threshold

    def _truncate_at(self, max_length: int) -> None:
        self.max_length = max_length
        self._tokenizer.enable_truncation(max_length=max_length)

    def _pick_output(self) -> tuple[str, bool]:
        outputs = self._session.get_outputs()
        by_name = {o.name: o for o in outputs}
        for name in ("last_hidden_state", "token_embeddings"):
            if name in by_name:
                return name, False
        if "sentence_embedding" in by_name:
            return "sentence_embedding", True
        for o in outputs:
            if len(o.shape) == 3:
                return str(o.name), False
        for o in outputs:
            if len(o.shape) == 2:
                return str(o.name), True
        raise ModelNotAvailableError(f"the ONNX model {self.model_path} has no usable output")

    # -- construction --
    @classmethod
    def from_directory(
        cls,
        path: str | os.PathLike[str],
        pooling: str | None = None,
        *,
        model_id: str | None = None,
        max_length: int | None = None,
        batch_size: int = 32,
        threads: int = 0,
        relevance_threshold: float | None = _UNSET,
        name: str | None = None,
    ) -> OnnxEmbedder:
        """Load ``path/model.onnx`` (or ``path/onnx/model.onnx``) and ``path/tokenizer.json``.

        ``pooling`` and ``max_length`` default to what the directory says (``actrone_model.json``,
        sentence-transformers' ``1_Pooling/config.json`` and ``sentence_bert_config.json``), then
        to the preset of ``model_id``, then to mean pooling and the model's position limit.
        ``model_id`` defaults to the hub id a snapshot path encodes, else the directory's name, and
        names the embedder. The calibrated threshold comes from what the model computes: the
        vectors of all-MiniLM-L6-v2 are recognised wherever the files lie and whatever the
        directory is called; bge-small-en-v1.5 (no fingerprint recorded) by its id.
        """
        directory = Path(path).expanduser()
        if not directory.is_dir():
            raise ModelNotAvailableError(
                f"model directory {directory} does not exist; it must hold model.onnx (or "
                "onnx/model.onnx) and tokenizer.json"
            )
        onnx_file = _find_onnx(directory)
        tokenizer_file = directory / "tokenizer.json"
        missing = [
            n
            for n, ok in (("model.onnx", onnx_file), ("tokenizer.json", tokenizer_file.is_file()))
            if not ok
        ]
        if missing or onnx_file is None:
            raise ModelNotAvailableError(
                f"model directory {directory} lacks {' and '.join(missing)}; export the model to "
                "ONNX (model.onnx) and save its fast tokenizer (tokenizer.json) there"
            )
        meta = _read_json(directory / "actrone_model.json")
        model_id = model_id or str(meta.get("model_id") or _id_from_path(directory))
        preset = _preset_for(model_id)
        if pooling is None:
            pooling = meta.get("pooling") or _pooling_from_st(directory)
        if pooling is None:
            pooling = preset.pooling if preset else "mean"
        guess_length = (
            max_length is None and preset is None and not _declared_length(directory, meta)
        )
        if max_length is None:
            max_length = _max_length(directory, meta, preset)
        embedder = cls(
            onnx_file,
            tokenizer_file,
            model_id=model_id,
            pooling=str(pooling),
            max_length=max_length,
            batch_size=batch_size,
            threads=threads,
            relevance_threshold=relevance_threshold,
            name=name,
        )
        if guess_length and embedder.recognised_by == "vectors" and embedder.recognised_as:
            # Nothing in the directory says how long a text may be, but the model is known:
            # truncate where it was trained to (MiniLM: 256, not its 512 positions).
            embedder._truncate_at(PRESETS[embedder.recognised_as].max_length)
        return embedder

    @classmethod
    def from_pretrained(
        cls,
        model_id: str = DEFAULT_MODEL,
        *,
        revision: str | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        local_files_only: bool = False,
        pooling: str | None = None,
        batch_size: int = 32,
        threads: int = 0,
        relevance_threshold: float | None = _UNSET,
    ) -> OnnxEmbedder:
        """Load ``model_id`` from the Hugging Face hub cache, downloading it the first time.

        Fetches ``onnx/model.onnx`` (or ``model.onnx``), ``tokenizer.json`` and the small config
        files into the hub's standard cache (``HF_HOME`` / ``cache_dir``). The cache is tried
        first, so once a model is there it loads with no network at all; with
        ``local_files_only`` (or ``HF_HUB_OFFLINE=1``) the network is never tried.
        """
        model_id = resolve_model_id(model_id)
        snapshot = hub_snapshot(
            model_id, revision=revision, cache_dir=cache_dir, local_files_only=local_files_only
        )
        return cls.from_directory(
            snapshot,
            pooling,
            model_id=model_id,
            batch_size=batch_size,
            threads=threads,
            relevance_threshold=relevance_threshold,
        )

    # -- inference --
    def embed_sync(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors of ``texts`` (blocking; prefer :meth:`embed_batch` inside an event loop)."""
        return self._embed_sync(list(texts))

    async def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors of ``texts`` as a ``(len(texts), dimensions)`` float32 array, unit length."""
        items = list(texts)
        if not items:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        return await asyncio.to_thread(self._embed_sync, items)

    def _embed_sync(self, texts: list[str]) -> np.ndarray:
        # Sorting by length keeps the padding of each batch small, less than half the time
        # (docs/notes/benchmarks.md, "Measurements behind the code"). Results go back in caller
        # order.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out: np.ndarray | None = None
        for start in range(0, len(order), self.batch_size):
            idx = order[start : start + self.batch_size]
            vectors = self._run([texts[i] for i in idx])
            if out is None:
                out = np.empty((len(texts), vectors.shape[1]), dtype=np.float32)
            out[idx] = vectors
        assert out is not None
        return out

    def _run(self, texts: list[str]) -> np.ndarray:
        try:
            encodings = self._tokenizer.encode_batch(texts)
        except Exception as exc:
            raise EmbedderError(f"tokenizer failed: {exc}") from None
        ids = np.asarray([e.ids for e in encodings], dtype=np.int64)
        mask = np.asarray([e.attention_mask for e in encodings], dtype=np.int64)
        feed = {"input_ids": ids}
        if "attention_mask" in self._inputs:
            feed["attention_mask"] = mask
        if "token_type_ids" in self._inputs:
            feed["token_type_ids"] = np.zeros_like(ids)
        try:
            (raw,) = self._session.run([self._output], feed)
        except Exception as exc:
            raise EmbedderError(f"{self.name}: inference failed: {exc}") from None
        hidden = np.asarray(raw, dtype=np.float32)
        if self._pooled:
            pooled = hidden
        elif self.pooling == "cls":
            pooled = hidden[:, 0, :]
        else:
            weights = mask[:, :, None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        unit: np.ndarray = (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)
        return unit

    def __repr__(self) -> str:
        return (
            f"OnnxEmbedder(name={self.name!r}, pooling={self.pooling!r}, "
            f"dimensions={self.dimensions}, max_length={self.max_length})"
        )


def _recognise(embedder: OnnxEmbedder, claimed: Preset | None) -> tuple[str | None, str | None]:
    """Which built-in model ``embedder`` is, and how that is known.

    Its vectors for the probe sentences decide for every model whose fingerprint is recorded,
    whatever the id claims; a preset without a recorded fingerprint is taken at its id's word.
    """
    if any(PRESETS[m].dimensions == embedder.dimensions for m in FINGERPRINTS):
        found = recognise(embedder._embed_sync(list(PROBES)))
        if found is not None:
            return found, "vectors"
    if claimed is not None and claimed.model_id not in FINGERPRINTS:
        return claimed.model_id, "model id"
    return None, None


_noticed_unrecognised: set[str] = set()


def _notice_unrecognised(embedder: OnnxEmbedder, claimed: Preset | None) -> None:
    """Say once per model file which threshold an unrecognised model gets and how to measure one."""
    key = str(embedder.model_path.resolve())
    if key in _noticed_unrecognised:
        return
    _noticed_unrecognised.add(key)
    directory = embedder.model_path.parent
    if directory.name == "onnx":  # the hub's layout: <model>/onnx/model.onnx
        directory = directory.parent
    if claimed is not None:
        what = (
            f"is named like {claimed.model_id} but its vectors differ from that model's (a "
            "fine-tuned, quantised or different model), so it has no calibrated threshold"
        )
    else:
        what = "is not a built-in model, so it has no calibrated threshold"
    logger.warning(
        "ONNX model %s %s: admission uses relevance_threshold if you set one, else %s. Measure "
        "its own with `actrone-pg calibrate --embedder onnx:%s` (add --pairs your_pairs.jsonl for "
        "your data) and set ACTRONE_RELEVANCE_THRESHOLD to the result.",
        embedder.model_path,
        what,
        DEFAULT_RELEVANCE_THRESHOLD,
        directory,
    )


def _pooling_from_st(directory: Path) -> str | None:
    cfg = _read_json(directory / "1_Pooling" / "config.json")
    if cfg.get("pooling_mode_cls_token"):
        return "cls"
    if cfg.get("pooling_mode_mean_tokens"):
        return "mean"
    return None


def _declared_length(directory: Path, meta: dict[str, Any]) -> bool:
    """Whether the directory's own files say how many tokens the model takes."""
    st = _read_json(directory / "sentence_bert_config.json").get("max_seq_length")
    return bool(meta.get("max_length") or st)


def from_config(config: MemoryConfig, *, local_only: bool = False) -> OnnxEmbedder:
    """The ONNX embedder ``config`` asks for (used by ``create_embedder``).

    ``embedding_model`` may be a directory, a hub id or a preset alias (``minilm``,
    ``bge-small``); unset means all-MiniLM-L6-v2, else bge-small, whichever is found first. A
    model is looked for in this order: the directory itself; ``models_dir()/<name>``; the hub
    cache; and, unless ``local_only`` (the ``"local"`` provider, which must never touch the
    network), one download from the hub. Nothing found raises
    :class:`~actrone_pg.errors.ModelNotAvailableError` saying how to get a model.
    """
    _import_runtime()  # a missing extra is reported before any search
    kwargs: dict[str, Any] = {
        "batch_size": config.embedding_batch_size,
        "threads": config.embedding_threads,
    }
    model = (config.embedding_model or "").strip()
    if model and _looks_like_path(model):
        embedder = OnnxEmbedder.from_directory(model, **kwargs)
        _check_dimensions(config, embedder)
        return embedder
    candidates = [resolve_model_id(model)] if model else [DEFAULT_MODEL, "BAAI/bge-small-en-v1.5"]
    for model_id in candidates:
        for local in (models_dir() / model_id.split("/")[-1], models_dir() / model_id):
            if local.is_dir() and _find_onnx(local) and (local / "tokenizer.json").is_file():
                embedder = OnnxEmbedder.from_directory(local, model_id=model_id, **kwargs)
                _check_dimensions(config, embedder)
                return embedder
        try:
            embedder = OnnxEmbedder.from_pretrained(model_id, local_files_only=True, **kwargs)
        except (ModelNotAvailableError, MissingDependencyError):
            continue
        _check_dimensions(config, embedder)
        return embedder
    if local_only:
        raise ModelNotAvailableError(
            f"no local ONNX model ({' or '.join(candidates)}) in {models_dir()} nor in the hub "
            "cache; " + _HOW_TO
        )
    embedder = OnnxEmbedder.from_pretrained(candidates[0], **kwargs)
    _check_dimensions(config, embedder)
    return embedder


def _check_dimensions(config: MemoryConfig, embedder: OnnxEmbedder) -> None:
    if config.embedding_dimensions is not None and config.embedding_dimensions != (
        embedder.dimensions
    ):
        raise ConfigurationError(
            "embedding_dimensions",
            f"{embedder.name} gives {embedder.dimensions} dimensions, not "
            f"{config.embedding_dimensions}; unset embedding_dimensions or pick another model",
        )
