-- The database's own guard on shadow proposals (seed 000 section 5, third layer; design.md
-- invariants 1 and 2). submit_shadow_run already validates every proposal; this trigger holds
-- the two invariants even if that procedure, or a hand-written INSERT, is wrong:
--   * no proposal row of an isolated thread, valid or rejected;
--   * a row marked valid (no validation_error) points only into its own thread: its run and
--     generation are the thread's, and every evidence pointer and its lineage resolve there.
-- Rejected rows may point anywhere: keeping a hallucinated cross-thread pointer as comparison
-- data is the point of storing them. The trigger enforces the lineage rule only, not the
-- per-kind rules of check_evidence: a wrong kind is a quality judgement, stored as a
-- validation_error, while a valid-marked row leaving its thread breaks an invariant.

CREATE OR REPLACE FUNCTION ember.shadow_proposal_guard()
RETURNS trigger
LANGUAGE plpgsql
AS $$
DECLARE
    v_reason text;
BEGIN
    IF ember.is_isolated(NEW.thread_id) THEN
        RAISE EXCEPTION 'shadow proposal for thread "%": the thread is isolated, nothing automated may '
            'write about it', NEW.thread_id
            USING ERRCODE = 'EM045';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM ember.shadow_runs AS r WHERE r.id = NEW.run_id AND r.thread_id = NEW.thread_id)
       OR NOT EXISTS (
           SELECT 1 FROM ember.generations AS g WHERE g.id = NEW.generation_id AND g.thread_id = NEW.thread_id
       ) THEN
        RAISE EXCEPTION 'shadow proposal for thread "%": its run % or generation % belongs to another thread',
            NEW.thread_id, NEW.run_id, NEW.generation_id
            USING ERRCODE = 'EM046';
    END IF;
    IF NEW.validation_error IS NULL THEN
        v_reason := ember.evidence_lineage_error(NEW.thread_id, NEW.evidence);
        IF v_reason IS NOT NULL THEN
            RAISE EXCEPTION 'shadow proposal for thread "%" is marked valid but its evidence fails: %',
                NEW.thread_id, v_reason
                USING ERRCODE = 'EM046',
                      HINT = 'store it with a validation_error, as a rejected proposal';
        END IF;
    END IF;
    RETURN NEW;
END;
$$;

-- BEFORE INSERT OR UPDATE: an UPDATE that clears validation_error, or moves a row to another
-- thread, is held to the same rule as an insert.
CREATE OR REPLACE TRIGGER shadow_proposal_guard
BEFORE INSERT OR UPDATE ON ember.shadow_proposals
FOR EACH ROW EXECUTE FUNCTION ember.shadow_proposal_guard();
