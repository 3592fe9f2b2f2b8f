"""A cross-encoder reranker on onnxruntime + tokenizers (no torch).

The model reads ``[CLS] query [SEP] memory [SEP]`` and returns one logit per pair; higher means
more relevant. The default is ``Xenova/ms-marco-MiniLM-L-6-v2`` (an ONNX export of the MS MARCO
MiniLM cross-encoder) from the Hugging Face hub cache; a directory with ``model.onnx`` (or
``onnx/model.onnx``) and ``tokenizer.json`` works as well. Scores are the raw logits (for a
two-class head, the logit of the "relevant" class), which only their order matters for.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from actrone_pg import _onnx
from actrone_pg.errors import ConfigurationError, ModelNotAvailableError, RerankerError

if TYPE_CHECKING:
    from actrone_pg.config import MemoryConfig

__all__ = ["DEFAULT_RERANK_MODEL", "CrossEncoderReranker", "from_config"]

DEFAULT_RERANK_MODEL = "Xenova/ms-marco-MiniLM-L-6-v2"


class CrossEncoderReranker:
    """Scores (query, text) pairs with an ONNX cross-encoder, in a worker thread."""

    def __init__(
        self,
        model_path: str | os.PathLike[str],
        tokenizer_path: str | os.PathLike[str],
        *,
        name: str,
        max_length: int = 512,
        batch_size: int = 32,
        threads: int = 0,
    ) -> None:
        if batch_size < 1:
            raise ConfigurationError("batch_size", f"must be at least 1, got {batch_size}")
        ort, tokenizers = _onnx.import_runtime()
        self.name = name
        self.max_length = max_length
        self.batch_size = batch_size
        tokenizer = _onnx.load_tokenizer(tokenizers, tokenizer_path, what="reranker tokenizer")
        # Long memories lose their tail, not the query: longest_first trims the longer side.
        tokenizer.enable_truncation(max_length=max_length, strategy="longest_first")
        pad_id = tokenizer.token_to_id("[PAD]")
        tokenizer.enable_padding(pad_id=pad_id or 0, pad_token="[PAD]" if pad_id else "<pad>")
        self._tokenizer = tokenizer
        self._session, self._inputs = _onnx.inference_session(
            ort, model_path, threads=threads, what="reranker model"
        )
        self._output = self._session.get_outputs()[0].name

    @classmethod
    def from_directory(
        cls,
        path: str | os.PathLike[str],
        *,
        name: str | None = None,
        batch_size: int = 32,
        threads: int = 0,
    ) -> CrossEncoderReranker:
        """Load ``path/model.onnx`` (or ``path/onnx/model.onnx``) and ``path/tokenizer.json``."""
        directory = Path(path).expanduser()
        onnx_file = _onnx.find_onnx(directory) if directory.is_dir() else None
        if onnx_file is None or not (directory / "tokenizer.json").is_file():
            raise ModelNotAvailableError(
                f"rerank model directory {directory} must hold model.onnx (or onnx/model.onnx) "
                "and tokenizer.json"
            )
        meta = _onnx.read_json(directory / "actrone_model.json")
        return cls(
            onnx_file,
            directory / "tokenizer.json",
            name=name or f"onnx-cross-encoder:{meta.get('model_id') or directory.name}",
            max_length=_onnx.max_length(directory, meta, None),
            batch_size=batch_size,
            threads=threads,
        )

    @classmethod
    def from_pretrained(
        cls,
        model_id: str = DEFAULT_RERANK_MODEL,
        *,
        revision: str | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        local_files_only: bool = False,
        batch_size: int = 32,
        threads: int = 0,
    ) -> CrossEncoderReranker:
        """Load ``model_id`` from the hub cache, downloading it once if needed."""
        snapshot = _onnx.hub_snapshot(
            model_id, revision=revision, cache_dir=cache_dir, local_files_only=local_files_only
        )
        return cls.from_directory(
            snapshot,
            name=f"onnx-cross-encoder:{model_id}",
            batch_size=batch_size,
            threads=threads,
        )

    async def score(self, query: str, texts: Sequence[str]) -> list[float]:
        """One relevance score per text (higher is more relevant)."""
        items = list(texts)
        if not items:
            return []
        return await asyncio.to_thread(self.score_sync, query, items)

    def score_sync(self, query: str, texts: Sequence[str]) -> list[float]:
        """Blocking form of :meth:`score`."""
        out: list[float] = []
        for start in range(0, len(texts), self.batch_size):
            out.extend(self._run(query, list(texts[start : start + self.batch_size])))
        return out

    def _run(self, query: str, texts: list[str]) -> list[float]:
        try:
            encodings = self._tokenizer.encode_batch([(query, t) for t in texts])
        except Exception as exc:
            raise RerankerError(f"reranker tokenizer failed: {exc}") from None
        feed: dict[str, Any] = {
            "input_ids": np.asarray([e.ids for e in encodings], dtype=np.int64),
        }
        if "attention_mask" in self._inputs:
            feed["attention_mask"] = np.asarray(
                [e.attention_mask for e in encodings], dtype=np.int64
            )
        if "token_type_ids" in self._inputs:
            feed["token_type_ids"] = np.asarray([e.type_ids for e in encodings], dtype=np.int64)
        try:
            (logits,) = self._session.run([self._output], feed)
        except Exception as exc:
            raise RerankerError(f"{self.name}: inference failed: {exc}") from None
        arr = np.asarray(logits, dtype=np.float64)
        if arr.ndim == 2:
            arr = arr[:, -1]  # one logit, or the "relevant" class of a two-class head
        if arr.shape != (len(texts),):
            raise RerankerError(f"{self.name} returned scores of shape {np.shape(logits)}")
        return [float(x) for x in arr]

    def __repr__(self) -> str:
        return f"CrossEncoderReranker(name={self.name!r})"


def from_config(config: MemoryConfig) -> CrossEncoderReranker:
    """The reranker ``rerank_model`` names: a directory, else a hub id (cache, then download)."""
    _onnx.import_runtime()  # a missing extra is reported before any search or download
    model = config.rerank_model.strip()
    kwargs: dict[str, Any] = {
        "batch_size": config.rerank_top_k,
        "threads": config.embedding_threads,
    }
    if _onnx.looks_like_path(model):
        return CrossEncoderReranker.from_directory(model, **kwargs)
    return CrossEncoderReranker.from_pretrained(model, **kwargs)
