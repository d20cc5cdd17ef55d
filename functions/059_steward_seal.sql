-- A steward run whose model call is out when a thread it read is sealed: the call is aborted at
-- once, as a shadow run's is on a human message (044_shadow_cancel.sql). The next step would
-- fail the run anyway (steward_step, thread-isolated), but the call would run to its end with
-- the sealed rows in it, and a paid answer about them would be thrown away.

-- True when the running steward run read a row of a thread that is isolated now. The worker asks
-- this on an ember_cancel hint and at each lease renewal (a lost notification is noticed there).
CREATE OR REPLACE FUNCTION ember.steward_run_cancel_requested(p_run bigint)
RETURNS boolean
LANGUAGE sql
STABLE
AS $$
    SELECT coalesce((
        SELECT r.status = 'running' AND EXISTS (
            SELECT 1 FROM ember.messages AS m
            WHERE m.id = ANY(r.read_message_ids) AND ember.is_isolated(m.thread_id)
        )
        FROM ember.steward_runs AS r WHERE r.id = p_run
    ), false)
$$;

-- On a seal: the id of every running steward run that read the thread goes out on ember_cancel
-- (delivered at commit, like every notification); the worker asks SQL before it acts.
CREATE OR REPLACE FUNCTION ember.steward_seal_cancel()
RETURNS trigger
LANGUAGE plpgsql
AS $$
DECLARE
    v_run bigint;
BEGIN
    FOR v_run IN
        SELECT r.id FROM ember.steward_runs AS r
        WHERE r.status = 'running'
            AND EXISTS (SELECT 1 FROM ember.messages AS m
                        WHERE m.id = ANY(r.read_message_ids) AND m.thread_id = new.id)
    LOOP
        PERFORM pg_notify('ember_cancel', v_run::text);
    END LOOP;
    RETURN new;
END;
$$;

CREATE OR REPLACE TRIGGER threads_steward_seal_cancel
AFTER UPDATE OF seal_tier ON ember.threads
FOR EACH ROW WHEN (new.seal_tier = 'isolated' AND old.seal_tier IS DISTINCT FROM 'isolated')
EXECUTE FUNCTION ember.steward_seal_cancel();
