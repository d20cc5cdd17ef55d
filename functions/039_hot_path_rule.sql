-- Whether a prefix may take the hot path on a model, by that model's own cache rules: the one
-- place this is decided (shadow_ready asks it; a cold run records its answer as path_reason).
--
-- Hot only when the registry knows the model's cache TTL and a minimum cacheable length
-- (documented or observed, whichever is larger: a prefix between the two is not cached by the
-- API, and replaying it would be paid at full price while booked as hot), the prefix is at
-- least that long, and younger than the TTL (counted from the original request's start, when
-- the entry's lifetime began). Unknown rules are cold, never a guess: the reason says which
-- rule is missing, so an operator knows what to record with `ember models load`.
CREATE OR REPLACE FUNCTION ember.hot_path_rule(
    p_model text, p_prefix_tokens bigint, p_prefix_age interval,
    OUT eligible boolean, OUT reason text
)
LANGUAGE sql STABLE
AS $$
    SELECT r.why IS NULL, r.why
    FROM (SELECT 1) AS one
    LEFT JOIN ember.models AS m ON m.id = p_model
    CROSS JOIN LATERAL (
        SELECT CASE
            WHEN m.id IS NULL THEN format('model %s is not in the registry', coalesce(p_model, 'NULL'))
            WHEN m.cache_ttl IS NULL THEN format('the cache TTL of %s is unknown', m.id)
            WHEN m.min_cacheable_tokens IS NULL AND m.observed_min_cacheable_tokens IS NULL
                THEN format('the minimum cacheable length of %s is unknown', m.id)
            WHEN p_prefix_tokens IS NULL THEN 'the prefix length is unknown'
            WHEN p_prefix_age IS NULL OR p_prefix_age >= m.cache_ttl
                THEN format('the prefix is %s old, past the %s cache TTL of %s',
                            coalesce(justify_interval(date_trunc('second', p_prefix_age))::text, 'of unknown age'),
                            m.cache_ttl, m.id)
            WHEN p_prefix_tokens < greatest(m.min_cacheable_tokens, m.observed_min_cacheable_tokens)
                THEN format('the prefix is %s tokens, below the minimum cacheable length of %s (%s)',
                            p_prefix_tokens, m.id,
                            concat_ws(', ', 'documented ' || m.min_cacheable_tokens,
                                      'observed ' || m.observed_min_cacheable_tokens))
        END AS why
    ) AS r
$$;

COMMENT ON FUNCTION ember.hot_path_rule(text, bigint, interval) IS
'Whether a prefix of this length and age may take the hot path on this model, and if not why.';
