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
* **Ranking** is :func:`actrone_pg.pipeline.search`: Qdrant returns the agent's nearest points
  above (slightly below) the threshold; the store takes Qdrant's score as the cosine except where
  two candidates, or a candidate and the threshold, are within 1e-5 — for those it fetches the
  vectors and recomputes the cosine with the reference's own float32 routine — then admits
  exactly, and hands the candidates with the agent's BM25 statistics from Redis to
  :func:`actrone_pg.pipeline.search`. Qdrant's own fusion cannot be used: its RRF has no
  weights and no tie rule, and its BM25 IDF would count the whole collection (every agent), not
  the agent's own memories the ranking rules ask for (:mod:`actrone_pg.ranking`).

Keys never collide: the agent and session ids are percent-encoded (``:``, ``%``, ``{``, ``*`` ...
all become ``%XX``), and erasure walks a per-agent index of live keys, never ``SCAN`` patterns.

The package is cut by concern. ``store`` holds :class:`RedisQdrantStore`, the one class: it keeps
a :class:`~.connection.Servers` (clients, settings, caches, error mapping; ``connection``) and
forwards each call to a module of functions that take it: ``sessions`` (L1), ``writes`` (L2
writes with their undo, reads by id, erasure), ``search`` (candidates for the pipeline, listing),
``index`` (the Redis memory index and BM25 statistics) and ``registry`` (embedder dimensions and
collections). ``layout`` (keys, point ids, payloads and turn JSON) and ``scripts`` (the Lua
scripts) do no I/O. Imports run one way: ``store`` -> ``sessions``, ``writes``, ``search`` ->
``index`` -> ``registry`` -> ``connection`` -> ``layout``, ``scripts``.
"""

from __future__ import annotations

from actrone_pg.stores.redis_qdrant.settings import RedisQdrantSettings
from actrone_pg.stores.redis_qdrant.store import RedisQdrantStore, from_config

__all__ = ["RedisQdrantSettings", "RedisQdrantStore", "from_config"]
