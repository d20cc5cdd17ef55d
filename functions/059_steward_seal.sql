-- A steward run whose model call is out when a thread it read is sealed: the call is aborted at
-- once, as a shadow run's is on a human message (044_shadow_cancel.sql). The next step would
-- fail the run anyway (steward_step, thread-isolated), but the call would run to its end with
-- the sealed rows in it, and a paid answer about them would be thrown away.

-- True when the running steward run read a row of a thread that is isolated now. The worker asks
-- this on an ember_cancel hint and at each lease renewal (a lost notification is noticed there).
CREATE OR REPLACE FUNCTION ember.steward_run_cancel_requested(p_tenant text, p_run bigint)
RETURNS boolean
LANGUAGE sql
STABLE
AS $$
    SELECT coalesce((
        SELECT r.status = 'running' AND EXISTS (
            SELECT 1 FROM ember.messages AS m
            WHERE m.tenant_id = r.tenant_id AND m.id = ANY(r.read_message_ids)
                AND ember.is_isolated(r.tenant_id, m.thread_id)
        )
        FROM ember.steward_runs AS r WHERE r.tenant_id = p_tenant AND r.id = p_run
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
        WHERE r.tenant_id = new.tenant_id AND r.status = 'running'
            AND EXISTS (SELECT 1 FROM ember.messages AS m
                        WHERE m.tenant_id = new.tenant_id AND m.id = ANY(r.read_message_ids) AND m.thread_id = new.id)
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

-- On a seal: the steward's record is redacted where it quotes the sealed thread, as forgetting
-- redacts it (086_forget_redact.sql, forget_steward_runs): in each wake that read a row of the
-- thread, the lines of those rows in the pages it was given become "m:ID [sealed]", and the
-- rows' texts, and those of the facts written from the thread, where its own turns quote them
-- verbatim. What the steward wrote from them stays in
-- memory, hidden as every fact derived from an isolated thread is (fact_visible); its record no
-- longer holds the thread's words for anything that reads it.
-- plpgsql, and the steward's tables asked for first: this trigger is created before them.
CREATE OR REPLACE FUNCTION ember.steward_seal_redact()
RETURNS trigger
LANGUAGE plpgsql
AS $$
DECLARE
    v_ids bigint[];
    v_contents text[];
    v_facts bigint[];
    v_texts text[];
BEGIN
    IF to_regclass('ember.steward_runs') IS NULL
       OR NOT EXISTS (SELECT 1 FROM ember.threads WHERE id = 'memory-steward') THEN
        RETURN NULL;
    END IF;
    SELECT coalesce(array_agg(m.id ORDER BY m.id), '{}'), coalesce(array_agg(m.content ORDER BY m.id), '{}')
    INTO v_ids, v_contents
    FROM ember.messages AS m
    WHERE m.thread_id = new.id AND m.erased_by IS NULL
        AND EXISTS (SELECT 1 FROM ember.steward_runs AS r WHERE m.id = ANY(r.read_message_ids));
    IF cardinality(v_ids) = 0 THEN
        RETURN NULL;
    END IF;
    PERFORM set_config('ember.erasing', 'on', true);
    PERFORM set_config('ember.redacting', 'seal', true);
    -- The facts it wrote from the thread are quoted in its own turns (write_fact) too.
    SELECT coalesce(array_agg(f.id ORDER BY f.id), '{}'), coalesce(array_agg(f.text ORDER BY f.id), '{}')
    INTO v_facts, v_texts
    FROM ember.facts AS f WHERE new.id = ANY(f.source_threads) AND f.text IS NOT NULL;
    PERFORM ember.forget_steward_runs(v_ids, v_contents, v_facts, v_texts, '-infinity');
    PERFORM set_config('ember.redacting', '', true);
    PERFORM set_config('ember.erasing', '', true);
    RETURN NULL;
END;
$$;

CREATE OR REPLACE TRIGGER threads_steward_seal_redact
AFTER UPDATE OF seal_tier ON ember.threads
FOR EACH ROW WHEN (new.seal_tier = 'isolated' AND old.seal_tier IS DISTINCT FROM 'isolated')
EXECUTE FUNCTION ember.steward_seal_redact();
