"""The Redis + Qdrant store: L1 (turns, sessions, locks) in Redis, L2 (memory vectors) in Qdrant.

Layout and reasoning are written up for users in ``docs/redis_qdrant.md``; in short:

* **Redis** holds every session as a list of JSON turns plus the ids of its recent turns (so a
  retried append is a no-op) and a small hash (created / last active, by Redis's clock, and
  the session metadata). Each change is one Lua script, so append + trim + expiry refresh happen
  atomically. Locks are ``SET NX PX`` with a random token, released by a compare-and-delete
  script. Per agent, Redis also keeps the memory index (memory id -> embedder), each memory's
  length and distinct terms, and the BM25 statistics (document frequency per term, total length),
  all changed by one script per write so they never disagree with each other.
* **Qdrant** holds one collection per embedder and dimension, one point per memory (the point id
  is ``uuid5(agent_id, memory_id)``, the payload the memory itself), with a tenant index on
  ``agent_id`` that every query filters on.
* **Ranking** follows :mod:`actrone_pg.ranking` exactly: Qdrant returns the agent's nearest points
  above (slightly below) the threshold; the store takes Qdrant's score as the cosine except where
  two candidates, or a candidate and the threshold, are within 1e-5 — for those it fetches the
  vectors and recomputes the cosine with the reference's own float32 routine — then admits
  exactly, and hands the candidates with the agent's BM25 statistics from Redis to
  :func:`actrone_pg.pipeline.search`. Qdrant's own fusion cannot be used: its RRF has no
  weights and no tie rule, and its BM25 IDF would count the whole collection (every agent), not
  the agent's corpus that spec §3 asks for.

Keys never collide: the agent and session ids are percent-encoded (``:``, ``%``, ``{``, ``*`` ...
all become ``%XX``), and erasure walks a per-agent index of live keys, never ``SCAN`` patterns.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import math
import re
import uuid
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar, cast
from urllib.parse import quote, urlsplit, urlunsplit

import numpy as np
import numpy.typing as npt

from actrone_pg import pipeline
from actrone_pg.errors import (
    MissingDependencyError,
    StoreError,
    StoreUnavailableError,
)
from actrone_pg.models import Memory, SessionInfo, Turn
from actrone_pg.pipeline import Candidates, PackedSearch, SearchRequest
from actrone_pg.ranking import CorpusStats, code_point_ranks, micros, term_counts, tokenize
from actrone_pg.ranking import cosines as _reference_cosines
from actrone_pg.stores.base import MemoryRecord, check_query_dimensions, dimension_mismatch

try:
    import redis.asyncio as aioredis
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import RedisError
    from redis.exceptions import TimeoutError as RedisTimeoutError
except ImportError:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError("redis", "redis") from None
try:
    from qdrant_client import AsyncQdrantClient
    from qdrant_client import models as qm
    from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse
except ImportError:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError("qdrant", "qdrant-client") from None

if TYPE_CHECKING:
    from actrone_pg.config import MemoryConfig

__all__ = ["RedisQdrantStore", "from_config"]

logger = logging.getLogger("actrone_pg.stores.redis_qdrant")

T = TypeVar("T")

# Point ids are uuid5(namespace, agent_id NUL memory_id): deterministic, so a retried write
# overwrites the same point, and tenant-scoped, so agent B passing agent A's memory id addresses
# a different point. Ids cannot contain NUL (the manager rejects control characters).
_POINT_NAMESPACE = uuid.UUID("3b0f7a52-9e64-4c1d-8a7e-5d2c9f4b1e36")

# Qdrant's score for a point and the float32 cosine the store recomputes may differ in the last
# bits (different summation order; measured differences are ≤ 2e-7 for 384-dim unit vectors).
# Candidates are fetched with this much slack below the threshold and then admitted exactly.
_SCORE_SLACK = 1e-4
# Two cosines closer than this may be ordered differently by Qdrant's score and by the reference's
# float32 product; such candidates get their cosine recomputed (see _exact_cosines). Measured:
# local-mode scores vs the reference differ by at most 1.2e-7 (16 dims), 6e-8 (384), 5e-8 (1536)
# over 20 queries x 10,000 unit vectors (python benchmarks/qdrant_score_precision.py).
_TIE_SLACK = 1e-5

# Records per Lua call and per Qdrant upsert: keeps each Redis script well under a millisecond
# per 100 records and each HTTP body small; a larger batch is still all-or-nothing (see upsert).
_REDIS_CHUNK = 500
_QDRANT_CHUNK = 256

# Turn ids remembered per session for idempotent retries (at least 4 × max_turns): a retry
# arrives seconds after the original, thousands of turns is far beyond any retry window, and the
# bound keeps a session that is written to for months from growing without limit.
_TURN_IDS_KEPT = 1000

# Version of the Redis key layout, part of every key. A release that changes key types or meanings
# bumps it: its keys then never meet the old ones (no WRONGTYPE errors), the memory index is
# rebuilt from Qdrant on first search (see rebuild_index), and old keys can be deleted by prefix.
_LAYOUT = "v1"

# Collection names are "<prefix>_<slug>_<8 hex>_<dimension>" with a slug free of underscores, so
# the store can recognise exactly its own collections in a shared Qdrant (another prefix that
# merely starts with ours, such as "<prefix>_x", never matches _OwnCollections).
_SLUG = re.compile(r"[^A-Za-z0-9-]+")

# -- Lua scripts. Each runs atomically inside Redis. Times are Redis's own clock (TIME), in
# microseconds since the epoch (doubles hold them exactly: < 2^53).

# The per-agent keyset is a sorted set: member "s:<session>" or "l:<lock>", score the time (ms)
# at which that key expires. Every write that extends a key updates its score and drops members
# whose keys have expired, so the set holds only live keys and erasure finds them all.

# Shared by the scripts that write a session (needs ``ttl_ms`` set and KEYS[1..3] = turns, tids,
# sess): read Redis's clock, start the session afresh if it has expired, stamp its activity.
_TOUCH_SESSION = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local last = redis.call('HGET', KEYS[3], 'a')
if last and now - tonumber(last) > ttl_ms * 1000 then
  redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
  last = false
end
local stamp = string.format('%.0f', now)
if not last then
  redis.call('HSET', KEYS[3], 'c', stamp)
end
redis.call('HSET', KEYS[3], 'a', stamp)
"""

# KEYS: turns, tids, sess, keyset. ARGV: turn_id, turn_json, max_turns, ttl_ms, keyset member,
# ids_kept. tids is a sorted set of turn ids scored by arrival order; the newest `ids_kept` are
# remembered (far more than any client retries across), so it cannot grow without bound.
_APPEND_TURN = (
    """
local ttl_ms = tonumber(ARGV[4])
"""
    + _TOUCH_SESSION
    + """local added = 0
if not redis.call('ZSCORE', KEYS[2], ARGV[1]) then
  local seq = redis.call('HINCRBY', KEYS[3], 'n', 1)
  redis.call('ZADD', KEYS[2], seq, ARGV[1])
  redis.call('ZREMRANGEBYRANK', KEYS[2], 0, -tonumber(ARGV[6]) - 1)
  redis.call('RPUSH', KEYS[1], ARGV[2])
  redis.call('LTRIM', KEYS[1], -tonumber(ARGV[3]), -1)
  added = 1
end
redis.call('PEXPIRE', KEYS[1], ttl_ms)
redis.call('PEXPIRE', KEYS[2], ttl_ms)
redis.call('PEXPIRE', KEYS[3], ttl_ms)
local now_ms = math.floor(now / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now_ms)
redis.call('ZADD', KEYS[4], now_ms + ttl_ms, ARGV[5])
return added
"""
)

# KEYS: turns, sess. ARGV: limit, ttl_ms. Returns the newest `limit` turns, oldest first.
_RECENT_TURNS = """
local last = redis.call('HGET', KEYS[2], 'a')
if not last then return {} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
if now - tonumber(last) > tonumber(ARGV[2]) * 1000 then return {} end
return redis.call('LRANGE', KEYS[1], -tonumber(ARGV[1]), -1)
"""

# KEYS: turns, sess. ARGV: ttl_ms. Returns {turn_count, field, value, ...} or {} if not live.
_GET_SESSION = """
local last = redis.call('HGET', KEYS[2], 'a')
if not last then return {} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
if now - tonumber(last) > tonumber(ARGV[1]) * 1000 then return {} end
local out = {tostring(redis.call('LLEN', KEYS[1]))}
local h = redis.call('HGETALL', KEYS[2])
for i = 1, #h do out[#out + 1] = h[i] end
return out
"""

# KEYS: turns, tids, sess, keyset. ARGV: ttl_ms, keyset member, then field/value pairs.
_SET_SESSION_METADATA = (
    """
local ttl_ms = tonumber(ARGV[1])
"""
    + _TOUCH_SESSION
    + """for i = 3, #ARGV, 2 do
  redis.call('HSET', KEYS[3], ARGV[i], ARGV[i + 1])
end
redis.call('PEXPIRE', KEYS[1], ttl_ms)
redis.call('PEXPIRE', KEYS[2], ttl_ms)
redis.call('PEXPIRE', KEYS[3], ttl_ms)
local now_ms = math.floor(now / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now_ms)
redis.call('ZADD', KEYS[4], now_ms + ttl_ms, ARGV[2])
return 1
"""
)

# KEYS: turns, tids, sess, keyset. ARGV: keyset member.
_CLEAR_SESSION = """
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
redis.call('ZREM', KEYS[4], ARGV[1])
return 1
"""

# KEYS: lock, keyset. ARGV: token, ttl_ms, keyset member. SET NX PX: Redis's clock expires it.
_ACQUIRE_LOCK = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  local t = redis.call('TIME')
  local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now_ms)
  redis.call('ZADD', KEYS[2], now_ms + tonumber(ARGV[2]), ARGV[3])
  return 1
end
return 0
"""

# KEYS: lock, keyset. ARGV: token, keyset member. Compare-and-delete: only the holder releases.
_RELEASE_LOCK = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('ZREM', KEYS[2], ARGV[2])
  return 1
end
return 0
"""

# KEYS: mem (id -> embedder), doc (id -> "length term term ..."), df (term -> count),
# stats ("len" -> total length). ARGV: triples (memory id, embedder, doc); an empty embedder
# removes the memory. Returns the previous (embedder, doc) of each triple ('' = absent), which is
# exactly the input that undoes the call when replayed in reverse order. Replaying the same call
# gives the same end state, so a retry after a lost reply is harmless.
_SET_ENTRIES = """
local out = {}
local total = 0
local function apply(doc, delta)
  local first = true
  for tok in string.gmatch(doc, '%S+') do
    if first then
      total = total + delta * tonumber(tok)
      first = false
    elseif redis.call('HINCRBY', KEYS[3], tok, delta) <= 0 then
      redis.call('HDEL', KEYS[3], tok)
    end
  end
end
for i = 1, #ARGV, 3 do
  local id, emb, doc = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local old_emb = redis.call('HGET', KEYS[1], id)
  local old_doc = redis.call('HGET', KEYS[2], id)
  if old_doc then apply(old_doc, -1) end
  out[#out + 1] = old_emb or ''
  out[#out + 1] = old_doc or ''
  if emb ~= '' then
    redis.call('HSET', KEYS[1], id, emb)
    redis.call('HSET', KEYS[2], id, doc)
    apply(doc, 1)
  else
    redis.call('HDEL', KEYS[1], id)
    redis.call('HDEL', KEYS[2], id)
  end
end
if total ~= 0 then redis.call('HINCRBY', KEYS[4], 'len', total) end
return out
"""

# KEYS: mem, df, stats. ARGV: embedder, number of ids, the ids, then the query terms. Returns
# {memory count, total length, "1"/"0" per id (indexed under this embedder?), df per term}. One
# string for the whole mask: parsing ~500 separate replies cost more than the rest of the call.
_SEARCH_STATS = """
local n = tonumber(ARGV[2])
local mask = {}
for i = 1, n do
  mask[i] = (redis.call('HGET', KEYS[1], ARGV[2 + i]) == ARGV[1]) and '1' or '0'
end
local out = {redis.call('HLEN', KEYS[1]), redis.call('HGET', KEYS[3], 'len') or '0',
             table.concat(mask)}
for i = 3 + n, #ARGV do
  out[#out + 1] = redis.call('HGET', KEYS[2], ARGV[i]) or '0'
end
return out
"""

# KEYS: keyset, mem, doc, df, stats. ARGV: the agent's key base. Deletes every key the keyset
# names (sessions and locks) and the agent's memory index and statistics.
_ERASE_AGENT = """
local base = ARGV[1]
for _, m in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  local kind, name = string.sub(m, 1, 2), string.sub(m, 3)
  if kind == 's:' then
    redis.call('DEL', base .. 'turns:' .. name, base .. 'tids:' .. name, base .. 'sess:' .. name)
  elseif kind == 'l:' then
    redis.call('DEL', base .. 'lock:' .. name)
  end
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5])
return 1
"""


def _enc(value: str) -> str:
    """Percent-encode an id so that it contains no ':', '{', '}', '*', '?', '%' or space.

    Encoding is injective ('%' itself becomes '%25'), so distinct ids give distinct keys, and
    the result never contains Redis glob or hash-tag characters.
    """
    return quote(value, safe="")


@dataclass(frozen=True, slots=True)
class _AgentKeys:
    """Every Redis key of one agent. The agent is the hash tag: on a cluster all share a slot."""

    base: str

    @classmethod
    def of(cls, prefix: str, agent_id: str) -> _AgentKeys:
        return cls(f"{prefix}:{_LAYOUT}:{{{_enc(agent_id)}}}:")

    def turns(self, s: str) -> str:
        return f"{self.base}turns:{s}"

    def tids(self, s: str) -> str:
        return f"{self.base}tids:{s}"

    def sess(self, s: str) -> str:
        return f"{self.base}sess:{s}"

    def lock(self, n: str) -> str:
        return f"{self.base}lock:{n}"

    @property
    def keyset(self) -> str:
        return f"{self.base}keys"

    @property
    def mem(self) -> str:
        return f"{self.base}mem"

    @property
    def doc(self) -> str:
        return f"{self.base}doc"

    @property
    def df(self) -> str:
        return f"{self.base}df"

    @property
    def stats(self) -> str:
        return f"{self.base}stats"

    def session_keys(self, session_id: str) -> tuple[list[str], str]:
        s = _enc(session_id)
        return [self.turns(s), self.tids(s), self.sess(s), self.keyset], "s:" + s


def _point_id(agent_id: str, memory_id: str) -> str:
    return str(uuid.uuid5(_POINT_NAMESPACE, f"{agent_id}\x00{memory_id}"))


def _doc_entry(content: str) -> str:
    """``"length term term ..."``: what the BM25 statistics need to add or remove a memory."""
    tf, length = term_counts(content)
    return " ".join([str(length), *tf.keys()])


def _redact(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)[-1]
    user = f"{parts.username}:***@" if parts.username else ":***@"
    return urlunsplit(parts._replace(netloc=user + netloc))


def _micros_to_dt(value: str) -> datetime:
    return datetime.fromtimestamp(int(value) / 1_000_000, tz=UTC)


def _turn_to_json(turn: Turn) -> str:
    return json.dumps(
        {
            "id": turn.id,
            "agent_id": turn.agent_id,
            "session_id": turn.session_id,
            "user_message": turn.user_message,
            "assistant_message": turn.assistant_message,
            "tool_results": turn.tool_results,
            "created_at": turn.created_at.isoformat(),
            "token_count": turn.token_count,
        },
        ensure_ascii=False,
    )


def _turn_from_json(text: str) -> Turn:
    d = json.loads(text)
    return Turn(
        id=d["id"],
        agent_id=d["agent_id"],
        session_id=d["session_id"],
        user_message=d["user_message"],
        assistant_message=d["assistant_message"],
        tool_results=d["tool_results"],
        created_at=datetime.fromisoformat(d["created_at"]),
        token_count=int(d["token_count"]),
    )


def _payload(memory: Memory) -> dict[str, Any]:
    return {
        "agent_id": memory.agent_id,
        "memory_id": memory.id,
        "session_id": memory.session_id,
        "content": memory.content,
        "content_type": memory.content_type,
        "importance": memory.importance,
        "tags": list(memory.tags),
        "source": memory.source,
        "sensitivity": memory.sensitivity,
        "created_at": memory.created_at.isoformat(),
        "metadata": memory.metadata,
        "embedder": memory.embedder,
        "token_count": memory.token_count,
    }


def _memory_from_payload(p: dict[str, Any]) -> Memory:
    return Memory(
        id=p["memory_id"],
        agent_id=p["agent_id"],
        session_id=p["session_id"],
        content=p["content"],
        content_type=p["content_type"],
        importance=float(p["importance"]),
        tags=tuple(p["tags"]),
        source=p["source"],
        sensitivity=p["sensitivity"],
        created_at=datetime.fromisoformat(p["created_at"]),
        metadata=dict(p["metadata"]),
        embedder=p["embedder"],
        token_count=int(p["token_count"]),
    )


def _agent_filter(agent_id: str) -> qm.Filter:
    return qm.Filter(must=[qm.FieldCondition(key="agent_id", match=qm.MatchValue(value=agent_id))])


@dataclass(frozen=True, slots=True)
class _Prior:
    """What a memory was before a write touched it ('' = it did not exist)."""

    agent_id: str
    memory_id: str
    embedder: str
    doc: str


class RedisQdrantStore:
    """L1 in Redis, L2 in Qdrant, ranking identical to the in-memory reference.

    Build it with :func:`from_config` (or ``MemoryConfig(backend="redis_qdrant")``); call
    :meth:`setup` before use. ``qdrant_url`` may be an ``http(s)://`` URL, ``":memory:"`` or a
    directory path (the last two use qdrant-client's embedded local mode). ``prefix`` (from
    ``MemoryConfig.qdrant_collection_prefix``) starts every Redis key and every collection name.
    """

    backend = "redis_qdrant"

    def __init__(
        self,
        *,
        redis_url: str = "redis://localhost:6379",
        qdrant_url: str = "http://localhost:6333",
        qdrant_api_key: str | None = None,
        prefix: str = "actrone",
        redis_timeout: float = 5.0,
        qdrant_timeout: float = 10.0,
        redis_pool_size: int = 20,
    ) -> None:
        self._redis_url = redis_url
        self._qdrant_url = qdrant_url
        self._qdrant_api_key = qdrant_api_key
        self._prefix = prefix
        self._redis_timeout = redis_timeout
        self._qdrant_timeout = qdrant_timeout
        self._pool_size = redis_pool_size
        self._redis: aioredis.Redis | None = None
        self._qdrant: AsyncQdrantClient | None = None
        self._scripts: dict[str, Any] = {}
        # embedder -> dimension, as registered in Redis (never changes once set)
        self._dims: dict[str, int] = {}
        self._collections: set[str] = set()  # created or checked by _ensure_collection
        self._known: set[str] = set()  # seen to exist (reads)

    @property
    def is_local_qdrant(self) -> bool:
        """True when Qdrant runs embedded in this process (``":memory:"`` or a path)."""
        return not self._qdrant_url.startswith(("http://", "https://"))

    @property
    def _dims_key(self) -> str:
        return f"{self._prefix}:{_LAYOUT}:dims"

    # -- lifecycle --
    async def setup(self) -> None:
        """Create the clients and check that both servers answer (StoreUnavailableError if not)."""
        if self._redis is None:
            # A blocking pool: when every connection is busy a caller waits (up to the timeout)
            # instead of failing with "Too many connections". No client-side retries: the
            # pool already replaces a connection that the server closed (it checks each one on
            # checkout), and retrying would multiply the time a caller waits for an error.
            pool = aioredis.BlockingConnectionPool.from_url(
                self._redis_url,
                max_connections=self._pool_size,
                timeout=self._redis_timeout,
                socket_timeout=self._redis_timeout,
                socket_connect_timeout=self._redis_timeout,
                retry=Retry(NoBackoff(), 0),
                decode_responses=True,
            )
            self._redis = aioredis.Redis.from_pool(pool)
            for name, src in (
                ("append", _APPEND_TURN),
                ("recent", _RECENT_TURNS),
                ("get_session", _GET_SESSION),
                ("set_meta", _SET_SESSION_METADATA),
                ("clear", _CLEAR_SESSION),
                ("acquire", _ACQUIRE_LOCK),
                ("release", _RELEASE_LOCK),
                ("set_entries", _SET_ENTRIES),
                ("erase", _ERASE_AGENT),
                ("search_stats", _SEARCH_STATS),
            ):
                # register_script runs EVALSHA and reloads the script after a server restart.
                self._scripts[name] = self._redis.register_script(src)
        if self._qdrant is None:
            if self._qdrant_url == ":memory:":
                self._qdrant = AsyncQdrantClient(location=":memory:")
            elif self.is_local_qdrant:
                self._qdrant = AsyncQdrantClient(path=self._qdrant_url)
            else:
                self._qdrant = AsyncQdrantClient(
                    url=self._qdrant_url,
                    api_key=self._qdrant_api_key,
                    timeout=max(1, math.ceil(self._qdrant_timeout)),
                    check_compatibility=False,
                )
        try:
            await self._r(self._redis.ping())
            await self._q(self._qdrant.get_collections())
        except BaseException:
            # Do not keep a half-built store: a local-mode Qdrant on a path holds a file lock.
            await self.close()
            raise

    async def close(self) -> None:
        """Close both clients. Calling it twice is harmless."""
        redis_client, self._redis = self._redis, None
        qdrant_client, self._qdrant = self._qdrant, None
        self._scripts.clear()
        if redis_client is not None:
            await redis_client.aclose()
        if qdrant_client is not None:
            await qdrant_client.close()

    # -- error mapping --
    def _client_r(self) -> aioredis.Redis:
        if self._redis is None:
            raise StoreError("the store is not set up (call setup()) or already closed")
        return self._redis

    def _client_q(self) -> AsyncQdrantClient:
        if self._qdrant is None:
            raise StoreError("the store is not set up (call setup()) or already closed")
        return self._qdrant

    async def _r(self, aw: Awaitable[T]) -> T:
        """Await a Redis call; connection trouble becomes StoreUnavailableError in time."""
        try:
            async with asyncio.timeout(self._redis_timeout):
                return await aw
        except (RedisConnectionError, RedisTimeoutError, TimeoutError, OSError) as exc:
            raise StoreUnavailableError(
                f"Redis at {_redact(self._redis_url)} did not answer within "
                f"{self._redis_timeout:g} s ({type(exc).__name__}: {exc}); check that it is "
                "running and reachable, or raise MemoryConfig.redis_timeout"
            ) from None
        except RedisError as exc:
            raise StoreError(f"Redis failed: {exc}") from exc

    async def _q(self, aw: Awaitable[T]) -> T:
        """Await a Qdrant call; connection trouble becomes StoreUnavailableError."""
        try:
            async with asyncio.timeout(self._qdrant_timeout):
                return await aw
        except (ResponseHandlingException, TimeoutError, OSError) as exc:
            raise StoreUnavailableError(
                f"Qdrant at {self._qdrant_url} did not answer within {self._qdrant_timeout:g} s "
                f"({type(exc).__name__}: {exc}); check that it is running and reachable, or "
                "raise MemoryConfig.qdrant_timeout"
            ) from None
        except UnexpectedResponse as exc:
            if exc.status_code is not None and exc.status_code >= 500:
                raise StoreUnavailableError(
                    f"Qdrant at {self._qdrant_url} answered {exc.status_code}; retry later"
                ) from None
            raise StoreError(f"Qdrant refused the request: {exc}") from exc

    async def _hget(self, key: str, field: str) -> str | None:
        value = await self._r(self._client_r().hget(key, field))
        return None if value is None else str(value)

    async def _script(self, name: str, keys: Sequence[str], args: Sequence[Any]) -> Any:
        self._client_r()
        return await self._r(self._scripts[name](keys=list(keys), args=list(args)))

    # -- L1 --
    async def append_turn(self, turn: Turn, *, max_turns: int, ttl_seconds: float) -> None:
        """Append (idempotent by id), trim and refresh the expiry in one Lua script."""
        keys, member = _AgentKeys.of(self._prefix, turn.agent_id).session_keys(turn.session_id)
        await self._script(
            "append",
            keys,
            [
                turn.id,
                _turn_to_json(turn),
                max_turns,
                _ttl_ms(ttl_seconds),
                member,
                max(_TURN_IDS_KEPT, 4 * max_turns),
            ],
        )

    async def recent_turns(
        self, agent_id: str, session_id: str, *, limit: int, ttl_seconds: float
    ) -> list[Turn]:
        """The newest ``limit`` turns of a live session, oldest first."""
        keys, _ = _AgentKeys.of(self._prefix, agent_id).session_keys(session_id)
        raw = await self._script("recent", [keys[0], keys[2]], [limit, _ttl_ms(ttl_seconds)])
        return [_turn_from_json(t) for t in raw]

    async def get_session(
        self, agent_id: str, session_id: str, *, ttl_seconds: float
    ) -> SessionInfo | None:
        """Turn count, creation and last activity (Redis's clock) and metadata of a live session."""
        keys, _ = _AgentKeys.of(self._prefix, agent_id).session_keys(session_id)
        raw = await self._script("get_session", [keys[0], keys[2]], [_ttl_ms(ttl_seconds)])
        if not raw:
            return None
        fields = dict(zip(raw[1::2], raw[2::2], strict=True))
        metadata = {k[2:]: json.loads(v) for k, v in fields.items() if k.startswith("m:")}
        return SessionInfo(
            agent_id=agent_id,
            session_id=session_id,
            turn_count=int(raw[0]),
            created_at=_micros_to_dt(fields["c"]),
            last_active_at=_micros_to_dt(fields["a"]),
            metadata=metadata,
        )

    async def set_session_metadata(
        self, agent_id: str, session_id: str, metadata: dict[str, Any], *, ttl_seconds: float
    ) -> None:
        """Merge ``metadata`` into the session (one hash field per key), creating it if needed."""
        keys, member = _AgentKeys.of(self._prefix, agent_id).session_keys(session_id)
        args: list[Any] = [_ttl_ms(ttl_seconds), member]
        for k, val in metadata.items():
            args.extend(["m:" + k, json.dumps(val, ensure_ascii=False)])
        await self._script("set_meta", keys, args)

    async def clear_session(self, agent_id: str, session_id: str) -> None:
        """Delete the session's turns, turn ids and bookkeeping."""
        keys, member = _AgentKeys.of(self._prefix, agent_id).session_keys(session_id)
        await self._script("clear", keys, [member])

    async def sweep_expired_sessions(self, *, ttl_seconds: float, limit: int) -> int:
        """Nothing to do: every key of a session carries its TTL and Redis removes it."""
        return 0

    async def acquire_lock(self, agent_id: str, name: str, holder: str, ttl_seconds: float) -> bool:
        """``SET NX PX``: one winner among concurrent callers; Redis expires it after the TTL."""
        ak = _AgentKeys.of(self._prefix, agent_id)
        n = _enc(name)
        got = await self._script(
            "acquire", [ak.lock(n), ak.keyset], [holder, _ttl_ms(ttl_seconds), "l:" + n]
        )
        return bool(int(got))

    async def release_lock(self, agent_id: str, name: str, holder: str) -> bool:
        """Compare-and-delete: only the holder of a live lock can release it."""
        ak = _AgentKeys.of(self._prefix, agent_id)
        n = _enc(name)
        done = await self._script("release", [ak.lock(n), ak.keyset], [holder, "l:" + n])
        return bool(int(done))

    # -- embedders, dimensions, collections --
    def _collection(self, embedder: str, dim: int) -> str:
        slug = _SLUG.sub("-", embedder)[:48]
        digest = hashlib.blake2b(embedder.encode("utf-8"), digest_size=4).hexdigest()
        return f"{self._prefix}_{slug}_{digest}_{dim}"

    async def _registered_dim(self, embedder: str) -> int | None:
        """The embedder's dimension: in-process cache, else Redis, else Qdrant's collections.

        The last step re-registers a dimension Redis has lost, so that neither a search nor a
        write with another dimension can miss the vectors Qdrant still holds.
        """
        dim = self._dims.get(embedder)
        if dim is not None:
            return dim
        raw = await self._hget(self._dims_key, embedder)
        if raw is not None:
            dim = int(raw)
        else:
            stem = self._collection(embedder, 0)[:-1]  # "<prefix>_<slug>_<hash>_"
            found = [d for name, d in await self._own_collections() if name.startswith(stem)]
            if not found:
                return None
            dim = found[0]
            await self._r(self._client_r().hsetnx(self._dims_key, embedder, dim))
        self._dims[embedder] = dim
        return dim

    async def _own_collections(self) -> list[tuple[str, int]]:
        """(name, dimension) of every collection of this store's prefix in Qdrant."""
        own = re.compile(
            rf"^{re.escape(self._prefix)}_[A-Za-z0-9-]{{0,48}}_[0-9a-f]{{8}}_([0-9]+)$"
        )
        response = await self._q(self._client_q().get_collections())
        out = []
        for c in response.collections:
            m = own.match(c.name)
            if m:
                out.append((c.name, int(m.group(1))))
        return sorted(out)

    async def _register_dim(self, embedder: str, dim: int) -> None:
        r = self._client_r()
        await self._r(r.hsetnx(self._dims_key, embedder, dim))
        raw = await self._hget(self._dims_key, embedder)
        have = int(raw) if raw is not None else dim
        if have != dim:  # another process registered a different dimension first
            raise dimension_mismatch(embedder, have, dim)
        self._dims[embedder] = dim

    async def _ensure_collection(self, embedder: str, dim: int) -> str:
        name = self._collection(embedder, dim)
        if name in self._collections:
            return name
        q = self._client_q()
        if not await self._q(q.collection_exists(name)):
            try:
                # Dot product on unit vectors is the cosine; unlike Distance.COSINE it stores the
                # vectors unchanged (no re-normalisation), so the vectors read back are the exact
                # float32 values the reference store multiplies. m=0 + payload_m builds per-tenant
                # graphs only (Qdrant's multitenancy recipe); searches are exact anyway.
                await self._q(
                    q.create_collection(
                        name,
                        vectors_config=qm.VectorParams(size=dim, distance=qm.Distance.DOT),
                        hnsw_config=qm.HnswConfigDiff(m=0, payload_m=16),
                    )
                )
            except (StoreError, ValueError):
                # Lost a creation race with another writer: fine if it exists now.
                if not await self._q(q.collection_exists(name)):
                    raise
        if not self.is_local_qdrant:
            # Idempotent on the server; asked once per process and collection so that a
            # collection whose creator died before this step still gets its tenant index.
            # Local mode has no payload indexes (and warns if asked for one).
            await self._q(
                q.create_payload_index(
                    name,
                    field_name="agent_id",
                    field_schema=qm.KeywordIndexParams(
                        type=qm.KeywordIndexType.KEYWORD, is_tenant=True
                    ),
                    wait=True,
                )
            )
        self._collections.add(name)
        return name

    async def _existing_collection(self, embedder: str, dim: int) -> str | None:
        name = self._collection(embedder, dim)
        if name in self._collections or name in self._known:
            return name
        if await self._q(self._client_q().collection_exists(name)):
            self._known.add(name)  # exists; _ensure_collection still checks its tenant index
            return name
        return None

    # -- L2 writes --
    async def upsert_memories(self, records: Sequence[MemoryRecord]) -> None:
        """Insert or replace, all or none.

        Order: every dimension is checked first (a mismatch writes nothing); then the Redis index
        and statistics change in Lua scripts that return each memory's previous state; then the
        points are written to Qdrant with ``wait=True``. If Qdrant fails, the points this call
        wrote are removed or restored from copies read beforehand and the Redis changes are
        undone, and the error is raised. If that compensation itself fails (both servers down at
        once) the original error is still raised and the log names the affected agents and ids.
        """
        if not records:
            return
        batch_dims: dict[str, int] = {}
        for rec in records:
            name, size = rec.memory.embedder, int(rec.vector.shape[0])
            if batch_dims.setdefault(name, size) != size:
                raise dimension_mismatch(name, batch_dims[name], size)
        registered = {name: await self._registered_dim(name) for name in batch_dims}
        for name, size in batch_dims.items():
            have = registered[name]
            if have is not None and have != size:
                raise dimension_mismatch(name, have, size)
        collections = {
            name: await self._ensure_collection(name, size) for name, size in batch_dims.items()
        }
        for name, size in batch_dims.items():
            if registered[name] is None:
                await self._register_dim(name, size)

        priors = await self._apply_entries(
            [
                (r.memory.agent_id, r.memory.id, r.memory.embedder, _doc_entry(r.memory.content))
                for r in records
            ]
        )
        copies: dict[tuple[str, str], qm.Record] = {}
        try:
            copies = await self._copy_replaced(records, priors, collections)
            for coll, points in self._points_by_collection(records, collections).items():
                for start in range(0, len(points), _QDRANT_CHUNK):
                    chunk = points[start : start + _QDRANT_CHUNK]
                    await self._q(self._client_q().upsert(coll, points=chunk, wait=True))
        except BaseException:
            await self._undo_upsert(records, priors, collections, copies)
            raise
        await self._drop_moved(records, priors)

    def _points_by_collection(
        self, records: Sequence[MemoryRecord], collections: dict[str, str]
    ) -> dict[str, list[qm.PointStruct]]:
        out: dict[str, list[qm.PointStruct]] = {}
        for rec in records:
            m = rec.memory
            out.setdefault(collections[m.embedder], []).append(
                qm.PointStruct(
                    id=_point_id(m.agent_id, m.id),
                    vector=np.asarray(rec.vector, dtype=np.float32).tolist(),
                    payload=_payload(m),
                )
            )
        return out

    async def _apply_entries(self, entries: list[tuple[str, str, str, str]]) -> list[_Prior]:
        """Set (agent, id) -> (embedder, doc) in Redis; '' embedder deletes.

        Returns each entry's prior state, in the order of ``entries``. On failure part-way, the
        chunks already applied are undone before the error is raised.
        """
        by_agent: dict[str, list[int]] = {}
        for pos, entry in enumerate(entries):
            by_agent.setdefault(entry[0], []).append(pos)
        result: list[_Prior | None] = [None] * len(entries)
        applied: list[_Prior] = []  # in the order the scripts ran, for an exact undo
        try:
            for agent_id, positions in by_agent.items():
                ak = _AgentKeys.of(self._prefix, agent_id)
                for start in range(0, len(positions), _REDIS_CHUNK):
                    chunk = positions[start : start + _REDIS_CHUNK]
                    args = [x for pos in chunk for x in entries[pos][1:]]
                    old = await self._script("set_entries", [ak.mem, ak.doc, ak.df, ak.stats], args)
                    for j, pos in enumerate(chunk):
                        prior = _Prior(agent_id, entries[pos][1], old[2 * j], old[2 * j + 1])
                        result[pos] = prior
                        applied.append(prior)
        except BaseException:
            await self._restore_entries(applied)
            raise
        return [p for p in result if p is not None]

    async def _restore_entries(self, priors: list[_Prior]) -> None:
        """Replay priors in reverse order: undoes :meth:`_apply_entries` exactly.

        Called while another error propagates, so a failure here is logged, not raised.
        """
        if not priors:
            return
        # Agents are independent; within one agent the script applies triples in order, so
        # chunks of the reversed sequence keep the exact reverse order.
        by_agent: dict[str, list[_Prior]] = {}
        for p in reversed(priors):
            by_agent.setdefault(p.agent_id, []).append(p)
        try:
            for agent_id, items in by_agent.items():
                ak = _AgentKeys.of(self._prefix, agent_id)
                for start in range(0, len(items), _REDIS_CHUNK):
                    args = [
                        x
                        for p in items[start : start + _REDIS_CHUNK]
                        for x in (p.memory_id, p.embedder, p.doc)
                    ]
                    await self._script("set_entries", [ak.mem, ak.doc, ak.df, ak.stats], args)
        except StoreError:
            logger.error(
                "could not undo the Redis index of %d memories after a failed write "
                "(agents %s); their BM25 statistics may be off until they are written again",
                len(priors),
                sorted({p.agent_id for p in priors}),
            )

    async def _copy_replaced(
        self,
        records: Sequence[MemoryRecord],
        priors: list[_Prior],
        collections: dict[str, str],
    ) -> dict[tuple[str, str], qm.Record]:
        """Copies of the points this write will overwrite in place (to restore on failure)."""
        wanted: dict[str, list[str]] = {}
        for rec, prior in zip(records, priors, strict=True):
            if prior.embedder == rec.memory.embedder:
                coll = collections[rec.memory.embedder]
                wanted.setdefault(coll, []).append(_point_id(rec.memory.agent_id, rec.memory.id))
        copies: dict[tuple[str, str], qm.Record] = {}
        for coll, ids in wanted.items():
            found = await self._q(
                self._client_q().retrieve(coll, ids=ids, with_payload=True, with_vectors=True)
            )
            for point in found:
                copies[(coll, str(point.id))] = point
        return copies

    async def _undo_upsert(
        self,
        records: Sequence[MemoryRecord],
        priors: list[_Prior],
        collections: dict[str, str],
        copies: dict[tuple[str, str], qm.Record],
    ) -> None:
        try:
            q = self._client_q()
            restore: dict[str, list[qm.PointStruct]] = {}
            remove: dict[str, list[qm.ExtendedPointId]] = {}
            for rec in records:
                coll = collections[rec.memory.embedder]
                pid = _point_id(rec.memory.agent_id, rec.memory.id)
                copy = copies.get((coll, pid))
                if copy is not None:
                    restore.setdefault(coll, []).append(
                        qm.PointStruct(id=pid, vector=cast(Any, copy.vector), payload=copy.payload)
                    )
                else:
                    remove.setdefault(coll, []).append(pid)
            for coll, pids in remove.items():
                await self._q(
                    q.delete(coll, points_selector=qm.PointIdsList(points=pids), wait=True)
                )
            for coll, pts in restore.items():
                await self._q(q.upsert(coll, points=pts, wait=True))
        except StoreError:
            logger.error(
                "could not undo the Qdrant points of a failed write of %d memories; ids: %s",
                len(records),
                [r.memory.id for r in records][:20],
            )
        await self._restore_entries(priors)

    async def _drop_moved(self, records: Sequence[MemoryRecord], priors: list[_Prior]) -> None:
        """Delete old points of memories rewritten under another embedder (best effort).

        A leftover point is harmless: search keeps only points whose Redis index entry names the
        collection's embedder.
        """
        for rec, prior in zip(records, priors, strict=True):
            if prior.embedder and prior.embedder != rec.memory.embedder:
                dim = await self._registered_dim(prior.embedder)
                if dim is None:
                    continue
                try:
                    await self._q(
                        self._client_q().delete(
                            self._collection(prior.embedder, dim),
                            points_selector=qm.PointIdsList(
                                points=[_point_id(prior.agent_id, prior.memory_id)]
                            ),
                            wait=True,
                        )
                    )
                except StoreError as exc:
                    logger.warning("left a stale point of memory %r: %s", prior.memory_id, exc)

    async def _index_entry(self, agent_id: str, memory_id: str) -> str | None:
        """The embedder the agent's index names for ``memory_id``.

        On a miss, if the agent's whole index is empty while Qdrant holds points of the agent
        (Redis lost its data), the index is rebuilt first; a miss in a non-empty index costs
        nothing more.
        """
        ak = _AgentKeys.of(self._prefix, agent_id)
        embedder = await self._hget(ak.mem, memory_id)
        if embedder is None and await self._rebuild_if_lost(agent_id):
            embedder = await self._hget(ak.mem, memory_id)
        return embedder

    async def _rebuild_if_lost(self, agent_id: str) -> bool:
        """Rebuild the agent's index if it is empty but Qdrant has the agent's points."""
        ak = _AgentKeys.of(self._prefix, agent_id)
        if int(await self._r(self._client_r().hlen(ak.mem))) > 0:
            return False
        for coll, _ in await self._own_collections():
            found = await self._q(
                self._client_q().count(coll, count_filter=_agent_filter(agent_id), exact=True)
            )
            if found.count:
                await self.rebuild_index(agent_id)
                return True
        return False

    async def get_memory(self, agent_id: str, memory_id: str) -> Memory | None:
        """The agent's memory from its Qdrant point (the Redis index says which collection)."""
        embedder = await self._index_entry(agent_id, memory_id)
        if embedder is None:
            return None
        dim = await self._registered_dim(embedder)
        if dim is None:
            return None
        points = await self._q(
            self._client_q().retrieve(
                self._collection(embedder, dim),
                ids=[_point_id(agent_id, memory_id)],
                with_payload=True,
                with_vectors=False,
            )
        )
        for point in points:
            payload = point.payload or {}
            if payload.get("agent_id") == agent_id and payload.get("memory_id") == memory_id:
                return _memory_from_payload(payload)
        return None

    async def delete_memory(self, agent_id: str, memory_id: str) -> bool:
        """Delete the point (tenant filter + id), then the index entry and its statistics.

        In this order a failure between the two leaves an index entry without a point, which
        search cannot return and a retried delete removes.
        """
        ak = _AgentKeys.of(self._prefix, agent_id)
        embedder = await self._index_entry(agent_id, memory_id)
        if embedder is None:
            return False
        dim = await self._registered_dim(embedder)
        if dim is not None and await self._existing_collection(embedder, dim):
            selector = qm.FilterSelector(
                filter=qm.Filter(
                    must=[
                        qm.HasIdCondition(has_id=[_point_id(agent_id, memory_id)]),
                        qm.FieldCondition(key="agent_id", match=qm.MatchValue(value=agent_id)),
                    ]
                )
            )
            await self._q(
                self._client_q().delete(
                    self._collection(embedder, dim), points_selector=selector, wait=True
                )
            )
        old = await self._script(
            "set_entries", [ak.mem, ak.doc, ak.df, ak.stats], [memory_id, "", ""]
        )
        return bool(old[0])

    async def count_memories(self, agent_id: str) -> int:
        """Size of the agent's memory index in Redis (rebuilt first if Redis lost it)."""
        ak = _AgentKeys.of(self._prefix, agent_id)
        n = int(await self._r(self._client_r().hlen(ak.mem)))
        if n == 0 and await self._rebuild_if_lost(agent_id):
            n = int(await self._r(self._client_r().hlen(ak.mem)))
        return n

    async def erase_agent(self, agent_id: str) -> None:
        """Delete the agent's points in every collection, then all its Redis keys.

        Points go first: if Redis fails afterwards, a retry finds nothing left in Qdrant and
        finishes the job; no other agent's key or point is touched (the filter and the keys
        carry the agent id).
        """
        # Every collection of this prefix that exists, not only those the Redis registry names:
        # after a Redis loss the registry may be empty while Qdrant still holds the points.
        for coll, _ in await self._own_collections():
            await self._q(
                self._client_q().delete(
                    coll,
                    points_selector=qm.FilterSelector(filter=_agent_filter(agent_id)),
                    wait=True,
                )
            )
        ak = _AgentKeys.of(self._prefix, agent_id)
        await self._script("erase", [ak.keyset, ak.mem, ak.doc, ak.df, ak.stats], [ak.base])

    async def rebuild_index(self, agent_id: str) -> int:
        """Recompute the agent's Redis memory index and BM25 statistics from its Qdrant points.

        Needed only if Redis lost data that Qdrant kept (a Redis without persistence restarted,
        or restored from an older snapshot); :meth:`search` calls it by itself when it finds
        points for an agent whose index is empty. Returns the number of memories indexed.
        """
        entries: list[tuple[str, str, str, str]] = []
        for coll, dim in await self._own_collections():
            offset: qm.ExtendedPointId | None = None
            while True:
                points, offset = await self._q(
                    self._client_q().scroll(
                        coll,
                        scroll_filter=_agent_filter(agent_id),
                        limit=1000,
                        offset=offset,
                        with_payload=["memory_id", "content", "embedder"],
                        with_vectors=False,
                    )
                )
                for p in points:
                    payload = p.payload or {}
                    embedder = str(payload["embedder"])
                    if self._collection(embedder, dim) != coll:
                        continue  # not a point this store wrote
                    if await self._registered_dim(embedder) is None:
                        await self._register_dim(embedder, dim)
                    entries.append(
                        (agent_id, payload["memory_id"], embedder, _doc_entry(payload["content"]))
                    )
                if offset is None:
                    break
        ak = _AgentKeys.of(self._prefix, agent_id)
        await self._r(self._client_r().delete(ak.mem, ak.doc, ak.df, ak.stats))
        await self._apply_entries(entries)
        logger.warning("rebuilt the Redis index of agent %r: %d memories", agent_id, len(entries))
        return len(entries)

    # -- L2 search --
    async def search(self, request: SearchRequest) -> PackedSearch:
        """The agent's Qdrant candidates, with exact cosines, ranked by the pipeline."""
        nothing = PackedSearch(hits=[], ranked=0, tokens=0)
        dim = await self._registered_dim(request.embedder)
        if dim is None:
            return nothing
        check_query_dimensions(request.embedder, dim, request.vector)
        coll = await self._existing_collection(request.embedder, dim)
        if coll is None:
            return nothing
        query = np.asarray(request.vector, dtype=np.float32)
        ak = _AgentKeys.of(self._prefix, request.agent_id)
        terms = list(request.terms)
        fetch = request.limit + max(16, request.limit // 8)
        rebuilt = False
        while True:
            response = await self._q(
                self._client_q().query_points(
                    coll,
                    query=query.tolist(),
                    query_filter=_agent_filter(request.agent_id),
                    limit=fetch,
                    score_threshold=request.threshold - _SCORE_SLACK,
                    with_payload=True,
                    with_vectors=False,
                    **self._exact(),
                )
            )
            points = response.points
            ids = [str((p.payload or {}).get("memory_id", "")) for p in points]
            n_docs, total_length, indexed, dfs = await self._search_stats(
                ak, request.embedder, ids, terms
            )
            if n_docs == 0 and points and not rebuilt:
                # Points without any index entry: Redis lost the index (see rebuild_index).
                await self.rebuild_index(request.agent_id)
                rebuilt = True
                continue
            kept = [
                p
                for p, ok in zip(points, indexed, strict=True)
                if ok and (p.payload or {}).get("agent_id") == request.agent_id
            ]
            cos = await self._exact_cosines(coll, query, kept, request.threshold)
            admitted = np.flatnonzero(cos >= request.threshold)
            if len(points) < fetch:
                break  # Qdrant returned every point above threshold - slack
            if admitted.size >= request.limit:
                kth = float(np.sort(cos[admitted])[::-1][request.limit - 1])
                floor = min(float(p.score) for p in points)
                if kth > floor + _SCORE_SLACK:
                    break  # nothing unfetched can reach the limit-th admitted cosine
            fetch *= 2
        payloads = [p.payload or {} for p in kept]
        contents = [str(p["content"]) for p in payloads]

        def tf(
            idx: npt.NDArray[np.intp], terms: Sequence[str]
        ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
            tokens = [tokenize(contents[i]) for i in idx.tolist()]
            counts = [[t.count(term) for t in tokens] for term in terms]
            lengths = np.array([len(t) for t in tokens], dtype=np.float64)
            return np.array(counts, dtype=np.float64).reshape(len(terms), idx.size), lengths

        candidates = Candidates(
            cosine=cos,
            created_us=np.array(
                [micros(datetime.fromisoformat(p["created_at"])) for p in payloads], dtype=np.int64
            ),
            id_order=code_point_ranks([str(p["memory_id"]) for p in payloads]),
            tokens=np.array([int(p["token_count"]) for p in payloads], dtype=np.int64),
            term_frequencies=tf,
            memory=lambda i: _memory_from_payload(payloads[i]),
        )
        stats = CorpusStats(n_docs=n_docs, total_length=total_length, doc_freq=dfs)
        return pipeline.search(request, candidates, stats)

    async def _exact_cosines(
        self,
        coll: str,
        query: npt.NDArray[np.float32],
        points: list[qm.ScoredPoint],
        threshold: float,
    ) -> npt.NDArray[np.float64]:
        """The candidates' cosines as the reference computes them, where it can matter.

        Qdrant's score is the float32 dot product summed in its own order, so it may differ from
        the reference's float32 product in the last bits (typically ~1e-7). That only matters
        where two candidates, or a candidate and the threshold, are closer than ``_TIE_SLACK``:
        for exactly those the vectors are fetched and the cosine recomputed with the reference's
        routine. Everywhere else the score is used as is (rounded to the float32 it was), which
        orders and admits identically. Fetching every candidate's vector instead would move
        500 × dims floats per search (about 2 MB of JSON at 384 dimensions).
        """
        if not points:
            return np.zeros(0, dtype=np.float64)
        # float32 first: a server's JSON carries the shortest decimal of its float32 score.
        cos = np.array([p.score for p in points], dtype=np.float32).astype(np.float64)
        order = np.argsort(cos, kind="stable")
        close = np.diff(cos[order]) < _TIE_SLACK
        risky = np.zeros(cos.size, dtype=bool)
        risky[order[:-1][close]] = True
        risky[order[1:][close]] = True
        risky |= np.abs(cos - threshold) < _TIE_SLACK
        idx = np.flatnonzero(risky)
        if idx.size == 0:
            return cos
        wanted = [points[i].id for i in idx.tolist()]
        records = await self._q(
            self._client_q().retrieve(coll, ids=wanted, with_payload=False, with_vectors=True)
        )
        vectors = {str(r.id): r.vector for r in records}
        have = [i for i in idx.tolist() if str(points[i].id) in vectors]
        if have:
            rows = np.asarray([vectors[str(points[i].id)] for i in have], dtype=np.float32)
            cos[have] = _reference_cosines(query, np.ascontiguousarray(rows.T))
        return cos

    def _exact(self) -> dict[str, Any]:
        # Exact search on a server: admission must not miss a memory above the threshold (HNSW is
        # approximate). Local mode is always exact and warns about search params.
        if self.is_local_qdrant:
            return {}
        return {"search_params": qm.SearchParams(exact=True)}

    async def _search_stats(
        self, ak: _AgentKeys, embedder: str, ids: list[str], terms: list[str]
    ) -> tuple[int, int, list[bool], dict[str, int]]:
        """One script: corpus size, total length, which candidates the index names under
        ``embedder``, and the query terms' document frequencies (a consistent snapshot)."""
        res = await self._script(
            "search_stats",
            [ak.mem, ak.df, ak.stats],
            [embedder, len(ids), *ids, *terms],
        )
        mask = str(res[2])
        return (
            int(res[0]),
            int(res[1]),
            [c == "1" for c in mask],
            {t: int(v) for t, v in zip(terms, res[3:], strict=True) if int(v) > 0},
        )


def _ttl_ms(ttl_seconds: float) -> int:
    return max(1, math.ceil(ttl_seconds * 1000.0))


def from_config(config: MemoryConfig) -> RedisQdrantStore:
    """Factory used by :func:`actrone_pg.stores.create_store` (connects on ``setup()``)."""
    return RedisQdrantStore(
        redis_url=config.redis_url,
        qdrant_url=config.qdrant_url,
        qdrant_api_key=config.qdrant_api_key,
        # One namespace for both servers: the Redis index and statistics describe exactly the
        # points of the collections with the same prefix, so the two must never be paired apart.
        prefix=config.qdrant_collection_prefix,
        redis_timeout=config.redis_timeout,
        qdrant_timeout=config.qdrant_timeout,
        redis_pool_size=config.redis_pool_size,
    )
