-- The steward's hidden thread (seed 001 section 3). Created once; main's model pin and thinking
-- level are copied once, at creation, so that switching main to a frontier model later does
-- not make the back office expensive.

CREATE OR REPLACE FUNCTION ember.ensure_steward_thread(p_now timestamptz DEFAULT clock_timestamp())
RETURNS text
LANGUAGE plpgsql
AS $$
DECLARE
    m ember.threads;
BEGIN
    PERFORM ember.require_now(p_now);
    -- Serialize concurrent bootstraps: the second caller waits, then finds the thread.
    PERFORM pg_advisory_xact_lock(hashtext('ember.steward_thread'));
    IF EXISTS (SELECT 1 FROM ember.threads WHERE kind = 'steward') THEN
        RETURN 'memory-steward';
    END IF;
    SELECT * INTO m FROM ember.threads WHERE kind = 'main';
    INSERT INTO ember.threads (
        id, kind, title, seal_tier, origin, hidden, model, thinking_level,
        created_at, status_changed_at
    ) VALUES (
        'memory-steward', 'steward', 'memory steward', 'open', '{"system": "memory-steward"}',
        true, m.model, coalesce(m.thinking_level, 'off'), p_now, p_now
    );
    PERFORM ember.open_generation('memory-steward', p_now);
    RETURN 'memory-steward';
END;
$$;

-- Pin a thread's model and thinking level (the operator's or the user's choice). The pin is what
-- reads the thread's context on its next call, so it never downgrades (invariant 9): the new model
-- must be tagged for every label the thread carries now (ember.thread_call_labels), else
-- category_model (EM022), as routing would say; a fresh generation carries nothing and may take
-- any model. No pin proves no tags, so a labelled thread is not unpinned either. Checking only
-- at flow time (check_carrier_flow) would let a thread cleared for main's labels be switched
-- to an untagged model right after.
CREATE OR REPLACE FUNCTION ember.set_thread_model(
    p_thread text, p_model text, p_thinking_level text DEFAULT NULL
)
RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
    v_labels text[];
    v_missing text[];
BEGIN
    IF p_model IS NOT NULL AND NOT EXISTS (SELECT 1 FROM ember.models WHERE id = p_model) THEN
        RAISE EXCEPTION 'thread "%": unknown model "%"', p_thread, p_model USING ERRCODE = 'EM009';
    END IF;
    IF p_thinking_level IS NOT NULL AND p_thinking_level NOT IN ('off', 'low', 'medium', 'high') THEN
        RAISE EXCEPTION 'thread "%": unknown thinking level "%"', p_thread, p_thinking_level
            USING ERRCODE = 'EM012', HINT = 'thinking levels: off, low, medium, high';
    END IF;
    PERFORM ember.lock_thread(p_thread);
    v_labels := ember.thread_call_labels(p_thread);
    v_missing := ARRAY(
        SELECT l FROM unnest(v_labels) AS l
        WHERE NOT l = ANY(coalesce((SELECT m.tags FROM ember.models AS m WHERE m.id = p_model), '{}'))
    );
    IF cardinality(v_missing) > 0 THEN
        RAISE EXCEPTION 'category_model: thread "%" carries %, and model % is not tagged for %',
            p_thread, v_labels, coalesce('"' || p_model || '"', '(none pinned)'), v_missing
            USING ERRCODE = 'EM022',
                  HINT = 'pin a model tagged for these categories, or start a new generation first';
    END IF;
    UPDATE ember.threads
    SET model = p_model, thinking_level = coalesce(p_thinking_level, thinking_level)
    WHERE id = p_thread;
END;
$$;
