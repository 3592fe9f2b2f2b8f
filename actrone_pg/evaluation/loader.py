"""Reading conversations for ``actrone-pg eval``: LoCoMo (both shapes) and the project's JSON Lines.

A :class:`Conversation` is what the evaluation needs and nothing more: its dialog turns (each
becomes one memory, stamped at the time it was said) and its questions (each a query whose
relevant memories are the turns given as evidence).

**LoCoMo** (Maharana et al., ACL 2024). A conversation is a JSON object with ``session_N`` (a list
of turns ``{speaker, dia_id, text, img_url?, blip_caption?}``) and ``session_N_date_time``
(``"1:56 pm on 8 May, 2023"``), and ``qa`` (``{question, answer, evidence: [dia_id, ...],
category}``, category 1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5 adversarial). It
comes either as one file per conversation, or as the release's ``locomo10.json``: a list of
objects with the conversation nested under ``conversation`` and the questions beside it. Category
5 questions have no answer in the conversation and are left out, as are questions without
evidence.

**JSON Lines** (``.jsonl``), one object per line, documented in docs/quality.md::

    {"conversation": "c1", "id": "c1:1", "session": "s1", "time": "2024-03-01T09:00:00+00:00",
     "speaker": "Ana", "text": "I adopted a cat called Miso."}
    {"conversation": "c1", "question": "What is the name of Ana's cat?", "evidence": ["c1:1"],
     "category": "single-hop"}

A line with ``text`` is a turn, a line with ``question`` a question.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from importlib import resources
from pathlib import Path
from typing import Any

from actrone_pg.errors import ValidationError

__all__ = [
    "LOCOMO_CATEGORIES",
    "Conversation",
    "DialogTurn",
    "EvalFormatError",
    "Question",
    "load_conversations",
    "parse_jsonl",
    "parse_locomo",
    "shipped_conversations",
]

#: LoCoMo's question categories by number (5, adversarial, is never evaluated).
LOCOMO_CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}

# Turns of one session share its date and time; one second per turn keeps them in the order they
# were said, so "newer" (recency, tie-breaks) means later in the conversation, as it would live.
_TURN_STEP = timedelta(seconds=1)
_SESSION_KEY = re.compile(r"session_(\d+)")
_LOCOMO_TIME = re.compile(
    r"^\s*(\d{1,2}):(\d{2})\s*([ap]m)\s+on\s+(\d{1,2})\s+([A-Za-z]+),?\s+(\d{4})\s*$", re.I
)
_MONTHS = {
    name: i + 1
    for i, name in enumerate(
        (
            "january february march april may june july august september october november december"
        ).split()
    )
}


class EvalFormatError(ValidationError):
    """An evaluation file is missing, unreadable, or not LoCoMo nor the JSON Lines format."""


@dataclass(frozen=True, slots=True)
class DialogTurn:
    """One thing said in a conversation; it becomes one memory."""

    id: str
    session: str
    speaker: str
    text: str
    created_at: datetime
    caption: str | None = None

    @property
    def session_id(self) -> str | None:
        """The ``session_id`` of its memory (``session-<label>``), ``None`` without a session."""
        return f"session-{self.session}" if self.session else None

    def content(self, *, captions: bool = True) -> str:
        """The memory's text: who said what, and the caption of a shared photo if any."""
        text = f"{self.speaker}: {self.text}" if self.speaker else self.text
        if captions and self.caption:
            text = f"{text} [shares a photo: {self.caption}]"
        return text


@dataclass(frozen=True, slots=True)
class Question:
    """A query with the ids of the turns that hold its answer."""

    text: str
    evidence: frozenset[str]
    category: str


@dataclass(frozen=True, slots=True)
class Conversation:
    """One conversation between two speakers: an agent's memories and the questions about them."""

    id: str
    turns: tuple[DialogTurn, ...]
    questions: tuple[Question, ...]
    skipped: dict[str, int] = field(default_factory=dict)

    def sessions(self) -> dict[str, str | None]:
        """Each turn id with the ``session_id`` of its memory."""
        return {t.id: t.session_id for t in self.turns}


# -- LoCoMo --


def parse_locomo_time(text: object, where: str) -> datetime:
    """``"1:56 pm on 8 May, 2023"`` as an aware datetime (UTC: the data set gives no zone)."""
    m = _LOCOMO_TIME.match(text) if isinstance(text, str) else None
    month = _MONTHS.get(m.group(5).lower()) if m else None
    if m is None or month is None:
        raise EvalFormatError(f"{where}: cannot read the date {text!r}")
    hour = int(m.group(1)) % 12 + (12 if m.group(3).lower() == "pm" else 0)
    try:
        return datetime(int(m.group(6)), month, int(m.group(4)), hour, int(m.group(2)), tzinfo=UTC)
    except ValueError:
        raise EvalFormatError(f"{where}: {text!r} is not a valid date") from None


def _evidence_ids(raw: object) -> list[str]:
    # A few LoCoMo entries pack two ids into one string ("D8:6; D9:17").
    if not isinstance(raw, list):
        return []
    out: list[str] = []
    for item in raw:
        if isinstance(item, str):
            out.extend(part.strip() for part in re.split(r"[;,]", item) if part.strip())
    return out


def parse_locomo(
    obj: Mapping[str, Any], conv_id: str, qa: object = None, *, where: str = ""
) -> Conversation:
    """One LoCoMo conversation (its ``session_N`` keys; questions from ``qa`` or ``obj['qa']``)."""
    where = where or conv_id
    sessions = sorted(
        (int(m.group(1)), key)
        for key in obj
        if (m := _SESSION_KEY.fullmatch(key)) and isinstance(obj[key], list)
    )
    if not sessions:
        raise EvalFormatError(f"{where}: not a LoCoMo conversation (no session_N turns)")
    turns: list[DialogTurn] = []
    for n, key in sessions:
        start = parse_locomo_time(obj.get(f"{key}_date_time"), f"{where} {key}_date_time")
        for i, raw in enumerate(obj[key]):
            if not isinstance(raw, Mapping) or not isinstance(raw.get("dia_id"), str):
                raise EvalFormatError(f"{where} {key}[{i}]: a turn needs a 'dia_id'")
            text = raw.get("text")
            if not isinstance(text, str):
                raise EvalFormatError(f"{where} {key}[{i}]: a turn needs a 'text'")
            caption = raw.get("blip_caption")
            turns.append(
                DialogTurn(
                    id=raw["dia_id"],
                    session=str(n),
                    speaker=str(raw.get("speaker") or ""),
                    text=text,
                    created_at=start + i * _TURN_STEP,
                    caption=caption if isinstance(caption, str) and caption.strip() else None,
                )
            )
    qa = obj.get("qa") if qa is None else qa
    if not isinstance(qa, list):
        raise EvalFormatError(f"{where}: no 'qa' list of questions")
    known = {t.id for t in turns}
    questions: list[Question] = []
    skipped = {"adversarial": 0, "no_evidence": 0, "unknown_evidence_ids": 0}
    for i, q in enumerate(qa):
        if not isinstance(q, Mapping) or not isinstance(q.get("question"), str):
            raise EvalFormatError(f"{where} qa[{i}]: a question needs a 'question' string")
        category = q.get("category")
        if category not in LOCOMO_CATEGORIES:
            skipped["adversarial"] += 1
            continue
        ids = _evidence_ids(q.get("evidence"))
        found = frozenset(e for e in ids if e in known)
        skipped["unknown_evidence_ids"] += len(set(ids) - found)
        if not found:
            skipped["no_evidence"] += 1
            continue
        questions.append(Question(q["question"], found, LOCOMO_CATEGORIES[category]))
    return Conversation(conv_id, tuple(turns), tuple(questions), skipped)


def _locomo_document(data: object, stem: str, where: str) -> list[Conversation]:
    if isinstance(data, list):  # the release's locomo10.json
        out = []
        for i, item in enumerate(data):
            if not isinstance(item, Mapping) or not isinstance(item.get("conversation"), Mapping):
                raise EvalFormatError(
                    f"{where}[{i}]: expected an object with a 'conversation' (LoCoMo release)"
                )
            conv_id = str(item.get("sample_id") or f"{stem}-{i}")
            out.append(
                parse_locomo(item["conversation"], conv_id, item.get("qa"), where=f"{where}[{i}]")
            )
        return out
    if isinstance(data, Mapping):
        if isinstance(data.get("conversation"), Mapping):
            conv_id = str(data.get("sample_id") or stem)
            return [parse_locomo(data["conversation"], conv_id, data.get("qa"), where=where)]
        return [parse_locomo(data, str(data.get("sample_id") or stem), where=where)]
    raise EvalFormatError(f"{where}: not a LoCoMo conversation (expected a JSON object or list)")


# -- JSON Lines --


def _aware(text: object, where: str) -> datetime:
    if not isinstance(text, str):
        raise EvalFormatError(f"{where}: 'time' must be an ISO 8601 string with a UTC offset")
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise EvalFormatError(f"{where}: 'time' {text!r} is not ISO 8601") from None
    if value.tzinfo is None:
        raise EvalFormatError(f"{where}: 'time' {text!r} needs a UTC offset (e.g. +00:00)")
    return value


def parse_jsonl(lines: Iterable[str], source: str = "<jsonl>") -> list[Conversation]:
    """Conversations of the project's JSON Lines format, in the order they first appear."""
    turns: dict[str, list[DialogTurn]] = {}
    raw_questions: dict[str, list[tuple[str, list[str], str, str]]] = {}
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{source}:{n}"
        try:
            obj = json.loads(line)
        except ValueError:
            raise EvalFormatError(f"{where}: not a JSON object") from None
        if not isinstance(obj, dict) or not isinstance(obj.get("conversation"), str):
            raise EvalFormatError(f"{where}: each line needs a 'conversation' id (a string)")
        conv = obj["conversation"]
        turns.setdefault(conv, [])
        raw_questions.setdefault(conv, [])
        if "question" in obj:
            q, ev, cat = obj["question"], obj.get("evidence"), obj.get("category", "all")
            if not isinstance(q, str) or not q.strip():
                raise EvalFormatError(f"{where}: 'question' must be a non-empty string")
            if not isinstance(ev, list) or not ev or not all(isinstance(e, str) for e in ev):
                raise EvalFormatError(f"{where}: 'evidence' must be a non-empty list of turn ids")
            if not isinstance(cat, str) or not cat.strip():
                raise EvalFormatError(f"{where}: 'category' must be a string")
            raw_questions[conv].append((q, ev, cat, where))
        elif "text" in obj:
            tid, text, speaker = obj.get("id"), obj["text"], obj.get("speaker", "")
            if not isinstance(tid, str) or not tid.strip():
                raise EvalFormatError(f"{where}: a turn needs an 'id' (a string)")
            if not isinstance(text, str) or not text.strip():
                raise EvalFormatError(f"{where}: 'text' must be a non-empty string")
            if not isinstance(speaker, str):
                raise EvalFormatError(f"{where}: 'speaker' must be a string")
            caption = obj.get("caption")
            if caption is not None and not isinstance(caption, str):
                raise EvalFormatError(f"{where}: 'caption' must be a string")
            turns[conv].append(
                DialogTurn(
                    id=tid,
                    session=str(obj.get("session", "")),
                    speaker=speaker,
                    text=text,
                    created_at=_aware(obj.get("time"), where),
                    caption=caption or None,
                )
            )
        else:
            raise EvalFormatError(f"{where}: a line is a turn ('text') or a question ('question')")
    out = []
    for conv, conv_turns in turns.items():
        ids = [t.id for t in conv_turns]
        if len(set(ids)) != len(ids):
            dup = next(i for i in ids if ids.count(i) > 1)
            raise EvalFormatError(f"{source}: conversation {conv!r} has two turns with id {dup!r}")
        questions = []
        for q, ev, cat, where in raw_questions[conv]:
            missing = sorted(set(ev) - set(ids))
            if missing:
                raise EvalFormatError(
                    f"{where}: evidence {missing} names no turn of conversation {conv!r}"
                )
            questions.append(Question(q, frozenset(ev), cat))
        if not conv_turns:
            raise EvalFormatError(f"{source}: conversation {conv!r} has questions but no turns")
        out.append(Conversation(conv, tuple(conv_turns), tuple(questions)))
    if not out:
        raise EvalFormatError(f"{source}: no conversations")
    return out


# -- files --


def _load_file(path: Path) -> list[Conversation]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise EvalFormatError(f"cannot read {path}: {exc}") from None
    if path.suffix.lower() == ".jsonl":
        return parse_jsonl(text.splitlines(), str(path))
    try:
        data = json.loads(text)
    except ValueError:
        raise EvalFormatError(
            f"{path}: not JSON (expected a LoCoMo .json file or a .jsonl file)"
        ) from None
    return _locomo_document(data, path.stem, str(path))


def load_conversations(paths: Iterable[str | Path]) -> list[Conversation]:
    """Conversations from files and directories (a directory: its ``*.json``/``*.jsonl``)."""
    files: list[Path] = []
    for raw in paths:
        path = Path(raw).expanduser()
        if path.is_dir():
            found = sorted(p for p in path.iterdir() if p.suffix.lower() in (".json", ".jsonl"))
            if not found:
                raise EvalFormatError(f"{path}: no .json or .jsonl files in this directory")
            files.extend(found)
        elif path.is_file():
            files.append(path)
        else:
            raise EvalFormatError(f"{path}: no such file or directory")
    conversations = [c for f in files for c in _load_file(f)]
    ids = [c.id for c in conversations]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise EvalFormatError(f"two conversations are called {dup!r}")
    if not any(c.questions for c in conversations):
        raise EvalFormatError("no questions with evidence to evaluate")
    return conversations


def shipped_conversations() -> list[Conversation]:
    """The small synthetic set shipped with the package (``data/eval_conversations.jsonl``)."""
    text = (
        resources.files("actrone_pg").joinpath("data/eval_conversations.jsonl").read_text("utf-8")
    )
    return parse_jsonl(text.splitlines(), "eval_conversations.jsonl")
