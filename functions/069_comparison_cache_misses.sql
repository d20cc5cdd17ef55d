-- comparison_cache_misses: why shadow runs did not read the prompt cache. After
-- 069_analyst_role.sql, whose role it is granted to.
--
-- Three kinds of answer, each kept as its source gave it: the API's (or the simulator's)
-- diagnostics.cache_miss_reason on a hot run that asked for it (model_changed, system_changed,
-- tools_changed, messages_changed, previous_message_not_found, unavailable), with its estimate
-- of the tokens that missed; why a run went cold (shadow_runs.path_reason, from
-- ember.hot_path_rule); and a hot run that read nothing and was given no reason.
CREATE OR REPLACE FUNCTION ember.comparison_cache_misses(
    p_since timestamptz DEFAULT NULL, p_until timestamptz DEFAULT NULL
)
RETURNS TABLE (
    path text,
    model text,
    reason text,
    source text,
    runs bigint,
    missed_tokens numeric
)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, ember, pg_temp
AS $$
BEGIN
    PERFORM ember.comparison_check_window(p_since, p_until);
    RETURN QUERY
    WITH r AS (
        SELECT s.path, s.model,
               s.cache_diagnostics #>> '{cache_miss_reason,type}' AS api_reason,
               (s.cache_diagnostics #>> '{cache_miss_reason,cache_missed_input_tokens}')::bigint AS missed,
               s.path_reason, s.cache_read_tokens, s.status
        FROM ember.comparison_window_runs(p_since, p_until) AS w
        JOIN ember.shadow_runs AS s ON s.id = w.run_id
        WHERE w.path IN ('hot', 'cold')
    ),
    why AS (
        SELECT r.path, r.model, r.missed,
               CASE
                   WHEN r.api_reason IS NOT NULL THEN r.api_reason
                   WHEN r.path = 'cold' THEN coalesce(r.path_reason, 'cold, no reason recorded')
                   ELSE 'no cache read, no reason given'
               END AS reason,
               CASE
                   WHEN r.api_reason IS NOT NULL THEN 'diagnostics'
                   WHEN r.path = 'cold' THEN 'hot_path_rule'
                   ELSE 'usage'
               END AS source
        FROM r
        WHERE r.api_reason IS NOT NULL
            OR r.path = 'cold'
            OR (r.path = 'hot' AND r.status = 'completed' AND r.cache_read_tokens = 0)
    )
    SELECT w.path, w.model, w.reason, w.source, count(*), sum(w.missed)
    FROM why AS w
    GROUP BY w.path, w.model, w.reason, w.source
    ORDER BY count(*) DESC, w.path, w.model, w.reason;
END;
$$;

CREATE OR REPLACE VIEW ember.comparison_cache_misses AS
SELECT * FROM ember.comparison_cache_misses(NULL, NULL);

COMMENT ON VIEW ember.comparison_cache_misses IS
'Why shadow runs did not read the prompt cache, by path, model and reason: the API''s
diagnostics.cache_miss_reason (source diagnostics), why a run went cold (source hot_path_rule), or a hot run
that read nothing with no reason given (source usage). missed_tokens is the API''s estimate, where it gave one.
Windowed by run start: ember.comparison_cache_misses(since, until). No run of an isolated thread.';

GRANT SELECT ON ember.comparison_cache_misses TO ember_analyst;
REVOKE ALL ON FUNCTION ember.comparison_cache_misses(timestamptz, timestamptz) FROM public;
GRANT EXECUTE ON FUNCTION ember.comparison_cache_misses(timestamptz, timestamptz) TO ember_analyst;
