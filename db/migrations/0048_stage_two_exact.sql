-- Stage two exact where its parts meet (cut-over, rollback, consolidation, validity). The rules
-- are in functions/097_cutover.sql, functions/099_fact_valid_time.sql and
-- functions/101_consolidation_submit.sql.

-- 'reopened': a fact closed by another (superseded, or merged into it) is open again because its
-- closer stopped holding: retired, forgotten, or rolled back with its cut-over. The history row
-- names the closer and why in detail.
ALTER TABLE ember.fact_history
DROP CONSTRAINT fact_history_change_check,
ADD CONSTRAINT fact_history_change_check CHECK (
    change IN (
        'written', 'merged', 'retired', 'evidence-shrunk', 're-embedded', 'forgotten', 'confirmed',
        'superseded', 'validity-changed', 'reopened'
    )
);

-- Who made a cut-over or its rollback, and when, as the database saw it: the session's login role
-- and the transaction's clock. created_by and rolled_back_by stay what the operator said (the
-- person who decided, `ember cutover --by`); these are the audit trail nobody passes in.
ALTER TABLE ember.cutovers
ADD COLUMN recorded_by text NOT NULL DEFAULT session_user,
ADD COLUMN recorded_at timestamptz NOT NULL DEFAULT now(),
ADD COLUMN rollback_recorded_by text,
ADD COLUMN rollback_recorded_at timestamptz,
ADD CONSTRAINT cutover_rollback_recorded CHECK (
    (rolled_back_at IS NULL) = (rollback_recorded_by IS NULL)
    AND (rolled_back_at IS NULL) = (rollback_recorded_at IS NULL)
);

-- The database's clock at a consolidation claim, as shadow_runs has it (0043_lease_clock.sql): a
-- submit's lease is judged on the time that really passed since, never on the outcome's
-- finished_at.
ALTER TABLE ember.consolidation_runs
ADD COLUMN claimed_clock timestamptz NOT NULL DEFAULT clock_timestamp();
