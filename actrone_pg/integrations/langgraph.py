"""LangGraph's long-term memory store (``BaseStore``) over actrone_pg (``[langgraph]`` extra).

from actrone_pg.sync import MemoryManager
from actrone_pg.integrations.langgraph import ActroneStore

store = ActroneStore(MemoryManager.create(config), "my-graph", index={"fields": ["text"]})
graph = builder.compile(store=store)      # nodes get it as `store`, or via get_store()

The mapping (docs/integrations.md says the same for users):

- The store belongs to one agent, ``agent_id``: every item is one of its long-term memories, so
  the tenant isolation of the library holds between stores of different agents. A namespace is
  not an agent; it is kept in the memory's metadata, so that searches and listings can span
  namespaces.
- An item is a memory whose id is derived from (namespace, key): a second ``put`` of the same key
  writes a new version of that memory (``update_memory``), and ``memory_history`` shows the old
  values. Its metadata is ``{"namespace": {"0": label, "1": label, ...}, "key": key,
  "value": value}``: the labels by position, so that a namespace prefix is a JSON containment
  filter (spec §9.3) evaluated by the store before ranking.
- The memory's content (what is embedded and searched) is the text of the value's index fields:
  the store's ``index={"fields": [...]}``, or the put's ``index=[...]``, in LangGraph's path
  syntax; ``["$"]`` (the default) is the whole value as JSON. An item put with ``index=False``,
  or whose fields hold no text, is stored with ``content_type="langgraph-unindexed"``: ``get``
  and listings find it, a search with a query does not.
- ``search(prefix, query=...)`` is ``search_memories`` with filters: the item's namespace prefix
  and ``filter`` as metadata containment. A filter value is an exact match (or ``{"$eq": v}``);
  the other operators (``$ne``, ``$gt``, ...) and list or null values have no containment form
  and raise ``ValidationError`` instead of being ignored. Results follow the library's ranking
  (hybrid, admission threshold included) and ``score`` is the score that ranking sorts by.
  ``query=None`` pages through ``list_memories`` instead, newest first.
- ``ttl`` (minutes) sets the memory's ``expires_at``, counted from the put. Reads do not extend
  it (``refresh_ttl`` has no effect): a refresh would be a new version of the memory per read.
  A put without a TTL (LangGraph's "never") over an item that has one removes the expiry
  (``update_memory(..., clear_expiry=True)``); the earlier versions are kept, as for any put.
- A batch runs its reads first, then its writes (the last put of a key wins), as LangGraph's own
  stores do. The new items of a batch land together (``inject_memories``); each update and
  delete is one call of its own.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from actrone_pg import _validation as v
from actrone_pg.errors import (
    ConfigurationError,
    MemoryNotFoundError,
    MissingDependencyError,
    ValidationError,
)
from actrone_pg.integrations._bridge import AnyManager, Bridge
from actrone_pg.manager import MemoryManager
from actrone_pg.models import Memory

try:
    from langgraph.store.base import (
        BaseStore,
        GetOp,
        InvalidNamespaceError,
        Item,
        ListNamespacesOp,
        MatchCondition,
        Op,
        PutOp,
        Result,
        SearchItem,
        SearchOp,
        TTLConfig,
        get_text_at_path,
        tokenize_path,
    )
except ImportError:  # pragma: no cover - exercised by installs without the extra
    raise MissingDependencyError("langgraph", "langgraph") from None

__all__ = ["INDEXED", "UNINDEXED", "ActroneStore", "item_id", "metadata_filter"]

#: ``content_type`` of an item whose text is embedded and searched by query.
INDEXED = "langgraph"
#: ``content_type`` of an item put with ``index=False`` (or without text in its index fields).
UNINDEXED = "langgraph-unindexed"

# Fixed: item ids derive from it, so changing it would orphan every stored item.
_ITEM_NAMESPACE = uuid.UUID("3f0c9d47-5a0e-4c55-9a8e-6c2b1f7d2e41")
# Items read per list_memories call when a search without a query or a listing pages through.
_PAGE = 100
_TTL_KEYS = frozenset({"default_ttl", "refresh_on_read", "omit_expired", "sweep_interval_minutes"})


def item_id(namespace: tuple[str, ...], key: str) -> str:
    """The memory id of the item at (namespace, key): the same for every put of that key."""
    name = json.dumps([list(namespace), key], ensure_ascii=True)
    return str(uuid.uuid5(_ITEM_NAMESPACE, name))


def _positions(labels: Sequence[str], *, wildcard: bool = False) -> dict[str, str]:
    # With ``wildcard`` (list_namespaces' paths) "*" constrains nothing, so it has no entry;
    # elsewhere it is a label like any other, as in LangGraph's own stores.
    return {str(i): label for i, label in enumerate(labels) if not (wildcard and label == "*")}


def _item_of(memory: Memory) -> Item | None:
    """The item a memory holds, or ``None`` if this adapter did not write it.

    Any client can write a memory with ``content_type="langgraph"`` (inject_memory, an MCP
    tool): one without the adapter's metadata, or whose id is not its (namespace, key)'s, is
    not an item and is skipped by every read, never breaking it.
    """
    meta = memory.metadata
    positions, key, value = meta.get("namespace"), meta.get("key"), meta.get("value")
    if not isinstance(positions, Mapping) or not isinstance(key, str):
        return None
    if not isinstance(value, Mapping):
        return None
    labels = [positions.get(str(i)) for i in range(len(positions))]
    if not labels or not all(isinstance(label, str) and label for label in labels):
        return None
    namespace = tuple(str(label) for label in labels)
    if memory.id != item_id(namespace, key):
        return None
    return Item(
        namespace=namespace,
        key=key,
        value=dict(value),
        created_at=memory.created_at,
        updated_at=memory.valid_from or memory.created_at,
    )


def _check_namespace(
    namespace: object, *, what: str = "namespace", put: bool = False
) -> tuple[str, ...]:
    # BaseStore's methods check labels before batching; ops given to batch() directly do not,
    # so the same rules as LangGraph's own are applied here (a dotted label, say, is refused
    # by aget and must not be writable through abatch either).
    if not isinstance(namespace, tuple):
        raise InvalidNamespaceError(f"{what} must be a tuple of strings, got {namespace!r}")
    for label in namespace:
        if not isinstance(label, str) or not label:
            raise InvalidNamespaceError(
                f"{what} {namespace!r}: every label must be a non-empty string"
            )
        if "." in label or "\x00" in label:
            raise InvalidNamespaceError(
                f"{what} {namespace!r}: a label cannot contain a period or a NUL byte"
            )
    if put and namespace and namespace[0] == "langgraph":
        raise InvalidNamespaceError(f'{what} {namespace!r}: the root label cannot be "langgraph"')
    return namespace


def _condition(path: str, value: Any) -> Any:
    if isinstance(value, Mapping):
        operators = [k for k in value if isinstance(k, str) and k.startswith("$")]
        if not operators:
            return {k: _condition(f"{path}.{k}", sub) for k, sub in value.items()}
        if set(value) != {"$eq"}:
            unsupported = sorted(set(operators) - {"$eq"}) or sorted(value)
            raise ValidationError(
                f"filter {path!r}: {', '.join(unsupported)} cannot be mapped onto actrone_pg's "
                "filters, which match exact values (JSON containment); use an exact value or "
                "{'$eq': value} here and compare the rest on the results"
            )
        value = value["$eq"]
        if isinstance(value, Mapping):
            raise ValidationError(
                f"filter {path!r}: {{'$eq': object}} asks for an equal object, but containment "
                "would also match a larger one; give the object's fields as a plain filter"
            )
    if isinstance(value, (list, tuple)):
        raise ValidationError(
            f"filter {path!r}: a list matches only an equal list in LangGraph, but containment "
            "would also match a longer one; filter on a scalar field instead"
        )
    if value is None:
        raise ValidationError(
            f"filter {path!r}: None matches a missing field in LangGraph, which containment "
            "cannot express; filter on a value that is present"
        )
    if not isinstance(value, (str, int, float, bool)):
        raise ValidationError(f"filter {path!r}: {type(value).__name__} is not a JSON value")
    return value


def metadata_filter(filter: Mapping[str, Any] | None) -> dict[str, Any]:
    """LangGraph's ``filter`` on an item's value as the JSON its value must contain.

    Exact values and ``{"$eq": value}`` map onto containment (nested objects too); any other
    operator, a list and ``None`` raise :class:`~actrone_pg.errors.ValidationError`.
    """
    if filter is None:
        return {}
    if not isinstance(filter, Mapping):
        raise ValidationError(f"filter must be a dict, got {type(filter).__name__}")
    return {str(k): _condition(str(k), value) for k, value in filter.items()}


def _matches(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    part = namespace[: len(path)] if condition.match_type == "prefix" else namespace[-len(path) :]
    return all(p in ("*", n) for p, n in zip(path, part, strict=True)) if path else True


def _check_window(limit: object, offset: object) -> tuple[int, int]:
    for name, value in (("limit", limit), ("offset", offset)):
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= v.MAX_INT:
            raise ValidationError(f"{name} must be a whole number in [0, {v.MAX_INT:,}]")
    return cast(int, limit), cast(int, offset)


class ActroneStore(BaseStore):
    """A LangGraph ``BaseStore`` whose items are long-term memories of one agent.

    ``manager`` is an ``actrone_pg.sync.MemoryManager`` (every method, blocking and async) or an
    async ``actrone_pg.MemoryManager`` (only the async ones: ``aget``, ``aput``, ``asearch``,
    ...; use ``ainvoke``/``astream`` on the graph). ``index`` takes LangGraph's ``IndexConfig``
    ``fields`` (default ``["$"]``, the whole value); the vectors are the manager's embedder's, so
    ``embed`` is refused and ``dims``, if given, must be the embedder's. ``ttl`` takes
    ``TTLConfig``'s ``default_ttl`` (minutes); reads do not refresh it. Bad input raises
    ``InvalidNamespaceError`` (LangGraph's) or the library's ``ValidationError``, both
    ``ValueError``; nothing of a rejected batch is written.
    """

    supports_ttl = True

    def __init__(
        self,
        manager: AnyManager,
        agent_id: str,
        *,
        index: Mapping[str, Any] | None = None,
        ttl: TTLConfig | None = None,
    ) -> None:
        self._bridge = Bridge(manager, type(self).__name__)
        self.agent_id = v.check_id("agent_id", agent_id)
        self.fields = self._index_fields(index)
        self.ttl_config = self._ttl(ttl)

    def _index_fields(self, index: Mapping[str, Any] | None) -> list[str]:
        if index is None:
            return ["$"]
        unknown = set(index) - {"fields", "dims", "embed"}
        if unknown:
            raise ConfigurationError("index", f"unknown key(s) {sorted(unknown)}")
        if index.get("embed") is not None:
            raise ConfigurationError(
                "index.embed",
                "ActroneStore embeds with the manager's embedder; choose it with "
                "MemoryConfig(embedding_provider=...) or MemoryManager.create(embedder=...)",
            )
        dims = index.get("dims")
        embedder_dims = self._bridge.async_manager.embedder.dimensions
        if dims is not None and dims != embedder_dims:
            raise ConfigurationError(
                "index.dims", f"the manager's embedder has {embedder_dims} dimensions, not {dims}"
            )
        fields = index.get("fields") or ["$"]
        if isinstance(fields, str) or not all(isinstance(f, str) and f for f in fields):
            raise ConfigurationError("index.fields", "a list of paths such as ['text', 'a.b']")
        for path in fields:
            if path != "$":
                tokenize_path(path)
        return list(fields)

    @staticmethod
    def _ttl(ttl: TTLConfig | None) -> TTLConfig:
        config = dict(ttl or {})
        unknown = set(config) - _TTL_KEYS
        if unknown:
            raise ConfigurationError("ttl", f"unknown key(s) {sorted(unknown)}")
        if config.get("refresh_on_read"):
            raise ConfigurationError(
                "ttl.refresh_on_read",
                "reads do not extend an item's expiry here; the TTL counts from the last put",
            )
        if config.get("sweep_interval_minutes") is not None:
            raise ConfigurationError(
                "ttl.sweep_interval_minutes",
                "expired items are never returned; delete them with `actrone-pg sweep` on a "
                "schedule of yours",
            )
        default = cast("float | None", config.get("default_ttl"))
        if default is not None:
            _expires_at(default)
        return TTLConfig(refresh_on_read=False, omit_expired=True, default_ttl=default)

    # -- BaseStore --
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the operations and return their results in order (reads before writes)."""
        op_list = list(ops)
        return self._bridge.run(lambda mm: self._execute(mm, op_list))

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the operations and return their results in order (reads before writes)."""
        op_list = list(ops)
        return await self._bridge.arun(lambda mm: self._execute(mm, op_list))

    # -- the one implementation, on the async manager --
    async def _execute(self, mm: MemoryManager, ops: Sequence[Op]) -> list[Result]:
        # As LangGraph's own stores do: every read sees the state before the batch's writes,
        # and of several puts to one key the last wins. Everything is checked before any I/O.
        puts: dict[tuple[tuple[str, ...], str], PutOp] = {}
        for op in ops:
            if isinstance(op, PutOp):
                if not _check_namespace(op.namespace, put=True):
                    raise InvalidNamespaceError("an item's namespace cannot be empty")
                puts[(op.namespace, _check_key(op.key))] = op
            elif isinstance(op, GetOp):
                _check_namespace(op.namespace)
                _check_key(op.key)
            elif isinstance(op, SearchOp):
                _check_namespace(op.namespace_prefix, what="namespace_prefix")
                metadata_filter(op.filter)
                _check_window(op.limit, op.offset)
            elif isinstance(op, ListNamespacesOp):
                for condition in op.match_conditions or ():
                    if condition.match_type not in ("prefix", "suffix"):
                        raise ValidationError(f"unknown match_type {condition.match_type!r}")
                    _check_namespace(tuple(condition.path), what=f"{condition.match_type} path")
                _check_window(op.limit, op.offset)
                depth = op.max_depth
                if depth is not None and (
                    isinstance(depth, bool) or not isinstance(depth, int) or depth < 1
                ):
                    raise ValidationError(f"max_depth must be None or at least 1, got {depth!r}")
            else:
                raise ValidationError(f"unknown store operation {type(op).__name__}")
        writes = [self._draft(mm, op) for op in puts.values()]

        results: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                results.append(await self._get(mm, op.namespace, op.key))
            elif isinstance(op, SearchOp):
                results.append(await self._search(mm, op))
            elif isinstance(op, ListNamespacesOp):
                results.append(await self._list_namespaces(mm, op))
            else:
                results.append(None)
        await self._write(mm, writes)
        return results

    def _draft(self, mm: MemoryManager, op: PutOp) -> dict[str, Any]:
        """The memory a put writes (``content`` None: a delete), checked."""
        memory_id = item_id(op.namespace, op.key)
        if op.value is None:
            return {"memory_id": memory_id, "content": None}
        if not isinstance(op.value, Mapping) or not all(isinstance(k, str) for k in op.value):
            raise ValidationError(
                f"the value of {op.key!r} must be a dict with string keys, got "
                f"{type(op.value).__name__}"
            )
        value = dict(op.value)
        limit = mm.config.max_text_chars
        metadata = {"namespace": _positions(op.namespace), "key": op.key, "value": value}
        metadata = v.check_metadata(metadata, max_chars=limit)
        paths = None if op.index is False else (self.fields if op.index is None else op.index)
        texts = [t for path in paths or () for t in get_text_at_path(value, path) if t.strip()]
        if texts:
            content, content_type = "\n".join(texts), INDEXED
        else:
            # A memory has text; this one's is never searched by query (content_type).
            content = json.dumps(value, sort_keys=True, ensure_ascii=False)
            content_type = UNINDEXED
        return {
            "memory_id": memory_id,
            "content": v.check_text("the text to index", content, limit),
            "content_type": content_type,
            "metadata": metadata,
            "expires_at": None if op.ttl is None else _expires_at(op.ttl),
        }

    async def _write(self, mm: MemoryManager, writes: list[dict[str, Any]]) -> None:
        new: list[dict[str, Any]] = []
        for draft in writes:
            if draft["content"] is None:
                await mm.delete_memory(self.agent_id, draft["memory_id"])
                continue
            try:
                await mm.update_memory(
                    self.agent_id,
                    draft["memory_id"],
                    content=draft["content"],
                    content_type=draft["content_type"],
                    metadata=draft["metadata"],
                    expires_at=draft["expires_at"],
                    # update_memory keeps an expiry it is not given; a put without one means
                    # "never".
                    clear_expiry=draft["expires_at"] is None,
                )
            except MemoryNotFoundError:
                new.append({**draft, "source": "langgraph"})
        if new:
            # The new items of the batch land together or not at all.
            await mm.inject_memories(self.agent_id, new)

    async def _get(self, mm: MemoryManager, namespace: tuple[str, ...], key: str) -> Item | None:
        memory = await mm.get_memory(self.agent_id, item_id(namespace, key))
        if memory is None or memory.content_type not in (INDEXED, UNINDEXED):
            return None
        item = _item_of(memory)
        # The id is a hash of (namespace, key): check it is this item, not a colliding one.
        if item is None or (item.namespace, item.key) != (namespace, key):
            return None
        return item

    def _filters(self, prefix: Sequence[str], flt: Mapping[str, Any] | None, query: bool) -> Any:
        contains: dict[str, Any] = {}
        if prefix:
            contains["namespace"] = _positions(prefix)
        value = metadata_filter(flt)
        if value:
            contains["value"] = value
        filters: dict[str, Any] = {"content_types": [INDEXED] if query else [INDEXED, UNINDEXED]}
        if contains:
            filters["metadata"] = contains
        return filters

    async def _search(self, mm: MemoryManager, op: SearchOp) -> list[SearchItem]:
        limit, offset = _check_window(op.limit, op.offset)
        if limit == 0:
            return []
        filters = self._filters(op.namespace_prefix, op.filter, op.query is not None)
        if op.query is not None:
            hits = await mm.search_memories(
                self.agent_id, op.query, offset + limit, explain=True, filters=filters
            )
            found = [(_item_of(m), _score(m)) for m in hits]
            return [_search_item(i, score=x) for i, x in found if i is not None][offset:]
        out: list[SearchItem] = []
        async for item in self._each(mm, filters, offset + limit):
            out.append(_search_item(item))
        return out[offset:]

    async def _list_namespaces(self, mm: MemoryManager, op: ListNamespacesOp) -> list[Any]:
        limit, offset = _check_window(op.limit, op.offset)
        conditions = tuple(op.match_conditions or ())
        contains: dict[str, Any] = {}
        for c in conditions:
            if c.match_type == "prefix":
                contains.setdefault("namespace", {}).update(_positions(c.path, wildcard=True))
        filters: dict[str, Any] = {"content_types": [INDEXED, UNINDEXED]}
        if contains:
            filters["metadata"] = contains
        found: set[tuple[str, ...]] = set()
        async for item in self._each(mm, filters, None):
            namespace = item.namespace
            if all(_matches(c, namespace) for c in conditions):
                found.add(namespace if op.max_depth is None else namespace[: op.max_depth])
        return sorted(found)[offset : offset + limit]

    async def _each(self, mm: MemoryManager, filters: Any, most: int | None) -> AsyncIterator[Item]:
        """The agent's items matching ``filters``, newest first, page by page (at most
        ``most``; memories that are not items are skipped and not counted)."""
        cursor: str | None = None
        seen = 0
        while True:
            size = _PAGE if most is None else min(_PAGE, most - seen)
            page = await mm.list_memories(self.agent_id, filters=filters, limit=size, cursor=cursor)
            for memory in page.items:
                item = _item_of(memory)
                if item is not None:
                    seen += 1
                    yield item
            cursor = page.next_cursor
            if cursor is None or (most is not None and seen >= most):
                return


def _check_key(key: object) -> str:
    if not isinstance(key, str):
        raise ValidationError(f"key must be a string, got {type(key).__name__}")
    return key


def _expires_at(minutes: object) -> datetime:
    most = v.MAX_TTL_SECONDS // 60
    if (
        isinstance(minutes, bool)
        or not isinstance(minutes, (int, float))
        or not 0 < minutes <= most  # also refuses NaN
    ):
        raise ValidationError(f"ttl must lie in (0, {most:,}] minutes (one year), got {minutes!r}")
    return datetime.now(UTC) + timedelta(minutes=minutes)


def _score(memory: Memory) -> float | None:
    if memory.explain is None:
        return None
    if memory.explain.rerank_score is not None:
        return memory.explain.rerank_score
    return memory.explain.fused_score


def _search_item(item: Item, *, score: float | None = None) -> SearchItem:
    return SearchItem(
        item.namespace, item.key, item.value, item.created_at, item.updated_at, score=score
    )
