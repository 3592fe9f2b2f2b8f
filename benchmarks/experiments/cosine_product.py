"""One threaded matrix-vector product, or 1,024-column chunks that OpenBLAS runs on one thread?

``ranking.cosines`` computes a unit query's cosines with every column of an agent's (dimensions ×
n) float32 matrix: the first step of every in-memory search. OpenBLAS runs one product over many
columns on all its threads, and a product under about 460,000 cells (1,024 columns of 384) on
the calling thread alone. This script times both ways on the same matrix and queries, the calls
of both interleaved at random, each call followed by some work of the calling thread (what the
rest of a search does between two products), as the machine is and with one more busy process
(``--load`` starts it and stops it; the load average is printed). It counts first how many
float32 cosines each way gives differently from the 1,024-column chunks, and how many a subset of
37 columns computed alone does (as the Redis + Qdrant store computes a few candidates' cosines).
Two more ways read the matrix stored as contiguous 1,024-column blocks with ``np.dot`` (which
releases the GIL around its BLAS call; ``np.matmul`` keeps it for a single vector-matrix product,
so two threads calling it only take turns): on the calling thread, and half the blocks on a
second Python thread. Both keep the chunks' results.

    python benchmarks/experiments/cosine_product.py [--memories 10000] [--dimensions 384]
        [--calls 2000] [--pause-ms 2.0] [--load]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import numpy.typing as npt

F32 = npt.NDArray[np.float32]
CHUNK = 1024


def chunked(query: F32, matrix: F32) -> F32:
    out = np.empty(matrix.shape[1], dtype=np.float32)
    for start in range(0, matrix.shape[1], CHUNK):
        np.matmul(query, matrix[:, start : start + CHUNK], out=out[start : start + CHUNK])
    return out


def whole(query: F32, matrix: F32) -> F32:
    out = np.empty(matrix.shape[1], dtype=np.float32)
    np.matmul(query, matrix, out=out)
    return out


_POOL = ThreadPoolExecutor(1)
# The matrix as contiguous (dims × 1,024) blocks: np.dot releases the GIL around its BLAS call
# (np.matmul keeps it for a single vector-matrix product), and copies a strided slice first.
_BLOCKS: dict[int, list[F32]] = {}


def _blocks_of(matrix: F32) -> list[F32]:
    found = _BLOCKS.get(id(matrix))
    if found is None:
        found = _BLOCKS[id(matrix)] = [
            np.ascontiguousarray(matrix[:, s : s + CHUNK]) for s in range(0, matrix.shape[1], CHUNK)
        ]
    return found


def _dot_blocks(query: F32, blocks: list[F32], out: F32, first: int, stop: int) -> None:
    for k in range(first, stop):
        start = k * CHUNK
        np.dot(query, blocks[k], out=out[start : start + blocks[k].shape[1]])


def blocks_dot(query: F32, matrix: F32) -> F32:
    blocks = _blocks_of(matrix)
    out = np.empty(matrix.shape[1], dtype=np.float32)
    _dot_blocks(query, blocks, out, 0, len(blocks))
    return out


def blocks_on_2_threads(query: F32, matrix: F32) -> F32:
    blocks = _blocks_of(matrix)
    out = np.empty(matrix.shape[1], dtype=np.float32)
    half = len(blocks) // 2
    later = _POOL.submit(_dot_blocks, query, blocks, out, half, len(blocks))
    _dot_blocks(query, blocks, out, 0, half)
    later.result()
    return out


WAYS: dict[str, Callable[[F32, F32], F32]] = {
    "1,024-column chunks": chunked,
    "whole": whole,
    "blocks, np.dot": blocks_dot,
    "blocks on 2 threads": blocks_on_2_threads,
}


def unit_columns(rng: np.random.Generator, dims: int, n: int) -> F32:
    m = rng.standard_normal((dims, n)).astype(np.float32)
    return np.ascontiguousarray(m / np.linalg.norm(m, axis=0))


def differing(matrix: F32, queries: F32, rng: np.random.Generator) -> dict[str, int]:
    """How many float32 cosines of 50 queries each way (and a subset) computes differently."""
    counts = dict.fromkeys([*WAYS, "37 columns alone"], 0)
    for q in queries[:50]:
        reference = chunked(q, matrix)
        for name, way in WAYS.items():
            counts[name] += int(np.count_nonzero(way(q, matrix) != reference))
        cols = np.sort(rng.choice(matrix.shape[1], size=37, replace=False))
        subset = np.matmul(q, np.ascontiguousarray(matrix[:, cols]))
        counts["37 columns alone"] += int(np.count_nonzero(subset != reference[cols]))
    return counts


def busy_work(ms: float) -> None:
    # Python work, as the rest of a search does between two products (it keeps this core busy).
    end = time.perf_counter() + ms / 1000.0
    while time.perf_counter() < end:
        sum(range(200))


def timed(matrix: F32, queries: F32, calls: int, pause_ms: float) -> dict[str, list[float]]:
    plan = [name for name in WAYS for _ in range(calls)]
    random.Random(7).shuffle(plan)
    times: dict[str, list[float]] = {name: [] for name in WAYS}
    for i, name in enumerate(plan):
        q = queries[i % len(queries)]
        start = time.perf_counter()
        WAYS[name](q, matrix)
        times[name].append((time.perf_counter() - start) * 1000.0)
        busy_work(pause_ms)
    return times


def report(label: str, times: dict[str, list[float]]) -> None:
    for name, ts in times.items():
        ts = sorted(ts)
        p50 = statistics.median(ts)
        p99 = ts[min(len(ts) - 1, int(0.99 * len(ts)))]
        print(f"{label:6s} {name:22s} p50 {p50:6.3f} ms  p99 {p99:6.3f} ms  mean {np.mean(ts):.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--dimensions", type=int, default=384)
    parser.add_argument("--calls", type=int, default=2000, help="per way")
    parser.add_argument("--pause-ms", type=float, default=2.0)
    parser.add_argument("--load", action="store_true", help="also time with a busy process")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    matrix = unit_columns(rng, args.dimensions, args.memories)
    queries = unit_columns(rng, args.dimensions, 200).T.copy()
    for name, count in differing(matrix, queries, rng).items():
        total = 50 * (37 if name == "37 columns alone" else args.memories)
        print(f"{name}: {count:,} of {total:,} float32 cosines differ from the chunks'")
    print("load average {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    report("as is", timed(matrix, queries, args.calls, args.pause_ms))
    if args.load:
        busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        try:
            time.sleep(0.5)
            report("+busy", timed(matrix, queries, args.calls, args.pause_ms))
        finally:
            busy.kill()
            busy.wait()


if __name__ == "__main__":
    main()
