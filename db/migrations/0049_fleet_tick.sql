-- Who ticked for the fleet last, and when (ember.fleet_tick in functions/046_shadow_tick.sql).
-- One row. Every worker tries to tick each interval; one that finds a tick younger than half an
-- interval leaves it, so a fleet ticks about once an interval, and a worker that stops ticking
-- (dead, frozen, cut off) is replaced at the next worker's next interval: nothing is held for it.
CREATE TABLE ember.fleet_tick (
    one boolean PRIMARY KEY DEFAULT TRUE CHECK (one),
    worker text NOT NULL,
    ticked_at timestamptz NOT NULL
);
