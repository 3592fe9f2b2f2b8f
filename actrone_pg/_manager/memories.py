"""The manager's L2 writes: injecting, updating, listing and deleting long-term memories."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from actrone_pg import _validation as v
from actrone_pg._manager.context import ManagerContext, utc_now, write_fence
from actrone_pg.errors import MemoryNotFoundError, ValidationError
from actrone_pg.models import STORED_MEMORY_FIELDS, Memory, MemoryPage
from actrone_pg.ranking import micros
from actrone_pg.stores import MemoryRecord
from actrone_pg.stores.base import Fence

__all__ = ["Memories"]

# Memory ids default to a UUID derived from the agent, session and content, so that a client that
# retries an inject after a timeout writes the same memory again instead of a duplicate.
_MEMORY_NAMESPACE = uuid.UUID("6f3a7d2e-5c1b-4e8a-9d0f-2b7c4e6a8f10")

# What an item of inject_memories may set: the stored fields the manager does not fill in itself,
# with the id as "memory_id". A version's number and validity belong to update_memory.
_SET_BY_MANAGER = {"id", "agent_id", "embedder", "token_count", "version", "valid_from", "valid_to"}
# Text embedded before an item's content but not stored (see inject_memory).
_CONTEXT = "embedding_context"
_MEMORY_FIELDS = frozenset(STORED_MEMORY_FIELDS) - _SET_BY_MANAGER | {"memory_id", _CONTEXT}


class Memories:
    """Write long-term memories and manage their lifecycle: versions, expiry, erasure."""

    def __init__(self, ctx: ManagerContext) -> None:
        self.ctx = ctx
        #: Awaited by erase_agent before it deletes: stops this manager's runs for the agent
        #: (the manager sets it to Consolidation.stop_agent).
        self.before_erase: Callable[[str], Awaitable[None]] | None = None

    async def inject_memory(
        self,
        agent_id: str,
        content: str,
        *,
        session_id: str | None = None,
        content_type: str = "injected",
        importance: float = 0.5,
        tags: Iterable[str] = (),
        source: str = "injected",
        sensitivity: str = "none",
        created_at: datetime | None = None,
        metadata: Mapping[str, Any] | None = None,
        memory_id: str | None = None,
        expires_at: datetime | None = None,
        source_turn_ids: Iterable[str] = (),
        embedding_context: str | None = None,
    ) -> str:
        """What :meth:`actrone_pg.MemoryManager.inject_memory` does (documented there)."""
        item = {
            "content": content,
            "session_id": session_id,
            "content_type": content_type,
            "importance": importance,
            "tags": tags,
            "source": source,
            "sensitivity": sensitivity,
            "created_at": created_at,
            "metadata": metadata,
            "memory_id": memory_id,
            "expires_at": expires_at,
            "source_turn_ids": source_turn_ids,
            _CONTEXT: embedding_context,
        }
        ids = await self.inject_memories(agent_id, [item])
        return ids[0]

    async def inject_memories(
        self, agent_id: str, items: Iterable[Mapping[str, Any] | str]
    ) -> list[str]:
        """What :meth:`actrone_pg.MemoryManager.inject_memories` does (documented there)."""
        v.check_id("agent_id", agent_id)
        if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Iterable):
            raise ValidationError("items must be a list of memories (strings or dicts)")
        now = utc_now()
        built = [self._build_memory(agent_id, item, i, now) for i, item in enumerate(items)]
        if not built:
            return []
        memories = [m for m, _ in built]
        # An item repeated in one batch (a conversation says "Thanks!" twice) is stored once, as
        # two calls would store it; the later copy wins, as a second call's upsert would. One id
        # with two different contents is a contradiction, not a repeat.
        unique: dict[str, tuple[Memory, str]] = {}
        for m, embedded in built:
            earlier = unique.get(m.id)
            if earlier is not None and earlier[0].content != m.content:
                raise ValidationError(
                    f"memory id {m.id!r} is given twice in one batch with different content"
                )
            unique[m.id] = (m, embedded)
        fence = await self._fence(agent_id)
        vectors = await self.ctx.embed([embedded for _, embedded in unique.values()])
        records = [
            MemoryRecord(memory=m, vector=vec)
            for (m, _), vec in zip(unique.values(), vectors, strict=True)
        ]
        await self.ctx.store.upsert_memories(records, fence=fence)
        return [m.id for m in memories]

    async def _fence(self, agent_id: str) -> Fence:
        """What a write of the agent starting now is fenced by (spec §8, "Erasure"): the lock a
        consolidation writes under, or else the agent's write generation, which
        :meth:`erase_agent` ends: the store then refuses the write
        (:class:`~actrone_pg.errors.LockLostError`)."""
        return write_fence.get() or await self.ctx.store.writer_fence(agent_id)

    def _build_memory(
        self, agent_id: str, item: Mapping[str, Any] | str, index: int, now: datetime
    ) -> tuple[Memory, str]:
        """The memory an item describes, and the text to embed for it."""
        if isinstance(item, str):
            item = {"content": item}
        if not isinstance(item, Mapping):
            raise ValidationError(
                f"item {index}: expected a string or a dict, got {type(item).__name__}"
            )
        unknown = set(item) - _MEMORY_FIELDS
        if unknown:
            raise ValidationError(f"item {index}: unknown field(s) {sorted(unknown)}")
        if "content" not in item:
            raise ValidationError(f"item {index}: 'content' is required")
        limit = self.ctx.config.max_text_chars
        try:
            content = v.check_text("content", item["content"], limit)
            session_id = item.get("session_id")
            if session_id is not None:
                v.check_id("session_id", session_id)
            created = item.get("created_at")
            created_at = now if created is None else v.check_datetime("created_at", created)
            created_at = created_at.astimezone(UTC)
            memory_id = item.get("memory_id")
            if memory_id is None:
                key = f"{agent_id}\x00{session_id or ''}\x00{content}"
                memory_id = str(uuid.uuid5(_MEMORY_NAMESPACE, key))
            else:
                v.check_id("memory_id", memory_id)
            context = item.get(_CONTEXT)
            embedded = content
            if context is not None:
                context = v.check_text(_CONTEXT, context, limit)
                # One line break apart: the context reads as what came before the content.
                embedded = f"{context}\n{content}"
            memory = Memory(
                id=memory_id,
                agent_id=agent_id,
                session_id=session_id,
                content=content,
                content_type=v.check_label("content_type", item.get("content_type", "injected")),
                importance=v.check_importance(item.get("importance", 0.5)),
                tags=v.check_tags(item.get("tags", ())),
                source=v.check_label("source", item.get("source", "injected")),
                sensitivity=v.check_label("sensitivity", item.get("sensitivity", "none")),
                created_at=created_at,
                metadata=v.check_metadata(item.get("metadata"), max_chars=limit),
                embedder=self.ctx.embedder.name,
                token_count=self.ctx.count_tokens(content),
                expires_at=_check_expiry(item.get("expires_at"), now),
                source_turn_ids=v.check_turn_ids(item.get("source_turn_ids", ())),
                valid_from=now,
            )
        except ValidationError as exc:
            raise type(exc)(f"item {index}: {exc}") from None
        return memory, embedded

    async def delete_memory(self, agent_id: str, memory_id: str) -> bool:
        """Delete one of the agent's memories; ``False`` if the agent has no such memory."""
        v.check_id("agent_id", agent_id)
        v.check_id("memory_id", memory_id)
        return await self.ctx.store.delete_memory(agent_id, memory_id)

    async def get_memory(self, agent_id: str, memory_id: str) -> Memory | None:
        """The current version of one of the agent's memories, or ``None`` (also once expired)."""
        v.check_id("agent_id", agent_id)
        v.check_id("memory_id", memory_id)
        found = self.ctx.live(await self.ctx.store.get_memory(agent_id, memory_id), utc_now())
        return None if found is None else self.ctx.shown(found)

    async def update_memory(
        self,
        agent_id: str,
        memory_id: str,
        *,
        content: str | None = None,
        tags: Iterable[str] | None = None,
        importance: float | None = None,
        metadata: Mapping[str, Any] | None = None,
        content_type: str | None = None,
        expires_at: datetime | None = None,
        clear_expiry: bool = False,
    ) -> Memory:
        """What :meth:`actrone_pg.MemoryManager.update_memory` does (documented there)."""
        v.check_id("agent_id", agent_id)
        v.check_id("memory_id", memory_id)
        limit = self.ctx.config.max_text_chars
        changes: dict[str, Any] = {}
        if content is not None:
            changes["content"] = v.check_text("content", content, limit)
        if tags is not None:
            changes["tags"] = v.check_tags(tags)
        if importance is not None:
            changes["importance"] = v.check_importance(importance)
        if metadata is not None:
            changes["metadata"] = v.check_metadata(metadata, max_chars=limit)
        if content_type is not None:
            changes["content_type"] = v.check_label("content_type", content_type)
        if not isinstance(clear_expiry, bool):
            raise ValidationError(f"clear_expiry must be True or False, got {clear_expiry!r}")
        if clear_expiry and expires_at is not None:
            raise ValidationError(
                "pass either expires_at (a new expiry) or clear_expiry=True (no expiry), not both"
            )
        if expires_at is not None:
            changes["expires_at"] = _check_expiry(expires_at, utc_now())
        if clear_expiry:
            changes["expires_at"] = None
        # The store serialises the updates of one memory and hands each the current version
        # under its lock. The text is embedded before that (the vector is all the lock would
        # wait for): the new content, or the current one as read now, embedded again only if
        # an update that landed meanwhile changed it.
        ctx = self.ctx
        fence = await self._fence(agent_id)
        found = ctx.live(await ctx.store.get_memory(agent_id, memory_id), utc_now())
        if found is None:
            raise MemoryNotFoundError(f"agent {agent_id!r} has no memory {memory_id!r}")
        embedded = changes.get("content", found.content)
        (prepared,) = await ctx.embed([embedded])

        async def build(current: Memory) -> MemoryRecord:
            now = utc_now()
            if ctx.live(current, now) is None:
                raise MemoryNotFoundError(f"agent {agent_id!r} has no memory {memory_id!r}")
            text = changes.get("content", current.content)
            vector = prepared if text == embedded else (await ctx.embed([text]))[0]
            new = replace(
                current,
                **changes,
                embedder=ctx.embedder.name,
                token_count=ctx.count_tokens(text),
                version=current.version + 1,
                valid_from=max(now, current.valid_from or now),
                valid_to=None,
                explain=None,
            )
            return MemoryRecord(new, vector)

        written = await ctx.store.update_memory(agent_id, memory_id, build, fence=fence)
        if written is None:
            raise MemoryNotFoundError(f"agent {agent_id!r} has no memory {memory_id!r}")
        return ctx.shown(written)

    async def memory_history(self, agent_id: str, memory_id: str) -> list[Memory]:
        """What :meth:`actrone_pg.MemoryManager.memory_history` does (documented there)."""
        v.check_id("agent_id", agent_id)
        v.check_id("memory_id", memory_id)
        versions = await self.ctx.store.memory_history(agent_id, memory_id)
        if not versions or self.ctx.live(versions[-1], utc_now()) is None:
            return []
        return [self.ctx.shown(m) for m in versions]

    async def list_memories(
        self,
        agent_id: str,
        *,
        filters: Mapping[str, Any] | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> MemoryPage:
        """What :meth:`actrone_pg.MemoryManager.list_memories` does (documented there)."""
        v.check_id("agent_id", agent_id)
        v.check_limit("limit", limit)
        flt = v.check_filters(filters, max_chars=self.ctx.config.max_text_chars)
        after = None if cursor is None else _decode_cursor(cursor)
        found = await self.ctx.store.list_memories(
            agent_id, now=utc_now(), limit=limit + 1, after=after, filter=flt
        )
        items = found[:limit]
        more = len(found) > limit
        return MemoryPage(
            items=[self.ctx.shown(m) for m in items],
            next_cursor=_encode_cursor(items[-1]) if more else None,
        )

    async def count_memories(self, agent_id: str) -> int:
        """How many memories the agent has."""
        v.check_id("agent_id", agent_id)
        return await self.ctx.store.count_memories(agent_id)

    async def erase_agent(self, agent_id: str) -> None:
        """Remove every turn, session, memory, statistic and lock of the agent.

        Erasure wins over every writer running meanwhile, here or in another process (spec §8):
        once this returns nothing of the agent is left, and a writer it overtook (an inject, an
        update, an import, a consolidation) raises
        :class:`~actrone_pg.errors.LockLostError` (a consolidation, its
        :class:`~actrone_pg.errors.ConsolidationError`) instead of reporting success. Each
        such writer fences its writes (:class:`~actrone_pg.stores.base.Fence`) by the agent's
        write generation or, for a consolidation, its maintenance lock; the store deletes both
        here, and checks the fence with each write. This manager's background consolidations
        of the agent are stopped first.
        """
        v.check_id("agent_id", agent_id)
        if self.before_erase is not None:
            await self.before_erase(agent_id)
        await self.ctx.store.erase_agent(agent_id)

    async def sweep_expired(self, limit: int = 10_000) -> int:
        """What :meth:`actrone_pg.MemoryManager.sweep_expired` does (documented there)."""
        v.check_limit("limit", limit)
        return await self.ctx.store.sweep_expired_memories(limit=limit)


def _encode_cursor(m: Memory) -> str:
    """The opaque cursor after ``m``: its ``(created_at, id)`` key, as URL-safe base64 JSON."""
    key = json.dumps([micros(m.created_at), m.id], ensure_ascii=False).encode("utf-8")
    return base64.urlsafe_b64encode(key).decode("ascii").rstrip("=")


def _decode_cursor(cursor: object) -> tuple[datetime, str]:
    if not isinstance(cursor, str) or not cursor or len(cursor) > 4 * v.MAX_ID_CHARS:
        raise ValidationError("cursor must be a next_cursor string from list_memories")
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        at, memory_id = json.loads(raw.decode("utf-8"))
        when = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=int(at))
        return when, v.check_id("cursor id", memory_id)
    except (ValueError, TypeError, OverflowError, UnicodeDecodeError):
        raise ValidationError(
            "cursor is not one list_memories returned (pass next_cursor as it is)"
        ) from None


def _check_expiry(value: object, now: datetime) -> datetime | None:
    """``expires_at``: ``None`` or an aware datetime after ``now`` (a past one is refused)."""
    if value is None:
        return None
    expires = v.check_datetime("expires_at", value)
    if expires <= now:
        raise ValidationError(
            f"expires_at {expires.isoformat()} is not in the future; a memory that expired"
            " already would never be returned (omit it, or pass a later time)"
        )
    return expires
