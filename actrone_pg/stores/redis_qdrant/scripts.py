"""The Redis + Qdrant store's Lua scripts: each runs atomically inside Redis.

Times are Redis's own clock (TIME), in microseconds since the epoch (doubles hold them exactly:
< 2^53). The per-agent keyset is a sorted set: member "s:<session>" or "l:<lock>", score the time
(ms) at which that key expires. Every write that extends a key updates its score and drops
members whose keys have expired, so the set holds only live keys and erasure finds them all.

A session is live while it has been idle at most its TTL; its keys stay ``grace_ms`` longer, so
that a sweeper finds it expired, consolidates it and deletes it. The sessions set (one per
prefix, every agent) scores each session "<agent>:<session>" (both encoded, so the first ':'
splits them) by its last activity in ms, written by the same scripts that stamp that activity:
the sweeper's listing can never miss a session whose turns are still in Redis. It is the one key
shared by agents (Redis Cluster, which would need it sharded, is not supported).
"""

from __future__ import annotations

__all__ = ["ERASING", "SCRIPTS"]

# Shared by the scripts that write a session (needs ``ttl_ms`` set and KEYS[1..3] = turns, tids,
# sess): read Redis's clock, start the session afresh if it has expired, stamp its activity.
TOUCH_SESSION = """
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

# Shared by the same scripts, after TOUCH_SESSION (needs ``grace_ms``, ``member`` (the session's
# keyset member) and ``active`` (its sessions-set member) set too, and KEYS[4], KEYS[5] = keyset,
# sessions): the session's keys expire ``ttl_ms + grace_ms`` from now, the keyset says so, and
# the sessions set records the activity. Entries older than that are of sessions whose keys are
# gone: dropped here, so the set never outgrows the sessions Redis holds.
EXTEND_SESSION = """
local keep_ms = ttl_ms + grace_ms
redis.call('PEXPIRE', KEYS[1], keep_ms)
redis.call('PEXPIRE', KEYS[2], keep_ms)
redis.call('PEXPIRE', KEYS[3], keep_ms)
local now_ms = math.floor(now / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now_ms)
redis.call('ZADD', KEYS[4], now_ms + keep_ms, member)
redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', '(' .. string.format('%.0f', now_ms - keep_ms))
redis.call('ZADD', KEYS[5], now_ms, active)
"""

# KEYS: turns, tids, sess, keyset, sessions. ARGV: turn_id, turn_json, max_turns, ttl_ms,
# keyset member, ids_kept, grace_ms, sessions member. tids is a sorted set of turn ids scored by
# arrival order; the newest `ids_kept` are remembered (far more than any client retries across),
# so it cannot grow without bound.
APPEND_TURN = (
    """
local ttl_ms = tonumber(ARGV[4])
local member = ARGV[5]
local grace_ms = tonumber(ARGV[7])
local active = ARGV[8]
"""
    + TOUCH_SESSION
    + """local added = 0
if not redis.call('ZSCORE', KEYS[2], ARGV[1]) then
  local seq = redis.call('HINCRBY', KEYS[3], 'n', 1)
  redis.call('ZADD', KEYS[2], seq, ARGV[1])
  redis.call('ZREMRANGEBYRANK', KEYS[2], 0, -tonumber(ARGV[6]) - 1)
  redis.call('RPUSH', KEYS[1], ARGV[2])
  redis.call('LTRIM', KEYS[1], -tonumber(ARGV[3]), -1)
  added = 1
end
"""
    + EXTEND_SESSION
    + """return added
"""
)

# Shared by the scripts that read a session (needs ``ttl_ms`` set and KEYS[2] = sess): return
# nothing unless the session is live by Redis's clock.
UNLESS_LIVE = """
local last = redis.call('HGET', KEYS[2], 'a')
if not last then return {} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
if now - tonumber(last) > ttl_ms * 1000 then return {} end
"""

# KEYS: turns, sess. ARGV: limit, ttl_ms. Returns the newest `limit` turns, oldest first.
RECENT_TURNS = (
    """
local ttl_ms = tonumber(ARGV[2])
"""
    + UNLESS_LIVE
    + """return redis.call('LRANGE', KEYS[1], -tonumber(ARGV[1]), -1)
"""
)

# KEYS: turns, sess. ARGV: ttl_ms. Returns {turn_count, field, value, ...} or {} if not live.
GET_SESSION = (
    """
local ttl_ms = tonumber(ARGV[1])
"""
    + UNLESS_LIVE
    + """local out = {tostring(redis.call('LLEN', KEYS[1]))}
local h = redis.call('HGETALL', KEYS[2])
for i = 1, #h do out[#out + 1] = h[i] end
return out
"""
)

# KEYS: keyset. ARGV: the agent's key base, ttl_ms. The agent's sessions live by Redis's clock,
# from the keyset (no SCAN): {name, turn_count, number of hash values, field, value, ...} each.
LIST_SESSIONS = """
local base = ARGV[1]
local ttl_ms = tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local out = {}
for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], math.floor(now / 1000), '+inf')) do
  if string.sub(m, 1, 2) == 's:' then
    local name = string.sub(m, 3)
    local last = redis.call('HGET', base .. 'sess:' .. name, 'a')
    if last and now - tonumber(last) <= ttl_ms * 1000 then
      local h = redis.call('HGETALL', base .. 'sess:' .. name)
      out[#out + 1] = name
      out[#out + 1] = tostring(redis.call('LLEN', base .. 'turns:' .. name))
      out[#out + 1] = tostring(#h)
      for i = 1, #h do out[#out + 1] = h[i] end
    end
  end
end
return out
"""

# A fenced write (stores.base.Fence): nothing unless the writer still holds the lock, in the same
# script as the write. Needs ``fence_key`` (the lock's key) and ``fence_holder`` set.
FENCE = """
if redis.call('GET', fence_key) ~= fence_holder then return false end
"""

# APPEND_TURN, fenced: KEYS[6] the lock, ARGV[9] its holder. Returns nil if the lock is not held
# (nothing written).
FENCED_APPEND_TURN = "local fence_key, fence_holder = KEYS[6], ARGV[9]\n" + FENCE + APPEND_TURN

_SET_SESSION_METADATA = (
    """
local ttl_ms = tonumber(ARGV[1])
local member = ARGV[2]
local grace_ms = tonumber(ARGV[3])
local active = ARGV[4]
"""
    + TOUCH_SESSION
    + """for i = start, #ARGV, 2 do
  redis.call('HSET', KEYS[3], ARGV[i], ARGV[i + 1])
end
"""
    + EXTEND_SESSION
    + """return 1
"""
)
# KEYS: turns, tids, sess, keyset, sessions. ARGV: ttl_ms, keyset member, grace_ms, sessions
# member, then field/value pairs.
SET_SESSION_METADATA = "local start = 5\n" + _SET_SESSION_METADATA
# The same, fenced: KEYS[6] the lock, ARGV[5] its holder, then the pairs. Returns nil if the
# lock is not held (nothing written).
FENCED_SET_SESSION_METADATA = (
    "local fence_key, fence_holder, start = KEYS[6], ARGV[5], 6\n" + FENCE + _SET_SESSION_METADATA
)

# KEYS: turns, tids, sess, keyset, sessions. ARGV: keyset member, sessions member.
CLEAR_SESSION = """
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
redis.call('ZREM', KEYS[4], ARGV[1])
redis.call('ZREM', KEYS[5], ARGV[2])
return 1
"""

# KEYS: sessions. ARGV: the key base without the agent ("<prefix>:<layout>:"), ttl_ms, limit.
# Up to `limit` sessions members (oldest activity first) of sessions idle longer than ttl_ms by
# Redis's clock, checked against each session's own stamp. An entry whose session is gone
# (cleared, erased, or its keys expired after the grace) is dropped on the way.
EXPIRED_SESSIONS = """
local base = ARGV[1]
local ttl_ms = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local cutoff = string.format('%.0f', math.floor(now / 1000) - ttl_ms)
local out = {}
local offset = 0
while #out < limit do
  local batch = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', cutoff, 'LIMIT', offset, 100)
  if #batch == 0 then break end
  for _, m in ipairs(batch) do
    local at = string.find(m, ':', 1, true)
    local sess = base .. '{' .. string.sub(m, 1, at - 1) .. '}:sess:' .. string.sub(m, at + 1)
    local last = redis.call('HGET', sess, 'a')
    if not last then
      redis.call('ZREM', KEYS[1], m)
    else
      offset = offset + 1
      if now - tonumber(last) > ttl_ms * 1000 then
        out[#out + 1] = m
        if #out >= limit then break end
      end
    end
  end
end
return out
"""

# KEYS: turns, tids, sess, keyset, sessions. ARGV: ttl_ms, keyset member, sessions member.
# Deletes the session if it is still idle longer than ttl_ms (a new turn since it was listed
# revives it: then it is kept). Returns 1 if deleted.
DELETE_EXPIRED_SESSION = """
local last = redis.call('HGET', KEYS[3], 'a')
if last then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  if now - tonumber(last) <= tonumber(ARGV[1]) * 1000 then return 0 end
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
redis.call('ZREM', KEYS[4], ARGV[2])
redis.call('ZREM', KEYS[5], ARGV[3])
if last then return 1 end
return 0
"""

# KEYS: lock, keyset. ARGV: token, ttl_ms, keyset member. SET NX PX: Redis's clock expires it.
ACQUIRE_LOCK = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  local t = redis.call('TIME')
  local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now_ms)
  redis.call('ZADD', KEYS[2], now_ms + tonumber(ARGV[2]), ARGV[3])
  return 1
end
return 0
"""

# While an erase of the agent is under way, its write generation's key holds this (no token is
# ever equal to it): a writer that starts then waits for the erase (stores.base.writer_fence).
ERASING = "erasing"

# KEYS: the generation's key, keyset. ARGV: a new token, the key's keyset member. The agent's
# write generation, created (never expiring: keyset score +inf) if it has none; nil while an
# erase of the agent is under way.
WRITER_GENERATION = (
    """
local current = redis.call('GET', KEYS[1])
if current == '"""
    + ERASING
    + """' then return false end
if current then return current end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[2], '+inf', ARGV[2])
return ARGV[1]
"""
)

# KEYS: lock, keyset. ARGV: token, keyset member. Compare-and-delete: only the holder releases.
RELEASE_LOCK = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('ZREM', KEYS[2], ARGV[2])
  return 1
end
return 0
"""

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
for i = start, #ARGV, 3 do
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
# KEYS: mem (id -> embedder), doc (id -> "length term term ..."), df (term -> count),
# stats ("len" -> total length). ARGV: triples (memory id, embedder, doc); an empty embedder
# removes the memory. Returns the previous (embedder, doc) of each triple ('' = absent), which is
# exactly the input that undoes the call when replayed in reverse order. Replaying the same call
# gives the same end state, so a retry after a lost reply is harmless.
SET_ENTRIES = "local start = 1\n" + _SET_ENTRIES
# The same, fenced: KEYS[5] the lock, ARGV[1] its holder, then the triples. Returns nil if the
# lock is not held (nothing written).
FENCED_SET_ENTRIES = (
    "local fence_key, fence_holder, start = KEYS[5], ARGV[1], 2\n" + FENCE + _SET_ENTRIES
)

# KEYS: mem, df, stats. ARGV: embedder, number of ids, the ids, then the query terms. Returns
# {memory count, total length, "1"/"0" per id (indexed under this embedder?), df per term}. One
# string for the whole mask: parsing ~500 separate replies cost more than the rest of the call.
SEARCH_STATS = """
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

# KEYS: keyset, mem, doc, df, stats, sessions, the write generation's key. ARGV: the agent's key
# base, the encoded agent id, how long (ms) the erase may take or 0. Deletes every key the keyset
# names (sessions and locks), the agent's entries of the sessions set, and the agent's memory
# index and statistics; then, given a time, marks the generation ERASING for that long (the
# erase's first pass), else deletes the mark (its last).
ERASE_AGENT = (
    """
local base = ARGV[1]
for _, m in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  local kind, name = string.sub(m, 1, 2), string.sub(m, 3)
  if kind == 's:' then
    redis.call('DEL', base .. 'turns:' .. name, base .. 'tids:' .. name, base .. 'sess:' .. name)
    redis.call('ZREM', KEYS[6], ARGV[2] .. ':' .. name)
  elseif kind == 'l:' then
    redis.call('DEL', base .. 'lock:' .. name)
  end
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[7])
if tonumber(ARGV[3]) > 0 then
  redis.call('SET', KEYS[7], '"""
    + ERASING
    + """', 'PX', ARGV[3])
end
return 1
"""
)


#: Each script by the name the store calls it with.
SCRIPTS = {
    "append": APPEND_TURN,
    "fenced_append": FENCED_APPEND_TURN,
    "recent": RECENT_TURNS,
    "get_session": GET_SESSION,
    "list_sessions": LIST_SESSIONS,
    "set_meta": SET_SESSION_METADATA,
    "fenced_set_meta": FENCED_SET_SESSION_METADATA,
    "clear": CLEAR_SESSION,
    "expired_sessions": EXPIRED_SESSIONS,
    "delete_expired": DELETE_EXPIRED_SESSION,
    "acquire": ACQUIRE_LOCK,
    "release": RELEASE_LOCK,
    "writer_generation": WRITER_GENERATION,
    "set_entries": SET_ENTRIES,
    "fenced_set_entries": FENCED_SET_ENTRIES,
    "erase": ERASE_AGENT,
    "search_stats": SEARCH_STATS,
}
