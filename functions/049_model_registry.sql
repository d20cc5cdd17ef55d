-- The model registry as data: loading an operator's file, the snapshot a run copies, and the
-- record of why a run went cold and why its cache reads missed.

-- A model's length tiers as a run copies them: [{above_tokens, price_input, ...}], lowest first.
CREATE OR REPLACE FUNCTION ember.model_price_tiers_json(p_model text)
RETURNS jsonb
LANGUAGE sql STABLE
AS $$
    SELECT coalesce(jsonb_agg(jsonb_build_object(
        'above_tokens', t.above_tokens,
        'price_input', t.price_input,
        'price_output', t.price_output,
        'price_cache_write_5m', t.price_cache_write_5m,
        'price_cache_write_1h', t.price_cache_write_1h,
        'price_cache_read', t.price_cache_read
    ) ORDER BY t.above_tokens), '[]'::jsonb)
    FROM ember.model_price_tiers AS t
    WHERE t.model = p_model
$$;

-- Every claim copies its model's prices onto the run; the tiers come with them here, in one
-- trigger for the three run tables, rather than in each claim: a claim that copies the snapshot
-- cannot forget half of it.
CREATE OR REPLACE FUNCTION ember.copy_price_tiers()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    IF NEW.price_tiers IS NULL AND NEW.price_as_of IS NOT NULL THEN
        NEW.price_tiers := ember.model_price_tiers_json(NEW.model);
    END IF;
    RETURN NEW;
END;
$$;

CREATE OR REPLACE TRIGGER shadow_runs_price_tiers BEFORE INSERT ON ember.shadow_runs
FOR EACH ROW EXECUTE FUNCTION ember.copy_price_tiers();
CREATE OR REPLACE TRIGGER steward_runs_price_tiers BEFORE INSERT ON ember.steward_runs
FOR EACH ROW EXECUTE FUNCTION ember.copy_price_tiers();
CREATE OR REPLACE TRIGGER judge_runs_price_tiers BEFORE INSERT ON ember.judge_runs
FOR EACH ROW EXECUTE FUNCTION ember.copy_price_tiers();

-- Why a run went cold, recorded on the run as it is claimed: the first rule the thread's prefix
-- failed, the model's cache rules by ember.hot_path_rule itself. Kept beside the claim rather
-- than in it so that the claim's SQL does not have to know the reasons.
CREATE OR REPLACE FUNCTION ember.record_path_reason()
RETURNS trigger
LANGUAGE plpgsql
AS $$
DECLARE
    p ember.shadow_prefixes%ROWTYPE;
    v_rule record;
BEGIN
    IF NEW.path <> 'cold' OR NEW.path_reason IS NOT NULL THEN
        RETURN NEW;
    END IF;
    SELECT * INTO p FROM ember.shadow_prefixes AS sp WHERE sp.thread_id = NEW.thread_id;
    IF NOT FOUND THEN
        NEW.path_reason := 'no prefix is recorded for the thread';
        RETURN NEW;
    END IF;
    IF p.generation_id <> NEW.generation_id THEN
        NEW.path_reason := 'the prefix belongs to another generation';
        RETURN NEW;
    END IF;
    IF NOT p.has_shadow_tool THEN
        NEW.path_reason := 'the prefix has no shadow tool in its tools';
        RETURN NEW;
    END IF;
    SELECT * INTO v_rule
    FROM ember.hot_path_rule(p.model, p.estimated_tokens, NEW.started_at - p.request_started_at);
    NEW.path_reason := coalesce(
        v_rule.reason,
        format('the prefix model %s may not read every label of the generation, '
               || 'or the generation has ended', p.model)
    );
    RETURN NEW;
END;
$$;

CREATE OR REPLACE TRIGGER shadow_runs_path_reason BEFORE INSERT ON ember.shadow_runs
FOR EACH ROW EXECUTE FUNCTION ember.record_path_reason();

-- load_models: add or re-price models from an operator's file ----------------------------------

-- The first problem of one model entry, or NULL when it may be stored. The file format is in
-- docs/models.md; the CLI checks it first and prints every problem, this is the guard for any
-- other caller.
CREATE OR REPLACE FUNCTION ember.model_entry_error(p_entry jsonb)
RETURNS text
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
    v_allowed constant text[] := ARRAY[
        'name', 'tier', 'position', 'tags', 'cache_ttl', 'min_cacheable_tokens',
        'observed_min_cacheable_tokens', 'thinking_retention', 'thinking_before_system',
        'adaptive_thinking_only', 'preserved_thinking', 'reads_thinking_from', 'snapshots',
        'price_as_of', 'prices_per_mtok', 'length_tiers', 'source'];
    v_prices constant text[] := ARRAY['input', 'output', 'cache_write_5m', 'cache_write_1h', 'cache_read'];
    v_key text;
    v_tier jsonb;
BEGIN
    IF jsonb_typeof(p_entry) IS DISTINCT FROM 'object' THEN
        RETURN 'a model entry must be an object';
    END IF;
    SELECT k INTO v_key FROM jsonb_object_keys(p_entry) AS k WHERE k <> ALL (v_allowed) LIMIT 1;
    IF v_key IS NOT NULL THEN
        RETURN format('unknown key %s', v_key);
    END IF;
    IF coalesce(btrim(p_entry ->> 'name'), '') = '' THEN
        RETURN 'name is required';
    END IF;
    IF p_entry ->> 'tier' IS NULL OR p_entry ->> 'tier' NOT IN ('light', 'standard', 'frontier') THEN
        RETURN 'tier must be light, standard or frontier';
    END IF;
    IF coalesce(p_entry ->> 'price_as_of', '') !~ '^\d{4}-\d{2}-\d{2}$' THEN
        RETURN 'price_as_of (the date of the price snapshot, YYYY-MM-DD) is required';
    END IF;
    IF coalesce(p_entry ->> 'cache_ttl', '5m') NOT IN ('5m', '1h') THEN
        RETURN 'cache_ttl must be 5m, 1h or null';
    END IF;
    IF coalesce(p_entry ->> 'thinking_retention', 'all') NOT IN ('all', 'last-turn') THEN
        RETURN 'thinking_retention must be all or last-turn';
    END IF;
    FOREACH v_key IN ARRAY ARRAY['min_cacheable_tokens', 'observed_min_cacheable_tokens'] LOOP
        IF jsonb_typeof(p_entry -> v_key) NOT IN ('number', 'null')
           OR (p_entry ->> v_key)::numeric <= 0 THEN
            RETURN format('%s must be a positive number of tokens or null', v_key);
        END IF;
    END LOOP;
    FOREACH v_key IN ARRAY v_prices LOOP
        IF jsonb_typeof(p_entry -> 'prices_per_mtok' -> v_key) NOT IN ('number', 'null')
           OR (p_entry -> 'prices_per_mtok' ->> v_key)::numeric < 0 THEN
            RETURN format('prices_per_mtok.%s must be a price of at least 0 or null', v_key);
        END IF;
    END LOOP;
    FOR v_tier IN SELECT e FROM jsonb_array_elements(coalesce(p_entry -> 'length_tiers', '[]')) AS e LOOP
        IF jsonb_typeof(v_tier -> 'above_tokens') IS DISTINCT FROM 'number'
           OR (v_tier ->> 'above_tokens')::numeric <= 0 THEN
            RETURN 'length_tiers: above_tokens must be a positive number of tokens';
        END IF;
        FOREACH v_key IN ARRAY v_prices LOOP
            IF jsonb_typeof(v_tier -> 'prices_per_mtok' -> v_key) NOT IN ('number', 'null')
               OR (v_tier -> 'prices_per_mtok' ->> v_key)::numeric < 0 THEN
                RETURN format('length_tiers: prices_per_mtok.%s must be a price of at least 0 or null', v_key);
            END IF;
        END LOOP;
    END LOOP;
    RETURN NULL;
END;
$$;

-- Add or re-price the models of p_models (an array of entries); models not named are left as
-- they are. A named model's row and its tiers become exactly what the entry says, in one
-- transaction: a bad entry (EM100, its index and problem in the message) stores nothing.
-- Finished runs keep the snapshot they copied. Returns the number of models stored.
CREATE OR REPLACE FUNCTION ember.load_models(p_models jsonb)
RETURNS integer
LANGUAGE plpgsql
SET search_path = pg_catalog, ember, pg_temp
AS $$
DECLARE
    v_entry jsonb;
    v_index integer := 0;
    v_error text;
    v_prices jsonb;
BEGIN
    IF jsonb_typeof(p_models) IS DISTINCT FROM 'array' THEN
        RAISE EXCEPTION 'load_models: the models must be a JSON array' USING ERRCODE = 'EM100';
    END IF;
    FOR v_entry IN SELECT e FROM jsonb_array_elements(p_models) AS e LOOP
        v_error := ember.model_entry_error(v_entry);
        IF v_error IS NOT NULL THEN
            RAISE EXCEPTION 'load_models: models[%] (%): %', v_index, coalesce(v_entry ->> 'name', '?'), v_error
                USING ERRCODE = 'EM100';
        END IF;
        v_index := v_index + 1;
    END LOOP;
    FOR v_entry IN SELECT e FROM jsonb_array_elements(p_models) AS e LOOP
        v_prices := coalesce(v_entry -> 'prices_per_mtok', '{}');
        INSERT INTO ember.models AS m (
            id, position, tier, tags, cache_ttl, min_cacheable_tokens, observed_min_cacheable_tokens,
            thinking_retention, thinking_before_system, adaptive_thinking_only, preserved_thinking,
            reads_thinking_from, price_as_of, price_input, price_output, price_cache_write_5m,
            price_cache_write_1h, price_cache_read, source
        ) VALUES (
            v_entry ->> 'name',
            coalesce((v_entry ->> 'position')::integer,
                     (SELECT coalesce(max(x.position), 0) + 10 FROM ember.models AS x)),
            v_entry ->> 'tier',
            ARRAY(SELECT jsonb_array_elements_text(coalesce(v_entry -> 'tags', '[]'))),
            CASE coalesce(v_entry ->> 'cache_ttl', 'null')
                WHEN '5m' THEN interval '5 minutes' WHEN '1h' THEN interval '1 hour' END,
            (v_entry ->> 'min_cacheable_tokens')::integer,
            (v_entry ->> 'observed_min_cacheable_tokens')::integer,
            coalesce(v_entry ->> 'thinking_retention', 'all'),
            coalesce((v_entry ->> 'thinking_before_system')::boolean, false),
            coalesce((v_entry ->> 'adaptive_thinking_only')::boolean, false),
            coalesce((v_entry ->> 'preserved_thinking')::boolean, false),
            ARRAY(SELECT jsonb_array_elements_text(coalesce(v_entry -> 'reads_thinking_from', '[]'))),
            (v_entry ->> 'price_as_of')::date,
            (v_prices ->> 'input')::numeric, (v_prices ->> 'output')::numeric,
            (v_prices ->> 'cache_write_5m')::numeric, (v_prices ->> 'cache_write_1h')::numeric,
            (v_prices ->> 'cache_read')::numeric,
            v_entry ->> 'source'
        )
        ON CONFLICT (id) DO UPDATE SET
            position = coalesce((v_entry ->> 'position')::integer, m.position),
            tier = excluded.tier, tags = excluded.tags, cache_ttl = excluded.cache_ttl,
            min_cacheable_tokens = excluded.min_cacheable_tokens,
            observed_min_cacheable_tokens = excluded.observed_min_cacheable_tokens,
            thinking_retention = excluded.thinking_retention,
            thinking_before_system = excluded.thinking_before_system,
            adaptive_thinking_only = excluded.adaptive_thinking_only,
            preserved_thinking = excluded.preserved_thinking,
            reads_thinking_from = excluded.reads_thinking_from,
            price_as_of = excluded.price_as_of, price_input = excluded.price_input,
            price_output = excluded.price_output, price_cache_write_5m = excluded.price_cache_write_5m,
            price_cache_write_1h = excluded.price_cache_write_1h,
            price_cache_read = excluded.price_cache_read, source = excluded.source;
        DELETE FROM ember.model_price_tiers AS t WHERE t.model = v_entry ->> 'name';
        INSERT INTO ember.model_price_tiers (
            model, above_tokens, price_input, price_output, price_cache_write_5m,
            price_cache_write_1h, price_cache_read
        )
        SELECT v_entry ->> 'name', (t ->> 'above_tokens')::integer,
               (t -> 'prices_per_mtok' ->> 'input')::numeric, (t -> 'prices_per_mtok' ->> 'output')::numeric,
               (t -> 'prices_per_mtok' ->> 'cache_write_5m')::numeric,
               (t -> 'prices_per_mtok' ->> 'cache_write_1h')::numeric,
               (t -> 'prices_per_mtok' ->> 'cache_read')::numeric
        FROM jsonb_array_elements(coalesce(v_entry -> 'length_tiers', '[]')) AS t;
    END LOOP;
    RETURN v_index;
END;
$$;

-- What `ember models list` shows: each model with its cache rules and snapshot.
CREATE OR REPLACE VIEW ember.model_registry AS
SELECT
    m.id AS model,
    m.tier,
    m.position,
    m.tags,
    m.cache_ttl,
    m.min_cacheable_tokens,
    m.observed_min_cacheable_tokens,
    greatest(m.min_cacheable_tokens, m.observed_min_cacheable_tokens) AS hot_min_tokens,
    m.thinking_retention,
    m.preserved_thinking,
    m.reads_thinking_from,
    m.price_as_of,
    m.price_input,
    m.price_output,
    m.price_cache_write_5m,
    m.price_cache_write_1h,
    m.price_cache_read,
    ember.model_price_tiers_json(m.id) AS length_tiers,
    m.source
FROM ember.models AS m;
