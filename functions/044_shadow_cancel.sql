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
CREATE OR REPLACE FUNCTION ember.shadow_cancel_on_user_message()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, ember, pg_temp
AS $$
DECLARE
    v_run bigint;
BEGIN
    DELETE FROM ember.shadow_signals WHERE thread_id = new.thread_id;
    DELETE FROM ember.shadow_prefixes WHERE thread_id = new.thread_id;
    -- The user answered: a turn blocked on the user is no longer waiting (and is busy again).
    UPDATE ember.shadow_thread_state
    SET waiting_user = false, last_activity_at = greatest(last_activity_at, new.created_at)
    WHERE thread_id = new.thread_id;
    FOR v_run IN
        UPDATE ember.shadow_runs SET cancel_requested = true
        WHERE thread_id = new.thread_id AND status = 'running'
        RETURNING id
    LOOP
        PERFORM pg_notify('ember_cancel', v_run::text);
    END LOOP;
    RETURN NULL;
END;
$$;

CREATE OR REPLACE TRIGGER shadow_cancel_on_user_message
AFTER INSERT ON ember.messages
FOR EACH ROW
WHEN (new.role = 'user' AND new.author = 'human')
EXECUTE FUNCTION ember.shadow_cancel_on_user_message();
