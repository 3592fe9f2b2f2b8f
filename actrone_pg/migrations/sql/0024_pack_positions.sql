-- The memories of a ranking that fit a token budget, chosen exactly as
-- actrone_pg.budget.pack_costs chooses them (spec §3.3): in rank order, each memory whose cost
-- fits what is left of the budget is taken, one that does not is skipped and the next tried.
-- Installed by the migrations as {schema}.pack_positions.
--
-- p_costs are the ranked memories' costs (token counts), best first; the result is the
-- 1-based positions taken, in order. p_budget NULL takes every memory; p_max_items stops after
-- that many (NULL: no limit). The walk ends as soon as even the cheapest memory left would not
-- fit, instead of trying all (typically 500) candidates for a budget that holds a few dozen.
--
-- The store calls it inside the statement that ranks (hybrid_search) and reads the chosen
-- memories' rows, so one round trip and one snapshot serve retrieve_context's L2 share. From
-- psql, SELECT {schema}.pack_positions(ARRAY[300, 900, 200], 1000) gives positions 1 and 3.
CREATE OR REPLACE FUNCTION {schema}.pack_positions(
    p_costs integer[],
    p_budget bigint,
    p_max_items integer DEFAULT NULL
)
RETURNS integer[]
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    n integer := coalesce(cardinality(p_costs), 0);
    cheapest integer[];
    taken integer[] := ARRAY[]::integer[];
    used bigint := 0;
    i integer;
BEGIN
    IF p_budget IS NULL THEN
        RETURN ARRAY(SELECT generate_series(1, least(n, coalesce(p_max_items, n))));
    END IF;
    -- cheapest[i] = the smallest cost from position i on
    cheapest := array_fill(NULL::integer, ARRAY[n]);
    FOR i IN REVERSE n..1 LOOP
        cheapest[i] := CASE WHEN i = n THEN p_costs[i] ELSE least(p_costs[i], cheapest[i + 1]) END;
    END LOOP;
    FOR i IN 1..n LOOP
        EXIT WHEN used + cheapest[i] > p_budget OR cardinality(taken) = p_max_items;
        IF used + p_costs[i] <= p_budget THEN
            taken := taken || i;
            used := used + p_costs[i];
        END IF;
    END LOOP;
    RETURN taken;
END
$$;
