-- Promotion (issue 25, item 1): a valid proposal of a cut-over thread becomes a production fact,
-- its evidence checked again as the steward's would be. The cut-over itself, its dry run and
-- its rollback are in 097_cutover.sql; which rows are shadow's is 024_cutover_scope.sql.

-- Why a proposal may not become a fact under cut-over c, or NULL. Everything is decided again
-- from the rows, never from the proposal's validation_error:
--   the run completed, in the proposal's thread and generation;
--   the text states something;
--   the shadow rule: check_evidence in its own thread, limited to what the run's model saw
--   (its rendered rows cold, its generation through through_seq hot; as submit_shadow_run);
--   the steward's rule: check_evidence across threads (no isolated thread, no steward record);
--   no pointer names a forgotten row;
--   every pointer is shadow's: a row above the cut-over point, a generation wholly above it, or
--   the run's own generation when the run (cold) read only rows above the point.
CREATE OR REPLACE FUNCTION ember.cutover_promotion_error(p ember.shadow_proposals, c ember.cutovers)
RETURNS text
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    r ember.shadow_runs;
    v_seen bigint[];
    v_reason text;
    t record;
BEGIN
    SELECT * INTO r FROM ember.shadow_runs WHERE id = p.run_id;
    IF NOT FOUND OR r.status <> 'completed' OR r.thread_id <> p.thread_id OR r.generation_id <> p.generation_id THEN
        RETURN format('run %s is not a completed run of this proposal''s thread and generation', p.run_id);
    END IF;
    IF p.forgotten_by IS NOT NULL OR p.text IS NULL OR ember.clean_fact_text(p.text) = '' THEN
        RETURN 'the proposal states nothing (empty or forgotten)';
    END IF;
    IF jsonb_typeof(p.evidence) IS DISTINCT FROM 'array' THEN
        RETURN 'evidence must be a list of pointers';
    END IF;
    v_seen := ARRAY(
        SELECT m.id FROM ember.messages AS m
        WHERE m.generation_id = r.generation_id AND m.seq <= r.through_seq
            AND (r.path = 'hot' OR m.seq > r.from_seq)
    );
    v_reason := coalesce(
        ember.check_evidence(p.thread_id, p.evidence_kind, p.evidence, true, v_seen, ARRAY[r.generation_id]),
        ember.check_evidence(NULL, p.evidence_kind, p.evidence, false)
    );
    IF v_reason IS NOT NULL THEN
        RETURN 'evidence refused: ' || v_reason;
    END IF;
    FOR t IN SELECT * FROM ember.evidence_targets(p.evidence) LOOP
        IF EXISTS (
            SELECT 1 FROM ember.messages AS m
            WHERE m.erased_by IS NOT NULL AND (m.id = t.message_id OR m.generation_id = t.generation_id)
        ) THEN
            RETURN ember.evidence_pointer_label(t.ordinal, t.message_id, t.generation_id) || ': names a forgotten row';
        END IF;
        IF t.message_id IS NOT NULL
           AND (SELECT m.seq FROM ember.messages AS m WHERE m.id = t.message_id) <= c.from_seq THEN
            RETURN ember.evidence_pointer_label(t.ordinal, t.message_id, t.generation_id)
                || format(': at or before cut-over %s''s point (seq %s), a row the steward reads', c.id, c.from_seq);
        END IF;
        -- A generation pointer names the rows of it the run read: a cold run of the proposal's
        -- own generation that started reading above the point read only shadow's rows, though
        -- the generation began before it; any other generation must lie wholly above the point.
        IF t.generation_id IS NOT NULL
           AND NOT (t.generation_id = r.generation_id AND r.path = 'cold' AND r.from_seq >= c.from_seq)
           AND coalesce((
            SELECT min(m.seq) FROM ember.messages AS m WHERE m.generation_id = t.generation_id
        ), 0) <= c.from_seq THEN
            RETURN ember.evidence_pointer_label(t.ordinal, t.message_id, t.generation_id)
                || format(': the generation has rows at or before cut-over %s''s point (seq %s), which the '
                          'steward reads', c.id, c.from_seq);
        END IF;
    END LOOP;
    RETURN NULL;
END;
$$;

-- Promote one stored proposal if its thread is cut over. Returns the outcome (promoted,
-- already-stated, refused), or NULL when the thread is not cut over or the proposal was
-- considered before. Never raises for a bad proposal: a refusal is a row of cutover_promotions,
-- and the shadow submit that stored the proposal commits as it would have without a cut-over.
CREATE OR REPLACE FUNCTION ember.cutover_promote(p_proposal bigint, p_now timestamptz DEFAULT clock_timestamp())
RETURNS text
LANGUAGE plpgsql
AS $$
DECLARE
    p ember.shadow_proposals;
    c ember.cutovers;
    v_reason text;
    v_fact bigint;
    v_outcome text;
BEGIN
    SELECT * INTO p FROM ember.shadow_proposals WHERE id = p_proposal;
    IF NOT FOUND OR p.validation_error IS NOT NULL
       OR EXISTS (SELECT 1 FROM ember.cutover_promotions WHERE proposal_id = p_proposal) THEN
        RETURN NULL;
    END IF;
    -- FOR SHARE against a concurrent rollback (which takes the row FOR UPDATE): either this
    -- promotion commits first and the rollback retires its fact, or it sees the rollback and
    -- promotes nothing.
    SELECT * INTO c FROM ember.cutovers
    WHERE id = ember.cutover_for_thread(p.thread_id) AND rolled_back_at IS NULL
    FOR SHARE;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;

    v_reason := ember.cutover_promotion_error(p, c);
    IF v_reason IS NOT NULL THEN
        v_outcome := 'refused';
    ELSE
        -- As the steward's write_fact: an active fact it may read that states the same is kept,
        -- and nothing is written.
        SELECT f.id INTO v_fact
        FROM ember.facts AS f
        WHERE f.status = 'active'
            AND f.text_key = ember.normalize_fact_text(ember.clean_fact_text(p.text))
            AND ember.fact_hidden_reason('memory-steward', f) IS NULL
        ORDER BY f.id
        LIMIT 1;
        IF v_fact IS NOT NULL THEN
            v_outcome := 'already-stated';
        ELSE
            v_outcome := 'promoted';
            INSERT INTO ember.facts (
                text, evidence_kind, categories, run_id, source_threads, shadow_proposal_id, shadow_run_id,
                cutover_id, created_at, updated_at
            ) VALUES (
                p.text, p.evidence_kind,
                -- The labels its generation carries now, never fewer than the proposal carried.
                ember.label_set(p.categories || ember.generation_labels(p.generation_id)),
                NULL,
                ember.label_set(ARRAY(
                    SELECT DISTINCT l FROM ember.evidence_targets(p.evidence) AS t, unnest(t.lineage) AS l
                )),
                p.id, p.run_id, c.id, p_now, p_now
            )
            RETURNING id INTO v_fact;
            INSERT INTO ember.fact_evidence (fact_id, ordinal, message_id, generation_id)
            SELECT v_fact, x.ordinality, (x.value ->> 'message_id')::bigint, (x.value ->> 'generation_id')::uuid
            FROM jsonb_array_elements(p.evidence) WITH ORDINALITY AS x (value, ordinality);
        END IF;
    END IF;
    INSERT INTO ember.cutover_promotions (proposal_id, cutover_id, thread_id, shadow_run_id, outcome, fact_id, reason, at)
    VALUES (p.id, c.id, p.thread_id, p.run_id, v_outcome, v_fact, v_reason, p_now);
    RETURN v_outcome;
END;
$$;

CREATE OR REPLACE FUNCTION ember.cutover_promote_on_insert()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    PERFORM ember.cutover_promote(new.id, new.created_at);
    RETURN NULL;
END;
$$;

-- After the guard (031_proposal_guard.sql) has let the row in: only a stored valid proposal is
-- considered, and the submit that stores it needs no change.
CREATE OR REPLACE TRIGGER cutover_promote_on_insert
AFTER INSERT ON ember.shadow_proposals
FOR EACH ROW WHEN (new.validation_error IS NULL)
EXECUTE FUNCTION ember.cutover_promote_on_insert();

-- The steward found what it meant to write already stated by fact p_fact (write_fact's "already
-- states this"). When that fact came from a promotion and the steward's own evidence passes its
-- checks, the confirmation is recorded, and the fact then survives a rollback of its cut-over.
-- Returns whether a confirmation was recorded.
CREATE OR REPLACE FUNCTION ember.fact_confirmed(
    p_tenant text, p_fact bigint, p_run bigint, p_input jsonb, p_now timestamptz
)
RETURNS boolean
LANGUAGE plpgsql
AS $$
DECLARE
    f ember.facts;
    v_kind text := CASE WHEN jsonb_typeof(p_input -> 'evidence_kind') = 'string' THEN p_input ->> 'evidence_kind' END;
BEGIN
    SELECT * INTO f FROM ember.facts WHERE tenant_id = p_tenant AND id = p_fact;
    IF NOT FOUND OR f.cutover_id IS NULL OR f.status <> 'active'
       OR ember.steward_evidence_error(p_tenant, p_run, v_kind, p_input -> 'evidence') IS NOT NULL THEN
        RETURN false;
    END IF;
    INSERT INTO ember.fact_confirmations (tenant_id, fact_id, run_id, evidence_kind, evidence, at)
    VALUES (p_tenant, p_fact, p_run, v_kind, p_input -> 'evidence', p_now);
    INSERT INTO ember.fact_history (tenant_id, fact_id, at, change, status, run_id, cutover_id)
    VALUES (f.tenant_id, p_fact, p_now, 'confirmed', f.status, p_run, f.cutover_id);
    RETURN true;
END;
$$;
