-- Shadow signals (seed 000 section 4): every reason a thread may have something worth remembering
-- enters through one function, shadow_memory_changed(), which owns the busy/waiting rules. The
-- host's calls (note_prefix, turn_started, turn_ended, waiting_for_user, task_ended and
-- start_generation / set_thread_status, all in 015_host.sql) only report what happened.
--
-- A signal is an offer, not a job: shadow_ready() decides whether an offer becomes work (unread
-- rows, no running run, no backoff), and claim_shadow_run() consumes the thread's offers.

-- Threads shadow never looks at: main (the front desk; its reading moves to progress reports),
-- the steward's own record, and isolated threads. The rules themselves are decided by the
-- predicates of 010_predicates.sql; this only names their combination for the shadow files.
CREATE OR REPLACE FUNCTION ember.shadow_excluded(p_tenant text, p_thread text)
RETURNS boolean
LANGUAGE sql STABLE
AS $$
    SELECT coalesce(
        (SELECT t.kind = 'main' FROM ember.threads AS t WHERE t.tenant_id = p_tenant AND t.id = p_thread),
        true
    )
        OR ember.is_steward_thread(p_tenant, p_thread)
        OR ember.is_isolated(p_tenant, p_thread)
$$;

-- The one-tenant form, for the callers that do not name the tenant yet (ember.sole_tenant()).
CREATE OR REPLACE FUNCTION ember.shadow_excluded(p_thread text)
RETURNS boolean
LANGUAGE sql STABLE
AS $$
    SELECT ember.shadow_excluded(ember.sole_tenant(), p_thread)
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
    p_tenant text, p_thread text, p_now timestamptz DEFAULT clock_timestamp()
)
RETURNS boolean
LANGUAGE plpgsql
AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM ember.shadow_ready(ember.require_now(p_now), p_tenant, p_thread) AS r WHERE r.model IS NOT NULL) THEN
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
    p_tenant text, p_thread text, p_reason text, p_now timestamptz DEFAULT clock_timestamp()
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
    PERFORM ember.lock_thread(p_tenant, p_thread);
    IF ember.shadow_excluded(p_tenant, p_thread) THEN
        RETURN 'ignored';
    END IF;

    -- The turn state moves with the reasons that report it; tick's idle-or-ended and the
    -- status/generation reasons are not activity and leave last_activity_at alone. That holds for
    -- a thread's first signal too: its state row then starts at the thread's creation, so idle
    -- time is counted from the thread's own last row (tick and shadow_ready take the later of
    -- the two), not from the moment tick happened to look. An imported history whose last row is
    -- old is idle at once, instead of waiting idle_before_digest of wall-clock time.
    INSERT INTO ember.shadow_thread_state AS s (tenant_id, thread_id, turn_running, waiting_user, last_activity_at)
    VALUES (p_tenant, p_thread, false, p_reason = 'waiting-user', CASE
        WHEN p_reason IN ('turn-boundary', 'turn-failed', 'waiting-user', 'task-ended') THEN p_now
        ELSE (SELECT t.created_at FROM ember.threads AS t WHERE t.tenant_id = p_tenant AND t.id = p_thread)
    END)
    ON CONFLICT (tenant_id, thread_id) DO UPDATE SET
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
        UPDATE ember.shadow_signals SET deferred = false
        WHERE tenant_id = p_tenant AND thread_id = p_thread AND deferred;
        GET DIAGNOSTICS v_drained = ROW_COUNT;
        IF p_reason = 'turn-boundary' THEN
            -- A normal turn end is not itself a reason to read the thread (seed section 4: it only
            -- drains what queued while the turn ran); idleness will bring it to tick later.
            PERFORM ember.shadow_wake_if_ready(p_tenant, p_thread, p_now);
            RETURN CASE WHEN v_drained > 0 THEN 'drained' ELSE 'none' END;
        END IF;
    END IF;

    -- waiting-user is never deferred: the turn is blocked on the user, the prefix is frozen and as
    -- hot as it will ever be. Repeating an offer that already stands adds nothing.
    IF NOT EXISTS (
        SELECT 1 FROM ember.shadow_signals
        WHERE tenant_id = p_tenant AND thread_id = p_thread AND reason = p_reason AND deferred = (v_busy AND p_reason <> 'waiting-user')
    ) THEN
        INSERT INTO ember.shadow_signals (tenant_id, thread_id, reason, deferred, created_at)
        VALUES (p_tenant, p_thread, p_reason, v_busy AND p_reason <> 'waiting-user', p_now);
    END IF;
    IF v_busy AND p_reason <> 'waiting-user' THEN
        RETURN 'deferred';
    END IF;
    PERFORM ember.shadow_wake_if_ready(p_tenant, p_thread, p_now);
    RETURN 'pending';
END;
$$;
