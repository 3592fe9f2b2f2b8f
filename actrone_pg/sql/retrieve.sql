-- Every read of the PostgreSQL store: one call of retrieve() (migration 0024), alone and the
-- agent first, so that on Citus the whole call is delegated to the worker holding the agent's
-- shards. The function plans the search itself (a filter's candidates and statistics, an
-- agent's own HNSW index, the exact scan, the expired memories left out, the shard tables on
-- Citus) and returns L1's recent turns and the packed search in one round trip.
-- Placeholder: s, the schema. Parameters, by name: agent, session, turn_limit, session_ttl,
-- embedder, terms, vector, threshold, limit, hybrid, rrf_k, rrf_weights, relevance_weight,
-- recency_weight, now, bm25_k1, bm25_b, budget, max_hits, filters (a JSON object or NULL),
-- ef_search (the HNSW scan's; 0: exact scans only).
SELECT * FROM {s}.retrieve(
    %(agent)s, %(session)s, %(turn_limit)s::int, %(session_ttl)s::float8,
    %(embedder)s, %(terms)s::text[], %(vector)s, %(threshold)s::float8, %(limit)s::int,
    %(hybrid)s::bool, %(rrf_k)s::int, %(rrf_weights)s::float8[], %(relevance_weight)s::float8,
    %(recency_weight)s::float8, %(now)s::timestamptz, %(bm25_k1)s::float8, %(bm25_b)s::float8,
    %(budget)s::bigint, %(max_hits)s::int, %(filters)s::jsonb, %(ef_search)s::int)
