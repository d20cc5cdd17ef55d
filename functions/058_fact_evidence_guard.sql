-- The database's own guard on fact evidence (design.md invariant 1): no pointer of any fact may
-- name a row or a generation of an isolated thread, whatever wrote it. check_evidence refuses
-- such evidence for the steward's writes; this trigger holds when a procedure is wrong or the
-- owner writes the table by hand, as shadow_proposal_guard does for proposals. A thread sealed
-- after a fact cited it keeps that pointer (the seal does not rewrite history); search_memory
-- and the comparison hide such facts by their own rule.
CREATE OR REPLACE FUNCTION ember.fact_evidence_not_isolated()
RETURNS trigger
LANGUAGE plpgsql
AS $$
DECLARE
    v_thread text;
BEGIN
    IF new.message_id IS NOT NULL THEN
        SELECT m.thread_id INTO v_thread FROM ember.messages AS m WHERE m.id = new.message_id;
    ELSE
        SELECT g.thread_id INTO v_thread FROM ember.generations AS g WHERE g.id = new.generation_id;
    END IF;
    IF v_thread IS NOT NULL AND ember.is_isolated(v_thread) THEN
        RAISE EXCEPTION 'fact %: pointer % names a row of isolated thread "%"', new.fact_id,
            coalesce('message ' || new.message_id, 'generation ' || new.generation_id), v_thread
            USING ERRCODE = 'EM115', HINT = 'nothing automated reads an isolated thread, and no fact cites one';
    END IF;
    RETURN new;
END;
$$;

CREATE OR REPLACE TRIGGER fact_evidence_not_isolated
BEFORE INSERT OR UPDATE ON ember.fact_evidence
FOR EACH ROW EXECUTE FUNCTION ember.fact_evidence_not_isolated();
