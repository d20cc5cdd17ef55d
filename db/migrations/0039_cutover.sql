-- Cut-over (issue 25, item 1): shadow takes over a scope of threads from a point on, and can be
-- rolled back. The rules are in functions/024_cutover_scope.sql and functions/097_cutover.sql.

-- One row per cut-over. A scope is a thread, a category, or all threads shadow reads. Rows of
-- the scope with seq above from_seq belong to shadow while the cut-over is active: the steward's
-- backlog leaves them out and shadow's proposals that cite only them become facts. A rollback
-- ends the cut-over as a whole (its rows go back to the steward), so an active cut-over has no
-- upper bound and a thread's shadow rows are always a tail of its rows.
CREATE TABLE ember.cutovers (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    scope text NOT NULL CHECK (scope IN ('thread', 'category', 'all')),
    scope_value text,
    -- The global max(seq) when the cut-over was made: no row above it existed then, so no
    -- steward run had read one and no shadow run had either.
    from_seq bigint NOT NULL CHECK (from_seq >= 0),
    from_at timestamptz NOT NULL,
    created_by text NOT NULL CHECK (btrim(created_by) <> ''),
    note text,
    rolled_back_at timestamptz,
    rolled_back_by text,
    -- The global max(seq) at the rollback, for the record.
    rollback_seq bigint,
    -- What the rollback did: facts retired, facts kept because the steward confirmed them, rows
    -- returned to the steward's backlog.
    rollback_result jsonb,
    CONSTRAINT cutover_scope_value CHECK ((scope = 'all') = (scope_value IS NULL)),
    CONSTRAINT cutover_rollback_complete CHECK (
        (rolled_back_at IS NULL) = (rolled_back_by IS NULL)
        AND (rolled_back_at IS NULL) = (rollback_seq IS NULL)
    )
);

-- The active cut-overs are few, and every backlog read asks for them.
CREATE INDEX cutovers_active ON ember.cutovers (scope, scope_value) WHERE rolled_back_at IS NULL;

-- What promotion did with each valid proposal of a cut-over scope: promoted (fact_id is the new
-- fact), already-stated (fact_id is the active fact that states it), or refused (reason says
-- which check failed). One row per proposal: a proposal is considered once.
-- Keyed like the proposals it follows (distributed by thread_id: docs/operations.md,
-- "Distribution by thread_id"), so its keys hold thread_id.
CREATE TABLE ember.cutover_promotions (
    proposal_id bigint NOT NULL,
    cutover_id bigint NOT NULL REFERENCES ember.cutovers (id),
    thread_id text NOT NULL REFERENCES ember.threads (id),
    shadow_run_id bigint NOT NULL,
    outcome text NOT NULL CHECK (outcome IN ('promoted', 'already-stated', 'refused')),
    fact_id bigint REFERENCES ember.facts (id),
    reason text,
    at timestamptz NOT NULL,
    PRIMARY KEY (proposal_id, thread_id),
    FOREIGN KEY (proposal_id, thread_id) REFERENCES ember.shadow_proposals (id, thread_id),
    FOREIGN KEY (shadow_run_id, thread_id) REFERENCES ember.shadow_runs (id, thread_id),
    CONSTRAINT promotion_outcome_shape CHECK (
        (outcome = 'refused') = (reason IS NOT NULL)
        AND (outcome = 'refused') = (fact_id IS NULL)
    )
);

CREATE INDEX cutover_promotions_cutover ON ember.cutover_promotions (cutover_id, outcome);
CREATE INDEX cutover_promotions_thread ON ember.cutover_promotions (thread_id);

-- A fact written by promotion names its proposal, the shadow run and the cut-over; run_id (the
-- steward run) stays NULL, so whichever pipeline wrote a fact is one column away. No foreign
-- key to the proposal or the run: facts are a reference table and those are distributed, which
-- Citus refuses; promotion reads the proposal it names first, and no proposal or run is deleted.
ALTER TABLE ember.facts
ADD COLUMN shadow_proposal_id bigint,
ADD COLUMN shadow_run_id bigint,
ADD COLUMN cutover_id bigint REFERENCES ember.cutovers (id),
ADD CONSTRAINT facts_one_writer CHECK (
    (cutover_id IS NULL) = (shadow_proposal_id IS NULL)
    AND (cutover_id IS NULL) = (shadow_run_id IS NULL)
    AND (cutover_id IS NULL OR run_id IS NULL)
);

CREATE INDEX facts_cutover ON ember.facts (cutover_id) WHERE cutover_id IS NOT NULL;

-- The steward confirmed a fact: it meant to write what the fact states, with evidence of its own
-- that passed its checks, and found it in memory. A promoted fact the steward confirmed stays
-- when its cut-over is rolled back: the steward holds it on its own evidence.
CREATE TABLE ember.fact_confirmations (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    fact_id bigint NOT NULL REFERENCES ember.facts (id),
    -- The steward run (no foreign key: a reference table may not point into a distributed one).
    run_id bigint NOT NULL,
    evidence_kind text NOT NULL,
    evidence jsonb NOT NULL,
    at timestamptz NOT NULL
);

CREATE INDEX fact_confirmations_fact ON ember.fact_confirmations (fact_id);

-- History names the promotion behind a write and the cut-over behind a rollback's retirement;
-- 'confirmed' is the steward's confirmation of a fact it found already stated.
ALTER TABLE ember.fact_history
ADD COLUMN proposal_id bigint,
ADD COLUMN shadow_run_id bigint,
ADD COLUMN cutover_id bigint REFERENCES ember.cutovers (id),
DROP CONSTRAINT fact_history_change_check,
ADD CONSTRAINT fact_history_change_check CHECK (
    change IN (
        'written', 'merged', 'retired', 'evidence-shrunk', 're-embedded', 'forgotten', 'confirmed'
    )
);
