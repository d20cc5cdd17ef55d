-- Keeping and giving back a shadow run's lease (issue 9). A claim hands out a lease instead of
-- holding a transaction open across the model call; the worker renews it while the call runs, so
-- a slow model does not lose its run, and a worker that dies simply stops renewing and tick()
-- abandons the run when the lease lapses. On a graceful shutdown the worker gives unfinished runs
-- back at once, so their threads are offered again now rather than a lease length later.
--
-- Both functions are guarded like submit_shadow_run: the lease token must be the run's, the run
-- must still be running and its lease not lapsed. A renewal cannot revive a lapsed lease: tick()
-- may already have abandoned the run and re-offered its thread, and two live runs for one thread
-- is exactly what the lease exists to prevent.

-- The run locked for a lease operation, or a named error. Lock order thread, then run: the order
-- of a human message's cancel and of submit_shadow_run, so none of them can deadlock.
CREATE OR REPLACE FUNCTION ember.shadow_lease_run(
    p_tenant text, p_run bigint, p_lease_token uuid, p_now timestamptz
)
RETURNS ember.shadow_runs
LANGUAGE plpgsql
AS $$
DECLARE
    v_thread text;
    r ember.shadow_runs;
BEGIN
    SELECT sr.thread_id INTO v_thread FROM ember.shadow_runs AS sr WHERE sr.tenant_id = p_tenant AND sr.id = p_run;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'unknown shadow run % of tenant %', p_run, coalesce(quote_literal(p_tenant), 'none')
            USING ERRCODE = 'EM051';
    END IF;
    PERFORM 1 FROM ember.threads AS t WHERE t.tenant_id = p_tenant AND t.id = v_thread FOR SHARE;
    SELECT * INTO r FROM ember.shadow_runs AS sr
    WHERE sr.tenant_id = p_tenant AND sr.id = p_run AND sr.thread_id = v_thread FOR UPDATE;
    IF p_lease_token IS NULL OR p_lease_token <> r.lease_token THEN
        RAISE EXCEPTION 'shadow run %: the lease token does not match; the run is held by another claim', p_run
            USING ERRCODE = 'EM051';
    END IF;
    IF r.status <> 'running' THEN
        RAISE EXCEPTION 'shadow run % is %, not running: its lease is gone', p_run, r.status
            USING ERRCODE = 'EM051';
    END IF;
    IF p_now >= r.lease_expires_at THEN
        RAISE EXCEPTION 'shadow run %: the lease expired at %', p_run, r.lease_expires_at
            USING ERRCODE = 'EM051', HINT = 'the run will be abandoned and its thread offered again';
    END IF;
    RETURN r;
END;
$$;

-- Renew the lease of a running run to p_now + p_lease. Returns {"lease_expires_at",
-- "cancel_requested"}: the renewal doubles as the worker's check of the run's state in SQL, so a
-- lost ember_cancel notification is noticed at the next renewal at the latest.
CREATE OR REPLACE FUNCTION ember.extend_shadow_lease(
    p_tenant text, p_run bigint, p_lease_token uuid, p_lease interval, p_now timestamptz DEFAULT clock_timestamp()
)
RETURNS jsonb
LANGUAGE plpgsql
AS $$
DECLARE
    r ember.shadow_runs;
BEGIN
    PERFORM ember.require_now(p_now);
    IF p_lease IS NULL OR p_lease <= interval '0' THEN
        RAISE EXCEPTION 'a lease extension needs a positive lease, got %', coalesce(p_lease::text, 'none')
            USING ERRCODE = 'EM050';
    END IF;
    r := ember.shadow_lease_run(p_tenant, p_run, p_lease_token, p_now);
    -- Never shorten: a renewal racing an earlier, longer one must not cut it back.
    UPDATE ember.shadow_runs SET lease_expires_at = greatest(lease_expires_at, p_now + p_lease)
    WHERE tenant_id = r.tenant_id AND id = r.id AND thread_id = r.thread_id
    RETURNING * INTO r;
    RETURN jsonb_build_object('lease_expires_at', r.lease_expires_at, 'cancel_requested', r.cancel_requested);
END;
$$;

-- Give back a running run that will not be finished (the worker is shutting down). The run ends
-- 'abandoned' with error 'released' (like a lapsed lease: it neither counts towards nor resets
-- failure backoff), and the offers its claim consumed stand again at once, so the next claim takes
-- the thread without waiting for tick(). A run already asked to cancel ends 'cancelled' instead,
-- with no offer put back: the human message that cancelled it withdrew the thread's offers.
-- Returns the run's final status.
CREATE OR REPLACE FUNCTION ember.release_shadow_run(
    p_tenant text, p_run bigint, p_lease_token uuid, p_now timestamptz DEFAULT clock_timestamp()
)
RETURNS text
LANGUAGE plpgsql
AS $$
DECLARE
    r ember.shadow_runs;
    v_status text;
    v_reason text;
BEGIN
    PERFORM ember.require_now(p_now);
    r := ember.shadow_lease_run(p_tenant, p_run, p_lease_token, p_now);
    v_status := CASE WHEN r.cancel_requested THEN 'cancelled' ELSE 'abandoned' END;
    UPDATE ember.shadow_runs SET
        status = v_status,
        error = CASE
            WHEN NOT r.cancel_requested THEN 'released'
            WHEN ember.is_isolated(r.tenant_id, r.thread_id) THEN 'thread-isolated'
            ELSE 'interrupted-by-user'
        END,
        finished_at = greatest(p_now, r.started_at)
    WHERE tenant_id = r.tenant_id AND id = r.id AND thread_id = r.thread_id;
    IF v_status = 'abandoned' AND NOT ember.shadow_excluded(r.tenant_id, r.thread_id) THEN
        -- The claim answered these offers and deleted them; put them back as they stood.
        FOREACH v_reason IN ARRAY coalesce(nullif(string_to_array(r.reason, ','), '{}'), ARRAY['idle-or-ended']) LOOP
            IF NOT EXISTS (
                SELECT 1 FROM ember.shadow_signals AS s
                WHERE s.tenant_id = r.tenant_id AND s.thread_id = r.thread_id AND s.reason = v_reason AND NOT s.deferred
            ) THEN
                INSERT INTO ember.shadow_signals (tenant_id, thread_id, reason, deferred, created_at)
                VALUES (r.tenant_id, r.thread_id, v_reason, false, r.started_at);
            END IF;
        END LOOP;
        PERFORM ember.shadow_wake_if_ready(r.tenant_id, r.thread_id, p_now);
    END IF;
    RETURN v_status;
END;
$$;

-- A run's state as the worker needs it to act on an ember_cancel hint: notifications carry only
-- a run id and anyone who can connect may send one, so the worker asks SQL before aborting.
CREATE OR REPLACE FUNCTION ember.shadow_run_cancel_requested(p_tenant text, p_run bigint)
RETURNS boolean
LANGUAGE sql STABLE
AS $$
    SELECT coalesce((
        SELECT r.cancel_requested OR r.status <> 'running' FROM ember.shadow_runs AS r
        WHERE r.tenant_id = p_tenant AND r.id = p_run
    ), false)
$$;
