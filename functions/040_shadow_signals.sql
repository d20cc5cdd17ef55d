-- Shadow signals (seed 000 section 4): every reason a thread may have something worth remembering
-- enters through one function, shadow_memory_changed(), which owns the busy/waiting rules. The
-- host's calls (note_prefix, turn_started, turn_ended, waiting_for_user, task_ended, and the core
-- start_generation / set_thread_status) only report what happened.
--
-- A signal is an offer, not a job: shadow_ready() decides whether an offer becomes work (unread
-- rows, no running run, no backoff), and claim_shadow_run() consumes the thread's offers.

-- Threads shadow never looks at: main (the front desk; its reading moves to progress reports),
-- the steward's own record, and isolated threads. The rules themselves are decided by the
-- predicates of 010_predicates.sql; this only names their combination for the shadow files.
CREATE OR REPLACE FUNCTION ember.shadow_excluded(p_thread text)
RETURNS boolean
LANGUAGE sql STABLE
AS $$
    SELECT coalesce((SELECT t.kind = 'main' FROM ember.threads AS t WHERE t.id = p_thread), true)
        OR ember.is_steward_thread(p_thread)
        OR ember.is_isolated(p_thread)
$$;

-- The reasons of seed section 4 (with the seed's waiting-max named waiting-user), plus one
-- thread-<status> per thread status.
CREATE OR REPLACE FUNCTION ember.shadow_reason_known(p_reason text)
RETURNS boolean
LANGUAGE sql IMMUTABLE
AS $$
    SELECT p_reason IN (
        'idle-or-ended', 'turn-boundary', 'turn-failed', 'waiting-user', 'task-ended',
        'generation-ended', 'thread-active', 'thread-ended', 'thread-archived'
    )
$$;

-- NOTIFY ember_wake (no payload: the worker claims whatever is ready, the data stays in tables)
-- when the thread now has claimable work. A notification is delivered only at commit, so a
-- listener never wakes for a signal it cannot see yet.
CREATE OR REPLACE FUNCTION ember.shadow_wake_if_ready(
    p_thread text, p_now timestamptz DEFAULT clock_timestamp()
)
RETURNS boolean
LANGUAGE plpgsql
AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM ember.shadow_ready(ember.require_now(p_now), p_thread) AS r WHERE r.model IS NOT NULL) THEN
        PERFORM pg_notify('ember_wake', '');
        RETURN true;
    END IF;
    RETURN false;
END;
$$;

-- The one entry point. Returns what became of the signal:
--   'ignored'  the thread is excluded from shadow (main, steward, isolated);
--   'deferred' a turn is running: the offer waits for the turn boundary;
--   'pending'  the offer stands now;
--   'drained'  a turn ended: offers deferred during it now stand;
--   'none'     a turn ended with nothing deferred: a turn boundary alone is no work.
-- The thread row is locked like every other write to the thread, so a signal is ordered with the
-- appends before it and with a claim that consumes it: a claim either sees the signal and the rows
-- it is about, or leaves the signal pending.
CREATE OR REPLACE FUNCTION ember.shadow_memory_changed(
    p_thread text, p_reason text, p_now timestamptz DEFAULT clock_timestamp()
)
RETURNS text
LANGUAGE plpgsql
AS $$
DECLARE
    st ember.shadow_thread_state;
    v_busy boolean;
    v_drained integer;
BEGIN
    PERFORM ember.require_now(p_now);
    IF p_reason IS NULL OR NOT ember.shadow_reason_known(p_reason) THEN
        RAISE EXCEPTION 'thread "%": unknown shadow reason "%"', p_thread, p_reason
            USING ERRCODE = 'EM030',
                  HINT = 'reasons: idle-or-ended, turn-boundary, turn-failed, waiting-user, task-ended, '
                      || 'generation-ended, thread-<status>';
    END IF;
    PERFORM ember.lock_thread(p_thread);
    IF ember.shadow_excluded(p_thread) THEN
        RETURN 'ignored';
    END IF;

    -- The turn state moves with the reasons that report it; tick's idle-or-ended and the
    -- status/generation reasons are not activity and leave last_activity_at alone. That holds for
    -- a thread's first signal too: its state row then starts at the thread's creation, so idle
    -- time is counted from the thread's own last row (tick and shadow_ready take the later of
    -- the two), not from the moment tick happened to look. An imported history whose last row is
    -- old is idle at once, instead of waiting idle_before_digest of wall-clock time.
    INSERT INTO ember.shadow_thread_state AS s (thread_id, turn_running, waiting_user, last_activity_at)
    VALUES (p_thread, false, p_reason = 'waiting-user', CASE
        WHEN p_reason IN ('turn-boundary', 'turn-failed', 'waiting-user', 'task-ended') THEN p_now
        ELSE (SELECT t.created_at FROM ember.threads AS t WHERE t.id = p_thread)
    END)
    ON CONFLICT (thread_id) DO UPDATE SET
        turn_running = CASE WHEN p_reason IN ('turn-boundary', 'turn-failed') THEN false
            ELSE s.turn_running END,
        waiting_user = CASE WHEN p_reason IN ('turn-boundary', 'turn-failed') THEN false
            WHEN p_reason = 'waiting-user' THEN true
            ELSE s.waiting_user END,
        last_activity_at = CASE
            WHEN p_reason IN ('turn-boundary', 'turn-failed', 'waiting-user', 'task-ended')
                THEN greatest(s.last_activity_at, p_now)
            ELSE s.last_activity_at END
    RETURNING * INTO st;
    v_busy := st.turn_running AND NOT st.waiting_user;

    IF p_reason IN ('turn-boundary', 'turn-failed') THEN
        UPDATE ember.shadow_signals SET deferred = false WHERE thread_id = p_thread AND deferred;
        GET DIAGNOSTICS v_drained = ROW_COUNT;
        IF p_reason = 'turn-boundary' THEN
            -- A normal turn end is not itself a reason to read the thread (seed section 4: it only
            -- drains what queued while the turn ran); idleness will bring it to tick later.
            PERFORM ember.shadow_wake_if_ready(p_thread, p_now);
            RETURN CASE WHEN v_drained > 0 THEN 'drained' ELSE 'none' END;
        END IF;
    END IF;

    -- waiting-user is never deferred: the turn is blocked on the user, the prefix is frozen and as
    -- hot as it will ever be. Repeating an offer that already stands adds nothing.
    IF NOT EXISTS (
        SELECT 1 FROM ember.shadow_signals
        WHERE thread_id = p_thread AND reason = p_reason AND deferred = (v_busy AND p_reason <> 'waiting-user')
    ) THEN
        INSERT INTO ember.shadow_signals (thread_id, reason, deferred, created_at)
        VALUES (p_thread, p_reason, v_busy AND p_reason <> 'waiting-user', p_now);
    END IF;
    IF v_busy AND p_reason <> 'waiting-user' THEN
        RETURN 'deferred';
    END IF;
    PERFORM ember.shadow_wake_if_ready(p_thread, p_now);
    RETURN 'pending';
END;
$$;

-- The thread's last real request and response, stored byte for byte (text: jsonb would reorder
-- keys and drop whitespace, and one changed byte is a cache miss). Returns false when the thread is
-- one shadow never reads (main, steward, isolated): nothing is stored for it at all.
--
-- model is the request's "model"; has_shadow_tool says whether the request's tools include
-- shadow_memory_propose (a replay cannot add it: a changed tools list misses the whole cache);
-- estimated_tokens is estimate_tokens() over the whole request text. That counts JSON syntax and
-- tool schemas too, so it overstates the prompt somewhat; it is compared with the model's minimum
-- cacheable length only to rule out prefixes that clearly are too short to be cached.
CREATE OR REPLACE FUNCTION ember.note_prefix(
    p_thread text,
    p_request text,
    p_response text,
    p_request_started_at timestamptz DEFAULT clock_timestamp(),
    p_now timestamptz DEFAULT clock_timestamp()
)
RETURNS boolean
LANGUAGE plpgsql
AS $$
DECLARE
    v_request json;
BEGIN
    PERFORM ember.require_now(p_now);
    PERFORM ember.lock_thread(p_thread);
    IF ember.shadow_excluded(p_thread) THEN
        RETURN false;
    END IF;
    IF p_request IS NULL OR p_response IS NULL OR p_request_started_at IS NULL THEN
        RAISE EXCEPTION 'thread "%": a prefix needs a request, a response and a start time', p_thread
            USING ERRCODE = 'EM032';
    END IF;
    BEGIN
        v_request := p_request::json;
        PERFORM p_response::json;
    EXCEPTION WHEN invalid_text_representation OR statement_too_complex THEN
        -- statement_too_complex (54001): JSON nested deeper than the parser's stack allows.
        RAISE EXCEPTION 'thread "%": a prefix request and response must be JSON text', p_thread
            USING ERRCODE = 'EM032', DETAIL = SQLERRM;
    END;
    IF json_typeof(v_request) <> 'object' THEN
        RAISE EXCEPTION 'thread "%": a prefix request must be a JSON object, got %',
            p_thread, json_typeof(v_request)
            USING ERRCODE = 'EM032';
    END IF;

    INSERT INTO ember.shadow_prefixes AS p (
        thread_id, generation_id, request, response, model, request_started_at,
        has_shadow_tool, estimated_tokens, noted_at
    ) VALUES (
        p_thread,
        ember.current_generation(p_thread, p_now),
        p_request,
        p_response,
        v_request ->> 'model',
        p_request_started_at,
        coalesce(json_typeof(v_request -> 'tools') = 'array' AND EXISTS (
            SELECT 1 FROM json_array_elements(v_request -> 'tools') AS tool
            WHERE json_typeof(tool) = 'object' AND tool ->> 'name' = 'shadow_memory_propose'
        ), false),
        ember.estimate_tokens(p_request),
        p_now
    )
    ON CONFLICT (thread_id) DO UPDATE SET
        generation_id = excluded.generation_id,
        request = excluded.request,
        response = excluded.response,
        model = excluded.model,
        request_started_at = excluded.request_started_at,
        has_shadow_tool = excluded.has_shadow_tool,
        estimated_tokens = excluded.estimated_tokens,
        noted_at = excluded.noted_at;

    INSERT INTO ember.shadow_thread_state AS s (thread_id, last_activity_at)
    VALUES (p_thread, p_now)
    ON CONFLICT (thread_id) DO UPDATE SET last_activity_at = greatest(s.last_activity_at, p_now);
    RETURN true;
END;
$$;

-- A turn began: until it ends, offers wait for the boundary (unless the turn blocks on the user).
CREATE OR REPLACE FUNCTION ember.turn_started(p_thread text, p_now timestamptz DEFAULT clock_timestamp())
RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
    PERFORM ember.require_now(p_now);
    PERFORM ember.lock_thread(p_thread);
    IF ember.shadow_excluded(p_thread) THEN
        RETURN;
    END IF;
    INSERT INTO ember.shadow_thread_state AS s (thread_id, turn_running, waiting_user, last_activity_at)
    VALUES (p_thread, true, false, p_now)
    ON CONFLICT (thread_id) DO UPDATE SET
        turn_running = true,
        waiting_user = false,
        last_activity_at = greatest(s.last_activity_at, p_now);
END;
$$;

-- A turn ended: normally (turn-boundary, which only drains) or with a failure (turn-failed, an
-- offer of its own: a failed turn may have left a half-done state worth recording).
CREATE OR REPLACE FUNCTION ember.turn_ended(
    p_thread text, p_ok boolean, p_now timestamptz DEFAULT clock_timestamp()
)
RETURNS text
LANGUAGE plpgsql
AS $$
BEGIN
    IF p_ok IS NULL THEN
        -- Guessing "failed" would signal a failure that may not have happened.
        RAISE EXCEPTION 'turn_ended: thread "%": p_ok must say whether the turn succeeded, not NULL', p_thread
            USING ERRCODE = 'EM012';
    END IF;
    RETURN ember.shadow_memory_changed(
        p_thread, CASE WHEN p_ok THEN 'turn-boundary' ELSE 'turn-failed' END, p_now
    );
END;
$$;

CREATE OR REPLACE FUNCTION ember.waiting_for_user(p_thread text, p_now timestamptz DEFAULT clock_timestamp())
RETURNS text
LANGUAGE sql
AS $$ SELECT ember.shadow_memory_changed(p_thread, 'waiting-user', p_now) $$;

-- A task's result reached the thread that dispatched it; the offer is on the task thread itself.
CREATE OR REPLACE FUNCTION ember.task_ended(p_thread text, p_now timestamptz DEFAULT clock_timestamp())
RETURNS text
LANGUAGE sql
AS $$ SELECT ember.shadow_memory_changed(p_thread, 'task-ended', p_now) $$;
