-- What each shadow run cost at list price (seed 000 section 6), from the price snapshot the claim
-- copied onto the run: later edits of the registry never reprice a finished run. Prices are per
-- million tokens. Any missing price makes the whole figure NULL: a partial sum would be an
-- undercount that looks like a real number, and an unknown cost must read as unknown.
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
    (
        r.input_tokens * r.price_input
        + r.cache_read_tokens * r.price_cache_read
        + r.cache_write_5m_tokens * r.price_cache_write_5m
        + r.cache_write_1h_tokens * r.price_cache_write_1h
        + r.output_tokens * r.price_output
    ) / 1000000.0 AS cost_usd
FROM ember.shadow_runs AS r;
