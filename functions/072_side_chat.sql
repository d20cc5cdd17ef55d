-- Main's hands (seed 001 section 7): side_chat_message to nudge, correct or stop a side chat,
-- and side_chat_inspect to see a small scene of it instead of its transcript. Main reads
-- progress reports, not transcripts; these two tools are how it checks and steers.

-- Main's id, or EM086 when there is none (main's tools act as main).
CREATE OR REPLACE FUNCTION ember.require_main(p_tool text)
RETURNS text
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_main text;
BEGIN
    SELECT id INTO v_main FROM ember.threads WHERE kind = 'main';
    IF v_main IS NULL THEN
        RAISE EXCEPTION '%: there is no main thread to act as', p_tool
            USING ERRCODE = 'EM086', HINT = 'create_thread(id, ''main'') first';
    END IF;
    RETURN v_main;
END;
$$;

-- One refusal (EM028) for every chat main may not see: an unknown id, an isolated chat, a chat
-- hidden from main's model by its labels. The tool result goes to main's model, and a refusal
-- that said "isolated" or named the labels would tell it what it may not know (read_thread
-- refuses the same way); thread_hidden_reason gives the operator the detail.
CREATE OR REPLACE FUNCTION ember.refuse_unseen_chat(p_tool text, p_thread text)
RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
    RAISE EXCEPTION '%: no side chat % is visible to main', p_tool, coalesce('"' || p_thread || '"', 'NULL')
        USING ERRCODE = 'EM028', HINT = 'progress_board lists the chats main may steer';
END;
$$;

-- Refuses a target main's side-chat tools do not act on: the steward's record (EM027, with the
-- honest reason read_thread gives: it exists, and it is not an empty conversation); an unknown
-- or isolated thread (EM028: main never sees an isolated chat, not even through a progress
-- report, so it has nothing to steer by); main itself (EM081).
CREATE OR REPLACE FUNCTION ember.check_side_chat_target(p_main text, p_thread text, p_tool text)
RETURNS ember.threads
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    t ember.threads;
BEGIN
    IF ember.is_steward_thread(p_thread) THEN
        RAISE EXCEPTION '%: %', p_tool, ember.hidden_reason_unchecked(p_main, p_thread)
            USING ERRCODE = 'EM027';
    END IF;
    SELECT * INTO t FROM ember.threads WHERE id = p_thread;
    IF NOT FOUND OR ember.is_isolated(p_thread) THEN
        PERFORM ember.refuse_unseen_chat(p_tool, p_thread);
    END IF;
    IF t.kind NOT IN ('side', 'task') THEN
        RAISE EXCEPTION '%: "%" is the % thread, not a side chat', p_tool, p_thread, t.kind
            USING ERRCODE = 'EM081', HINT = 'main acts on side and task threads';
    END IF;
    RETURN t;
END;
$$;

-- The text a side chat is shown: framed as main's, never as the user's.
CREATE OR REPLACE FUNCTION ember.main_message_text(p_intent text, p_message text)
RETURNS text
LANGUAGE sql IMMUTABLE
AS $$
    SELECT format(
        E'Message from Main (%s): %s\n\n'
        || '[Main is the front-desk agent that coordinates the side chats. This is not the user''s '
        || 'message, and these are not the user''s words. If it conflicts with anything the user '
        || 'said, the user wins.]',
        CASE p_intent
            WHEN 'nudge' THEN 'nudge'
            WHEN 'correct' THEN 'correction'
            WHEN 'stop' THEN 'stop: finish the step you are in, then stop and say where you are'
        END,
        p_message
    )
$$;

-- main's side_chat_message tool. Intent nudge, correct or stop (EM080 otherwise); a stop only to
-- a thread inside a turn (EM082: one that is not running has nothing to stop). The message is
-- queued as a main-message event, which a running chat takes in at its next safe point, and a
-- main_actions row records it with the tool result returned here. Labels: the event row leaves a
-- label carrier, so the flow rule applies as it is written (EM024 from a labelled main to a chat
-- whose model is not tagged for main's labels). Replaying a tool call id returns the recorded
-- result and writes nothing; the same id with other arguments is EM083.
CREATE OR REPLACE FUNCTION ember.side_chat_message(
    p_tool_call_id text,
    p_thread text,
    p_intent text,
    p_message text,
    p_now timestamptz DEFAULT clock_timestamp()
)
RETURNS text
LANGUAGE plpgsql
AS $$
DECLARE
    v_main text;
    a ember.main_actions;
    e ember.thread_events;
    v_result text;
BEGIN
    PERFORM ember.require_now(p_now);
    IF p_tool_call_id IS NULL OR btrim(p_tool_call_id) = '' THEN
        RAISE EXCEPTION 'side_chat_message: a tool call id is required' USING ERRCODE = 'EM012';
    END IF;
    IF p_intent IS NULL OR p_intent NOT IN ('nudge', 'correct', 'stop') THEN
        RAISE EXCEPTION 'side_chat_message: unknown intent %', coalesce('"' || p_intent || '"', 'NULL')
            USING ERRCODE = 'EM080', HINT = 'intents: nudge, correct, stop';
    END IF;
    IF p_message IS NULL OR btrim(p_message) = '' THEN
        RAISE EXCEPTION 'side_chat_message: the message must not be empty' USING ERRCODE = 'EM012';
    END IF;
    v_main := ember.require_main('side_chat_message');
    PERFORM ember.check_side_chat_target(v_main, p_thread, 'side_chat_message');
    -- The target's lock orders this call with a concurrent replay of the same call and with the
    -- turn state the stop check reads.
    PERFORM ember.lock_thread(ember.sole_tenant(), p_thread);

    SELECT * INTO a FROM ember.main_actions WHERE tool_call_id = p_tool_call_id;
    IF FOUND THEN
        IF (a.thread_id, a.intent, a.message) IS DISTINCT FROM (p_thread, p_intent, p_message) THEN
            RAISE EXCEPTION 'side_chat_message: tool call "%" was already recorded as a % to "%"',
                p_tool_call_id, a.intent, a.thread_id
                USING ERRCODE = 'EM083', HINT = 'a tool call id names one call';
        END IF;
        RETURN a.result;
    END IF;

    IF p_intent = 'stop' AND NOT ember.thread_turn_running(p_thread) THEN
        RAISE EXCEPTION 'side_chat_message: "%" is not running: there is nothing to stop', p_thread
            USING ERRCODE = 'EM082', HINT = 'nudge or correct it instead; it reads the message on its next turn';
    END IF;

    e := ember.enqueue_event(
        p_thread, 'thread-event', 'main-message', ember.main_message_text(p_intent, p_message),
        'main', v_main, p_tool_call_id, p_now
    );
    v_result := format(
        'Sent %s to side chat "%s" (call %s). %s Message: "%s"',
        CASE p_intent WHEN 'nudge' THEN 'a nudge' WHEN 'correct' THEN 'a correction' ELSE 'a stop' END,
        p_thread, p_tool_call_id,
        CASE WHEN ember.thread_turn_running(p_thread)
            THEN 'It is running: it takes this in at its next safe point, as from Main, not from the user.'
            ELSE 'It is idle: it takes this in when its next turn starts, as from Main, not from the user.'
        END,
        p_message
    );
    INSERT INTO ember.main_actions (
        thread_id, main_thread, tool_call_id, intent, message, event_id, result, created_at
    ) VALUES (
        p_thread, v_main, p_tool_call_id, p_intent, p_message, e.id, v_result, p_now
    );
    RETURN v_result;
END;
$$;

-- side_chat_inspect's tool_calls: the chat's most recent calls (inspect_tool_calls) with their
-- outcome and result cut to p_result_chars, and the ids of the rows they were read from.
CREATE OR REPLACE FUNCTION ember.side_chat_calls(
    p_thread text, p_result_chars integer, OUT tool_calls jsonb, OUT row_ids bigint[]
)
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    -- Tool calls are the tool_use blocks of assistant rows; a host that records only results
    -- still shows its calls through their result rows.
    WITH uses AS (
        SELECT m.id AS row_id, m.seq, b.ord, b.block ->> 'id' AS call_id, b.block ->> 'name' AS name,
            b.block -> 'input' AS input, m.created_at
        FROM ember.messages AS m
        CROSS JOIN LATERAL json_array_elements(
            CASE WHEN json_typeof(m.blocks) = 'array' THEN m.blocks ELSE '[]'::json END
        ) WITH ORDINALITY AS b (block, ord)
        WHERE m.thread_id = p_thread AND m.role = 'assistant' AND m.blocks IS NOT NULL
            AND json_typeof(b.block) = 'object' AND b.block ->> 'type' IN ('tool_use', 'server_tool_use')
    ),

    calls AS (
        SELECT u.row_id, u.seq, u.ord, u.call_id, u.name, u.created_at, FALSE AS result_only FROM uses AS u
        UNION ALL
        SELECT r.id, r.seq, 0, r.tool_call_id, r.tool_name, r.created_at, TRUE
        FROM ember.messages AS r
        LEFT JOIN uses AS u ON u.call_id = r.tool_call_id
        WHERE r.thread_id = p_thread AND r.role = 'tool_result' AND u.call_id IS NULL
    ),

    -- Only the calls shown look up their results.
    recent AS (
        SELECT c.*, res.id AS result_id, res.tool_status, res.content AS result
        FROM (SELECT * FROM calls ORDER BY seq DESC, ord DESC LIMIT ember.setting_int('inspect_tool_calls')) AS c
        LEFT JOIN LATERAL (
            SELECT r.id, r.tool_status, r.content FROM ember.messages AS r
            WHERE c.result_only AND r.id = c.row_id
            UNION ALL
            (SELECT r.id, r.tool_status, r.content FROM ember.messages AS r
             WHERE NOT c.result_only AND r.thread_id = p_thread AND r.role = 'tool_result'
                 AND r.tool_call_id = c.call_id
             ORDER BY r.seq DESC LIMIT 1)
        ) AS res ON TRUE
    )

    SELECT
        coalesce(jsonb_agg(jsonb_build_object(
            'tool_call_id', r.call_id,
            'name', r.name,
            'outcome', coalesce(r.tool_status, 'no-result'),
            'result', ember.shorten_to(r.result, p_result_chars),
            'at', r.created_at
        ) ORDER BY r.seq, r.ord), '[]'::jsonb),
        ARRAY(
            SELECT DISTINCT x FROM recent AS r2 CROSS JOIN LATERAL unnest(ARRAY[r2.row_id, r2.result_id]) AS x
            WHERE x IS NOT NULL
        )
    INTO tool_calls, row_ids
    FROM recent AS r;
END;
$$;

-- side_chat_inspect's written paths: the files the chat's file tools wrote with an ok result, most
-- recent first, at most inspect_paths, and the ids of the rows they were read from.
CREATE OR REPLACE FUNCTION ember.side_chat_written_paths(p_thread text, OUT paths jsonb, OUT row_ids bigint[])
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    WITH writes AS (
        SELECT m.id AS row_id, m.seq, b.ord, b.block -> 'input' ->> 'path' AS path
        FROM ember.messages AS m
        CROSS JOIN LATERAL json_array_elements(
            CASE WHEN json_typeof(m.blocks) = 'array' THEN m.blocks ELSE '[]'::json END
        ) WITH ORDINALITY AS b (block, ord)
        JOIN ember.tools AS tl ON tl.name = b.block ->> 'name' AND tl.file_tool
        WHERE m.thread_id = p_thread AND m.role = 'assistant' AND m.blocks IS NOT NULL
            AND json_typeof(b.block) = 'object' AND b.block ->> 'type' = 'tool_use'
            AND json_typeof(b.block -> 'input') = 'object'
            AND nullif(b.block -> 'input' ->> 'path', '') IS NOT NULL
            AND EXISTS (
                SELECT 1 FROM ember.messages AS r
                WHERE r.thread_id = p_thread AND r.role = 'tool_result'
                    AND r.tool_call_id = b.block ->> 'id' AND r.tool_status = 'ok'
            )
    ),

    latest AS (
        SELECT DISTINCT ON (w.path) w.path, w.seq, w.ord, w.row_id FROM writes AS w
        ORDER BY w.path, w.seq DESC, w.ord DESC
    ),

    shown AS (
        SELECT l.* FROM latest AS l ORDER BY l.seq DESC, l.ord DESC LIMIT ember.setting_int('inspect_paths')
    )

    SELECT coalesce(jsonb_agg(s.path ORDER BY s.seq DESC, s.ord DESC), '[]'::jsonb), array_agg(DISTINCT s.row_id)
    INTO paths, row_ids
    FROM shown AS s;
END;
$$;

-- main's side_chat_inspect tool: a small scene of a side chat, not its transcript, as jsonb:
--   thread, title, kind, status, running, waiting_user;
--   last_reply {message_id, at, text, chars, cut}: the last assistant text, cut to
--       inspect_reply_chars (1,500) characters, marker included;
--   tool_calls [{tool_call_id, name, outcome, result, at}]: the last inspect_tool_calls (12)
--       calls, oldest first; outcome is the result's status (ok, error, pending) or 'no-result';
--       result is the result text cut to inspect_result_chars;
--   written_paths: the paths written by file tools (ember.tools.file_tool) whose call succeeded,
--       most recent first, at most inspect_paths; a shell command's writes are not seen;
--   progress {event_id, at, text, delivered}: the latest progress report to main;
--   pending_from_main: main's messages the chat has not taken in yet.
-- Inspecting is main reading the thread, so the visibility rule applies as for read_thread
-- (EM028 when the chat, or a generation the scene draws on, carries labels main's model is not
-- tagged for), and main's generation records the generations it read: its labels grow by what
-- it saw.
--
-- Its length: what is left after side_chat_calls and side_chat_written_paths is the visibility
-- check and read report over the rows the scene shows, and the scene's one jsonb value.
CREATE OR REPLACE FUNCTION ember.side_chat_inspect(p_thread text)
RETURNS jsonb
LANGUAGE plpgsql
AS $$
DECLARE
    v_main text;
    t ember.threads;
    v_reply ember.messages;
    v_reply_chars integer := ember.setting_int('inspect_reply_chars');
    v_result_chars integer := ember.setting_int('inspect_result_chars');
    c record;
    w record;
    v_progress jsonb;
    v_rows bigint[];
    v_generations uuid[];
    st ember.shadow_thread_state;
BEGIN
    v_main := ember.require_main('side_chat_inspect');
    t := ember.check_side_chat_target(v_main, p_thread, 'side_chat_inspect');
    IF ember.hidden_reason_unchecked(v_main, p_thread) IS NOT NULL THEN
        PERFORM ember.refuse_unseen_chat('side_chat_inspect', p_thread);
    END IF;

    SELECT * INTO v_reply FROM ember.messages AS m
    WHERE m.thread_id = p_thread AND m.role = 'assistant' AND btrim(m.content) <> ''
    ORDER BY m.seq DESC LIMIT 1;

    SELECT * INTO c FROM ember.side_chat_calls(p_thread, v_result_chars);
    SELECT * INTO w FROM ember.side_chat_written_paths(p_thread);

    SELECT jsonb_build_object(
        'event_id', e.id, 'at', e.created_at, 'text', m.content, 'delivered', e.delivered_at IS NOT NULL
    )
    INTO v_progress
    FROM ember.thread_events AS e
    JOIN ember.messages AS m ON m.id = e.message_id
    WHERE e.from_thread = p_thread AND e.kind = 'progress-report'
    ORDER BY e.id DESC LIMIT 1;

    -- The rows of the chat whose content the scene shows: main's model must be tagged for all
    -- their labels (a chat's older generations may carry more than its current one), and main's
    -- generation now carries them.
    v_rows := ARRAY(
        SELECT DISTINCT x FROM unnest(coalesce(c.row_ids, '{}') || coalesce(w.row_ids, '{}') || v_reply.id) AS x
        WHERE x IS NOT NULL
    );
    -- Reading a row reports its whole generation read (below), so main's model must be tagged
    -- for the labels of each generation the scene draws on, not only for the rows' own stamps.
    v_generations := ARRAY(SELECT DISTINCT m.generation_id FROM ember.messages AS m WHERE m.id = ANY(v_rows));
    IF EXISTS (
        SELECT 1 FROM unnest(v_generations) AS g (id)
        WHERE NOT ember.generation_labels(g.id) <@ ember.viewer_tags(v_main)
    ) THEN
        PERFORM ember.refuse_unseen_chat('side_chat_inspect', p_thread);
    END IF;
    IF cardinality(v_generations) > 0 THEN
        PERFORM ember.report_read_generations(ember.current_generation(ember.sole_tenant(), v_main), v_generations);
    END IF;

    SELECT * INTO st FROM ember.shadow_thread_state WHERE thread_id = p_thread;
    RETURN jsonb_build_object(
        'thread', t.id,
        'title', t.title,
        'kind', t.kind,
        'status', t.status,
        'running', coalesce(st.turn_running, false),
        'waiting_user', coalesce(st.turn_running AND st.waiting_user, false),
        'last_reply', CASE WHEN v_reply.id IS NOT NULL THEN jsonb_build_object(
            'message_id', v_reply.id,
            'at', v_reply.created_at,
            'text', ember.shorten_to(v_reply.content, v_reply_chars),
            'chars', char_length(v_reply.content),
            'cut', char_length(v_reply.content) > v_reply_chars
        ) END,
        'tool_calls', c.tool_calls,
        'written_paths', w.paths,
        'progress', v_progress,
        'pending_from_main', (
            SELECT count(*) FROM ember.thread_events AS e
            WHERE e.thread_id = p_thread AND e.kind = 'main-message' AND e.delivered_at IS NULL
        )
    );
END;
$$;
