"""Query embedding and batch ingest: actrone_pg's ONNX embedder against fastembed, one model file.

    python benchmarks/embedder_vs_fastembed.py --fastembed-python /tmp/fastembed-venv/bin/python
        [--model-dir DIR] [--threads N] [--rounds 10] [--queries 40] [--batches 3]
        [--batch-sizes 32] [--sync]

Spec §7: query embedding and batch ingest with a real ONNX model are no slower than fastembed (the
reference system's embedder) on the same model file, in the same run. fastembed is not a
dependency: it lives in its own virtual environment, whose Python (``--fastembed-python``, else
``$ACTRONE_BENCH_FASTEMBED_PYTHON``) runs ``benchmarks/fastembed_driver.py`` in a subprocess::

    python3 -m venv /tmp/fastembed-venv && /tmp/fastembed-venv/bin/pip install fastembed==0.9.1

Both sides load the same ``model.onnx`` with the same onnxruntime thread setting (printed). Before
timing, both embed the same texts and every pair of vectors must agree to cosine >= 0.9999, so
the two do equal work (MiniLM: mean pooling, L2 normalisation). Then, for ``--rounds`` rounds,
each side in turn (the order alternating by round, so drift and warm caches favour neither):

* query embedding: ``--queries`` calls of one fresh text each, the inference a
  ``retrieve_context`` with an uncached query pays (ours through ``embed_batch``, as the manager
  calls it, thread hop included, or with ``--sync`` through ``embed_sync``, blocking as
  fastembed's ``embed`` does);
* batch ingest: ``--batches`` calls of ``B`` texts for each ``B`` in ``--batch-sizes`` (default:
  ``embedding_batch_size``, the chunk the manager hands the embedder when ingesting).

It prints per-call medians and p99s over all rounds, texts per second, and the ratio ours /
fastembed of the per-call time (below 1: ours is faster), with the range of the per-round median
ratios to show how much the machine moved.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol

import numpy as np

from actrone_pg import MemoryConfig
from actrone_pg.embedders.onnx import OnnxEmbedder, models_dir

#: Environment variable naming the Python of fastembed's virtual environment.
PYTHON_ENV = "ACTRONE_BENCH_FASTEMBED_PYTHON"
DRIVER = Path(__file__).with_name("fastembed_driver.py")
MIN_COSINE = 0.9999
#: Quiet time between two timed blocks: onnxruntime's worker threads spin for a while after a
#: run, and on a 2-core machine the side that just finished would steal the next side's cores.
PAUSE_S = 0.05

SUBJECTS = ["The user", "Her manager", "Our client", "The team", "His doctor", "Their landlord"]
VERBS = ["prefers", "asked about", "is planning", "mentioned", "wants to avoid", "booked"]
OBJECTS = [
    "a window seat on long flights",
    "vegetarian restaurants near the office",
    "the quarterly budget review on Thursday",
    "a trip to Lisbon in March with two colleagues",
    "peanut-free snacks for the kids' school party",
    "switching the reporting database to PostgreSQL",
    "running a half marathon in spring",
    "renewing the passport before August",
    "jazz concerts on weekends",
    "a new laptop with more memory and a better screen",
]
DETAILS = [
    "because the last time went badly",
    "and wants a reminder a week before",
    "although the budget is still unclear",
    "after reading a long review of the options",
    "so the calendar should stay free that afternoon",
    "which their partner strongly disagrees with",
    "and asked us to keep the receipts in the shared folder",
    "but only if the price stays under four hundred euros",
]


def memory_texts(n: int, seed: int) -> list[str]:
    """``n`` distinct memory-like texts of 10-70 words (well under MiniLM's 256 tokens).

    Lengths vary as real memories do, so how each embedder pads a batch counts.
    """
    rng = random.Random(seed)
    out = []
    for i in range(n):
        parts = [rng.choice(SUBJECTS), rng.choice(VERBS), rng.choice(OBJECTS)]
        parts += rng.sample(DETAILS, rng.randint(0, 5))
        out.append(" ".join(parts) + f" (note {seed}-{i}).")
    return out


def query_texts(n: int, seed: int) -> list[str]:
    """``n`` distinct short queries, as an agent's ``retrieve_context`` receives them."""
    rng = random.Random(seed)
    return [
        f"what does {rng.choice(SUBJECTS).lower()} think about {rng.choice(OBJECTS)} #{seed}-{i}"
        for i in range(n)
    ]


def pct(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, math.ceil(p / 100 * len(ordered)) - 1))]


class Embedder(Protocol):
    """What our side needs: the manager's ``embed_batch``."""

    async def embed_batch(self, texts: Sequence[str]) -> np.ndarray: ...


async def time_calls(embedder: Embedder, calls: Sequence[Sequence[str]]) -> list[float]:
    """Wall time of ``embed_batch`` for each call, one after another."""
    seconds = []
    for call in calls:
        t0 = time.perf_counter()
        await embedder.embed_batch(call)
        seconds.append(time.perf_counter() - t0)
    return seconds


def time_calls_sync(embedder: OnnxEmbedder, calls: Sequence[Sequence[str]]) -> list[float]:
    """Wall time of ``embed_sync`` for each call: inference without the worker-thread hop."""
    seconds = []
    for call in calls:
        t0 = time.perf_counter()
        embedder.embed_sync(call)
        seconds.append(time.perf_counter() - t0)
    return seconds


class FastembedProcess:
    """fastembed's side: ``fastembed_driver.py`` running under fastembed's own Python."""

    def __init__(self, python: Path, model_dir: Path, threads: int) -> None:
        self._proc = subprocess.Popen(
            [str(python), str(DRIVER), "--model-dir", str(model_dir), "--threads", str(threads)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        #: What the driver loaded: versions, model file, providers, threads.
        self.info = self._read()

    def _io(self) -> tuple[IO[str], IO[str]]:
        assert self._proc.stdin is not None and self._proc.stdout is not None
        return self._proc.stdin, self._proc.stdout

    def _read(self) -> dict[str, Any]:
        line = self._io()[1].readline()
        if not line:
            code = self._proc.wait()
            raise SystemExit(f"the fastembed driver exited ({code}); its error is printed above")
        reply: dict[str, Any] = json.loads(line)
        if "error" in reply:
            raise SystemExit(f"the fastembed driver refused a command: {reply['error']}")
        return reply

    def ask(self, command: dict[str, Any]) -> dict[str, Any]:
        """Send one command, return the driver's answer."""
        stdin = self._io()[0]
        stdin.write(json.dumps(command) + "\n")
        stdin.flush()
        return self._read()

    def vectors(self, texts: Sequence[str]) -> np.ndarray:
        """fastembed's vectors of ``texts``."""
        return np.asarray(self.ask({"op": "vectors", "texts": list(texts)})["vectors"])

    def time_calls(self, calls: Sequence[Sequence[str]], batch_size: int) -> list[float]:
        """Wall time of fastembed's ``embed`` for each call."""
        command = {"op": "time", "calls": [list(c) for c in calls], "batch_size": batch_size}
        reply = self.ask(command)
        return [float(s) for s in reply["seconds"]]

    def close(self) -> None:
        """Stop the driver."""
        if self._proc.poll() is None:
            stdin = self._io()[0]
            stdin.write(json.dumps({"op": "quit"}) + "\n")  # answered by exiting
            stdin.close()
        self._proc.wait(timeout=30)


@dataclass
class Workload:
    """One timed figure: ``texts`` per call, with every call's time on each side and per round."""

    label: str
    texts: int
    ours: list[float] = field(default_factory=list)
    theirs: list[float] = field(default_factory=list)
    round_ratios: list[float] = field(default_factory=list)

    def add_round(self, ours: list[float], theirs: list[float]) -> None:
        """Record one round of both sides."""
        self.ours += ours
        self.theirs += theirs
        self.round_ratios.append(statistics.median(ours) / statistics.median(theirs))

    def lines(self) -> list[str]:
        """The report: median and p99 per call on each side, texts/s, ratios ours/fastembed."""
        rows = []
        for side, values in (("ours", self.ours), ("fastembed", self.theirs)):
            med = statistics.median(values)
            rows.append(
                f"  {side:<9} median {med * 1000:8.2f} ms  p99 {pct(values, 99) * 1000:8.2f} ms"
                f"  {self.texts / med:8.1f} texts/s  ({len(values)} calls)"
            )
        p50 = statistics.median(self.ours) / statistics.median(self.theirs)
        p99 = pct(self.ours, 99) / pct(self.theirs, 99)
        rows.append(
            f"  ratio ours/fastembed (time per call): median {p50:.3f}, p99 {p99:.3f}; "
            f"per-round medians {min(self.round_ratios):.3f}-{max(self.round_ratios):.3f}"
        )
        return [f"{self.label}:", *rows]


def check_same_vectors(ours: np.ndarray, theirs: np.ndarray) -> float:
    """The lowest per-text cosine of the two sides' vectors; exits if below ``MIN_COSINE``."""
    a = ours / np.linalg.norm(ours, axis=1, keepdims=True)
    b = theirs / np.linalg.norm(theirs, axis=1, keepdims=True)
    cosines = (a * b).sum(axis=1)
    worst = float(cosines.min())
    if worst < MIN_COSINE:
        raise SystemExit(
            f"the embedders disagree (lowest cosine {worst:.6f} < {MIN_COSINE}, text "
            f"#{int(cosines.argmin())}): they do not compute the same vectors, so their timings "
            "are not comparable"
        )
    return worst


async def run(args: argparse.Namespace, python: Path) -> None:
    """Load both sides, check their vectors agree, time interleaved rounds and print."""
    batch_sizes: list[int] = args.batch_sizes
    ours = OnnxEmbedder.from_directory(
        args.model_dir, batch_size=max(batch_sizes), threads=args.threads
    )
    theirs = FastembedProcess(python, args.model_dir, args.threads)
    try:
        # Private attribute: a benchmark reads what the session really got, not what was asked.
        options = ours._session.get_session_options()
        info = theirs.info
        print(
            f"{os.cpu_count()} CPUs · {platform.processor() or platform.machine()} · Python "
            f"{platform.python_version()} · load average %.2f %.2f %.2f at start" % os.getloadavg()
        )
        print(f"model file: {ours.model_path} (both) · fastembed loaded {info['model_file']}")
        print(
            f"ours:      actrone_pg OnnxEmbedder · onnxruntime {_ort_version()} · providers "
            f"{ours._session.get_providers()} · intra-op threads "
            f"{options.intra_op_num_threads or 'default (0)'} · max_length {ours.max_length}"
        )
        print(
            f"fastembed: fastembed {info['fastembed']} · onnxruntime {info['onnxruntime']} · "
            f"providers {info['providers']} · intra-op threads "
            f"{info['intra_op_threads'] or 'default (0)'} · max_length {info['max_length']}"
        )
        probe = memory_texts(48, seed=0) + query_texts(16, seed=0)
        worst = check_same_vectors(ours.embed_sync(probe), theirs.vectors(probe))
        print(f"same vectors: lowest cosine {worst:.7f} over {len(probe)} texts (>= {MIN_COSINE})")

        query = Workload("query embedding (batch 1, per call)", 1)
        ingest = {b: Workload(f"batch ingest (batch {b}, per call)", b) for b in batch_sizes}
        for r in range(-1, args.rounds):  # round -1 warms both sides up and is not recorded
            seed = r + 2
            calls: list[tuple[Workload | None, int, list[list[str]]]] = [
                (query if r >= 0 else None, 1, [[q] for q in query_texts(args.queries, seed)])
            ]
            for b in batch_sizes:
                texts = memory_texts(b * args.batches, seed)
                chunks = [texts[i : i + b] for i in range(0, len(texts), b)]
                calls.append((ingest[b] if r >= 0 else None, b, chunks))
            for workload, b, chunks in calls:
                first_ours = r % 2 == 0
                times: dict[str, list[float]] = {}
                for side in ("ours", "theirs") if first_ours else ("theirs", "ours"):
                    time.sleep(PAUSE_S)
                    if side == "ours" and args.sync:
                        times[side] = time_calls_sync(ours, chunks)
                    elif side == "ours":
                        times[side] = await time_calls(ours, chunks)
                    else:
                        times[side] = theirs.time_calls(chunks, b)
                if workload is not None:
                    workload.add_round(times["ours"], times["theirs"])
            if r >= 0:
                print(f"  round {r + 1}/{args.rounds} done", file=sys.stderr, flush=True)
        how = "embed_sync, no worker-thread hop" if args.sync else "embed_batch, as the manager"
        print(
            f"{args.rounds} interleaved rounds (order alternating); per round {args.queries} "
            f"queries and {args.batches} calls per batch size; ours timed through {how}"
        )
        for workload in (query, *ingest.values()):
            print("\n".join(workload.lines()))
    finally:
        theirs.close()


def _ort_version() -> str:
    import onnxruntime

    return str(onnxruntime.__version__)


def _batch_sizes(value: str) -> list[int]:
    try:
        sizes = [int(v) for v in value.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of integers: {value!r}") from None
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"batch sizes must be positive: {value!r}")
    return sizes


def parse_args(argv: Sequence[str] | None = None) -> tuple[argparse.Namespace, Path]:
    """The arguments and fastembed's Python; argument errors exit before any model loads."""
    default_dir = os.environ.get("ACTRONE_TEST_MODEL_DIR") or str(models_dir() / "all-MiniLM-L6-v2")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", type=Path, default=Path(default_dir))
    parser.add_argument(
        "--fastembed-python",
        default=os.environ.get(PYTHON_ENV),
        help=f"Python of a virtual environment with fastembed installed (default ${PYTHON_ENV})",
    )
    parser.add_argument(
        "--threads", type=int, default=0, help="onnxruntime intra-op threads, both sides"
    )
    parser.add_argument(
        "--sync",
        action="store_true",
        help="time ours through embed_sync (no hop to a worker thread) instead of embed_batch",
    )
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--queries", type=int, default=40, help="query calls per round")
    parser.add_argument("--batches", type=int, default=3, help="ingest calls per round and size")
    parser.add_argument(
        "--batch-sizes",
        type=_batch_sizes,
        default=[MemoryConfig().embedding_batch_size],
        help="comma-separated ingest batch sizes (default: embedding_batch_size)",
    )
    args = parser.parse_args(argv)
    if not args.fastembed_python:
        parser.error(
            f"no fastembed Python: pass --fastembed-python or set {PYTHON_ENV}. Create one with: "
            "python3 -m venv /tmp/fastembed-venv && "
            "/tmp/fastembed-venv/bin/pip install fastembed==0.9.1"
        )
    python = Path(args.fastembed_python)
    if not python.exists():
        parser.error(f"--fastembed-python {python} does not exist")
    if not (args.model_dir / "model.onnx").is_file():
        parser.error(
            f"--model-dir {args.model_dir} has no model.onnx (export one with "
            "scripts/export_test_model.py)"
        )
    for name in ("threads", "rounds", "queries", "batches"):
        minimum = 0 if name == "threads" else 1
        if getattr(args, name) < minimum:
            parser.error(f"--{name} must be at least {minimum}")
    return args, python


def main() -> None:
    """Parse arguments and run."""
    args, python = parse_args()
    asyncio.run(run(args, python))


if __name__ == "__main__":
    main()
