"""The export file's format (version :data:`FORMAT_VERSION`, docs/export.md): its lines encoded and
parsed, with no store and no file in sight (:mod:`actrone_pg.export` does the I/O).

A parsed file is checked whole: every error is a :class:`~actrone_pg.errors.ValidationError`
naming its line.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from actrone_pg import _validation as v
from actrone_pg.consolidation.run import MARKER
from actrone_pg.errors import ValidationError
from actrone_pg.models import DATETIME_FIELDS, STORED_MEMORY_FIELDS, Memory, Turn

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "VERSION_FIELDS",
    "Parsed",
    "dumps",
    "encode_turn",
    "encode_version",
    "parse",
    "sorted_json",
]

#: The header's ``format``: what tells an actrone-pg export from any other JSON Lines file.
FORMAT = "actrone-pg/agent-export"
#: The version of the file layout this module writes and reads.
FORMAT_VERSION = 1

#: What a memory's version holds in the file: every stored field but the agent (the header's, or
#: the import's --agent), the embedder and the token count (the importer's own).
VERSION_FIELDS = tuple(
    name for name in STORED_MEMORY_FIELDS if name not in ("agent_id", "embedder", "token_count")
)
_TURN_FIELDS = ("id", "user_message", "assistant_message", "tool_results", "created_at")


# -- encoding -----------------------------------------------------------------------------------


def encode_version(m: Memory) -> dict[str, Any]:
    """One version of a memory as the file holds it."""
    out: dict[str, Any] = {}
    for name in VERSION_FIELDS:
        value = getattr(m, name)
        if name in DATETIME_FIELDS:
            value = None if value is None else value.isoformat()
        elif isinstance(value, tuple):
            value = list(value)
        elif isinstance(value, dict):
            value = sorted_json(value)
        out[name] = value
    return out


def sorted_json(value: Any) -> Any:
    """JSON with every object's keys in code-point order: PostgreSQL's jsonb keeps its own order
    (shorter keys first), so the same data gives the same file from every backend."""
    if isinstance(value, dict):
        return {k: sorted_json(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [sorted_json(x) for x in value]
    return value


def encode_turn(t: Turn) -> dict[str, Any]:
    """A turn's fields as the file holds them (its session is the line's)."""
    return {
        "id": t.id,
        "user_message": t.user_message,
        "assistant_message": t.assistant_message,
        "tool_results": sorted_json(t.tool_results),
        "created_at": t.created_at.isoformat(),
    }


def dumps(value: object) -> str:
    """One line of the file."""
    # Not ASCII-escaped: the file is UTF-8, and people read it.
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


# -- parsing ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Parsed:
    """A whole file, checked: the agent it goes to, its memories, sessions and turns."""

    agent_id: str
    memories: list[tuple[int, list[Memory]]]  # (line number, versions oldest first)
    sessions: dict[str, tuple[int, dict[str, Any]]]  # session id -> (line, metadata)
    turns: list[tuple[int, Turn]]


def parse(name: str, lines: list[str], rename: str | None, max_chars: int, now: datetime) -> Parsed:
    """Check the file ``name``'s ``lines`` whole; ``rename`` replaces the exported agent.

    ``now`` is the time of the import: a memory whose current version has expired by then is
    refused, as the live API refuses a past expiry.
    """
    records = _records(name, lines)
    try:
        line, header = next(records)
    except StopIteration:
        raise ValidationError(f"{name} is empty: expected an actrone-pg export") from None
    where = f"{name}, line {line}"
    if header.get("format") != FORMAT:
        raise ValidationError(
            f"{where}: not an actrone-pg export (its first line has no format {FORMAT!r})"
        )
    version = header.get("version")
    if version != FORMAT_VERSION:
        raise ValidationError(
            f"{where}: export format version {version!r}; this actrone-pg reads version "
            f"{FORMAT_VERSION}"
            + (
                " (upgrade actrone-pg)"
                if isinstance(version, int) and version > FORMAT_VERSION
                else ""
            )
        )
    try:
        exported = v.check_id("agent_id", header.get("agent_id"))
    except ValidationError as exc:
        raise ValidationError(f"{where}: {exc}") from None
    agent = rename or exported
    memories: list[tuple[int, list[Memory]]] = []
    seen: dict[str, int] = {}
    sessions: dict[str, tuple[int, dict[str, Any]]] = {}
    turns: list[tuple[int, Turn]] = []
    turn_ids: set[tuple[str, str]] = set()
    for line, rec in records:
        where = f"{name}, line {line}"
        try:
            kind = rec.get("kind")
            if kind == "memory":
                versions = _memory(rec, agent, max_chars)
                expires = versions[-1].expires_at
                if expires is not None and expires <= now:
                    raise ValidationError(
                        f"memory {versions[0].id!r} expired at {expires.isoformat()}: no read "
                        "would ever return it (remove the line, or set a later expires_at)"
                    )
                earlier = seen.setdefault(versions[0].id, line)
                if earlier != line:
                    raise ValidationError(f"memory {versions[0].id!r} is also on line {earlier}")
                memories.append((line, versions))
            elif kind == "session":
                _keys(rec, {"kind", "session_id", "metadata"})
                sid = v.check_id("session_id", rec.get("session_id"))
                if sid in sessions:
                    raise ValidationError(f"session {sid!r} is also on line {sessions[sid][0]}")
                sessions[sid] = (line, v.check_metadata(rec.get("metadata"), max_chars=max_chars))
            elif kind == "turn":
                turn = _turn_of(rec, agent, max_chars)
                if turn.session_id not in sessions:
                    raise ValidationError(
                        f"turn {turn.id!r} names session {turn.session_id!r}, which no earlier "
                        "line declares"
                    )
                if (turn.session_id, turn.id) in turn_ids:
                    raise ValidationError(f"turn {turn.id!r} appears twice in its session")
                turn_ids.add((turn.session_id, turn.id))
                turns.append((line, turn))
            else:
                raise ValidationError(
                    f"unknown kind {kind!r} (expected 'memory', 'session' or 'turn')"
                )
        except ValidationError as exc:
            raise ValidationError(f"{where}: {exc}") from None
    for sid, (line, metadata) in sessions.items():
        try:
            _check_marker(metadata.get(MARKER), [t for _, t in turns if t.session_id == sid], now)
        except ValidationError as exc:
            raise ValidationError(f"{name}, line {line}: session {sid!r}: {exc}") from None
    counts = header.get("counts")
    if isinstance(counts, Mapping):
        found = {
            "memories": len(memories),
            "versions": sum(len(vs) for _, vs in memories),
            "sessions": len(sessions),
            "turns": len(turns),
        }
        for key, n in found.items():
            if key in counts and counts[key] != n:
                raise ValidationError(
                    f"{name}: the header counts {counts[key]!r} {key} and the file holds {n}: "
                    "it is truncated or was edited"
                )
    return Parsed(agent, memories, sessions, turns)


def _check_marker(marker: Any, turns: list[Turn], now: datetime) -> None:
    """Refuse a consolidation marker (:data:`~actrone_pg.consolidation.run.MARKER`) that would
    make the session's turns in the file look consolidated when no run can have done it: one
    naming a turn of the session at another time, a turn missing from the file that is not older
    than every turn kept (trimming removes the oldest), or a run to come (its cooldown would
    hold off every later run)."""
    if marker is None:
        return
    if not isinstance(marker, Mapping) or not isinstance(marker.get("turn_id"), str):
        raise ValidationError(f"its {MARKER!r} metadata must be an object naming a turn_id")
    done = _required_when(f"{MARKER}.created_at", marker.get("created_at"))
    ran = _required_when(f"{MARKER}.ran_at", marker.get("ran_at"))
    if ran > now or done > ran:
        raise ValidationError(
            f"its {MARKER!r} metadata says a consolidation ran at {ran.isoformat()}, over turns "
            f"up to {done.isoformat()}: a run to come, or over turns not yet written"
        )
    named = [t for t in turns if t.id == marker["turn_id"]]
    if named and named[0].created_at != done:
        raise ValidationError(
            f"its {MARKER!r} metadata gives turn {marker['turn_id']!r} the time "
            f"{done.isoformat()}, the file {named[0].created_at.isoformat()}"
        )
    if not named and turns and done >= min(t.created_at for t in turns):
        raise ValidationError(
            f"its {MARKER!r} metadata names turn {marker['turn_id']!r}, which the file lacks, "
            "as no older than the turns it holds"
        )


def _records(name: str, lines: list[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    for number, text in enumerate(lines, 1):
        if not text.strip():
            continue
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValidationError(
                f"{name}, line {number}: not JSON ({exc.msg}, column {exc.colno})"
            ) from None
        except RecursionError:
            raise ValidationError(f"{name}, line {number}: nested too deeply") from None
        if not isinstance(value, dict):
            raise ValidationError(
                f"{name}, line {number}: expected a JSON object, got {type(value).__name__}"
            )
        yield number, value


def _keys(rec: Mapping[str, Any], allowed: set[str]) -> None:
    unknown = set(rec) - allowed
    if unknown:
        raise ValidationError(f"unknown field(s) {sorted(unknown)}")


def _when(name: str, value: object, *, optional: bool = False) -> datetime | None:
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise ValidationError(f"{name} must be an ISO 8601 time, got {type(value).__name__}")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise ValidationError(f"{name} {value!r} is not an ISO 8601 time") from None
    return v.check_datetime(name, parsed)


def _required_when(name: str, value: object) -> datetime:
    when = _when(name, value)
    if when is None:  # pragma: no cover - _when returns None only when optional
        raise ValidationError(f"{name} is required")
    return when


def _memory(rec: Mapping[str, Any], agent: str, max_chars: int) -> list[Memory]:
    _keys(rec, {"kind", "versions"})
    raw = rec.get("versions")
    if not isinstance(raw, list) or not raw:
        raise ValidationError("a memory needs 'versions': a non-empty list, oldest first")
    out: list[Memory] = []
    for i, item in enumerate(raw, 1):
        if not isinstance(item, dict):
            raise ValidationError(f"version {i} is not an object")
        missing = [f for f in ("id", "content") if f not in item]
        if missing:
            raise ValidationError(f"version {i} lacks {missing}")
        _keys(item, set(VERSION_FIELDS))
        try:
            session_id = item.get("session_id")
            m = Memory(
                id=v.check_id("id", item["id"]),
                agent_id=agent,
                session_id=None if session_id is None else v.check_id("session_id", session_id),
                content=v.check_text("content", item["content"], max_chars),
                content_type=v.check_label("content_type", item.get("content_type", "injected")),
                importance=v.check_importance(item.get("importance", 0.5)),
                tags=v.check_tags(item.get("tags", [])),
                source=v.check_label("source", item.get("source", "injected")),
                sensitivity=v.check_label("sensitivity", item.get("sensitivity", "none")),
                created_at=_required_when("created_at", item.get("created_at")),
                metadata=v.check_metadata(item.get("metadata"), max_chars=max_chars),
                embedder="",
                token_count=0,
                expires_at=_when("expires_at", item.get("expires_at"), optional=True),
                source_turn_ids=v.check_turn_ids(item.get("source_turn_ids", [])),
                version=_version_number(item.get("version", i)),
                valid_from=_when("valid_from", item.get("valid_from"), optional=True),
                valid_to=_when("valid_to", item.get("valid_to"), optional=True),
            )
        except ValidationError as exc:
            raise ValidationError(f"version {i}: {exc}") from None
        if m.version != i:
            raise ValidationError(f"version {i} is numbered {m.version}: versions count from 1")
        if out and m.id != out[0].id:
            raise ValidationError(f"version {i} has id {m.id!r}, version 1 {out[0].id!r}")
        out.append(m)
    for older, newer in zip(out, out[1:], strict=False):
        if older.valid_to != newer.valid_from:
            raise ValidationError(
                f"version {older.version} ends at {older.valid_to} but version "
                f"{newer.version} starts at {newer.valid_from}"
            )
    if out[-1].valid_to is not None:
        raise ValidationError("the last version is the current one: its valid_to must be null")
    return out


def _version_number(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValidationError(f"version must be a whole number ≥ 1, got {value!r}")
    return value


def _turn_of(rec: Mapping[str, Any], agent: str, max_chars: int) -> Turn:
    _keys(rec, {"kind", "session_id", *_TURN_FIELDS})
    for f in ("id", "session_id", "user_message", "assistant_message", "created_at"):
        if f not in rec:
            raise ValidationError(f"a turn needs {f!r}")
    user = v.check_text("user_message", rec["user_message"], max_chars, allow_empty=True)
    assistant = v.check_text(
        "assistant_message", rec["assistant_message"], max_chars, allow_empty=True
    )
    if not user.strip() and not assistant.strip():
        raise ValidationError("a turn needs a user_message or an assistant_message")
    results = rec.get("tool_results")
    if results is not None:
        if not isinstance(results, list):
            raise ValidationError("tool_results must be a list or null")
        results = v.check_json("tool_results", results, max_chars=max_chars)
    created = _required_when("created_at", rec["created_at"])
    return Turn(
        id=v.check_id("id", rec["id"]),
        agent_id=agent,
        session_id=v.check_id("session_id", rec["session_id"]),
        user_message=user,
        assistant_message=assistant,
        tool_results=results,
        created_at=created,
        token_count=0,
    )
