"""The reference system, actrone-memory 0.3.0, on the evaluation's conversations in the same run.

actrone-memory is never imported here: it lives in its own virtual environment (the one
``actrone-pg bench --setup-reference`` creates, see :mod:`actrone_pg.bench.reference`) and
:mod:`actrone_pg.evaluation.reference_driver` runs there as a script in a subprocess. This
module writes the conversations and the vectors actrone_pg's embedder computed for them (so
both systems rank identical vectors), launches the driver and turns its ranked ids into a
:class:`ConfigResult` scored exactly as actrone_pg's own.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from actrone_pg.bench.reference import ReferenceError, run_driver
from actrone_pg.errors import ActroneError
from actrone_pg.evaluation.loader import Conversation
from actrone_pg.evaluation.metrics import QueryResult
from actrone_pg.evaluation.runner import SEARCH_LIMIT, CachingEmbedder, ConfigResult

__all__ = ["ReferenceRunError", "find_eval_driver", "run_reference_eval", "write_eval_data"]

DRIVER = "reference_driver.py"


class ReferenceRunError(ActroneError):
    """The reference system could not be run; the message says what to do."""


def find_eval_driver(explicit: str | None = None) -> Path:
    """The driver script the reference Python runs: the given path, else the one shipped here.

    :mod:`actrone_pg.evaluation.reference_driver` is a file of this package that only the
    reference environment executes; actrone_pg never imports it.
    """
    path = Path(explicit) if explicit else Path(__file__).with_name(DRIVER)
    if not path.is_file():
        raise ReferenceRunError(f"reference driver {path} not found; check --reference-driver")
    return path


def write_eval_data(
    conversations: Sequence[Conversation],
    embedder: CachingEmbedder,
    directory: Path,
    *,
    captions: bool,
) -> None:
    """Write ``meta.json`` and ``vectors.f32`` (one little-endian float32 row per text)."""
    convs = []
    texts: dict[str, None] = {}
    for c in conversations:
        turns = []
        for t in c.turns:
            content = t.content(captions=captions)
            texts[content] = None
            turns.append(
                {
                    "id": t.id,
                    "session": t.session,
                    "content": content,
                    "created_at": t.created_at.isoformat(),
                }
            )
        for q in c.questions:
            texts[q.text] = None
        convs.append({"id": c.id, "turns": turns, "questions": [q.text for q in c.questions]})
    ordered = list(texts)
    vectors = np.stack([embedder.vector(t) for t in ordered]).astype("<f4")
    directory.mkdir(parents=True, exist_ok=True)
    vectors.tofile(directory / "vectors.f32")
    meta = {
        "embedder": embedder.name,
        "dimensions": embedder.dimensions,
        "threshold": embedder.relevance_threshold,
        "limit": SEARCH_LIMIT,
        "texts": ordered,
        "conversations": convs,
    }
    (directory / "meta.json").write_text(json.dumps(meta))


def run_reference_eval(
    python: Path,
    driver: Path,
    conversations: Sequence[Conversation],
    embedder: CachingEmbedder,
    *,
    captions: bool,
    threshold: float | None = None,
) -> ConfigResult:
    """Run the driver (texts already embedded by ``embedder``); its results as a config."""
    if not python.exists():
        raise ReferenceRunError(
            f"reference Python {python} does not exist; create the environment with "
            "--setup-reference or point --reference-python at one with actrone-memory 0.3.0"
        )
    with tempfile.TemporaryDirectory(prefix="actrone-eval-ref-") as tmp:
        write_eval_data(conversations, embedder, Path(tmp), captions=captions)
        cmd = [str(python), str(driver), "--data", tmp]
        if threshold is not None:
            cmd += ["--threshold", repr(threshold)]
        try:
            raw = run_driver(cmd)
        except ReferenceError as exc:
            raise ReferenceRunError(str(exc)) from None
    label = f"{raw['system']} {raw['version']} default"
    if threshold is not None:
        label += f" (threshold {threshold:g})"
    result = ConfigResult(label, {}, float(raw["threshold"]))
    pairs = [(c, q) for c in conversations for q in c.questions]
    if len(pairs) != len(raw["results"]):
        raise ReferenceRunError("the reference driver answered a different number of questions")
    sessions = {c.id: c.sessions() for c in conversations}
    for (conv, q), got in zip(pairs, raw["results"], strict=True):
        session_of = sessions[conv.id]
        ranked = tuple(got["ranked"])
        result.results.append(
            QueryResult(
                conv.id,
                q.category,
                q.evidence,
                ranked,
                float(got["ms"]),
                relevant_sessions=frozenset(
                    s for e in q.evidence if (s := session_of.get(e)) is not None
                ),
                ranked_sessions=tuple(session_of.get(i) for i in ranked),
            )
        )
    return result
