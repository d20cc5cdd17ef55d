-- The row of ember.work_status() and of the three functions it unions (functions/095_work_status.sql):
-- one type, so the four signatures cannot drift apart.
CREATE TYPE ember.work_status_row AS (
    pipeline text,
    state text,
    reason text,
    items integer,
    oldest text,
    since timestamptz,
    until timestamptz,
    detail text
);
