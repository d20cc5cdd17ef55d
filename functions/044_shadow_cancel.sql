-- Cancellation (seed 000 section 4, invariant 6): when the user speaks, shadow gets out of the way.
-- A human user message withdraws the thread's standing offers (the thread is about to run a turn),
-- drops its prefix (the next request replaces it, and replaying the old one would describe a
-- conversation that has moved on), and asks its running shadow run to stop: the run is flagged
-- cancel_requested, which submit_shadow_run() turns into 'cancelled' with no proposals, and
-- NOTIFY ember_cancel carries the run id so the worker can abort the model call now.
--
-- A trigger rather than a line in append_message: every path that inserts a human row (today only
-- append_message, later perhaps imports or copies) cancels the same way, and the host API stays
-- free of shadow details. The trigger runs inside the appending transaction, so if the append
-- rolls back nothing is cancelled, and the NOTIFY goes out only when the message commits.
--
-- SECURITY DEFINER because it writes shadow tables that a role allowed to append messages has no
-- reason to hold rights on; hence the pinned search_path.
-- Ask the thread's running shadow run to stop: flagged cancel_requested, and NOTIFY ember_cancel
-- with its id. The part of a withdrawal that a thread ending needs on its own.
CREATE OR REPLACE FUNCTION ember.shadow_cancel_running(p_tenant text, p_thread text)
RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
    v_run bigint;
BEGIN
    FOR v_run IN
        UPDATE ember.shadow_runs SET cancel_requested = true
        WHERE tenant_id = p_tenant AND thread_id = p_thread AND status = 'running'
        RETURNING id
    LOOP
        PERFORM pg_notify('ember_cancel', v_run::text);
    END LOOP;
END;
$$;

-- Withdraw a thread's shadow work: its offers, its prefix, and its running run (flagged, and
-- NOTIFY ember_cancel with the run id). The caller holds the thread's row lock, so a claim or a
-- submit of the same thread sees either all of this or none of it.
CREATE OR REPLACE FUNCTION ember.shadow_withdraw(p_tenant text, p_thread text)
RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
    DELETE FROM ember.shadow_signals WHERE tenant_id = p_tenant AND thread_id = p_thread;
    DELETE FROM ember.shadow_prefixes WHERE tenant_id = p_tenant AND thread_id = p_thread;
    PERFORM ember.shadow_cancel_running(p_tenant, p_thread);
END;
$$;

-- Once per statement, for each thread the statement gave a human row: a bulk append or an
-- import of many human rows withdraws each thread once rather than once per row (withdrawing a
-- second time finds nothing to withdraw), and the thread's activity moves to its latest human
-- row, as it would row by row.
CREATE OR REPLACE FUNCTION ember.shadow_cancel_on_user_message()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, ember, pg_temp
AS $$
DECLARE
    r record;
BEGIN
    FOR r IN
        SELECT n.tenant_id, n.thread_id, max(n.created_at) AS last_at
        FROM new_rows AS n
        WHERE n.role = 'user' AND n.author = 'human'
        GROUP BY n.tenant_id, n.thread_id
        ORDER BY n.tenant_id, n.thread_id
    LOOP
        PERFORM ember.shadow_withdraw(r.tenant_id, r.thread_id);
        -- The user answered: a turn blocked on the user is no longer waiting (and is busy again).
        UPDATE ember.shadow_thread_state
        SET waiting_user = false, last_activity_at = greatest(last_activity_at, r.last_at)
        WHERE tenant_id = r.tenant_id AND thread_id = r.thread_id;
    END LOOP;
    RETURN NULL;
END;
$$;

DROP TRIGGER IF EXISTS shadow_cancel_on_user_message ON ember.messages;
CREATE TRIGGER shadow_cancel_on_user_message
AFTER INSERT ON ember.messages
REFERENCING NEW TABLE AS new_rows
FOR EACH STATEMENT
EXECUTE FUNCTION ember.shadow_cancel_on_user_message();

-- Sealing an open thread (seal_tier to 'isolated', refused the other way in 025_visibility.sql)
-- takes effect for shadow at once: a plan already handed out is withdrawn like a human message's,
-- so its submit is recorded cancelled instead of being refused whole by the proposal guard, and
-- no prefix or offer of the sealed thread is left to be replayed. Every other reader asks
-- ember.is_isolated when it reads, so it needs nothing here.
CREATE OR REPLACE FUNCTION ember.shadow_cancel_on_seal()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, ember, pg_temp
AS $$
BEGIN
    PERFORM ember.shadow_withdraw(new.tenant_id, new.id);
    RETURN NULL;
END;
$$;

CREATE OR REPLACE TRIGGER shadow_cancel_on_seal
AFTER UPDATE OF seal_tier ON ember.threads
FOR EACH ROW
WHEN (old.seal_tier IS DISTINCT FROM new.seal_tier AND new.seal_tier = 'isolated')
EXECUTE FUNCTION ember.shadow_cancel_on_seal();

-- A thread that ends or is archived cancels its running shadow run: the run is flagged so its
-- submit records 'cancelled' and no proposals (invariant 6), and the worker is told through
-- NOTIFY ember_cancel. An archived thread is gone, so its offers and prefix go too
-- (shadow_withdraw); an ended one keeps its standing offers, and the status change's own signal
-- (thread-ended, raised after this) lets it be digested afresh from its final rows. A trigger on
-- the status column, so any path that ends a thread does it.
CREATE OR REPLACE FUNCTION ember.shadow_cancel_on_thread_end()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    IF new.status = 'archived' THEN
        PERFORM ember.shadow_withdraw(new.tenant_id, new.id);
    ELSE
        PERFORM ember.shadow_cancel_running(new.tenant_id, new.id);
    END IF;
    RETURN NULL;
END;
$$;

CREATE OR REPLACE TRIGGER shadow_cancel_on_thread_end
AFTER UPDATE OF status ON ember.threads
FOR EACH ROW
WHEN (new.status IN ('ended', 'archived') AND old.status IS DISTINCT FROM new.status)
EXECUTE FUNCTION ember.shadow_cancel_on_thread_end();
