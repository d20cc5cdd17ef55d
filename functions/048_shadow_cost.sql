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

-- What a shadow claim predicts each path would cost in input, before any call (issue 39; seed
-- 000's hot/cold fork, 「花钱的地方与信息量匹配」), in list-price USD from the registry as it stands:
-- the claim records it on the run (predicted_hot_usd, predicted_cold_usd, cost_prediction) and
-- comparison_cost sums it beside what the runs did cost. Tokens are estimated as the simulator
-- and the steward's page size estimate them, a token for four characters of what would be sent.
--
-- Hot: the host's whole recorded request read from the cache (its input as the host's own usage
-- reported it), and a tail at the input price: the recorded answer (its output tokens), the rows
-- the shadow question lists (p_hot_rows, as the plan renders them) and the question itself
-- (setting shadow_question_tokens). NULL without a prefix, or when its usage is unreadable.
-- Cold: the rows the cold reader would read (p_cold_pages as rendered, or, on a hot claim where
-- nothing was rendered for it, the rows' content and a header's worth per row), and
-- cold_request_tokens per page, at the light model's input price. NULL when no light model may
-- read the generation. Output is not predicted: it is what the model chooses to write.
CREATE OR REPLACE FUNCTION ember.shadow_cost_prediction(
    p_tenant text, p_generation uuid, p_ids bigint[], p_hot_model text, p_prefix_response text,
    p_hot_rows jsonb, p_cold_pages jsonb
)
RETURNS jsonb
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_prefix bigint;
    v_answer bigint;
    v_tail bigint;
    v_cold bigint;
    v_pages bigint;
    v_light text;
    v_hot numeric;
    v_cold_usd numeric;
    hot ember.models;
    light ember.models;
BEGIN
    IF p_prefix_response IS NOT NULL THEN
        v_prefix := ember.response_input_tokens(p_prefix_response);
        BEGIN
            v_answer := ((p_prefix_response::jsonb) #>> '{usage,output_tokens}')::bigint;
        EXCEPTION WHEN invalid_text_representation OR numeric_value_out_of_range THEN
            v_answer := NULL;
        END;
        v_answer := coalesce(v_answer, length(p_prefix_response) / 4);
        SELECT coalesce(sum(length(e.value #>> '{}')), 0) / 4 INTO v_tail
        FROM jsonb_array_elements(coalesce(p_hot_rows, '[]')) AS e (value);
        v_tail := v_tail + v_answer + ember.setting_int('shadow_question_tokens');
        SELECT * INTO hot FROM ember.models WHERE id = p_hot_model;
        IF v_prefix IS NOT NULL AND hot.id IS NOT NULL THEN
            v_hot := ember.run_cost_usd(
                v_tail, v_prefix, 0, 0, 0, hot.price_input, hot.price_output, hot.price_cache_write_5m,
                hot.price_cache_write_1h, hot.price_cache_read, ember.model_price_tiers_json(hot.id)
            );
        END IF;
    END IF;

    IF p_cold_pages IS NOT NULL THEN
        SELECT coalesce(sum(length(r.value #>> '{}') + 1), 0) / 4, count(DISTINCT p.ord)
        INTO v_cold, v_pages
        FROM jsonb_array_elements(p_cold_pages) WITH ORDINALITY AS p (value, ord)
        CROSS JOIN LATERAL jsonb_array_elements(
            CASE WHEN jsonb_typeof(p.value) = 'array' THEN p.value ELSE jsonb_build_array(p.value) END
        ) AS r (value);
    ELSE
        SELECT coalesce(sum(length(m.content) + 40), 0) / 4 INTO v_cold
        FROM ember.messages AS m WHERE m.tenant_id = p_tenant AND m.id = ANY (p_ids);
        v_pages := greatest(1, ceil(v_cold::numeric / ember.setting_int('cold_page_tokens')));
    END IF;
    v_cold := v_cold + v_pages * ember.setting_int('cold_request_tokens');
    v_light := (ember.shadow_light_model(p_generation)).model;
    SELECT * INTO light FROM ember.models WHERE id = v_light;
    IF light.id IS NOT NULL THEN
        v_cold_usd := ember.run_cost_usd(
            v_cold, 0, 0, 0, 0, light.price_input, light.price_output, light.price_cache_write_5m,
            light.price_cache_write_1h, light.price_cache_read, ember.model_price_tiers_json(light.id)
        );
    END IF;

    RETURN jsonb_build_object(
        'hot_usd', round(v_hot, 8),
        'cold_usd', round(v_cold_usd, 8),
        'hot_model', CASE WHEN v_prefix IS NOT NULL THEN p_hot_model END,
        'cold_model', v_light,
        'prefix_tokens', v_prefix,
        'hot_tail_tokens', CASE WHEN v_prefix IS NOT NULL THEN v_tail END,
        'cold_tokens', v_cold,
        'cold_pages', v_pages
    );
END;
$$;
