-- What each shadow run cost at list price (seed 000 section 6), from the price snapshot the claim
-- copied onto the run: later edits of the registry never reprice a finished run. Prices are per
-- million tokens. Any missing price makes the whole figure NULL: a partial sum would be an
-- undercount that looks like a real number, and an unknown cost must read as unknown.
-- A list-price estimate in USD of the tokens of one run: the one place cost is computed (every
-- cost view calls it). Prices are per million tokens, from the snapshot the run copied at claim.
-- p_tiers are the model's length tiers as the run copied them ([{above_tokens, price_*}]): when
-- the prompt (input + cache reads + cache writes) is longer than a tier's above_tokens, every
-- token of the run, output included, is priced at the highest such tier, as the pricing page
-- prices a prompt-length tier. A run of several requests (cold pages, steward rounds) is
-- tiered by its summed prompt, which can only overstate it, and only past the tier.
CREATE OR REPLACE FUNCTION ember.run_cost_usd(
    p_input bigint, p_cache_read bigint, p_write_5m bigint, p_write_1h bigint, p_output bigint,
    p_price_input numeric, p_price_output numeric, p_price_write_5m numeric,
    p_price_write_1h numeric, p_price_read numeric, p_tiers jsonb DEFAULT NULL
)
RETURNS numeric
LANGUAGE sql IMMUTABLE
AS $$
    SELECT (
        p_input * CASE WHEN t.tier IS NULL THEN p_price_input ELSE (t.tier ->> 'price_input')::numeric END
        + p_output * CASE WHEN t.tier IS NULL THEN p_price_output ELSE (t.tier ->> 'price_output')::numeric END
        + p_write_5m * CASE WHEN t.tier IS NULL THEN p_price_write_5m
                            ELSE (t.tier ->> 'price_cache_write_5m')::numeric END
        + p_write_1h * CASE WHEN t.tier IS NULL THEN p_price_write_1h
                            ELSE (t.tier ->> 'price_cache_write_1h')::numeric END
        + p_cache_read * CASE WHEN t.tier IS NULL THEN p_price_read
                              ELSE (t.tier ->> 'price_cache_read')::numeric END
    ) / 1000000.0
    FROM (SELECT 1) AS one
    LEFT JOIN LATERAL (
        SELECT e.value AS tier
        FROM jsonb_array_elements(
            CASE WHEN jsonb_typeof(p_tiers) = 'array' THEN p_tiers ELSE '[]'::jsonb END
        ) AS e (value)
        WHERE (e.value ->> 'above_tokens')::bigint < p_input + p_cache_read + p_write_5m + p_write_1h
        ORDER BY (e.value ->> 'above_tokens')::bigint DESC
        LIMIT 1
    ) AS t ON true
$$;

CREATE OR REPLACE VIEW ember.shadow_run_cost AS
SELECT
    r.id AS run_id,
    r.thread_id,
    r.generation_id,
    r.path,
    r.model,
    r.status,
    r.price_as_of,
    r.input_tokens,
    r.cache_read_tokens,
    r.cache_write_5m_tokens,
    r.cache_write_1h_tokens,
    r.output_tokens,
    (
        SELECT count(*) FROM ember.messages AS m
        WHERE m.generation_id = r.generation_id AND m.seq > r.from_seq AND m.seq <= r.through_seq
    ) AS messages_read,
    ember.run_cost_usd(
        r.input_tokens, r.cache_read_tokens, r.cache_write_5m_tokens, r.cache_write_1h_tokens,
        r.output_tokens, r.price_input, r.price_output, r.price_cache_write_5m,
        r.price_cache_write_1h, r.price_cache_read, r.price_tiers
    ) AS cost_usd
FROM ember.shadow_runs AS r;
