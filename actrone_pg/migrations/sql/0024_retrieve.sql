-- The one entry point of every read, for any client (Python, TypeScript, psql): a session's
-- recent turns (L1) and the agent's memories ranked by {schema}.hybrid_search's own statement
-- and packed into a token budget by {schema}.pack_positions (L2). Installed by the migrations as
-- {schema}.retrieve; a client calls it alone, `SELECT * FROM {schema}.retrieve(agent, ...)`, the
-- agent first: on a schema distributed with Citus it is distributed by its first argument, so
-- the whole call is delegated to the worker holding the agent's shards.
--
-- What a client computes is an argument: the query's vector and terms (the analyzer's), the
-- admission threshold and limit, the ranking's parameters, the budget, the filter (a JSON
-- object, spec §9.3: the keys of actrone_pg.filters) and the HNSW scan's ef_search. What the
-- database knows is decided here, once, by the plan below (docs/postgres.md, "One read path"):
--
--   1. the embedder's registered dimension: none, no memory is ranked (one 'ranked' row with
--      candidates_considered 0); another size than the query vector's, an error of SQLSTATE
--      AC001 whose DETAIL is the stored dimension;
--   2. the candidates: with a filter, the filtered set's nearest live memories and its BM25
--      statistics, ranked exactly whatever the agent's size; without one, the ids of the
--      agent's own HNSW index if it has a valid one (p_ann_ef_search > 0; the store builds
--      them, named by actrone_pg.stores.postgres.maintenance.ann_index_name), else the agent's
--      exact scan,
--      its expired memories that the sweeper has not deleted yet excluded;
--   3. the execution: one statement, L1's turns and the ranking, packing and chosen rows, over
--      the shard tables of this node where it holds the agent's placement (Citus, prepared once
--      per session and shard group with a generic plan), else over the tables (one server, or
--      the coordinator inside a transaction block). The statement is written once, at the end
--      (between "statement:" lines), its ranking hybrid_search's body (between "ranking:"
--      lines); its PREPARE text, the name's prefix and the format() call of its EXECUTE are
--      written from it by `python -m actrone_pg.migrations._render`.
--
-- Rows:
--   kind 'turn':   the session's newest p_turn_limit turns, newest first (p_session_id NULL: none);
--   kind 'memory': each chosen memory, best first, with `candidates_considered`, its explain
--                  columns (cosine, bm25, ranks, fused_score) and every stored field (metadata
--                  as text);
--   kind 'ranked': when no memory was chosen, one row with `candidates_considered` alone.
-- p_budget NULL takes every ranked memory; p_max_hits stops after that many (NULL: no limit).
--
-- The filter's keys and their conditions are actrone_pg.filters' (FilterKey.sql), each value
-- read from the JSON object as its key's type: tags_any, tags_all, content_types (arrays of
-- strings), session_id (a string), created_after, created_before (ISO 8601 timestamps with a
-- time zone), min_importance (a number), metadata (an object the memory's must contain). An
-- unknown key is an error (SQLSTATE 22023). The filtered set is found by one statement,
-- planned for this call's values (so a selective filter uses its index), the ranking by
-- another: two statements of one call.
--
-- From psql:
--   SELECT kind, id, fused_score FROM {schema}.retrieve('agent', 'session', 50, 86400,
--       'embedder', ARRAY['term'], '[...]'::vector, 0.5, 500, true, 60, ARRAY[1, 1, 0.3],
--       0.7, 0.3, now(), 1.2, 0.3, 1000, NULL, jsonb_build_object('tags_any', ARRAY['travel']),
--       800);
CREATE OR REPLACE FUNCTION {schema}.retrieve(
    p_agent_id text,
    p_session_id text,
    p_turn_limit integer,
    p_session_ttl double precision,
    p_embedder text,
    p_terms text[],
    p_vector {vector_schema}.vector,
    p_threshold double precision,
    p_limit integer,
    p_hybrid boolean,
    p_rrf_k integer,
    p_rrf_weights double precision[],
    p_relevance_weight double precision,
    p_recency_weight double precision,
    p_now timestamptz,
    p_bm25_k1 double precision,
    p_bm25_b double precision,
    p_budget bigint,
    p_max_hits integer,
    p_filters jsonb,
    p_ann_ef_search integer
)
RETURNS TABLE (
    kind text,
    candidates_considered integer,
    cosine double precision,
    bm25 double precision,
    ranks integer[],
    fused_score double precision,
    id text,
    session_id text,
    content text,
    content_type text,
    importance double precision,
    tags text[],
    source text,
    sensitivity text,
    created_at timestamptz,
    metadata text,
    embedder text,
    token_count integer,
    expires_at timestamptz,
    source_turn_ids text[],
    version integer,
    valid_from timestamptz,
    valid_to timestamptz,
    user_message text,
    assistant_message text,
    tool_results jsonb
)
LANGUAGE plpgsql VOLATILE
SET jit = off
-- as hybrid_search (0005): joins between CTEs of at most p_limit rows, never nested loops
SET enable_nestloop = off
-- The ranking's statement and the look-ups before it are planned once per session with a
-- generic plan (as 0009's hybrid_search), set around them below: not on a distributed schema's
-- coordinator, where Citus plans no generic plan of distributed tables. The filtered set's and
-- the HNSW scan's statements are EXECUTEd, each planned for its call's values.
AS $fn$
#variable_conflict use_column
DECLARE
    p_content boolean := false;
    p_candidates text[];
    p_excluded text[];
    p_n_docs bigint;
    p_total_length bigint;
    p_doc_freqs integer[];
    v_dimensions integer;
    v_index boolean;
    v_keys text[];
    v_where text;
    v_memories bigint;
    v_statement text;
    v_call text;
    v_plans text;
    v_distributed boolean := false;
BEGIN
    -- Where this node holds the agent's placement (Citus), its shard tables are read by name,
    -- as plain tables.
    -- Nested IFs: PL/pgSQL parses a statement when it first runs it, and a server without
    -- Citus has no pg_dist_* catalogs.
    IF current_setting('citus.version', true) IS NOT NULL THEN
        IF EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition AS d
                   WHERE d.logicalrelid = '{schema}.memories'::regclass) THEN
            v_distributed := true;
            v_memories := pg_catalog.get_shard_id_for_distribution_column(
                '{schema}.memories'::regclass, p_agent_id);
            IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_placement AS pl
                           JOIN pg_catalog.pg_dist_local_group AS g ON g.groupid = pl.groupid
                           WHERE pl.shardid = v_memories) THEN
                v_memories := NULL;  -- not this node's: the distributed statements
            END IF;
        END IF;
    END IF;
    -- From here on, off Citus, every statement of the function keeps its first plan: left to
    -- choose, the server planned the expired ids' look-up afresh at every call
    -- (docs/notes/2026-12-05-one-read-path.md, "The fixed cost, server side").
    v_plans := current_setting('plan_cache_mode');
    IF NOT v_distributed THEN
        PERFORM set_config('plan_cache_mode', 'force_generic_plan', true);
    END IF;
    -- 1. The embedder's dimension (embedders is a reference table on Citus: on every node).
    IF v_memories IS NULL THEN
        SELECT e.dimensions INTO v_dimensions FROM {schema}.embedders AS e
        WHERE e.name = p_embedder;
    ELSE
        EXECUTE format('SELECT e.dimensions FROM %s AS e WHERE e.name = $1',
                       (SELECT pg_catalog.shard_name(s.logicalrelid, s.shardid)
                        FROM pg_catalog.pg_dist_shard AS s
                        WHERE s.logicalrelid = '{schema}.embedders'::regclass))
            INTO v_dimensions USING p_embedder;
    END IF;
    IF v_dimensions IS NULL THEN
        p_limit := 0;  -- nothing stored by this embedder: the turns, and nothing ranked
    ELSIF {vector_schema}.vector_dims(p_vector) <> v_dimensions THEN
        RAISE EXCEPTION 'embedder % stores %-dimensional vectors; the query vector has %',
            quote_literal(p_embedder), v_dimensions, {vector_schema}.vector_dims(p_vector)
            USING ERRCODE = 'AC001', DETAIL = v_dimensions::text;
    -- 2. The candidates.
    ELSIF p_filters IS NOT NULL THEN
        v_keys := ARRAY(SELECT k FROM jsonb_object_keys(p_filters) AS k
                        WHERE k <> 'conditions' ORDER BY k);
        -- Each key's condition on a memories row m, its value the EXECUTE's $n of that key;
        -- then each of "conditions" (a key this function does not name: a FilterKey a client
        -- registered, sent as its column, operator, type and value), its column one of
        -- memories', its operator and type among the ones below.
        v_where := concat_ws(' AND ',
            (SELECT string_agg(CASE k
                WHEN 'tags_any' THEN 'm.tags && $1::text[]'
                WHEN 'tags_all' THEN 'm.tags @> $2::text[]'
                WHEN 'content_types' THEN 'm.content_type = ANY ($3::text[])'
                WHEN 'session_id' THEN 'm.session_id = $4'
                WHEN 'created_after' THEN 'm.created_at > $5'
                WHEN 'created_before' THEN 'm.created_at < $6'
                WHEN 'min_importance' THEN 'm.importance >= $7::float8'
                WHEN 'metadata' THEN 'm.metadata @> $8::jsonb'
                END, ' AND ' ORDER BY k)
             FROM unnest(v_keys) AS k),
            (SELECT string_agg(
                 format(CASE WHEN c.value ->> 'op' = '= ANY' THEN 'm.%1$I = ANY (%3$s)'
                             ELSE 'm.%1$I %2$s %3$s' END,
                        a.attname, c.value ->> 'op',
                        CASE WHEN c.value ->> 'type' = 'text[]'
                             THEN format('ARRAY(SELECT jsonb_array_elements_text('
                                         '$16 -> ''conditions'' -> %s -> ''value''))', c.n - 1)
                             ELSE format('($16 -> ''conditions'' -> %s ->> ''value'')::%s',
                                         c.n - 1, c.value ->> 'type') END),
                 ' AND ' ORDER BY c.n)
             FROM jsonb_array_elements(COALESCE(p_filters -> 'conditions', '[]'))
                  WITH ORDINALITY AS c(value, n)
             JOIN pg_catalog.pg_attribute AS a
               ON a.attrelid = '{schema}.memories'::regclass AND a.attnum > 0
              AND NOT a.attisdropped AND a.attname = c.value ->> 'column'
             WHERE c.value ->> 'op' IN ('=', '<', '<=', '>', '>=', '&&', '@>', '= ANY')
               AND c.value ->> 'type' IN ('text', 'text[]', 'int', 'bigint', 'float8',
                                          'boolean', 'timestamptz', 'jsonb')));
        IF EXISTS (SELECT 1 FROM unnest(v_keys) AS k WHERE k NOT IN ('tags_any', 'tags_all',
                   'content_types', 'session_id', 'created_after', 'created_before',
                   'min_importance', 'metadata'))
           OR cardinality(string_to_array(v_where, ' AND '))
              <> cardinality(v_keys) + jsonb_array_length(COALESCE(p_filters -> 'conditions',
                                                                   '[]')) THEN
            RAISE EXCEPTION 'unknown filter key or condition in %', p_filters
                USING ERRCODE = '22023';
        END IF;
        v_where := COALESCE(NULLIF(v_where, ''), 'TRUE');
        -- The filtered set's candidates and statistics: one pass finds the set, its cosines and
        -- its BM25 statistics. fp: the filter checked on a sample of 256 of the agent's memories
        -- (the first by id); broad: it matches at least a quarter of them, or no index serves
        -- it; most: broad, and it matches more than half. The sample only picks the way; every
        -- way gives the same result. fm: if not broad, the matching rows only (through the
        -- filter's index); if broad, every row of the agent, ok telling whether it matches. A
        -- row's terms are kept only on the side its statistics are counted on (the matching
        -- rows, or if most match the others) and if it holds one of the query's terms. fn: the
        -- filtered set's N and total length (every embedder, expired ones included until swept,
        -- as the pipeline counts them). fd: each term's document frequency in the filtered set,
        -- counted among the matching rows, or as the agent's minus the other rows'. fc: the
        -- filtered set's nearest live memories of the embedder, ordered and cut as the ranking
        -- admits them. docs/postgres.md, "Filtered search", has the measurements.
        EXECUTE format($filtered$
WITH fp AS MATERIALIZED (
  SELECT b.broad,
         CASE %3$L WHEN 'rest' THEN true WHEN 'matches' THEN false
                   ELSE b.broad AND s.hits * 2 > s.n END AS most
  FROM (SELECT count(*) FILTER (WHERE %1$s) AS hits, count(*) AS n
        FROM (SELECT * FROM {schema}.memories AS m WHERE m.agent_id = $9
              ORDER BY m.id LIMIT 256) AS m) AS s
  CROSS JOIN LATERAL (
    SELECT CASE %3$L WHEN 'selective' THEN false WHEN 'matches' THEN true WHEN 'rest' THEN true
                ELSE NOT %2$L::bool OR s.hits * 4 >= s.n END AS broad) AS b),
fm AS MATERIALIZED (
  SELECT m.id, m.created_at, m.doc_len,
         CASE WHEN m.term_freqs ?| $11::text[] THEN m.term_freqs END AS term_freqs,
         true AS ok,
         CASE WHEN true AND m.embedder = $10
                   AND (m.expires_at IS NULL OR m.expires_at > $15)
              THEN -(m.embedding OPERATOR({vector_schema}.<#>) $12) END AS cosine
  FROM {schema}.memories AS m
  WHERE m.agent_id = $9 AND %1$s AND NOT (SELECT fp.broad FROM fp)
  UNION ALL
  SELECT y.id, y.created_at, y.doc_len,
         CASE WHEN y.ok <> (SELECT fp.most FROM fp) AND y.term_freqs ?| $11::text[]
              THEN y.term_freqs END,
         y.ok,
         CASE WHEN y.ok AND y.embedder = $10
                   AND (y.expires_at IS NULL OR y.expires_at > $15)
              THEN -(y.embedding OPERATOR({vector_schema}.<#>) $12) END AS cosine
  FROM (SELECT m.id, m.created_at, m.doc_len, m.term_freqs, m.embedder, m.expires_at,
               m.embedding, COALESCE(%1$s, false) AS ok
        FROM {schema}.memories AS m
        WHERE m.agent_id = $9 AND (SELECT fp.broad FROM fp) OFFSET 0) AS y),
ft AS MATERIALIZED (SELECT f.ok, f.term_freqs FROM fm AS f WHERE f.term_freqs IS NOT NULL),
fc AS (
  SELECT ARRAY(SELECT x.id
               FROM (SELECT f.id FROM fm AS f WHERE f.cosine >= $13::float8
                     ORDER BY f.cosine DESC, f.created_at DESC, f.id LIMIT $14::int) AS x
               ORDER BY x.id) AS ids),
fn AS (
  SELECT count(*) FILTER (WHERE f.ok) AS n_docs,
         COALESCE(sum(f.doc_len) FILTER (WHERE f.ok), 0)::bigint AS total_length
  FROM fm AS f),
fd AS (
  SELECT ARRAY(
    SELECT (CASE WHEN (SELECT fp.most FROM fp)
                 THEN COALESCE((SELECT ts.df FROM {schema}.term_stats AS ts
                                WHERE ts.agent_id = $9 AND ts.term = t.term), 0)
                      - (SELECT count(*) FROM ft AS f WHERE NOT f.ok AND f.term_freqs ? t.term)
                 ELSE (SELECT count(*) FROM ft AS f WHERE f.ok AND f.term_freqs ? t.term)
            END)::integer
    FROM unnest($11::text[]) WITH ORDINALITY AS t(term, ord) ORDER BY t.ord) AS dfs)
SELECT (SELECT fc.ids FROM fc), (SELECT fn.n_docs FROM fn), (SELECT fn.total_length FROM fn),
       (SELECT fd.dfs FROM fd)
$filtered$, v_where,
            -- an index serves one of the conditions (FilterKey.sql_indexed)
            v_keys && ARRAY['tags_any', 'tags_all', 'created_after', 'created_before',
                            'metadata']
            OR jsonb_path_exists(p_filters, '$.conditions[*] ? (@.indexed == true)'),
            -- tests force each way in turn (tests/stores/test_postgres_filters.py): 'selective',
            -- 'matches' (broad, counted among the matches) or 'rest' (among the others)
            current_setting('actrone.filter_path', true))
        INTO p_candidates, p_n_docs, p_total_length, p_doc_freqs
        USING ARRAY(SELECT jsonb_array_elements_text(p_filters -> 'tags_any')),
              ARRAY(SELECT jsonb_array_elements_text(p_filters -> 'tags_all')),
              ARRAY(SELECT jsonb_array_elements_text(p_filters -> 'content_types')),
              p_filters ->> 'session_id',
              (p_filters ->> 'created_after')::timestamptz,
              (p_filters ->> 'created_before')::timestamptz,
              (p_filters ->> 'min_importance')::float8,
              p_filters -> 'metadata',
              p_agent_id, p_embedder, p_terms, p_vector, p_threshold, p_limit, p_now,
              p_filters;
    ELSIF p_ann_ef_search > 0 AND v_dimensions <= 2000 THEN
        -- The agent's own HNSW index, if it has a valid one (maintenance.ann_index_name).
        SELECT i.indisvalid INTO v_index
        FROM pg_catalog.pg_class AS c
        JOIN pg_catalog.pg_index AS i ON i.indexrelid = c.oid
        WHERE c.relname = 'ix_ann_' || left(encode(sha256(convert_to(p_agent_id, 'UTF8')
                                                          || '\x00'::bytea
                                                          || convert_to(p_embedder, 'UTF8')),
                                                   'hex'), 24)
          AND c.relnamespace = (SELECT r.relnamespace FROM pg_catalog.pg_class AS r
                                WHERE r.oid = '{schema}.memories'::regclass);
        IF v_index THEN
            -- Its nearest ids, 1.2 times as many as admitted (ranked exactly below): planned
            -- for this agent and embedder, the literals its partial index's predicate names;
            -- strict_order: iterate until the LIMIT is met, in exact distance order.
            PERFORM set_config('hnsw.ef_search', p_ann_ef_search::text, true);
            PERFORM set_config('hnsw.iterative_scan', 'strict_order', true);
            EXECUTE format(
                'SELECT ARRAY(SELECT a.id FROM {schema}.memories AS a'
                ' WHERE a.agent_id = %1$L AND a.embedder = %2$L'
                ' ORDER BY (a.embedding::{vector_schema}.vector(%3$s))'
                ' OPERATOR({vector_schema}.<#>) %4$L::{vector_schema}.vector(%3$s)'
                ' LIMIT %5$s)',
                p_agent_id, p_embedder, v_dimensions, p_vector,
                ceil(p_limit::float8 * 1.2::float8)::integer)
                INTO p_candidates;
        END IF;
    END IF;
    -- 3. The execution.
    IF v_memories IS NOT NULL THEN
        BEGIN
            IF p_n_docs IS NULL THEN
                EXECUTE format('SELECT array_agg(e.id) FROM %s AS e'
                               ' WHERE e.agent_id = $1 AND e.expires_at <= $2',
                               pg_catalog.shard_name('{schema}.memories'::regclass, v_memories))
                    INTO p_excluded USING p_agent_id, p_now;
            END IF;
            v_statement := 'actrone_35e24141fcea_' || v_memories;
            v_call := format('EXECUTE %I(%L, %L, %L, %L, %L, %L, %L, %L, %L, %L, %L, %L, %L, %L, %L, %L, %L, %L, %L, %L, %L, %L, %L, %L, %L, %L, %L)', v_statement, p_agent_id, p_session_id, p_turn_limit, p_session_ttl, p_embedder, p_terms, p_vector, p_threshold, p_limit, p_hybrid, p_rrf_k, p_rrf_weights, p_relevance_weight, p_recency_weight, p_now, p_bm25_k1, p_bm25_b, p_budget, p_max_hits, p_filters, p_ann_ef_search, p_content, p_candidates, p_excluded, p_n_docs, p_total_length, p_doc_freqs);
            -- A generic plan, made once (the statement's values change at every call).
            v_plans := current_setting('plan_cache_mode');
            PERFORM set_config('plan_cache_mode', 'force_generic_plan', true);
            -- RETURN QUERY EXECUTE of a statement not prepared yet fails as not returning
            -- rows, not as unknown: look first.
            IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_prepared_statements AS s
                           WHERE s.name = v_statement) THEN
                EXECUTE format(
$prepare$PREPARE %1$I (text, text, integer, double precision, text, text[], {vector_schema}.vector, double precision, integer, boolean, integer, double precision[], double precision, double precision, timestamptz, double precision, double precision, bigint, integer, jsonb, integer, boolean, text[], text[], bigint, bigint, integer[]) AS
(SELECT 'turn'::text, NULL::integer, NULL::float8, NULL::float8, NULL::integer[],
               NULL::float8, t.id::text, NULL::text, NULL::text, NULL::text, NULL::float8,
               NULL::text[], NULL::text, NULL::text, t.created_at, NULL::text, NULL::text,
               t.token_count, NULL::timestamptz, NULL::text[],
               NULL::integer, NULL::timestamptz, NULL::timestamptz, t.user_message,
               t.assistant_message, t.tool_results
        FROM %3$s AS t
        JOIN %4$s AS x ON x.agent_id = t.agent_id AND x.session_id = t.session_id
        WHERE $2 IS NOT NULL AND x.agent_id = $1 AND x.session_id = $2
          AND x.last_active_at >= now() - make_interval(secs => $4)
        ORDER BY t.seq DESC
        LIMIT $3)
UNION ALL
-- The ranking's rows in its order (its own final order, so no sort of their own): their costs
-- packed, and the columns of the chosen ones as arrays, read below by position.
(WITH p AS MATERIALIZED (
        SELECT {schema}.pack_positions(
                   array_agg(b.token_count ORDER BY b.fused_score DESC, b.created_at DESC, b.id),
                   $18, $19) AS taken,
               count(*)::integer AS n,
               array_agg(b.id ORDER BY b.fused_score DESC, b.created_at DESC, b.id) AS ids,
               array_agg(b.cosine ORDER BY b.fused_score DESC, b.created_at DESC, b.id)
                   AS cosines,
               array_agg(b.bm25 ORDER BY b.fused_score DESC, b.created_at DESC, b.id) AS bm25s,
               array_agg(b.fused_score ORDER BY b.fused_score DESC, b.created_at DESC, b.id)
                   AS fused_scores,
               array_agg(b.ranks ORDER BY b.fused_score DESC, b.created_at DESC, b.id) AS ranks
        FROM (
-- ranking: hybrid_search's body, as python -m actrone_pg.migrations._render copies it
WITH
-- Admission: cosine >= threshold, the nearest $9, ties newer first then id; the threshold is
-- applied before the sort, so only admitted rows are sorted (migration 0003). The dense rank is
-- the row's place in that same sort (one sort for the admission and the dense ranking).
nearest AS MATERIALIZED (
    SELECT u.id, u.created_at, u.cosine,
           row_number() OVER (ORDER BY u.cosine DESC, u.created_at DESC, u.id) AS dense_rank
    FROM (
        -- Vectors of up to 600 dimensions come from an index-only scan of ix_memories_candidates;
        -- larger ones, which do not fit in a btree entry, through the primary key. The
        -- embedder's registered dimension decides the branch once per call (a one-time filter);
        -- with $23 only the third branch runs, fetching those ids by primary key.
        SELECT m.id, m.created_at, -(m.embedding OPERATOR({vector_schema}.<#>) $7) AS cosine
        FROM %2$s AS m
        WHERE m.agent_id = $1 AND m.embedder = $5
          AND {vector_schema}.vector_dims(m.embedding) <= 600
          AND -(m.embedding OPERATOR({vector_schema}.<#>) $7) >= $8
          AND (SELECT e.dimensions FROM %7$s AS e WHERE e.name = $5) <= 600
          AND $23 IS NULL
          AND ($24 IS NULL OR m.id <> ALL ($24))
        UNION ALL
        SELECT m.id, m.created_at, -(m.embedding OPERATOR({vector_schema}.<#>) $7)
        FROM %2$s AS m
        WHERE m.agent_id = $1 AND m.embedder = $5
          AND -(m.embedding OPERATOR({vector_schema}.<#>) $7) >= $8
          AND (SELECT e.dimensions FROM %7$s AS e WHERE e.name = $5) > 600
          AND $23 IS NULL
          AND ($24 IS NULL OR m.id <> ALL ($24))
        UNION ALL
        SELECT m.id, m.created_at, -(m.embedding OPERATOR({vector_schema}.<#>) $7)
        FROM %2$s AS m
        WHERE $23 IS NOT NULL
          AND m.agent_id = $1 AND m.id = ANY ($23) AND m.embedder = $5
          AND -(m.embedding OPERATOR({vector_schema}.<#>) $7) >= $8
          AND ($24 IS NULL OR m.id <> ALL ($24))
    ) AS u
    ORDER BY u.cosine DESC, u.created_at DESC, u.id
    LIMIT $9
),
-- BM25 statistics of the agent's whole corpus (every embedder), kept by the writers, or the
-- ones given (a filtered set's).
given_stats AS (
    SELECT
        COALESCE($25, max(s.n_docs), 0) AS n_docs,
        COALESCE($26, max(s.total_length), 0) AS total_length
    FROM %5$s AS s
    WHERE s.agent_id = $1 AND $25 IS NULL
),
stats AS MATERIALIZED (
    SELECT
        g.n_docs,
        CASE WHEN g.n_docs > 0 AND g.total_length > 0
             THEN g.total_length::float8 / g.n_docs::float8
             ELSE 1.0::float8 END AS avgdl
    FROM given_stats AS g
),
terms AS (
    SELECT t.term, min(t.ord) AS ord
    FROM unnest($6) WITH ORDINALITY AS t(term, ord)
    WHERE t.term IS NOT NULL AND t.term <> ''
    GROUP BY t.term
),
-- MATERIALIZED: computed once, not once per candidate. Each term's document frequency is one
-- primary-key probe (as a join the planner read all of the agent's term statistics, migration
-- 0008). Stored in query-term order, the order every read of it below returns, so that each
-- candidate's BM25 terms are summed in query-term order, as ranking.bm25 sums them.
term_idf AS MATERIALIZED (
    SELECT
        terms.term,
        terms.ord,
        ln(1.0::float8
           + ((st.n_docs - f.df)::float8 + 0.5::float8) / (f.df::float8 + 0.5::float8)) AS idf
    FROM terms
    CROSS JOIN stats AS st
    CROSS JOIN LATERAL (
        SELECT CASE WHEN $27 IS NOT NULL
                    THEN COALESCE($27[terms.ord::integer], 0)
                    ELSE COALESCE((
                        SELECT ts.df FROM %6$s AS ts
                        WHERE ts.agent_id = $1 AND ts.term = terms.term
                    ), 0) END AS df
        OFFSET 0  -- one probe per term (flattened, the CASE stood three times: 3 probes)
    ) AS f
    -- 0018: a term no document holds adds 0.0 to every sum; it is not looked up.
    WHERE f.df > 0
    ORDER BY terms.ord
),
-- The terms of term_idf in columns, t1..t16 and their IDFs w1..w16 (NULL past the last), so that
-- a candidate's BM25 is one expression over its row instead of a subquery per candidate (see
-- the candidates' rows below); terms, n and the subquery serve a query of more terms. Also the
-- constants of every candidate's BM25, computed once.
term_slots AS MATERIALIZED (
    SELECT a.n, a.terms, (SELECT st.avgdl FROM stats AS st) AS avgdl,
           $16 + 1.0::float8 AS k1_plus_1,
           a.terms[1] AS t1, a.idfs[1] AS w1, a.terms[2] AS t2, a.idfs[2] AS w2,
           a.terms[3] AS t3, a.idfs[3] AS w3, a.terms[4] AS t4, a.idfs[4] AS w4,
           a.terms[5] AS t5, a.idfs[5] AS w5, a.terms[6] AS t6, a.idfs[6] AS w6,
           a.terms[7] AS t7, a.idfs[7] AS w7, a.terms[8] AS t8, a.idfs[8] AS w8,
           a.terms[9] AS t9, a.idfs[9] AS w9, a.terms[10] AS t10, a.idfs[10] AS w10,
           a.terms[11] AS t11, a.idfs[11] AS w11, a.terms[12] AS t12, a.idfs[12] AS w12,
           a.terms[13] AS t13, a.idfs[13] AS w13, a.terms[14] AS t14, a.idfs[14] AS w14,
           a.terms[15] AS t15, a.idfs[15] AS w15, a.terms[16] AS t16, a.idfs[16] AS w16
    FROM (SELECT count(*) AS n, array_agg(ti.term ORDER BY ti.ord) AS terms,
                 array_agg(ti.idf ORDER BY ti.ord) AS idfs
          FROM term_idf AS ti) AS a
),
-- The recency and lexical rankings, one sort each. A candidate without a query term has a NULL
-- BM25 and no lexical rank; those with one sort first (NULLS LAST), so counting them in that
-- order gives each its 1-based rank among them, as a row_number() over them alone would.
ranked AS (
    SELECT
        s.*,
        row_number() OVER (ORDER BY s.created_at DESC, s.id) AS recency_rank,
        CASE WHEN s.bm25 > 0.0::float8 THEN
            count(*) FILTER (WHERE s.bm25 > 0.0::float8)
                OVER (ORDER BY s.bm25 DESC NULLS LAST, s.created_at DESC, s.id
                      ROWS UNBOUNDED PRECEDING)
        END AS lexical_rank
    FROM (
        SELECT
            n.id, n.created_at, n.cosine, n.dense_rank, d.token_count, d.bm25,
            d.session_id, d.content, d.content_type, d.importance, d.tags, d.source,
            d.sensitivity, d.metadata, d.embedder
        FROM nearest AS n
        -- Each candidate's row, fetched once through the primary key: one index scan with the
        -- candidate ids as an array (PostgreSQL 17+ walks the index once for a sorted array),
        -- its BM25 computed there (OFFSET 0: once per row, not once per use). Each query term's
        -- frequency is read once ("->>", NULL where the document lacks the term, and for the
        -- slots past the last term); a document holding none has no sum (NULL). The sum adds
        -- the terms in query-term order, 0.0 for a term the document lacks, exactly as
        -- ranking.bm25 adds them (x + 0.0 = x); past 16 terms, one subquery per candidate sums
        -- the terms it holds. The memory's fields are carried only for $22 (NULL
        -- otherwise), so the sorts below move narrow rows.
        JOIN (
            SELECT m.id, m.token_count,
                   CASE WHEN m.n > 16 THEN
                       CASE WHEN m.term_freqs ?| m.terms THEN (
                           SELECT sum(x.idf * (x.tf * m.k1_plus_1) / (x.tf + m.norm))
                           FROM (SELECT ti.idf, (m.term_freqs ->> ti.term)::integer::float8 AS tf
                                 FROM term_idf AS ti OFFSET 0) AS x
                           WHERE x.tf IS NOT NULL
                       ) END
                   WHEN COALESCE(m.tf1, m.tf2, m.tf3, m.tf4, m.tf5, m.tf6, m.tf7, m.tf8, m.tf9,
                                 m.tf10, m.tf11, m.tf12, m.tf13, m.tf14, m.tf15, m.tf16)
                        IS NOT NULL THEN
                         COALESCE(m.w1 * (m.tf1 * m.k1_plus_1) / (m.tf1 + m.norm), 0.0::float8)
                       + COALESCE(m.w2 * (m.tf2 * m.k1_plus_1) / (m.tf2 + m.norm), 0.0::float8)
                       + COALESCE(m.w3 * (m.tf3 * m.k1_plus_1) / (m.tf3 + m.norm), 0.0::float8)
                       + COALESCE(m.w4 * (m.tf4 * m.k1_plus_1) / (m.tf4 + m.norm), 0.0::float8)
                       + COALESCE(m.w5 * (m.tf5 * m.k1_plus_1) / (m.tf5 + m.norm), 0.0::float8)
                       + COALESCE(m.w6 * (m.tf6 * m.k1_plus_1) / (m.tf6 + m.norm), 0.0::float8)
                       + COALESCE(m.w7 * (m.tf7 * m.k1_plus_1) / (m.tf7 + m.norm), 0.0::float8)
                       + COALESCE(m.w8 * (m.tf8 * m.k1_plus_1) / (m.tf8 + m.norm), 0.0::float8)
                       + COALESCE(m.w9 * (m.tf9 * m.k1_plus_1) / (m.tf9 + m.norm), 0.0::float8)
                       + COALESCE(m.w10 * (m.tf10 * m.k1_plus_1) / (m.tf10 + m.norm), 0.0::float8)
                       + COALESCE(m.w11 * (m.tf11 * m.k1_plus_1) / (m.tf11 + m.norm), 0.0::float8)
                       + COALESCE(m.w12 * (m.tf12 * m.k1_plus_1) / (m.tf12 + m.norm), 0.0::float8)
                       + COALESCE(m.w13 * (m.tf13 * m.k1_plus_1) / (m.tf13 + m.norm), 0.0::float8)
                       + COALESCE(m.w14 * (m.tf14 * m.k1_plus_1) / (m.tf14 + m.norm), 0.0::float8)
                       + COALESCE(m.w15 * (m.tf15 * m.k1_plus_1) / (m.tf15 + m.norm), 0.0::float8)
                       + COALESCE(m.w16 * (m.tf16 * m.k1_plus_1) / (m.tf16 + m.norm), 0.0::float8)
                   END AS bm25,
                   CASE WHEN $22 THEN m.session_id END AS session_id,
                   CASE WHEN $22 THEN m.content END AS content,
                   CASE WHEN $22 THEN m.content_type END AS content_type,
                   CASE WHEN $22 THEN m.importance END AS importance,
                   CASE WHEN $22 THEN m.tags END AS tags,
                   CASE WHEN $22 THEN m.source END AS source,
                   CASE WHEN $22 THEN m.sensitivity END AS sensitivity,
                   CASE WHEN $22 THEN m.metadata END AS metadata,
                   CASE WHEN $22 THEN m.embedder END AS embedder
            FROM (
                SELECT m.id, m.token_count, m.term_freqs, m.session_id, m.content,
                       m.content_type, m.importance, m.tags, m.source, m.sensitivity, m.metadata,
                       m.embedder, k.n, k.terms, k.k1_plus_1,
                       $16 * ((1.0::float8 - $17)
                                    + $17 * m.doc_len::float8 / k.avgdl) AS norm,
                       (m.term_freqs ->> k.t1)::integer::float8 AS tf1,
                       (m.term_freqs ->> k.t2)::integer::float8 AS tf2,
                       (m.term_freqs ->> k.t3)::integer::float8 AS tf3,
                       (m.term_freqs ->> k.t4)::integer::float8 AS tf4,
                       (m.term_freqs ->> k.t5)::integer::float8 AS tf5,
                       (m.term_freqs ->> k.t6)::integer::float8 AS tf6,
                       (m.term_freqs ->> k.t7)::integer::float8 AS tf7,
                       (m.term_freqs ->> k.t8)::integer::float8 AS tf8,
                       (m.term_freqs ->> k.t9)::integer::float8 AS tf9,
                       (m.term_freqs ->> k.t10)::integer::float8 AS tf10,
                       (m.term_freqs ->> k.t11)::integer::float8 AS tf11,
                       (m.term_freqs ->> k.t12)::integer::float8 AS tf12,
                       (m.term_freqs ->> k.t13)::integer::float8 AS tf13,
                       (m.term_freqs ->> k.t14)::integer::float8 AS tf14,
                       (m.term_freqs ->> k.t15)::integer::float8 AS tf15,
                       (m.term_freqs ->> k.t16)::integer::float8 AS tf16,
                       k.w1, k.w2, k.w3, k.w4, k.w5, k.w6, k.w7, k.w8,
                       k.w9, k.w10, k.w11, k.w12, k.w13, k.w14, k.w15, k.w16
                FROM %2$s AS m
                CROSS JOIN term_slots AS k
                WHERE m.agent_id = $1
                  AND m.id = ANY (ARRAY(SELECT c.id FROM nearest AS c))
                OFFSET 0
            ) AS m
            OFFSET 0
        ) AS d ON d.id = n.id
    ) AS s
),
fused AS (
    SELECT
        r.*,
        CASE WHEN $10 THEN
            ($12[1] / ($11 + r.dense_rank)::float8
             + COALESCE($12[2] / ($11 + r.lexical_rank)::float8, 0.0::float8))
            + $12[3] / ($11 + r.recency_rank)::float8
        ELSE
            $13 * r.cosine
            + $14 * (
                CASE WHEN extract(epoch FROM ($15 - r.created_at)) <= 0 THEN 1.0::float8
                     ELSE greatest(0.0::float8,
                                   1.0::float8
                                   - extract(epoch FROM ($15 - r.created_at))::float8
                                     / 2592000.0::float8)
                END)
        END AS fused_score
    FROM ranked AS r
)
-- Ordered as the final ranking's window is: no sort of its own.
SELECT
    f.id,
    row_number() OVER (ORDER BY f.fused_score DESC, f.created_at DESC, f.id)::integer,
    f.cosine,
    f.bm25,
    f.dense_rank::integer,
    CASE WHEN $10 THEN f.lexical_rank::integer END,
    f.recency_rank::integer,
    f.fused_score,
    f.session_id, f.content, f.content_type, f.importance, f.tags, f.source, f.sensitivity,
    f.created_at,
    f.metadata,
    f.embedder,
    f.token_count,
    ARRAY[f.dense_rank::integer, CASE WHEN $10 THEN f.lexical_rank::integer END,
          f.recency_rank::integer]
FROM fused AS f
ORDER BY f.fused_score DESC, f.created_at DESC, f.id
-- ranking: end
        ) AS b (id, "position", cosine, bm25, dense_rank, lexical_rank, recency_rank,
                fused_score, session_id, content, content_type, importance, tags, source,
                sensitivity, created_at, metadata, embedder, token_count, ranks)
    ),
    c AS MATERIALIZED (
        SELECT t.pos AS "position", p.ids[t.pos] AS id, p.cosines[t.pos] AS cosine,
               p.bm25s[t.pos] AS bm25, p.fused_scores[t.pos] AS fused_score,
               ARRAY(SELECT unnest(p.ranks[t.pos:t.pos][:])) AS ranks
        FROM p CROSS JOIN unnest(p.taken) AS t(pos)
    )
    SELECT CASE WHEN c.id IS NULL THEN 'ranked' ELSE 'memory' END, p.n, c.cosine, c.bm25,
           c.ranks, c.fused_score, f.id::text, f.session_id::text, f.content, f.content_type,
           f.importance, f.tags, f.source, f.sensitivity, f.created_at, f.metadata::text,
           f.embedder::text, f.token_count, f.expires_at, f.source_turn_ids, f.version,
           f.valid_from, f.valid_to, NULL::text, NULL::text, NULL::jsonb
    -- The chosen memories' rows, in one index scan of their ids (as the candidates' above).
    FROM p
    LEFT JOIN (c JOIN (
        SELECT m.id, m.session_id, m.content, m.content_type, m.importance, m.tags, m.source,
               m.sensitivity, m.created_at, m.metadata, m.embedder, m.token_count, m.expires_at,
               m.source_turn_ids, m.version, m.valid_from, m.valid_to
        FROM %2$s AS m
        WHERE m.agent_id = $1 AND m.id = ANY (ARRAY(SELECT c.id FROM c))
        OFFSET 0) AS f ON f.id = c.id) ON true
    ORDER BY c.position)
$prepare$,
                    v_statement,
                    pg_catalog.shard_name('{schema}.memories'::regclass, v_memories),
                    pg_catalog.shard_name('{schema}.turns'::regclass,
                        pg_catalog.get_shard_id_for_distribution_column('{schema}.turns'::regclass,
                                                                        p_agent_id)),
                    pg_catalog.shard_name('{schema}.sessions'::regclass,
                        pg_catalog.get_shard_id_for_distribution_column('{schema}.sessions'::regclass,
                                                                        p_agent_id)),
                    pg_catalog.shard_name('{schema}.agent_stats'::regclass,
                        pg_catalog.get_shard_id_for_distribution_column(
                            '{schema}.agent_stats'::regclass, p_agent_id)),
                    pg_catalog.shard_name('{schema}.term_stats'::regclass,
                        pg_catalog.get_shard_id_for_distribution_column(
                            '{schema}.term_stats'::regclass, p_agent_id)),
                    (SELECT pg_catalog.shard_name(s.logicalrelid, s.shardid)
                     FROM pg_catalog.pg_dist_shard AS s
                     WHERE s.logicalrelid = '{schema}.embedders'::regclass));
            END IF;
            RETURN QUERY EXECUTE v_call;
            PERFORM set_config('plan_cache_mode', v_plans, true);
            RETURN;
        EXCEPTION WHEN undefined_table THEN
            -- A shard table dropped since the look-up (a shard move's deferred drop): no row
            -- was returned, and the block's setting is undone with it; the distributed
            -- statements below find the agent's placement (and its excluded ids again).
            NULL;
        END;
    END IF;
    IF p_n_docs IS NULL THEN
        -- One probe of the partial index of expiring memories.
        p_excluded := (SELECT array_agg(e.id) FROM {schema}.memories AS e
                       WHERE e.agent_id = p_agent_id AND e.expires_at <= p_now);
    END IF;
    RETURN QUERY
-- statement: prepared above as python -m actrone_pg.migrations._render writes it
(SELECT 'turn'::text, NULL::integer, NULL::float8, NULL::float8, NULL::integer[],
               NULL::float8, t.id::text, NULL::text, NULL::text, NULL::text, NULL::float8,
               NULL::text[], NULL::text, NULL::text, t.created_at, NULL::text, NULL::text,
               t.token_count, NULL::timestamptz, NULL::text[],
               NULL::integer, NULL::timestamptz, NULL::timestamptz, t.user_message,
               t.assistant_message, t.tool_results
        FROM {schema}.turns AS t
        JOIN {schema}.sessions AS x ON x.agent_id = t.agent_id AND x.session_id = t.session_id
        WHERE p_session_id IS NOT NULL AND x.agent_id = p_agent_id AND x.session_id = p_session_id
          AND x.last_active_at >= now() - make_interval(secs => p_session_ttl)
        ORDER BY t.seq DESC
        LIMIT p_turn_limit)
UNION ALL
-- The ranking's rows in its order (its own final order, so no sort of their own): their costs
-- packed, and the columns of the chosen ones as arrays, read below by position.
(WITH p AS MATERIALIZED (
        SELECT {schema}.pack_positions(
                   array_agg(b.token_count ORDER BY b.fused_score DESC, b.created_at DESC, b.id),
                   p_budget, p_max_hits) AS taken,
               count(*)::integer AS n,
               array_agg(b.id ORDER BY b.fused_score DESC, b.created_at DESC, b.id) AS ids,
               array_agg(b.cosine ORDER BY b.fused_score DESC, b.created_at DESC, b.id)
                   AS cosines,
               array_agg(b.bm25 ORDER BY b.fused_score DESC, b.created_at DESC, b.id) AS bm25s,
               array_agg(b.fused_score ORDER BY b.fused_score DESC, b.created_at DESC, b.id)
                   AS fused_scores,
               array_agg(b.ranks ORDER BY b.fused_score DESC, b.created_at DESC, b.id) AS ranks
        FROM (
-- ranking: hybrid_search's body, as python -m actrone_pg.migrations._render copies it
WITH
-- Admission: cosine >= threshold, the nearest p_limit, ties newer first then id; the threshold is
-- applied before the sort, so only admitted rows are sorted (migration 0003). The dense rank is
-- the row's place in that same sort (one sort for the admission and the dense ranking).
nearest AS MATERIALIZED (
    SELECT u.id, u.created_at, u.cosine,
           row_number() OVER (ORDER BY u.cosine DESC, u.created_at DESC, u.id) AS dense_rank
    FROM (
        -- Vectors of up to 600 dimensions come from an index-only scan of ix_memories_candidates;
        -- larger ones, which do not fit in a btree entry, through the primary key. The
        -- embedder's registered dimension decides the branch once per call (a one-time filter);
        -- with p_candidates only the third branch runs, fetching those ids by primary key.
        SELECT m.id, m.created_at, -(m.embedding OPERATOR({vector_schema}.<#>) p_vector) AS cosine
        FROM {schema}.memories AS m
        WHERE m.agent_id = p_agent_id AND m.embedder = p_embedder
          AND {vector_schema}.vector_dims(m.embedding) <= 600
          AND -(m.embedding OPERATOR({vector_schema}.<#>) p_vector) >= p_threshold
          AND (SELECT e.dimensions FROM {schema}.embedders AS e WHERE e.name = p_embedder) <= 600
          AND p_candidates IS NULL
          AND (p_excluded IS NULL OR m.id <> ALL (p_excluded))
        UNION ALL
        SELECT m.id, m.created_at, -(m.embedding OPERATOR({vector_schema}.<#>) p_vector)
        FROM {schema}.memories AS m
        WHERE m.agent_id = p_agent_id AND m.embedder = p_embedder
          AND -(m.embedding OPERATOR({vector_schema}.<#>) p_vector) >= p_threshold
          AND (SELECT e.dimensions FROM {schema}.embedders AS e WHERE e.name = p_embedder) > 600
          AND p_candidates IS NULL
          AND (p_excluded IS NULL OR m.id <> ALL (p_excluded))
        UNION ALL
        SELECT m.id, m.created_at, -(m.embedding OPERATOR({vector_schema}.<#>) p_vector)
        FROM {schema}.memories AS m
        WHERE p_candidates IS NOT NULL
          AND m.agent_id = p_agent_id AND m.id = ANY (p_candidates) AND m.embedder = p_embedder
          AND -(m.embedding OPERATOR({vector_schema}.<#>) p_vector) >= p_threshold
          AND (p_excluded IS NULL OR m.id <> ALL (p_excluded))
    ) AS u
    ORDER BY u.cosine DESC, u.created_at DESC, u.id
    LIMIT p_limit
),
-- BM25 statistics of the agent's whole corpus (every embedder), kept by the writers, or the
-- ones given (a filtered set's).
given_stats AS (
    SELECT
        COALESCE(p_n_docs, max(s.n_docs), 0) AS n_docs,
        COALESCE(p_total_length, max(s.total_length), 0) AS total_length
    FROM {schema}.agent_stats AS s
    WHERE s.agent_id = p_agent_id AND p_n_docs IS NULL
),
stats AS MATERIALIZED (
    SELECT
        g.n_docs,
        CASE WHEN g.n_docs > 0 AND g.total_length > 0
             THEN g.total_length::float8 / g.n_docs::float8
             ELSE 1.0::float8 END AS avgdl
    FROM given_stats AS g
),
terms AS (
    SELECT t.term, min(t.ord) AS ord
    FROM unnest(p_terms) WITH ORDINALITY AS t(term, ord)
    WHERE t.term IS NOT NULL AND t.term <> ''
    GROUP BY t.term
),
-- MATERIALIZED: computed once, not once per candidate. Each term's document frequency is one
-- primary-key probe (as a join the planner read all of the agent's term statistics, migration
-- 0008). Stored in query-term order, the order every read of it below returns, so that each
-- candidate's BM25 terms are summed in query-term order, as ranking.bm25 sums them.
term_idf AS MATERIALIZED (
    SELECT
        terms.term,
        terms.ord,
        ln(1.0::float8
           + ((st.n_docs - f.df)::float8 + 0.5::float8) / (f.df::float8 + 0.5::float8)) AS idf
    FROM terms
    CROSS JOIN stats AS st
    CROSS JOIN LATERAL (
        SELECT CASE WHEN p_doc_freqs IS NOT NULL
                    THEN COALESCE(p_doc_freqs[terms.ord::integer], 0)
                    ELSE COALESCE((
                        SELECT ts.df FROM {schema}.term_stats AS ts
                        WHERE ts.agent_id = p_agent_id AND ts.term = terms.term
                    ), 0) END AS df
        OFFSET 0  -- one probe per term (flattened, the CASE stood three times: 3 probes)
    ) AS f
    -- 0018: a term no document holds adds 0.0 to every sum; it is not looked up.
    WHERE f.df > 0
    ORDER BY terms.ord
),
-- The terms of term_idf in columns, t1..t16 and their IDFs w1..w16 (NULL past the last), so that
-- a candidate's BM25 is one expression over its row instead of a subquery per candidate (see
-- the candidates' rows below); terms, n and the subquery serve a query of more terms. Also the
-- constants of every candidate's BM25, computed once.
term_slots AS MATERIALIZED (
    SELECT a.n, a.terms, (SELECT st.avgdl FROM stats AS st) AS avgdl,
           p_bm25_k1 + 1.0::float8 AS k1_plus_1,
           a.terms[1] AS t1, a.idfs[1] AS w1, a.terms[2] AS t2, a.idfs[2] AS w2,
           a.terms[3] AS t3, a.idfs[3] AS w3, a.terms[4] AS t4, a.idfs[4] AS w4,
           a.terms[5] AS t5, a.idfs[5] AS w5, a.terms[6] AS t6, a.idfs[6] AS w6,
           a.terms[7] AS t7, a.idfs[7] AS w7, a.terms[8] AS t8, a.idfs[8] AS w8,
           a.terms[9] AS t9, a.idfs[9] AS w9, a.terms[10] AS t10, a.idfs[10] AS w10,
           a.terms[11] AS t11, a.idfs[11] AS w11, a.terms[12] AS t12, a.idfs[12] AS w12,
           a.terms[13] AS t13, a.idfs[13] AS w13, a.terms[14] AS t14, a.idfs[14] AS w14,
           a.terms[15] AS t15, a.idfs[15] AS w15, a.terms[16] AS t16, a.idfs[16] AS w16
    FROM (SELECT count(*) AS n, array_agg(ti.term ORDER BY ti.ord) AS terms,
                 array_agg(ti.idf ORDER BY ti.ord) AS idfs
          FROM term_idf AS ti) AS a
),
-- The recency and lexical rankings, one sort each. A candidate without a query term has a NULL
-- BM25 and no lexical rank; those with one sort first (NULLS LAST), so counting them in that
-- order gives each its 1-based rank among them, as a row_number() over them alone would.
ranked AS (
    SELECT
        s.*,
        row_number() OVER (ORDER BY s.created_at DESC, s.id) AS recency_rank,
        CASE WHEN s.bm25 > 0.0::float8 THEN
            count(*) FILTER (WHERE s.bm25 > 0.0::float8)
                OVER (ORDER BY s.bm25 DESC NULLS LAST, s.created_at DESC, s.id
                      ROWS UNBOUNDED PRECEDING)
        END AS lexical_rank
    FROM (
        SELECT
            n.id, n.created_at, n.cosine, n.dense_rank, d.token_count, d.bm25,
            d.session_id, d.content, d.content_type, d.importance, d.tags, d.source,
            d.sensitivity, d.metadata, d.embedder
        FROM nearest AS n
        -- Each candidate's row, fetched once through the primary key: one index scan with the
        -- candidate ids as an array (PostgreSQL 17+ walks the index once for a sorted array),
        -- its BM25 computed there (OFFSET 0: once per row, not once per use). Each query term's
        -- frequency is read once ("->>", NULL where the document lacks the term, and for the
        -- slots past the last term); a document holding none has no sum (NULL). The sum adds
        -- the terms in query-term order, 0.0 for a term the document lacks, exactly as
        -- ranking.bm25 adds them (x + 0.0 = x); past 16 terms, one subquery per candidate sums
        -- the terms it holds. The memory's fields are carried only for p_content (NULL
        -- otherwise), so the sorts below move narrow rows.
        JOIN (
            SELECT m.id, m.token_count,
                   CASE WHEN m.n > 16 THEN
                       CASE WHEN m.term_freqs ?| m.terms THEN (
                           SELECT sum(x.idf * (x.tf * m.k1_plus_1) / (x.tf + m.norm))
                           FROM (SELECT ti.idf, (m.term_freqs ->> ti.term)::integer::float8 AS tf
                                 FROM term_idf AS ti OFFSET 0) AS x
                           WHERE x.tf IS NOT NULL
                       ) END
                   WHEN COALESCE(m.tf1, m.tf2, m.tf3, m.tf4, m.tf5, m.tf6, m.tf7, m.tf8, m.tf9,
                                 m.tf10, m.tf11, m.tf12, m.tf13, m.tf14, m.tf15, m.tf16)
                        IS NOT NULL THEN
                         COALESCE(m.w1 * (m.tf1 * m.k1_plus_1) / (m.tf1 + m.norm), 0.0::float8)
                       + COALESCE(m.w2 * (m.tf2 * m.k1_plus_1) / (m.tf2 + m.norm), 0.0::float8)
                       + COALESCE(m.w3 * (m.tf3 * m.k1_plus_1) / (m.tf3 + m.norm), 0.0::float8)
                       + COALESCE(m.w4 * (m.tf4 * m.k1_plus_1) / (m.tf4 + m.norm), 0.0::float8)
                       + COALESCE(m.w5 * (m.tf5 * m.k1_plus_1) / (m.tf5 + m.norm), 0.0::float8)
                       + COALESCE(m.w6 * (m.tf6 * m.k1_plus_1) / (m.tf6 + m.norm), 0.0::float8)
                       + COALESCE(m.w7 * (m.tf7 * m.k1_plus_1) / (m.tf7 + m.norm), 0.0::float8)
                       + COALESCE(m.w8 * (m.tf8 * m.k1_plus_1) / (m.tf8 + m.norm), 0.0::float8)
                       + COALESCE(m.w9 * (m.tf9 * m.k1_plus_1) / (m.tf9 + m.norm), 0.0::float8)
                       + COALESCE(m.w10 * (m.tf10 * m.k1_plus_1) / (m.tf10 + m.norm), 0.0::float8)
                       + COALESCE(m.w11 * (m.tf11 * m.k1_plus_1) / (m.tf11 + m.norm), 0.0::float8)
                       + COALESCE(m.w12 * (m.tf12 * m.k1_plus_1) / (m.tf12 + m.norm), 0.0::float8)
                       + COALESCE(m.w13 * (m.tf13 * m.k1_plus_1) / (m.tf13 + m.norm), 0.0::float8)
                       + COALESCE(m.w14 * (m.tf14 * m.k1_plus_1) / (m.tf14 + m.norm), 0.0::float8)
                       + COALESCE(m.w15 * (m.tf15 * m.k1_plus_1) / (m.tf15 + m.norm), 0.0::float8)
                       + COALESCE(m.w16 * (m.tf16 * m.k1_plus_1) / (m.tf16 + m.norm), 0.0::float8)
                   END AS bm25,
                   CASE WHEN p_content THEN m.session_id END AS session_id,
                   CASE WHEN p_content THEN m.content END AS content,
                   CASE WHEN p_content THEN m.content_type END AS content_type,
                   CASE WHEN p_content THEN m.importance END AS importance,
                   CASE WHEN p_content THEN m.tags END AS tags,
                   CASE WHEN p_content THEN m.source END AS source,
                   CASE WHEN p_content THEN m.sensitivity END AS sensitivity,
                   CASE WHEN p_content THEN m.metadata END AS metadata,
                   CASE WHEN p_content THEN m.embedder END AS embedder
            FROM (
                SELECT m.id, m.token_count, m.term_freqs, m.session_id, m.content,
                       m.content_type, m.importance, m.tags, m.source, m.sensitivity, m.metadata,
                       m.embedder, k.n, k.terms, k.k1_plus_1,
                       p_bm25_k1 * ((1.0::float8 - p_bm25_b)
                                    + p_bm25_b * m.doc_len::float8 / k.avgdl) AS norm,
                       (m.term_freqs ->> k.t1)::integer::float8 AS tf1,
                       (m.term_freqs ->> k.t2)::integer::float8 AS tf2,
                       (m.term_freqs ->> k.t3)::integer::float8 AS tf3,
                       (m.term_freqs ->> k.t4)::integer::float8 AS tf4,
                       (m.term_freqs ->> k.t5)::integer::float8 AS tf5,
                       (m.term_freqs ->> k.t6)::integer::float8 AS tf6,
                       (m.term_freqs ->> k.t7)::integer::float8 AS tf7,
                       (m.term_freqs ->> k.t8)::integer::float8 AS tf8,
                       (m.term_freqs ->> k.t9)::integer::float8 AS tf9,
                       (m.term_freqs ->> k.t10)::integer::float8 AS tf10,
                       (m.term_freqs ->> k.t11)::integer::float8 AS tf11,
                       (m.term_freqs ->> k.t12)::integer::float8 AS tf12,
                       (m.term_freqs ->> k.t13)::integer::float8 AS tf13,
                       (m.term_freqs ->> k.t14)::integer::float8 AS tf14,
                       (m.term_freqs ->> k.t15)::integer::float8 AS tf15,
                       (m.term_freqs ->> k.t16)::integer::float8 AS tf16,
                       k.w1, k.w2, k.w3, k.w4, k.w5, k.w6, k.w7, k.w8,
                       k.w9, k.w10, k.w11, k.w12, k.w13, k.w14, k.w15, k.w16
                FROM {schema}.memories AS m
                CROSS JOIN term_slots AS k
                WHERE m.agent_id = p_agent_id
                  AND m.id = ANY (ARRAY(SELECT c.id FROM nearest AS c))
                OFFSET 0
            ) AS m
            OFFSET 0
        ) AS d ON d.id = n.id
    ) AS s
),
fused AS (
    SELECT
        r.*,
        CASE WHEN p_hybrid THEN
            (p_rrf_weights[1] / (p_rrf_k + r.dense_rank)::float8
             + COALESCE(p_rrf_weights[2] / (p_rrf_k + r.lexical_rank)::float8, 0.0::float8))
            + p_rrf_weights[3] / (p_rrf_k + r.recency_rank)::float8
        ELSE
            p_relevance_weight * r.cosine
            + p_recency_weight * (
                CASE WHEN extract(epoch FROM (p_now - r.created_at)) <= 0 THEN 1.0::float8
                     ELSE greatest(0.0::float8,
                                   1.0::float8
                                   - extract(epoch FROM (p_now - r.created_at))::float8
                                     / 2592000.0::float8)
                END)
        END AS fused_score
    FROM ranked AS r
)
-- Ordered as the final ranking's window is: no sort of its own.
SELECT
    f.id,
    row_number() OVER (ORDER BY f.fused_score DESC, f.created_at DESC, f.id)::integer,
    f.cosine,
    f.bm25,
    f.dense_rank::integer,
    CASE WHEN p_hybrid THEN f.lexical_rank::integer END,
    f.recency_rank::integer,
    f.fused_score,
    f.session_id, f.content, f.content_type, f.importance, f.tags, f.source, f.sensitivity,
    f.created_at,
    f.metadata,
    f.embedder,
    f.token_count,
    ARRAY[f.dense_rank::integer, CASE WHEN p_hybrid THEN f.lexical_rank::integer END,
          f.recency_rank::integer]
FROM fused AS f
ORDER BY f.fused_score DESC, f.created_at DESC, f.id
-- ranking: end
        ) AS b (id, "position", cosine, bm25, dense_rank, lexical_rank, recency_rank,
                fused_score, session_id, content, content_type, importance, tags, source,
                sensitivity, created_at, metadata, embedder, token_count, ranks)
    ),
    c AS MATERIALIZED (
        SELECT t.pos AS "position", p.ids[t.pos] AS id, p.cosines[t.pos] AS cosine,
               p.bm25s[t.pos] AS bm25, p.fused_scores[t.pos] AS fused_score,
               ARRAY(SELECT unnest(p.ranks[t.pos:t.pos][:])) AS ranks
        FROM p CROSS JOIN unnest(p.taken) AS t(pos)
    )
    SELECT CASE WHEN c.id IS NULL THEN 'ranked' ELSE 'memory' END, p.n, c.cosine, c.bm25,
           c.ranks, c.fused_score, f.id::text, f.session_id::text, f.content, f.content_type,
           f.importance, f.tags, f.source, f.sensitivity, f.created_at, f.metadata::text,
           f.embedder::text, f.token_count, f.expires_at, f.source_turn_ids, f.version,
           f.valid_from, f.valid_to, NULL::text, NULL::text, NULL::jsonb
    -- The chosen memories' rows, in one index scan of their ids (as the candidates' above).
    FROM p
    LEFT JOIN (c JOIN (
        SELECT m.id, m.session_id, m.content, m.content_type, m.importance, m.tags, m.source,
               m.sensitivity, m.created_at, m.metadata, m.embedder, m.token_count, m.expires_at,
               m.source_turn_ids, m.version, m.valid_from, m.valid_to
        FROM {schema}.memories AS m
        WHERE m.agent_id = p_agent_id AND m.id = ANY (ARRAY(SELECT c.id FROM c))
        OFFSET 0) AS f ON f.id = c.id) ON true
    ORDER BY c.position)
-- statement: end
    ;
    PERFORM set_config('plan_cache_mode', v_plans, true);
END
$fn$
