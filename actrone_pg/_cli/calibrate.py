"""``actrone-pg calibrate``: measure an embedder's relevance threshold on labelled pairs.

Scores every (query, memory) pair with the embedder (cosine of the L2-normalised vectors), picks
the threshold by the rule in :mod:`actrone_pg.calibration` (best F2, ties to the higher
threshold), and prints both score distributions as a histogram with precision, recall, F1, F2.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from actrone_pg.calibration import (
    CalibrationResult,
    LabelledPair,
    choose_threshold,
    histogram,
    metrics_at,
    parse_pairs,
    summarise,
)
from actrone_pg.embedders import Embedder, as_vectors
from actrone_pg.errors import ConfigurationError, ValidationError

__all__ = ["add_arguments", "load_embedder", "run", "score_pairs", "shipped_pairs"]

EMBEDDER_HELP = (
    "which embedder to calibrate: 'hashing'; 'minilm' or 'bge-small' (found in --model-dir, "
    "the actrone-pg models directory or the hub cache); 'onnx:<directory or hub id>'; 'openai' "
    "(ACTRONE_EMBEDDING_API_URL etc.); 'config' (what ACTRONE_* settings select, the default); "
    "or 'package.module:factory' naming your own embedder or a callable returning one"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the command's options."""
    parser.add_argument("--embedder", default="config", help=EMBEDDER_HELP)
    parser.add_argument(
        "--model-dir", type=Path, default=None, help="directory with model.onnx + tokenizer.json"
    )
    parser.add_argument(
        "--pooling", choices=("mean", "cls"), default=None, help="pooling of an ONNX model"
    )
    parser.add_argument(
        "--pairs",
        type=Path,
        default=None,
        help="your labelled pairs (.jsonl or .csv); default: the shipped set of 48 relevant "
        "and 528 unrelated pairs",
    )
    parser.add_argument(
        "--format", choices=("jsonl", "csv"), default=None, help="pairs format (default: by suffix)"
    )
    parser.add_argument("--decimals", type=int, default=3, help="round the threshold down to N")
    parser.add_argument("--bins", type=int, default=20, help="histogram bins")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")


def shipped_pairs() -> list[LabelledPair]:
    """The calibration set shipped in the package (``actrone_pg/data/calibration.jsonl``)."""
    text = resources.files("actrone_pg").joinpath("data/calibration.jsonl").read_text("utf-8")
    return parse_pairs(text, "jsonl", source="calibration.jsonl")


def load_embedder(spec: str, *, model_dir: Path | None = None, pooling: str | None = None) -> Any:
    """Build the embedder a ``--embedder`` value names."""
    from actrone_pg.config import MemoryConfig

    if spec == "hashing":
        from actrone_pg.embedders import HashingEmbedder

        return HashingEmbedder()
    if spec == "config":
        from actrone_pg.embedders import create_embedder

        return create_embedder(MemoryConfig())
    if spec == "openai":
        from actrone_pg.embedders.openai import from_config as openai_from_config

        return openai_from_config(MemoryConfig(embedding_provider="openai"))
    from actrone_pg.embedders import onnx

    if spec.startswith("onnx:") or spec in ("minilm", "bge-small") or model_dir is not None:
        target = spec[len("onnx:") :] if spec.startswith("onnx:") else spec
        if model_dir is not None:
            model_id = onnx.resolve_model_id(target) if target and target != "onnx" else None
            return onnx.OnnxEmbedder.from_directory(model_dir, pooling, model_id=model_id)
        if Path(target).expanduser().is_dir():
            return onnx.OnnxEmbedder.from_directory(target, pooling)
        config = MemoryConfig(embedding_provider="onnx", embedding_model=target)
        return onnx.from_config(config)
    if ":" in spec:
        module_name, _, attr = spec.partition(":")
        try:
            obj = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as exc:
            raise ConfigurationError("embedder", f"cannot import {spec!r}: {exc}") from None
        # A class or a factory is called; an embedder instance is used as is.
        if isinstance(obj, type) or (callable(obj) and not hasattr(obj, "embed_batch")):
            obj = obj()
        return obj
    raise ConfigurationError("embedder", f"unknown embedder {spec!r}; {EMBEDDER_HELP}")


async def score_pairs(embedder: Embedder, pairs: list[LabelledPair]) -> list[float]:
    """The cosine of every pair (each distinct text embedded once, 64 at a time)."""
    texts = list(dict.fromkeys([p.query for p in pairs] + [p.memory for p in pairs]))
    vectors: dict[str, np.ndarray] = {}
    for start in range(0, len(texts), 64):
        chunk = texts[start : start + 64]
        raw = await embedder.embed_batch(chunk)
        for text, vec in zip(
            chunk, as_vectors(raw, len(chunk), embedder.dimensions, embedder.name), strict=True
        ):
            vectors[text] = vec.astype(np.float64)
    return [float(vectors[p.query] @ vectors[p.memory]) for p in pairs]


def _read_pairs(path: Path, fmt: str | None) -> list[LabelledPair]:
    fmt = fmt or ("csv" if path.suffix.lower() == ".csv" else "jsonl")
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ValidationError(f"cannot read {path}: {exc.strerror}") from None
    return parse_pairs(text, fmt, source=str(path))


def _result_dict(
    embedder: Any, source: str, result: CalibrationResult, declared: dict[str, Any] | None
) -> dict[str, Any]:
    m = result.metrics
    return {
        "embedder": embedder.name,
        "pairs": source,
        "rule": result.rule,
        "threshold": m.threshold,
        "precision": m.precision,
        "recall": m.recall,
        "f1": m.f1,
        "f2": m.f2,
        "true_positives": m.true_positives,
        "false_positives": m.false_positives,
        "false_negatives": m.false_negatives,
        "true_negatives": m.true_negatives,
        "relevant_scores": summarise(result.relevant_scores),
        "unrelated_scores": summarise(result.unrelated_scores),
        "declared": declared,
    }


def _print(data: dict[str, Any], result: CalibrationResult, bins: int) -> None:
    from rich.console import Console
    from rich.table import Table

    from actrone_pg._cli._output import console as make_console

    console = make_console(highlight=False, width=max(100, Console().width), soft_wrap=True)
    rel, unr = data["relevant_scores"], data["unrelated_scores"]
    console.print(
        f"[bold]{data['embedder']}[/bold] on {data['pairs']}: "
        f"{rel['count']} relevant, {unr['count']} unrelated pairs"
    )
    rows = histogram(result.relevant_scores, result.unrelated_scores, bins=bins)
    top_rel = max((r[2] for r in rows), default=1) or 1
    top_unr = max((r[3] for r in rows), default=1) or 1
    width = 24  # each column scaled to its own largest bin: the shapes, not the counts, compare
    table = Table(title="cosine of each pair", show_edge=False, pad_edge=False)
    table.add_column("score bin", justify="right", no_wrap=True)
    table.add_column("relevant", style="green", no_wrap=True, min_width=width)
    table.add_column("n", justify="right")
    table.add_column("unrelated", style="red", no_wrap=True, min_width=width)
    table.add_column("n", justify="right")
    table.add_column("", no_wrap=True)
    threshold = data["threshold"]
    for i, (lo, hi, r, u) in enumerate(rows):
        last = i == len(rows) - 1
        marker = "◀ threshold" if lo <= threshold < hi or (last and threshold >= hi) else ""
        table.add_row(
            f"{lo:+.3f} … {hi:+.3f}",
            "█" * max(1 if r else 0, round(width * r / top_rel)),
            str(r) if r else "",
            "█" * max(1 if u else 0, round(width * u / top_unr)),
            str(u) if u else "",
            marker,
        )
    console.print(table)
    stats = Table(show_edge=False, pad_edge=False)
    stats.add_column("")
    for key in ("count", "mean", "median", "min", "p10", "p90", "max"):
        stats.add_column(key, justify="right")
    for label, s in (("relevant", rel), ("unrelated", unr)):
        stats.add_row(label, *(f"{s[k]:.3f}" if k != "count" else str(s[k]) for k in s))
    console.print(stats)
    console.print(f"rule: {data['rule']}")
    console.print(
        f"[bold]threshold {threshold:.3f}[/bold]: precision {data['precision']:.3f}, "
        f"recall {data['recall']:.3f}, F1 {data['f1']:.3f}, F2 {data['f2']:.3f} "
        f"(TP {data['true_positives']}, FP {data['false_positives']}, "
        f"FN {data['false_negatives']}, TN {data['true_negatives']})"
    )
    declared = data["declared"]
    if declared is not None:
        same = abs(declared["threshold"] - threshold) < 1e-9
        console.print(
            f"declared threshold {declared['threshold']:.3f}"
            f"{' (the same)' if same else ''}: precision {declared['precision']:.3f}, "
            f"recall {declared['recall']:.3f}, F1 {declared['f1']:.3f}, F2 {declared['f2']:.3f}"
        )
    else:
        console.print("the embedder declares no threshold (the library default 0.72 applies)")


def run(args: argparse.Namespace) -> int:
    """Score the pairs, choose the threshold and print the report."""
    if args.decimals < 0 or args.decimals > 6:
        raise ValidationError("--decimals must lie between 0 and 6")
    if args.bins < 1:
        raise ValidationError("--bins must be at least 1")
    pairs = _read_pairs(args.pairs, args.format) if args.pairs else shipped_pairs()
    source = str(args.pairs) if args.pairs else "the shipped calibration set"
    embedder = load_embedder(args.embedder, model_dir=args.model_dir, pooling=args.pooling)
    scores = asyncio.run(score_pairs(embedder, pairs))
    labels = [p.relevant for p in pairs]
    result = choose_threshold(scores, labels, decimals=args.decimals)
    declared = None
    if getattr(embedder, "relevance_threshold", None) is not None:
        dm = metrics_at(scores, labels, float(embedder.relevance_threshold))
        declared = {
            "threshold": dm.threshold,
            "precision": dm.precision,
            "recall": dm.recall,
            "f1": dm.f1,
            "f2": dm.f2,
        }
    data = _result_dict(embedder, source, result, declared)
    if args.json:
        print(json.dumps(data, indent=2))
    else:
        _print(data, result, args.bins)
    return 0
