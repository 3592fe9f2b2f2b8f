"""Would an approximate candidate scan keep recall on real embeddings? (numpy, no database)

The exact scan of an agent's vectors is most of a Postgres search (docs/notes/benchmarks.md,
"Why not 5 ms"). Two ways to read less of them were prototyped in SQL and were fast on the bench's
synthetic vectors; this script asks whether they keep the nearest 500 on real text, where
the bench's five tidy clusters per agent do not exist:

- **clusters inside the agent** (k-means, then scan only the clusters nearest the query until a
  given share of the agent's memories has been read), and
- **binary quantisation** (sign bits, Hamming distance), rescoring the K nearest exactly,

with **half precision** (the nearest 600 by a float16 dot product) for comparison. Recall is
|found ∩ exact| / |exact| for the exact admitted top 500 (cosine ≥ a threshold that admits
``--admit`` memories for a typical query, as in ``actrone-pg bench``).

The real text is sentences from the docstrings of the standard library, numpy, SQLAlchemy and
psycopg (what is installed; the count is printed), embedded with all-MiniLM-L6-v2 through
onnxruntime: the test model ``scripts/test`` exports (``ACTRONE_TEST_MODEL_DIR`` or
``~/.cache/actrone-pg/test-models/all-MiniLM-L6-v2``). Embedding 10,300 sentences takes about
100 s on two cores. ``--synthetic`` runs the same measures on the bench's data instead.

    python benchmarks/experiments/candidate_recall_real_text.py [--memories 10000] [--synthetic]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import inspect
import os
import re
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import numpy.typing as npt

F32 = npt.NDArray[np.float32]
LIMIT = 500
MODULES = """
abc argparse array ast asyncio base64 bisect calendar cmath codecs collections colorsys
concurrent.futures configparser contextlib copy csv ctypes dataclasses datetime decimal difflib
dis doctest email email.message email.utils enum fnmatch fractions ftplib functools gettext glob
graphlib gzip hashlib heapq hmac html html.parser http.client http.cookiejar http.server imaplib
importlib inspect io ipaddress itertools json locale logging logging.handlers lzma mailbox math
mimetypes multiprocessing numbers operator optparse os pathlib pdb pickle pkgutil platform poplib
pprint queue random re reprlib sched secrets selectors shelve shlex shutil signal smtplib socket
socketserver sqlite3 ssl statistics string struct subprocess symtable sysconfig tarfile tempfile
textwrap threading time timeit tokenize tomllib trace traceback tracemalloc types typing unittest
unittest.mock urllib.parse urllib.request uuid warnings wave weakref xml.dom.minidom
xml.etree.ElementTree xmlrpc.client zipfile zoneinfo numpy numpy.linalg numpy.fft numpy.random
numpy.ma numpy.polynomial numpy.lib numpy.char numpy.strings numpy.testing sqlalchemy
sqlalchemy.orm sqlalchemy.sql alembic.op psycopg psycopg.sql psycopg_pool
""".split()


def docstring_sentences() -> list[str]:
    """Distinct sentences of 40-300 characters from the installed modules' docstrings."""
    found: set[str] = set()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in MODULES:
            try:
                module = importlib.import_module(name)
            except Exception:  # noqa: S112 - a module this Python lacks is simply skipped
                continue
            objects: list[object] = [module]
            for _, member in inspect.getmembers(module):
                objects.append(member)
                if inspect.isclass(member):
                    objects.extend(
                        v
                        for _, v in inspect.getmembers(member)
                        if inspect.isfunction(v) or inspect.ismethoddescriptor(v)
                    )
            for obj in objects:
                doc = getattr(obj, "__doc__", None)
                if isinstance(doc, str):
                    for s in re.split(r"(?<=[.!?])\s+", " ".join(doc.split())):
                        if 40 <= len(s) <= 300:
                            found.add(s)
    return sorted(found)


def embed_real(texts: list[str], model_dir: Path) -> F32:
    from actrone_pg.embedders import OnnxEmbedder

    embedder = OnnxEmbedder.from_directory(model_dir)

    async def run() -> list[list[float]]:
        out: list[list[float]] = []
        for i in range(0, len(texts), 256):
            out.extend(await embedder.embed_batch(texts[i : i + 256]))
            print(f"\r  embedded {len(out):,} / {len(texts):,}", end="", file=sys.stderr)
        print(file=sys.stderr)
        return out

    vectors = np.asarray(asyncio.run(run()), dtype=np.float32)
    unit: F32 = (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)
    return unit


def spherical_kmeans(x: F32, k: int, seed: int, iterations: int = 20) -> tuple[F32, np.ndarray]:
    """Unit centroids (k-means++ start on cosine distance) and each row's cluster."""
    rng = np.random.default_rng(seed)
    centres = [x[int(rng.integers(len(x)))]]
    dist = 1.0 - x @ centres[0]
    for _ in range(k - 1):
        p = np.maximum(dist, 0.0) ** 2
        centres.append(x[int(rng.choice(len(x), p=p / p.sum()))])
        dist = np.minimum(dist, 1.0 - x @ centres[-1])
    c = np.array(centres, dtype=np.float32)
    for _ in range(iterations):
        labels = np.argmax(x @ c.T, axis=1)
        for j in range(k):
            members = x[labels == j]
            if len(members):
                s = members.sum(axis=0)
                c[j] = s / np.linalg.norm(s)
    return c, np.argmax(x @ c.T, axis=1)


def top(ids: np.ndarray, cos: np.ndarray) -> set[int]:
    """The admitted ids' nearest LIMIT, ties by position (as the stores break them by id)."""
    order = ids[np.lexsort((ids, -cos[ids]))]
    return set(order[:LIMIT].tolist())


def summary(recalls: list[float]) -> str:
    r = np.asarray(recalls)
    return f"{r.mean():.4f} / {np.percentile(r, 5):.4f} / {r.min():.4f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--memories", type=int, default=10_000)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--admit", type=int, default=1000, help="memories a typical query admits")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--synthetic", action="store_true", help="the bench's vectors instead")
    default_model = Path(
        os.environ.get("ACTRONE_TEST_MODEL_DIR")
        or Path.home() / ".cache/actrone-pg/test-models/all-MiniLM-L6-v2"
    )
    ap.add_argument("--model-dir", type=Path, default=default_model)
    args = ap.parse_args()

    if args.synthetic:
        from actrone_pg.bench.workload import DatasetSpec, build_dataset

        agent = build_dataset(
            DatasetSpec(agents=1, per_agent=args.memories, queries=args.queries, seed=args.seed)
        ).agents[0]
        memories, queries = agent.vectors, agent.query_vectors
        source = f"the bench's synthetic vectors (seed {args.seed})"
    else:
        if not (args.model_dir / "model.onnx").exists():
            sys.exit(f"no ONNX model in {args.model_dir}: run ./scripts/test once, or --model-dir")
        sentences = docstring_sentences()
        need = args.memories + args.queries
        if len(sentences) < need:
            sys.exit(f"only {len(sentences):,} sentences found, {need:,} needed")
        rng = np.random.default_rng(args.seed)
        chosen = [sentences[int(i)] for i in rng.permutation(len(sentences))[:need]]
        started = time.perf_counter()
        vectors = embed_real(chosen, args.model_dir)
        memories, queries = vectors[: args.memories], vectors[args.memories :]
        source = (
            f"{len(sentences):,} docstring sentences, {need:,} of them embedded with MiniLM"
            f" in {time.perf_counter() - started:.0f} s"
        )

    kth = [float(np.partition(memories @ q, -args.admit)[-args.admit]) for q in queries]
    threshold = float(np.median(kth))
    cosines = [memories @ q for q in queries]
    admitted = [np.flatnonzero(c >= threshold) for c in cosines]
    exact = [top(a, c) for a, c in zip(admitted, cosines, strict=True)]
    print(f"{source}; {len(memories):,} memories, {len(queries)} queries,")
    print(
        f"threshold {threshold:.4f} (median admitted {int(np.median([len(a) for a in admitted]))})"
    )
    print(f"recall of the exact admitted top {LIMIT}: mean / 5th percentile / min\n")

    def recall(found: list[set[int]]) -> list[float]:
        return [len(e & f) / len(e) if e else 1.0 for e, f in zip(exact, found, strict=True)]

    print("clusters inside the agent (k-means), scanning the nearest clusters:")
    for k in (16, 64):
        centres, labels = spherical_kmeans(memories, k, args.seed)
        sizes = np.bincount(labels, minlength=k)
        for share in (0.2, 0.3, 0.5):
            found, scanned = [], []
            for q, cos, adm in zip(queries, cosines, admitted, strict=True):
                order = np.argsort(-(centres @ q))
                n = int(np.searchsorted(np.cumsum(sizes[order]), share * len(memories))) + 1
                probed = np.isin(labels, order[:n])
                scanned.append(int(probed.sum()))
                found.append(top(adm[probed[adm]], cos))
            print(
                f"  k = {k:3d}, ≥ {share:.0%} of the agent (read {np.mean(scanned):6,.0f}):"
                f" {summary(recall(found))}"
            )

    print("binary quantisation (sign bits), the K nearest by Hamming distance rescored exactly:")
    bits = memories > 0
    for k in (1000, 2000, 3000):
        found = []
        for q, cos in zip(queries, cosines, strict=True):
            nearest = np.argsort((bits != (q > 0)).sum(axis=1), kind="stable")[:k]
            found.append(top(nearest[cos[nearest] >= threshold], cos))
        print(f"  K = {k:5,}: {summary(recall(found))}")

    print("half precision, the nearest 600 by a float16 dot product rescored exactly:")
    half = memories.astype(np.float16).astype(np.float32)
    found = []
    for q, cos in zip(queries, cosines, strict=True):
        nearest = np.argsort(-(half @ q.astype(np.float16).astype(np.float32)))[:600]
        found.append(top(nearest[cos[nearest] >= threshold], cos))
    print(f"  {summary(recall(found))}")


if __name__ == "__main__":
    main()
