-- Fact history (issue 17): every change of a fact becomes an append-only row of
-- ember.fact_history, written by triggers on ember.facts and ember.fact_evidence. Triggers rather
-- than calls from the steward's tools: whatever writes facts (the steward, forgetting, an
-- operator's UPDATE) is recorded the same way, and the writers need not know this exists.
--
-- The cause of a change, most specific first: the forget call in progress (the transaction-local
-- setting ember.forgetting, set by the forget functions), a run named by the transaction-local
-- setting ember.run, the fact's own run_id for a write, the merge target's run for a merge, and
-- for a retirement the steward run then running (there is at most one). Left NULL when none of
-- these applies, which the history shows honestly as "unknown".

CREATE OR REPLACE FUNCTION ember.history_setting(p_name text)
RETURNS bigint
LANGUAGE sql STABLE
AS $$
    SELECT nullif(current_setting(p_name, true), '')::bigint
$$;

-- The steward run in progress, or NULL (also when the steward's tables are not installed).
CREATE OR REPLACE FUNCTION ember.running_steward_run()
RETURNS bigint
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_run bigint;
BEGIN
    IF to_regclass('ember.steward_runs') IS NULL THEN
        RETURN NULL;
    END IF;
    EXECUTE 'SELECT id FROM ember.steward_runs WHERE status = ''running'' LIMIT 1' INTO v_run;
    RETURN v_run;
END;
$$;

-- Its length: a row trigger on facts: one IF chain decides the change and an insert records it;
-- a helper would be a call per changed fact.
CREATE OR REPLACE FUNCTION ember.fact_history_on_fact()
RETURNS trigger
LANGUAGE plpgsql
AS $$
DECLARE
    v_forgetting bigint := ember.history_setting('ember.forgetting');
    v_run bigint := ember.history_setting('ember.run');
    -- A cut-over's rollback (097_cutover.sql) names itself, so its retirements are not put on
    -- whatever steward run happens to be running.
    v_cutover bigint := ember.history_setting('ember.cutover');
    -- The consolidation run and action applying a merge, supersede or retirement
    -- (100_consolidation.sql), likewise.
    v_consolidation bigint := ember.history_setting('ember.consolidation_run');
    v_action bigint := ember.history_setting('ember.consolidation_action');
    v_change text;
    -- A change of the fact's validity (099_fact_valid_time.sql), except its first setting from
    -- the evidence just inserted, which is the fact's validity from its write on.
    v_validity jsonb := CASE
        WHEN tg_op = 'UPDATE' AND old.valid_from IS NOT NULL
             AND (new.valid_from, new.valid_until) IS DISTINCT FROM (old.valid_from, old.valid_until)
            THEN jsonb_build_object('from', new.valid_from, 'until', new.valid_until,
                                    'was_from', old.valid_from, 'was_until', old.valid_until,
                                    'superseded_by', new.superseded_by)
    END;
BEGIN
    IF tg_op = 'INSERT' THEN
        -- A promoted fact names its proposal, shadow run and cut-over.
        INSERT INTO ember.fact_history (tenant_id, fact_id, at, change, status, merged_into, retired_reason, run_id,
                                        forgetting_id, proposal_id, shadow_run_id, cutover_id, validity,
                                        consolidation_run_id, consolidation_action_id)
        VALUES (new.tenant_id, new.id, new.created_at, 'written', new.status, new.merged_into, new.retired_reason,
                coalesce(v_run, new.run_id), v_forgetting, new.shadow_proposal_id, new.shadow_run_id,
                new.cutover_id,
                CASE WHEN new.valid_from IS NOT NULL
                     THEN jsonb_build_object('from', new.valid_from, 'until', new.valid_until) END,
                coalesce(v_consolidation, new.consolidation_run_id), v_action);
        RETURN NULL;
    END IF;

    IF new.status = 'retired' AND new.text IS NULL AND old.text IS NOT NULL THEN
        v_change := 'forgotten';
    ELSIF new.status = 'superseded' AND old.status <> 'superseded' THEN
        v_change := 'superseded';
    ELSIF new.status = 'active' AND old.status IN ('superseded', 'merged') THEN
        -- Its closer stopped holding (099_fact_valid_time.sql, 097_cutover.sql); detail says why.
        v_change := 'reopened';
    ELSIF new.status = 'merged' AND (old.status <> 'merged' OR old.merged_into IS DISTINCT FROM new.merged_into) THEN
        v_change := 'merged';
        v_run := coalesce(v_run, (SELECT t.run_id FROM ember.facts AS t WHERE t.id = new.merged_into));
    ELSIF new.status = 'retired' AND (old.status <> 'retired' OR old.retired_reason IS DISTINCT FROM new.retired_reason) THEN
        v_change := 'retired';
        IF v_forgetting IS NULL AND v_cutover IS NULL AND v_consolidation IS NULL THEN
            v_run := coalesce(v_run, ember.running_steward_run());
        END IF;
    ELSIF new.embedding IS DISTINCT FROM old.embedding AND new.text IS NOT NULL THEN
        v_change := 're-embedded';
        IF v_forgetting IS NULL THEN
            v_run := coalesce(v_run, ember.running_steward_run());
        END IF;
    ELSIF v_validity IS NOT NULL THEN
        v_change := 'validity-changed';
    ELSE
        RETURN NULL;
    END IF;

    INSERT INTO ember.fact_history (tenant_id, fact_id, at, change, status, merged_into, retired_reason, detail, run_id,
                                    forgetting_id, cutover_id, validity, consolidation_run_id,
                                    consolidation_action_id)
    VALUES (
        -- The writer's time when it set one (the steward passes its p_now), else the clock.
        new.tenant_id, new.id, CASE WHEN new.updated_at IS DISTINCT FROM old.updated_at THEN new.updated_at ELSE clock_timestamp() END,
        v_change, new.status, new.merged_into, new.retired_reason,
        -- A merge keeps where it went in merged_into; a retirement by forgetting says which
        -- status the fact left, since its merge target (if any) is cleared by the retirement.
        CASE WHEN v_change = 'forgotten' THEN 'was ' || old.status
                  || coalesce(' (merged into fact ' || old.merged_into || ')', '')
             -- The reason a writer gave for the change (set_fact_validity, a consolidation action)
             -- in the transaction-local setting ember.history_reason.
             ELSE nullif(current_setting('ember.history_reason', true), '') END,
        v_run, v_forgetting, v_cutover, v_validity, v_consolidation, v_action
    );
    RETURN NULL;
END;
$$;

CREATE OR REPLACE TRIGGER fact_history_on_fact
AFTER INSERT OR UPDATE ON ember.facts
FOR EACH ROW EXECUTE FUNCTION ember.fact_history_on_fact();

-- Removed pointers: one history row per fact and statement, listing what went.
CREATE OR REPLACE FUNCTION ember.fact_history_on_evidence()
RETURNS trigger
LANGUAGE plpgsql
AS $$
DECLARE
    v_forgetting bigint := ember.history_setting('ember.forgetting');
    v_at timestamptz;
BEGIN
    SELECT fg.requested_at INTO v_at FROM ember.forgettings AS fg WHERE fg.id = v_forgetting;
    INSERT INTO ember.fact_history (tenant_id, fact_id, at, change, status, merged_into, retired_reason,
                                    evidence_removed, run_id, forgetting_id)
    SELECT f.tenant_id, f.id, coalesce(v_at, clock_timestamp()), 'evidence-shrunk', f.status, f.merged_into, f.retired_reason,
        o.removed, ember.history_setting('ember.run'), v_forgetting
    FROM (
        SELECT gone.tenant_id, gone.fact_id,
            jsonb_agg(CASE WHEN gone.message_id IS NOT NULL THEN jsonb_build_object('message_id', gone.message_id)
                           ELSE jsonb_build_object('generation_id', gone.generation_id) END
                      ORDER BY gone.ordinal) AS removed
        FROM gone
        GROUP BY gone.tenant_id, gone.fact_id
    ) AS o
    INNER JOIN ember.facts AS f ON f.tenant_id = o.tenant_id AND f.id = o.fact_id;
    RETURN NULL;
END;
$$;

CREATE OR REPLACE TRIGGER fact_history_on_evidence
AFTER DELETE ON ember.fact_evidence
REFERENCING OLD TABLE AS gone
FOR EACH STATEMENT EXECUTE FUNCTION ember.fact_history_on_evidence();

-- A fact's text never changes: a new belief is a new fact (write or merge), so history need not
-- keep old texts. The one exception is erasure by forgetting, which may only empty it.
CREATE OR REPLACE FUNCTION ember.fact_text_fixed()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    IF new.text IS DISTINCT FROM old.text
       AND NOT (new.text IS NULL AND coalesce(current_setting('ember.erasing', true) = 'on', false)) THEN
        RAISE EXCEPTION 'fact %: its text never changes; write or merge a new fact instead', old.id
            USING ERRCODE = 'EM098';
    END IF;
    RETURN new;
END;
$$;

CREATE OR REPLACE TRIGGER fact_text_fixed
BEFORE UPDATE OF text ON ember.facts
FOR EACH ROW EXECUTE FUNCTION ember.fact_text_fixed();

-- History is append-only. While forgetting, a row's free text (detail, and a retirement reason
-- written by the steward's model, which can quote the fact) may be emptied, and nothing else.
CREATE OR REPLACE FUNCTION ember.fact_history_append_only()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    IF tg_op = 'UPDATE' AND coalesce(current_setting('ember.erasing', true) = 'on', false)
       AND (to_jsonb(new) - 'detail' - 'retired_reason') = (to_jsonb(old) - 'detail' - 'retired_reason')
       AND new.detail IS NULL
       AND (new.retired_reason IS NULL OR new.retired_reason = old.retired_reason) THEN
        RETURN new;
    END IF;
    RAISE EXCEPTION 'fact history is append-only: % refused', tg_op
        USING ERRCODE = 'EM098';
END;
$$;

CREATE OR REPLACE TRIGGER fact_history_append_only
BEFORE UPDATE OR DELETE ON ember.fact_history
FOR EACH ROW EXECUTE FUNCTION ember.fact_history_append_only();

CREATE OR REPLACE TRIGGER fact_history_no_truncate
BEFORE TRUNCATE ON ember.fact_history
FOR EACH STATEMENT EXECUTE FUNCTION ember.fact_history_append_only();

-- No new pointer may name a forgotten row, or a generation with forgotten rows: a tombstone
-- keeps its role and author, and would otherwise pass the kind rules of check_evidence.
CREATE OR REPLACE FUNCTION ember.fact_evidence_not_forgotten()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM ember.messages AS m WHERE m.id = new.message_id AND m.erased_by IS NOT NULL)
       OR EXISTS (SELECT 1 FROM ember.messages AS m
                  WHERE m.generation_id = new.generation_id AND m.erased_by IS NOT NULL) THEN
        RAISE EXCEPTION 'fact %: pointer % names a forgotten row', new.fact_id,
            coalesce('message ' || new.message_id, 'generation ' || new.generation_id)
            USING ERRCODE = 'EM099';
    END IF;
    RETURN new;
END;
$$;

CREATE OR REPLACE TRIGGER fact_evidence_not_forgotten
BEFORE INSERT OR UPDATE ON ember.fact_evidence
FOR EACH ROW EXECUTE FUNCTION ember.fact_evidence_not_forgotten();

-- facts_as_of, on both time axes, is in 099_fact_valid_time.sql.
