"""Export an agent's memories and live sessions to JSON Lines, and import them into any store.

::

    from actrone_pg.export import export_agent, import_agent

    async with create_memory_manager(MemoryConfig(backend="postgres")) as source:
        await export_agent(source, "agent-1", "agent-1.jsonl")
    async with create_memory_manager(MemoryConfig(backend="redis_qdrant")) as target:
        report = await import_agent(target, "agent-1.jsonl")          # or agent_id="agent-2"

This is the path between backends and the answer to a data portability request. The file
(format version :data:`FORMAT_VERSION`, described in docs/export.md) holds, after a header line,
one line per memory with **every version** (lineage: ``source_turn_ids``; ``expires_at``;
``valid_from``/``valid_to``; ids kept), then one line per live session and one per turn of it,
oldest first. Vectors are not in the file: the importing manager embeds each version with its
own embedder, and counts tokens with its own counter, as its searches and budgets need.

An import reads and checks the whole file before it writes anything: a bad line is a
:class:`~actrone_pg.errors.ValidationError` naming its line number, and nothing is written. It
keeps ids and is idempotent: a memory the agent already has with the same versions, and a turn
already in its session, are left alone, so a second import of the same file writes nothing. A
memory the agent has with *other* content under the same id is a conflict, refused before
anything is written (an import never overwrites). The memories' first versions are written in one
batch (all or none, on every backend); each later version and each turn is one write, so an
import stopped half-way (a lost connection) is finished by running it again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from actrone_pg import _validation as v
from actrone_pg._export_format import (
    FORMAT,
    FORMAT_VERSION,
    VERSION_FIELDS,
    dumps,
    encode_turn,
    encode_version,
    parse,
    sorted_json,
)
from actrone_pg._manager.context import utc_now
from actrone_pg.errors import ActroneError, LockLostError, StoreError, ValidationError
from actrone_pg.models import Memory
from actrone_pg.stores import MemoryRecord

if TYPE_CHECKING:
    from actrone_pg.manager import MemoryManager

__all__ = ["FORMAT", "FORMAT_VERSION", "TransferReport", "export_agent", "import_agent"]

# Memories read per page while exporting.
_PAGE = 500
# Progress is reported after every this many records.
_PROGRESS_EVERY = 1000

#: ``progress(message)``: called now and then during a long export or import (the CLI prints to
#: stderr).
Progress = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class TransferReport:
    """What an export wrote, or what an import found and wrote.

    ``memories``/``versions``/``sessions``/``turns`` count the file's records; ``written_*`` what
    an import wrote (an export writes them all); the rest was already there.
    """

    agent_id: str
    memories: int
    versions: int
    sessions: int
    turns: int
    written_memories: int
    written_versions: int
    written_turns: int

    def summary(self) -> str:
        """One line for people."""
        return (
            f"agent {self.agent_id!r}: {self.memories} memories ({self.versions} versions), "
            f"{self.sessions} sessions, {self.turns} turns; written: {self.written_memories} "
            f"memories ({self.written_versions} versions), {self.written_turns} turns"
        )


# -- export -------------------------------------------------------------------------------------


async def export_agent(
    mm: MemoryManager,
    agent_id: str,
    out: str | Path | TextIO,
    *,
    progress: Progress | None = None,
) -> TransferReport:
    """Write the agent's memories (every version) and live sessions (their turns) to ``out``.

    ``out`` is a path (written whole, then renamed into place) or an open text stream. Expired
    memories are left out (no read returns them). Memories come newest first, as
    :meth:`~actrone_pg.MemoryManager.list_memories` lists them, sessions by id, turns oldest
    first. Contents are written as stored: redaction (``redact_sensitivities``) applies to reads,
    not to an export. Writes that happen while it runs may or may not be in the file.
    """
    v.check_id("agent_id", agent_id)
    store = mm.store
    lines: list[str] = []
    n_versions = n_turns = 0
    memories = 0
    after: tuple[datetime, str] | None = None
    now = utc_now()
    while True:
        page = await store.list_memories(agent_id, now=now, limit=_PAGE, after=after)
        for current in page:
            versions = await store.memory_history(agent_id, current.id) or [current]
            lines.append(
                dumps({"kind": "memory", "versions": [encode_version(m) for m in versions]})
            )
            memories += 1
            n_versions += len(versions)
            if progress and memories % _PROGRESS_EVERY == 0:
                progress(f"exported {memories:,} memories")
        if len(page) < _PAGE:
            break
        after = (page[-1].created_at, page[-1].id)
    ttl = mm.config.session_ttl_seconds
    sessions = await store.list_sessions(agent_id, ttl_seconds=ttl)
    for info in sessions:
        turns = await store.recent_turns(
            agent_id, info.session_id, limit=max(info.turn_count, 1), ttl_seconds=ttl
        )
        lines.append(
            dumps(
                {
                    "kind": "session",
                    "session_id": info.session_id,
                    "metadata": sorted_json(info.metadata),
                }
            )
        )
        for t in turns:
            lines.append(dumps({"kind": "turn", "session_id": t.session_id, **encode_turn(t)}))
        n_turns += len(turns)
    header = {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "agent_id": agent_id,
        "exported_at": now.isoformat(),
        "counts": {
            "memories": memories,
            "versions": n_versions,
            "sessions": len(sessions),
            "turns": n_turns,
        },
    }
    _write(out, [dumps(header), *lines])
    return TransferReport(
        agent_id, memories, n_versions, len(sessions), n_turns, memories, n_versions, n_turns
    )


def _write(out: str | Path | TextIO, lines: list[str]) -> None:
    if isinstance(out, (str, Path)):
        path = Path(out)
        tmp = path.with_name(f".{path.name}.part")
        try:
            with tmp.open("w", encoding="utf-8", newline="\n") as f:
                for line in lines:
                    f.write(line + "\n")
            tmp.replace(path)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            raise StoreError(f"cannot write {path}: {exc.strerror or exc}") from exc
        return
    for line in lines:
        out.write(line + "\n")
    out.flush()


# -- import -------------------------------------------------------------------------------------


async def import_agent(
    mm: MemoryManager,
    source: str | Path | TextIO | Iterable[str],
    *,
    agent_id: str | None = None,
    progress: Progress | None = None,
) -> TransferReport:
    """Load an export into ``mm``'s store, under ``agent_id`` (default: the exported agent's).

    ``source`` is a path, an open text stream or the file's lines. The whole file is read and
    checked first; a bad line raises :class:`~actrone_pg.errors.ValidationError` naming its line
    number and nothing is written, and so does a memory the agent already has with other
    versions under the same id. Then each version is embedded by ``mm``'s embedder and written;
    memories and turns already present are left alone (a second import writes nothing). An
    ``erase_agent`` of the agent while the import runs (in any process) stops it with
    :class:`~actrone_pg.errors.LockLostError`, and nothing of the import is left.
    """
    if agent_id is not None:
        v.check_id("agent_id", agent_id)
    name, lines = _read(source)
    parsed = parse(name, lines, agent_id, mm.config.max_text_chars, utc_now())
    agent = parsed.agent_id
    store = mm.store
    # Every write of the import is fenced by the agent's write generation, taken before the
    # plan reads the store: an erase_agent that comes at any point after this makes each later
    # write fail (and removes the earlier ones), so an import it overtook never reports success.
    fence = await store.writer_fence(agent)

    # Plan: what the store lacks, and conflicts, before anything is written.
    todo: list[tuple[list[Memory], int]] = []  # (versions, how many the store already has)
    for line, versions in parsed.memories:
        have = await store.memory_history(agent, versions[0].id)
        done = _common_prefix(have, versions)
        if done < len(have):
            raise ValidationError(
                f"{name}, line {line}: agent {agent!r} already has memory {versions[0].id!r} "
                f"with other content (version {have[done].version} differs); nothing was "
                "imported (delete that memory, or import under another --agent)"
            )
        if done < len(versions):
            todo.append((versions, done))
    ttl = mm.config.session_ttl_seconds
    known_turns: dict[str, set[str]] = {}
    metadata_todo: list[tuple[str, dict[str, Any]]] = []
    for session_id, (_, metadata) in parsed.sessions.items():
        have_turns = await store.recent_turns(agent, session_id, limit=v.MAX_INT, ttl_seconds=ttl)
        known_turns[session_id] = {t.id for t in have_turns}
        info = await store.get_session(agent, session_id, ttl_seconds=ttl)
        held = info.metadata if info else {}
        if any(key not in held or held[key] != value for key, value in metadata.items()):
            metadata_todo.append((session_id, metadata))
    new_turns = [(ln, t) for ln, t in parsed.turns if t.id not in known_turns[t.session_id]]

    # Embed every version still to write: the importer's embedder, its token counter.
    texts = sorted({m.content for versions, done in todo for m in versions[done:]})
    if progress and texts:
        progress(f"embedding {len(texts):,} texts with {mm.embedder.name}")
    # The manager's own embedding path: batches, checks and normalises the vectors as every write.
    vectors = dict(zip(texts, await mm._ctx.embed(texts), strict=True))

    def record(m: Memory) -> MemoryRecord:
        m = replace(
            m, embedder=mm.embedder.name, token_count=mm.count_tokens(m.content), valid_to=None
        )
        return MemoryRecord(m, vectors[m.content])

    # First versions of new memories: one batch, all or none.
    firsts = [record(versions[0]) for versions, done in todo if done == 0]
    try:
        if firsts:
            await store.upsert_memories(firsts, fence=fence)
        written_versions = len(firsts)
        for versions, done in todo:
            for m in versions[max(done, 1) :]:
                built = _next_version(record, m, agent)
                if await store.update_memory(agent, m.id, built, fence=fence) is None:
                    raise _changed(agent, m.id)
                written_versions += 1
                if progress and written_versions % _PROGRESS_EVERY == 0:
                    progress(f"imported {written_versions:,} memory versions")
        for session_id, metadata in metadata_todo:
            await store.set_session_metadata(
                agent, session_id, metadata, ttl_seconds=ttl, fence=fence
            )
        for i, (_, turn) in enumerate(new_turns, 1):
            counted = replace(
                turn,
                token_count=mm._ctx.count_turn(
                    turn.user_message, turn.assistant_message, turn.tool_results
                ),
            )
            await store.append_turn(
                counted, max_turns=mm.config.max_session_turns, ttl_seconds=ttl, fence=fence
            )
            if progress and i % _PROGRESS_EVERY == 0:
                progress(f"imported {i:,} turns")
    except LockLostError:
        raise LockLostError(
            f"agent {agent!r} was erased while it was being imported; the import stopped, and "
            "nothing of it is kept"
        ) from None
    except ActroneError:
        raise
    except Exception as exc:  # a store's own failure, as every public path reports it
        raise StoreError(
            f"import into {store.backend} failed: {type(exc).__name__}: {exc}"
        ) from exc
    total_versions = sum(len(vs) for _, vs in parsed.memories)
    return TransferReport(
        agent,
        len(parsed.memories),
        total_versions,
        len(parsed.sessions),
        len(parsed.turns),
        sum(1 for _, done in todo if done == 0),
        written_versions,
        len(new_turns),
    )


def _read(source: str | Path | TextIO | Iterable[str]) -> tuple[str, list[str]]:
    if isinstance(source, (str, Path)):
        path = Path(source)
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise ValidationError(f"{path} is not UTF-8 text: {exc.reason}") from None
        except OSError as exc:
            raise ValidationError(f"cannot read {path}: {exc.strerror or exc}") from None
        return str(path), text.splitlines()
    name = getattr(source, "name", "<input>")
    try:
        return str(name), [line.rstrip("\r\n") for line in source]
    except UnicodeDecodeError as exc:
        raise ValidationError(f"{name} is not UTF-8 text: {exc.reason}") from None


# valid_to is left out: it is the next version's valid_from (compared), and None on a version
# that is current in the store but not in the file (an import stopped before its next version).
_COMPARED = tuple(f for f in VERSION_FIELDS if f != "valid_to")


def _common_prefix(have: list[Memory], want: list[Memory]) -> int:
    """How many leading versions the store has exactly as the file has them."""
    n = 0
    for a, b in zip(have, want, strict=False):
        if any(getattr(a, f) != getattr(b, f) for f in _COMPARED):
            break
        n += 1
    return n


def _changed(agent: str, memory_id: str) -> StoreError:
    return StoreError(
        f"memory {memory_id!r} of agent {agent!r} changed while it was imported; "
        "run the import again"
    )


def _next_version(
    record: Callable[[Memory], MemoryRecord], m: Memory, agent: str
) -> Callable[[Memory], Awaitable[MemoryRecord]]:
    """The store's update builds ``m`` (the file's record, its ids and validity kept) only on
    top of the version just before it; anything else raises, and nothing is written."""

    async def build(current: Memory) -> MemoryRecord:
        if current.version != m.version - 1:
            raise _changed(agent, m.id)
        return record(m)

    return build
