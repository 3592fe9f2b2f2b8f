"""``actrone-pg eval``: evidence retrieval quality on conversations, configurations side by side.

Reads LoCoMo conversations (a file per conversation, a directory of them, or the release's
``locomo10.json``) or the project's JSON Lines format, writes each dialog turn as a memory and asks
each question through ``search_memories(limit=10)``. Prints recall@5, recall@10, hit@5 and MRR
overall and per question category, and the median search time, for the default configuration
and every ``--config``. The format and the measured tables are in docs/quality.md.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
from pathlib import Path
from typing import Any

from actrone_pg.config import BACKENDS
from actrone_pg.errors import ValidationError
from actrone_pg.evaluation import (
    OVERALL,
    CachingEmbedder,
    EvalConfig,
    EvalReport,
    build_config,
    load_conversations,
    parse_overrides,
    run_eval,
    shipped_conversations,
)
from actrone_pg.evaluation.reference import (
    ReferenceRunError,
    find_eval_driver,
    run_reference_eval,
)
from actrone_pg.evaluation.runner import DEFAULT_LABEL, total_steps, turn_context
from actrone_pg.evaluation.selection import LeaveOneOut, leave_one_out

__all__ = ["add_arguments", "load_eval_embedder", "run"]

EMBEDDER_HELP = (
    "'local' (the library's choice: an ONNX model found locally, else hashing; the default), "
    "'hashing', 'onnx:<model directory or hub id>', 'minilm', or 'package.module:factory'"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the options of ``actrone-pg eval``."""
    parser.add_argument(
        "paths",
        nargs="*",
        type=Path,
        help="LoCoMo .json files, directories of them, locomo10.json, or .jsonl files "
        "(default: the small synthetic set shipped with the package)",
    )
    parser.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="FIELD=VALUE[;FIELD=VALUE]",
        help="a configuration to measure beside the default, as MemoryConfig overrides "
        "(e.g. 'rrf_weights=1,1,0.3', 'hybrid_retrieval=false'); repeat for more",
    )
    parser.add_argument(
        "--backend",
        choices=BACKENDS,
        default=None,
        help="store to measure on (default: ACTRONE_BACKEND, else memory: eval writes throw-away "
        "agents of its own, so unlike the other commands it never defaults to your store)",
    )
    parser.add_argument("--embedder", default="local", help=EMBEDDER_HELP)
    parser.add_argument(
        "--no-captions",
        action="store_true",
        help="leave the captions of shared photos out of the memories",
    )
    ref = parser.add_argument_group("reference system (actrone-memory 0.3.0)")
    ref.add_argument(
        "--reference",
        action="store_true",
        help="also measure actrone-memory 0.3.0's default configuration (its in-process store) "
        "on the same conversations and vectors",
    )
    ref.add_argument(
        "--reference-threshold",
        type=float,
        action="append",
        default=[],
        help="also measure the reference at this admission threshold; repeat for more",
    )
    ref.add_argument(
        "--reference-python",
        help="Python of an environment with actrone-memory 0.3.0 (default: "
        "$ACTRONE_BENCH_REFERENCE_PYTHON, else the `actrone-pg bench --setup-reference` one)",
    )
    ref.add_argument(
        "--setup-reference",
        action="store_true",
        help="create that environment (a separate venv) first; implies --reference",
    )
    ref.add_argument("--reference-venv", type=Path, help="where --setup-reference creates it")
    ref.add_argument("--reference-driver", help="driver script to run instead of the shipped one")
    parser.add_argument(
        "--memories",
        action="append",
        default=[],
        metavar="raw|context[:C]|consolidated[:N[:S]]",
        help="what is written: each turn as a memory ('raw', the default), each turn as a "
        "memory embedded after the C turns before it in its session ('context', C = 1 if "
        "omitted), or the memories the extractive consolidator makes of each session, N turns "
        "to a memory, sentences scoring at least S (its defaults if omitted); repeat to measure "
        "several side by side",
    )
    parser.add_argument(
        "--leave-one-out",
        action="store_true",
        help="also choose, for each conversation, the configuration (of those measured) with "
        "the best recall@10 + MRR on the other conversations, and score it on that one",
    )
    parser.add_argument("--chart", type=Path, help="save a PNG bar chart here (needs [bench])")
    parser.add_argument("--json", action="store_true", help="print the results as JSON only")


def load_eval_embedder(spec: str) -> Any:
    """The embedder a ``--embedder`` value names."""
    if spec == "local":
        from actrone_pg.config import MemoryConfig
        from actrone_pg.embedders import create_embedder

        return create_embedder(MemoryConfig(embedding_provider="local"))
    from actrone_pg._cli.calibrate import load_embedder

    return load_embedder(spec)


def _configs(args: argparse.Namespace) -> list[EvalConfig]:
    out = [EvalConfig(DEFAULT_LABEL, {}, build_config({}, backend=args.backend))]
    seen = {DEFAULT_LABEL}
    for spec in args.config:
        overrides = parse_overrides(spec)
        label = " ".join(f"{k}={v}" for k, v in overrides.items())
        if label in seen:
            raise ValidationError(f"--config {spec!r} is given twice")
        seen.add(label)
        out.append(EvalConfig(label, overrides, build_config(overrides, backend=args.backend)))
    kinds = list(dict.fromkeys(args.memories or ["raw"]))
    for kind in kinds:
        turn_context(kind)  # a bad value fails before anything runs
    return [
        dataclasses.replace(
            ec, label=ec.label if kind == "raw" else f"{ec.label} ({kind})", memories=kind
        )
        for kind in kinds
        for ec in out
    ]


def _reference_python(args: argparse.Namespace, console: Any) -> Path:
    from actrone_pg.bench import reference as ref

    venv = args.reference_venv or ref.default_reference_venv()
    try:
        if args.setup_reference:
            with console.status(f"installing {ref.REFERENCE_REQUIREMENT} into {venv}…"):
                return ref.setup_reference_venv(venv)
    except ref.ReferenceError as exc:
        raise ReferenceRunError(str(exc)) from None
    found = ref.reference_python(args.reference_python, venv)
    if found is None:
        raise ReferenceRunError(
            f"no reference environment: pass --setup-reference (creates {venv}), or "
            f"--reference-python / ${ref.PYTHON_ENV}"
        )
    return found


def _print(report: EvalReport, console: Any) -> None:
    from rich.table import Table

    n_questions = sum(c["questions"] for c in report.conversations)
    n_turns = sum(c["turns"] for c in report.conversations)
    console.print(
        f"[bold]{len(report.conversations)} conversations[/bold], {n_turns:,} turns stored as "
        f"L2 memories, {n_questions:,} questions; embedder {report.embedder}, "
        f"backend {report.backend}, search_memories(limit=10)"
    )
    table = Table(show_edge=False, pad_edge=False, title="overall")
    table.add_column("configuration", no_wrap=True)
    for name in (
        "threshold",
        "recall@5",
        "recall@10",
        "hit@5",
        "MRR",
        "session R@10",
        "session hit@10",
        "p50 ms",
    ):
        table.add_column(name, justify="right")
    for c in report.configs:
        s = c.scores()[OVERALL]
        table.add_row(
            c.label,
            f"{c.threshold:.3f}",
            f"{s.recall_at_5:.3f}",
            f"{s.recall_at_10:.3f}",
            f"{s.hit_at_5:.3f}",
            f"{s.mrr:.3f}",
            f"{s.session_recall_at_10:.3f}",
            f"{s.session_hit_at_10:.3f}",
            f"{c.p50_search_ms:.2f}",
        )
    console.print(table)
    per = Table(show_edge=False, pad_edge=False, title="recall@10 / MRR per category")
    per.add_column("category")
    per.add_column("questions", justify="right")
    for c in report.configs:
        per.add_column(c.label, justify="right")
    all_scores = [c.scores() for c in report.configs]
    for cat, base in all_scores[0].items():
        cells = [f"{s[cat].recall_at_10:.3f} / {s[cat].mrr:.3f}" for s in all_scores]
        per.add_row(cat, str(base.questions), *cells)
    console.print(per)
    console.print(
        "session R@10 / hit@10: share of the sessions holding evidence among the sessions of "
        "the first 10 / whether any is; "
        "p50 ms: median search_memories time, query embedding excluded (embedded beforehand)"
    )


def _print_loo(loo: LeaveOneOut, console: Any) -> None:
    from rich.table import Table

    table = Table(
        show_edge=False,
        pad_edge=False,
        title="leave one conversation out (chosen by recall@10 + MRR on the others)",
    )
    for name in ("held out", "chosen on the others", "recall@10 / MRR", f"{loo.baseline}"):
        table.add_column(name, justify="left" if name != "recall@10 / MRR" else "right")
    for f in loo.folds:
        h, b = f.held_out_scores, f.baseline_scores
        table.add_row(
            f.held_out,
            f.chosen,
            f"{h.recall_at_10:.3f} / {h.mrr:.3f}",
            f"{b.recall_at_10:.3f} / {b.mrr:.3f}",
        )
    p, b = loo.pooled, loo.baseline_pooled
    table.add_row(
        "pooled", "", f"{p.recall_at_10:.3f} / {p.mrr:.3f}", f"{b.recall_at_10:.3f} / {b.mrr:.3f}"
    )
    console.print(table)


def _chart(report: EvalReport, path: Path) -> str:
    from actrone_pg.bench import charts

    plt = charts.pyplot()
    if plt is None:
        return charts.MISSING
    labels = [c.label for c in report.configs]
    metrics = (("recall_at_5", "recall@5"), ("recall_at_10", "recall@10"), ("mrr", "MRR"))
    fig, ax = plt.subplots(figsize=(max(6.4, 1.4 * len(labels) + 2), 4.2))
    width = 0.8 / len(metrics)
    for i, (attr, name) in enumerate(metrics):
        values = [getattr(c.scores()[OVERALL], attr) for c in report.configs]
        xs = [x + (i - (len(metrics) - 1) / 2) * width for x in range(len(labels))]
        ax.bar(xs, values, width, label=name)
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, rotation=20, ha="right", fontsize=8)
    ax.set_ylim(0, 1)
    ax.set_ylabel("score")
    ax.set_title(f"evidence retrieval, {report.embedder}")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    charts.save(plt, fig, path)
    return f"chart saved to {path}"


def run(args: argparse.Namespace) -> int:
    """Load the conversations, measure every configuration, print the tables."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    from actrone_pg._cli._output import console as make_console

    configs = _configs(args)
    conversations = load_conversations(args.paths) if args.paths else shipped_conversations()
    embedder = CachingEmbedder(load_eval_embedder(args.embedder))
    captions = not args.no_captions
    console = make_console(
        stderr=args.json, highlight=False, width=max(120, Console().width), soft_wrap=True
    )
    reference = args.reference or args.setup_reference or bool(args.reference_threshold)
    if reference:
        python = _reference_python(args, console)
        driver = find_eval_driver(args.reference_driver)
    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=True,
        disable=args.json,
    ) as progress:
        task = progress.add_task(
            "embed, then search",
            total=total_steps(
                conversations,
                len(configs),
                captions=captions,
                memories=[c.memories for c in configs],
            ),
        )
        report = asyncio.run(
            run_eval(
                conversations,
                configs,
                embedder,
                captions=captions,
                progress=lambda n: progress.advance(task, n),
            )
        )
    loo = leave_one_out(report.configs) if args.leave_one_out else None
    if reference:
        for threshold in [None, *args.reference_threshold]:
            with console.status("running the reference (actrone-memory)…"):
                report.configs.append(
                    run_reference_eval(
                        python,
                        driver,
                        conversations,
                        embedder,
                        captions=captions,
                        threshold=threshold,
                    )
                )
    if args.json:
        out = report.as_dict()
        if args.leave_one_out:
            out["leave_one_out"] = None if loo is None else loo.as_dict()
        print(json.dumps(out, indent=2))
    else:
        _print(report, console)
        if args.leave_one_out:
            if loo is None:
                console.print("leave one out: needs at least two conversations")
            else:
                _print_loo(loo, console)
    if args.chart is not None:
        message = _chart(report, args.chart)
        Console(stderr=True, highlight=False).print(message)
    return 0
