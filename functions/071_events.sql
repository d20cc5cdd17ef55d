-- The per-thread event queue and its safe-point rule (seed 001 section 7).
--
-- An event is written as a message row (role 'event') of the receiving thread when it is queued,
-- and queued for delivery into the thread's model context. Writing the row at queue time stamps
-- its labels and checks its flow (functions/020_labels.sql, 022_flow.sql) at the moment the
-- content is written: a row written at delivery instead would be stamped with whatever the
-- sender carried by then, less than it carried when it wrote the text if it started a new
-- generation in between. The cost is that the row's seq can precede rows of a running turn that
-- had not yet seen it; delivered_at records when the context took it in.
--
-- Delivery: inside a running turn the host may merge events only at a safe point (between two
-- model calls), and there only background-shell exits and main's messages; everything else,
-- progress reports included, waits for the turn boundary. A stop that waited for the other chat
-- to finish on its own would not be a stop.

-- The seed's deliversAtSafePoint.
CREATE OR REPLACE FUNCTION ember.delivers_at_safe_point(p_source text, p_kind text)
RETURNS boolean
LANGUAGE sql IMMUTABLE
AS $$
    SELECT coalesce(p_source = 'shell-watch' OR (p_source = 'thread-event' AND p_kind = 'main-message'), false)
$$;

-- Whether the thread is inside a turn (turn_started without turn_ended yet; a turn blocked on
-- the user is still inside it), as the host reported it. The turn state is kept with shadow's
-- (db/migrations/0003_shadow.sql), which tracks every thread main can steer: a side or task
-- thread that is not isolated.
CREATE OR REPLACE FUNCTION ember.thread_turn_running(p_thread text)
RETURNS boolean
LANGUAGE sql STABLE
AS $$
    SELECT coalesce((SELECT s.turn_running FROM ember.shadow_thread_state AS s WHERE s.thread_id = p_thread), false)
$$;

-- Write the event's row and queue it. Callers have validated the event; the row goes through
-- append_message, so it takes the thread lock, a seq, its label stamp and the flow checks.
CREATE OR REPLACE FUNCTION ember.enqueue_event(
    p_thread text,
    p_source text,
    p_kind text,
    p_content text,
    p_author text,
    p_from_thread text,
    p_tool_call_id text,
    p_now timestamptz
)
RETURNS ember.thread_events
LANGUAGE plpgsql
AS $$
DECLARE
    v_message bigint;
    e ember.thread_events;
BEGIN
    v_message := ember.append_message(
        ember.sole_tenant(), p_thread, 'event', p_content, p_author, NULL, NULL, NULL, NULL, p_from_thread, p_now
    );
    INSERT INTO ember.thread_events (
        thread_id, source, kind, message_id, from_thread, tool_call_id, created_at
    ) VALUES (
        p_thread, p_source, p_kind, v_message, p_from_thread, p_tool_call_id, p_now
    )
    RETURNING * INTO e;
    -- The host's pump LISTENs on ember_event to learn, at commit, that a thread has something
    -- to take in (an idle chat that main nudged starts a turn). The payload is the thread id, or
    -- nothing for an id too long for a notification: the queue itself is in the table.
    PERFORM pg_notify('ember_event', CASE WHEN octet_length(p_thread) < 7000 THEN p_thread ELSE '' END);
    RETURN e;
END;
$$;

-- Queue an event the host observed: a background shell's exit ('shell-watch', 'shell-exit', no
-- sender), or a progress report or task result from another thread ('thread-event'). Main's
-- messages are queued only by side_chat_message, which records main's action and frames the
-- text; a host queueing one itself would skip both. Returns the event id.
CREATE OR REPLACE FUNCTION ember.queue_event(
    p_thread text,
    p_source text,
    p_kind text,
    p_content text,
    p_from_thread text DEFAULT NULL,
    p_now timestamptz DEFAULT clock_timestamp()
)
RETURNS bigint
LANGUAGE plpgsql
AS $$
DECLARE
    e ember.thread_events;
BEGIN
    PERFORM ember.require_now(p_now);
    IF p_source IS NULL OR p_kind IS NULL
       OR NOT ((p_source = 'shell-watch' AND p_kind = 'shell-exit')
               OR (p_source = 'thread-event' AND p_kind IN ('progress-report', 'task-result'))) THEN
        RAISE EXCEPTION 'thread "%": unknown event % / %', p_thread,
            coalesce('"' || p_source || '"', 'NULL'), coalesce('"' || p_kind || '"', 'NULL')
            USING ERRCODE = 'EM084',
                  HINT = 'events: shell-watch / shell-exit, thread-event / progress-report or task-result; '
                      || 'main''s messages go through side_chat_message';
    END IF;
    IF (p_source = 'thread-event') <> (p_from_thread IS NOT NULL) THEN
        RAISE EXCEPTION 'thread "%": a thread-event names the thread it comes from, a shell exit names none',
            p_thread
            USING ERRCODE = 'EM084';
    END IF;
    IF p_from_thread = p_thread THEN
        RAISE EXCEPTION 'thread "%": an event from a thread to itself is not an event', p_thread
            USING ERRCODE = 'EM084';
    END IF;
    e := ember.enqueue_event(p_thread, p_source, p_kind, p_content, 'system', p_from_thread, NULL, p_now);
    RETURN e.id;
END;
$$;

-- The text a progress report is shown with in main.
CREATE OR REPLACE FUNCTION ember.progress_report_text(p_thread text, p_report text)
RETURNS text
LANGUAGE sql STABLE
AS $$
    -- The title is the chat's own text: quoted as a JSON string, so a quote, parenthesis or line
    -- break in it cannot make the report look like it came from another chat. Thread ids are
    -- already restricted to a safe character set (EM018). The body is the chat's text too: a
    -- one-line body follows the header, and a longer one goes under it with every line quoted
    -- ("> "), so no line of it starts like a report whatever it says. Every line break a reader
    -- or a model might honour (CR, vertical tab, form feed, NEL, the Unicode separators) counts
    -- as one. Quoting the body as a JSON string would be as safe but would read as code to main.
    SELECT format('Progress report from "%s"%s:%s', t.id, coalesce(' (' || to_json(t.title)::text || ')', ''),
        CASE WHEN strpos(b.body, E'\n') = 0 THEN ' ' || b.body
            ELSE E'\n' || regexp_replace(regexp_replace(b.body, '^', '> ', 'gn'), '^> $', '>', 'gn')
        END)
    FROM ember.threads AS t
    CROSS JOIN LATERAL (
        SELECT regexp_replace(
            p_report, E'\r\n|[\r\u000b\u000c\u001c\u001d\u001e\u0085\u2028\u2029]', E'\n', 'g'
        ) AS body
    ) AS b
    WHERE t.id = p_thread
$$;

-- The report_progress tool of a side or task thread: queues the report for main (delivered at
-- main's turn boundary, never inside a running turn) and returns the tool result. Replaying the
-- same tool call id returns the same result and queues nothing more.
CREATE OR REPLACE FUNCTION ember.report_progress(
    p_tool_call_id text, p_thread text, p_report text, p_now timestamptz DEFAULT clock_timestamp()
)
RETURNS text
LANGUAGE plpgsql
AS $$
DECLARE
    v_main text;
    e ember.thread_events;
    m ember.messages;
BEGIN
    PERFORM ember.require_now(p_now);
    IF p_tool_call_id IS NULL OR btrim(p_tool_call_id) = '' THEN
        RAISE EXCEPTION 'report_progress: a tool call id is required' USING ERRCODE = 'EM012';
    END IF;
    IF p_report IS NULL OR btrim(p_report) = '' THEN
        RAISE EXCEPTION 'report_progress from "%": the report must not be empty', p_thread
            USING ERRCODE = 'EM012';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM ember.threads WHERE id = p_thread) THEN
        RAISE EXCEPTION 'unknown thread "%"', p_thread USING ERRCODE = 'EM001';
    END IF;

    SELECT * INTO e FROM ember.thread_events
    WHERE from_thread = p_thread AND kind = 'progress-report' AND tool_call_id = p_tool_call_id;
    IF FOUND THEN
        SELECT * INTO m FROM ember.messages WHERE id = e.message_id;
        IF m.content <> ember.progress_report_text(p_thread, p_report) THEN
            RAISE EXCEPTION 'report_progress: tool call "%" of "%" was already recorded with another report',
                p_tool_call_id, p_thread
                USING ERRCODE = 'EM083';
        END IF;
        RETURN format('Reported to main (event %s).', e.id);
    END IF;

    PERFORM ember.require_tool(p_thread, 'report_progress');
    SELECT id INTO v_main FROM ember.threads WHERE kind = 'main';
    IF v_main IS NULL THEN
        RAISE EXCEPTION 'report_progress from "%": there is no main thread to report to', p_thread
            USING ERRCODE = 'EM086';
    END IF;
    e := ember.enqueue_event(
        v_main, 'thread-event', 'progress-report', ember.progress_report_text(p_thread, p_report),
        'system', p_thread, p_tool_call_id, p_now
    );
    RETURN format('Reported to main (event %s).', e.id);
END;
$$;

-- What may be delivered into p_thread's context now, oldest first, marked delivered as it is
-- returned (each event is handed over once). p_at_safe_point true: the host is at a safe point
-- inside a running turn, so only what delivers_at_safe_point allows; false: a turn boundary,
-- so everything queued. The row lock orders this with the appends that queue events.
CREATE OR REPLACE FUNCTION ember.deliverable_events(
    p_thread text, p_at_safe_point boolean, p_now timestamptz DEFAULT clock_timestamp()
)
RETURNS TABLE (
    event_id bigint, message_id bigint, source text, kind text, from_thread text, author text,
    content text, created_at timestamptz
)
LANGUAGE plpgsql
AS $$
BEGIN
    PERFORM ember.require_now(p_now);
    IF p_at_safe_point IS NULL THEN
        RAISE EXCEPTION 'deliverable_events("%"): say whether this is a safe point (true) or a turn boundary (false)',
            p_thread
            USING ERRCODE = 'EM012';
    END IF;
    PERFORM ember.lock_thread(ember.sole_tenant(), p_thread);
    RETURN QUERY
    WITH delivered AS (
        UPDATE ember.thread_events AS e SET delivered_at = p_now
        WHERE e.thread_id = p_thread
            AND e.delivered_at IS NULL
            AND (NOT p_at_safe_point OR ember.delivers_at_safe_point(e.source, e.kind))
        RETURNING e.*
    )
    SELECT d.id, d.message_id, d.source, d.kind, d.from_thread, m.author, m.content, d.created_at
    FROM delivered AS d
    JOIN ember.messages AS m ON m.id = d.message_id
    ORDER BY d.id;
END;
$$;

-- main's progress_board tool: every side and task chat main may steer (not archived, and
-- visible to main by the rule list_threads('main') applies: not isolated, and no label main's
-- model is not tagged for, since a title is the chat's content), with its turn state and its
-- latest progress report, most recent report first (chats that never reported last). The
-- reports are rows main has already received, so reading the board adds nothing to main's labels.
CREATE OR REPLACE FUNCTION ember.progress_board()
RETURNS TABLE (
    thread_id text, title text, kind text, status text, running boolean,
    event_id bigint, report text, reported_at timestamptz, delivered boolean
)
LANGUAGE sql STABLE
AS $$
    SELECT t.id, t.title, t.kind, t.status, ember.thread_turn_running(t.id),
        r.id, r.content, r.created_at, CASE WHEN r.id IS NOT NULL THEN r.delivered_at IS NOT NULL END
    FROM ember.threads AS t
    LEFT JOIN LATERAL (
        SELECT e.id, m.content, e.created_at, e.delivered_at
        FROM ember.thread_events AS e
        JOIN ember.messages AS m ON m.id = e.message_id
        WHERE e.from_thread = t.id AND e.kind = 'progress-report'
        ORDER BY e.id DESC LIMIT 1
    ) AS r ON TRUE
    WHERE t.kind IN ('side', 'task') AND t.status <> 'archived' AND NOT ember.is_isolated(t.id)
        AND ember.hidden_reason_unchecked((SELECT mt.id FROM ember.threads AS mt WHERE mt.kind = 'main'), t.id) IS NULL
    ORDER BY r.id DESC NULLS LAST, t.created_at, t.id
$$;
