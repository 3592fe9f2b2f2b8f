-- The distinct lower-case letter/digit runs of a query, in order of first appearance: the SQL
-- twin of actrone_pg.ranking.query_terms, for people calling {schema}.hybrid_search from psql.
-- It matches the Python tokenizer for ASCII text; for other scripts PostgreSQL's regex classes
-- follow the database locale, so the library itself always passes terms tokenised in Python.
CREATE OR REPLACE FUNCTION {schema}.query_terms(p_query text)
RETURNS text[]
LANGUAGE sql STABLE STRICT PARALLEL SAFE
AS $$
SELECT COALESCE(array_agg(t.term ORDER BY t.ord), ARRAY[]::text[])
FROM (
    SELECT r.m[1] AS term, min(r.o) AS ord
    FROM regexp_matches(lower(p_query), '[^\W_]+', 'g') WITH ORDINALITY AS r(m, o)
    GROUP BY r.m[1]
) AS t
$$
