-- The hot path's own check (issue 22): did a hot run read the old prefix from the prompt cache,
-- and if not, the likely cause. A hot run is only cheap when the host's own request wrote the
-- cache up to its last message: the replay adds its tail after that point, and a breakpoint on the
-- host's system prompt alone leaves every message of the old prefix to be paid as fresh input.
-- Nothing failed in such a run, so without this check nobody would be told.

-- Whether a request carries a cache breakpoint on its last message: a marker on any block of
-- the last message, or the automatic breakpoint of a top-level cache_control (which the API puts
-- on the last block). NULL when the text is not a request with messages.
CREATE OR REPLACE FUNCTION ember.request_marks_last_message(p_request text)
RETURNS boolean
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
    v json;
    v_last json;
BEGIN
    v := p_request::json;
    IF json_typeof(v) <> 'object' OR json_typeof(v -> 'messages') <> 'array' THEN
        RETURN NULL;
    END IF;
    IF json_typeof(v -> 'cache_control') = 'object' THEN
        RETURN true;
    END IF;
    v_last := v -> 'messages' -> (json_array_length(v -> 'messages') - 1);
    RETURN json_typeof(v_last -> 'content') = 'array' AND EXISTS (
        SELECT 1 FROM json_array_elements(v_last -> 'content') AS b
        WHERE json_typeof(b) = 'object' AND json_typeof(b -> 'cache_control') = 'object'
    );
EXCEPTION WHEN invalid_text_representation OR statement_too_complex THEN
    RETURN NULL;
END;
$$;

-- The whole input of a request, as its own answer's usage reports it (read, written and
-- uncached tokens); NULL when the answer carries no usage. This is the old prefix's size in the
-- provider's own tokens, which the estimate in shadow_prefixes only approximates.
CREATE OR REPLACE FUNCTION ember.response_input_tokens(p_response text)
RETURNS bigint
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
    u json;
BEGIN
    u := p_response::json -> 'usage';
    IF json_typeof(u) <> 'object' OR json_typeof(u -> 'input_tokens') <> 'number' THEN
        RETURN NULL;
    END IF;
    RETURN (u ->> 'input_tokens')::bigint
        + coalesce((u ->> 'cache_read_input_tokens')::bigint, 0)
        + coalesce((u ->> 'cache_creation_input_tokens')::bigint, 0);
EXCEPTION WHEN invalid_text_representation OR numeric_value_out_of_range OR statement_too_complex THEN
    RETURN NULL;
END;
$$;

-- A hot run records, when it is claimed, what the check needs from its prefix: the prefix row is
-- replaced by the thread's next turn, long before anyone asks. A trigger rather than a change to
-- the claim, so the claim stays the one place that decides what is read.
CREATE OR REPLACE FUNCTION ember.shadow_runs_prefix_facts()
RETURNS trigger
LANGUAGE plpgsql
AS $$
DECLARE
    p ember.shadow_prefixes;
BEGIN
    SELECT * INTO p FROM ember.shadow_prefixes AS x
    WHERE x.tenant_id = new.tenant_id AND x.thread_id = new.thread_id AND x.generation_id = new.generation_id;
    IF FOUND THEN
        new.prefix_input_tokens := ember.response_input_tokens(p.response);
        new.prefix_cache_marked := ember.request_marks_last_message(p.request);
        new.prefix_requested_at := p.request_started_at;
    END IF;
    RETURN new;
END;
$$;

CREATE OR REPLACE TRIGGER shadow_runs_prefix_facts
BEFORE INSERT ON ember.shadow_runs
FOR EACH ROW WHEN (new.path = 'hot')
EXECUTE FUNCTION ember.shadow_runs_prefix_facts();

-- A completed hot run that read less than the setting hot_cache_min_read_share of its old prefix
-- from the cache, with the likely cause; NULL for any other run. Causes, the first that holds:
--   below-minimum  the old request was shorter than the model's minimum cacheable length, so
--                  nothing of it could be cached, breakpoint or not;
--   no-breakpoint  the host's request had no cache breakpoint on its last message, so the cache
--                  held the prefix only up to its last marker (ember.host places one for the host);
--   ttl-passed     the replay's call started after the cache entry's lifetime, counted from the
--                  start of the host's request, had run out;
--   prefix-changed none of the above: the replayed bytes differed from what the host's request
--                  wrote (a changed byte, model or setting before the breakpoint).
CREATE OR REPLACE FUNCTION ember.hot_cache_check(r ember.shadow_runs)
RETURNS jsonb
LANGUAGE sql STABLE
AS $$
    SELECT jsonb_build_object(
        'run_id', r.id,
        'thread_id', r.thread_id,
        'model', r.model,
        'finished_at', r.finished_at,
        'read_tokens', r.cache_read_tokens,
        'prefix_tokens', r.prefix_input_tokens,
        'share', round(r.cache_read_tokens::numeric / r.prefix_input_tokens, 3),
        'cause', CASE
            WHEN r.prefix_input_tokens < md.min_cacheable_tokens THEN 'below-minimum'
            WHEN NOT r.prefix_cache_marked THEN 'no-breakpoint'
            WHEN r.finished_at - make_interval(secs => coalesce(r.latency_ms, 0) / 1000.0)
                 >= r.prefix_requested_at + md.cache_ttl THEN 'ttl-passed'
            ELSE 'prefix-changed'
        END
    )
    FROM ember.models AS md
    WHERE md.id = r.model
        AND r.path = 'hot'
        AND r.status = 'completed'
        AND r.prefix_input_tokens > 0
        AND r.cache_read_tokens < ember.setting('hot_cache_min_read_share')::numeric * r.prefix_input_tokens
$$;

-- The check for one run, for the worker's metric after it submits a hot run.
CREATE OR REPLACE FUNCTION ember.hot_cache_shortfall(p_tenant text, p_run bigint)
RETURNS jsonb
LANGUAGE sql STABLE
AS $$
    SELECT ember.hot_cache_check(r) FROM ember.shadow_runs AS r WHERE r.tenant_id = p_tenant AND r.id = p_run
$$;

-- What each cause means, in one line, for ember status and the worker's log.
CREATE OR REPLACE FUNCTION ember.hot_cache_cause_text(p_cause text)
RETURNS text
LANGUAGE sql IMMUTABLE
AS $$
    SELECT CASE p_cause
        WHEN 'below-minimum' THEN 'the old request is shorter than the model''s minimum cacheable length'
        WHEN 'no-breakpoint' THEN 'the host''s request had no cache breakpoint on its last message '
            || '(ember.host.PrefixCapture places one; see docs/worker.md)'
        WHEN 'ttl-passed' THEN 'the replay started after the cache entry''s lifetime, counted from the host''s request, ran out'
        WHEN 'prefix-changed' THEN 'the replayed bytes differ from what the host''s request cached '
            || '(compare the two requests in ember sim''s log)'
    END
$$;
