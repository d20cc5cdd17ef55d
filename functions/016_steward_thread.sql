-- The steward's hidden thread (seed 001 section 3). Created once; main's model pin and thinking
-- level are copied once, at creation, so that switching main to a frontier model later does
-- not make the back office expensive.

CREATE OR REPLACE FUNCTION ember.ensure_steward_thread(
    p_tenant text, p_now timestamptz DEFAULT clock_timestamp()
)
RETURNS text
LANGUAGE plpgsql
AS $$
DECLARE
    m ember.threads;
BEGIN
    PERFORM ember.require_now(p_now);
    PERFORM ember.require_tenant(p_tenant);
    -- Serialize concurrent bootstraps of one tenant: the second caller waits, then finds the thread.
    PERFORM pg_advisory_xact_lock(hashtext('ember.steward_thread'), hashtext(p_tenant));
    IF EXISTS (SELECT 1 FROM ember.threads WHERE tenant_id = p_tenant AND kind = 'steward') THEN
        RETURN 'memory-steward';
    END IF;
    SELECT * INTO m FROM ember.threads WHERE tenant_id = p_tenant AND kind = 'main';
    INSERT INTO ember.threads (
        tenant_id, id, kind, title, seal_tier, origin, hidden, model, thinking_level,
        created_at, status_changed_at
    ) VALUES (
        p_tenant, 'memory-steward', 'steward', 'memory steward', 'open', '{"system": "memory-steward"}',
        true, m.model, coalesce(m.thinking_level, 'off'), p_now, p_now
    );
    PERFORM ember.open_generation(p_tenant, 'memory-steward', p_now);
    -- A carrier's rows from before the steward existed are never its backlog
    -- (ember.backlog), so they are not undigested work for steward_has_work either.
    UPDATE ember.generation_progress AS p SET undigested = 0
    WHERE p.tenant_id = p_tenant AND p.undigested > 0
        AND p.thread_id IN (
            SELECT t.id FROM ember.threads AS t
            WHERE t.tenant_id = p_tenant AND t.kind = 'main' AND ember.is_label_carrier(t.tenant_id, t.id)
        );
    RETURN 'memory-steward';
END;
$$;

-- The steward's record is written here, by the steward's own claim and steps (050, 051), and
-- nowhere else: append_message, append_messages, copy_messages and the import refuse the
-- steward's thread to every caller (EM027), so no host, tool or file can put words in the
-- steward's mouth or into what it is shown. Its rows are Ember's own (fixed roles and authors,
-- no from_thread), so append_message's input checks have nothing to catch; the lock and the seq
-- discipline are the same.
CREATE OR REPLACE FUNCTION ember.append_steward_record(
    p_tenant text,
    p_role text,
    p_content text,
    p_author text DEFAULT NULL,
    p_blocks json DEFAULT NULL,
    p_tool_call_id text DEFAULT NULL,
    p_tool_name text DEFAULT NULL,
    p_tool_status text DEFAULT NULL,
    p_now timestamptz DEFAULT clock_timestamp()
)
RETURNS bigint
LANGUAGE plpgsql
AS $$
DECLARE
    v_generation uuid;
    v_id bigint;
BEGIN
    PERFORM ember.lock_thread(p_tenant, 'memory-steward', p_append => true);
    v_generation := ember.current_generation(p_tenant, 'memory-steward', p_now);
    PERFORM set_config('ember.inserting_message', 'labelled', true);
    INSERT INTO ember.messages (
        tenant_id, seq, thread_id, generation_id, role, author, content, blocks,
        tool_call_id, tool_name, tool_status, categories, created_at
    ) VALUES (
        p_tenant, nextval('ember.message_seq'), 'memory-steward', v_generation, p_role,
        coalesce(p_author, CASE p_role WHEN 'user' THEN 'human' WHEN 'assistant' THEN 'agent' ELSE 'system' END),
        p_content,
        p_blocks, p_tool_call_id, p_tool_name, p_tool_status, ember.generation_labels(v_generation), p_now
    )
    RETURNING id INTO v_id;
    PERFORM set_config('ember.inserting_message', '', true);
    RETURN v_id;
END;
$$;

-- Pin a thread's model and thinking level (the operator's or the user's choice). The pin is what
-- reads the thread's context on its next call, so it never downgrades (invariant 9): the model
-- must be tagged for every label the thread carries now, else category_model (EM022); a fresh
-- generation carries only its thread's category. The rule itself is the trigger
-- threads_model_routed (functions/023_table_rules.sql), so a direct UPDATE is held to it too.
CREATE OR REPLACE FUNCTION ember.set_thread_model(
    p_tenant text, p_thread text, p_model text, p_thinking_level text DEFAULT NULL
)
RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
    IF p_model IS NOT NULL AND NOT EXISTS (SELECT 1 FROM ember.models WHERE id = p_model) THEN
        RAISE EXCEPTION 'thread "%": unknown model "%"', p_thread, p_model USING ERRCODE = 'EM009';
    END IF;
    IF p_thinking_level IS NOT NULL AND p_thinking_level NOT IN ('off', 'low', 'medium', 'high') THEN
        RAISE EXCEPTION 'thread "%": unknown thinking level "%"', p_thread, p_thinking_level
            USING ERRCODE = 'EM012', HINT = 'thinking levels: off, low, medium, high';
    END IF;
    PERFORM ember.lock_thread(p_tenant, p_thread);
    UPDATE ember.threads
    SET model = p_model, thinking_level = coalesce(p_thinking_level, thinking_level)
    WHERE tenant_id = p_tenant AND id = p_thread;
END;
$$;
