-- One row: the sha256 of the function files last applied, so a worker can tell at start-up that
-- the functions in the database are its own (migrations are checked by ember.schema_migrations).
-- A single digest rather than one row per file: functions/ is re-applied as a whole, in one
-- transaction, so the set is what was applied.
CREATE TABLE ember.schema_functions (
    singleton boolean PRIMARY KEY DEFAULT TRUE CHECK (singleton),
    sha256 text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
