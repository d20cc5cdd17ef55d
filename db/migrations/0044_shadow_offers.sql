-- Standing shadow offers, one row per thread (issue 21): the claim walks this table through an
-- index in its own order instead of computing shadow_ready() for every offered thread, and checks
-- readiness for the thread it picks only.
--
-- signalled_at is the earliest standing (not deferred) signal of the thread; a thread with only
-- deferred signals, or none, has no row. The shadow_signals triggers keep it
-- (functions/041_shadow_offers.sql).
--
-- parked_until / parked_reason: a claim that looked at the thread found it not claimable, for a
-- reason that holds until something it depends on changes (no light model for its labels, a run
-- or a turn running, nothing unread) or until a time (failure backoff). Later claims pass over a
-- parked offer; the triggers on what each reason depends on (models, settings, generations,
-- threads, runs, turn state, prefixes, messages) clear the park. A park is only a hint: clearing
-- it too often costs a re-check, and readiness is always decided afresh for the picked thread.
CREATE TABLE ember.shadow_offers (
    thread_id text PRIMARY KEY REFERENCES ember.threads (id),
    signalled_at timestamptz NOT NULL,
    parked_until timestamptz,
    parked_reason text,
    -- The registry's epoch (shadow_park_epoch) the claim read before it decided readiness: a park
    -- from an older epoch is passed over by no claim, since a model or setting changed since.
    parked_epoch bigint,
    CHECK ((parked_until IS NULL) = (parked_reason IS NULL))
);

-- Bumped by every statement that changes models or settings (functions/041_shadow_offers.sql).
-- A claim reads it before it decides a thread's readiness and parks with it; a change that
-- commits between that decision and the park makes the park stale instead of wrong. Clearing
-- every park in the changing statement instead would miss a park written a moment later from
-- the older reading.
CREATE TABLE ember.shadow_park_epoch (
    singleton boolean PRIMARY KEY DEFAULT TRUE CHECK (singleton),
    epoch bigint NOT NULL
);

INSERT INTO ember.shadow_park_epoch (epoch) VALUES (1);

-- The claim's order among cold offers: oldest signal first. Parked offers are few (they are the
-- exceptions), so the walk filters them rather than keeping a second index; an index on the park
-- itself, with stale statistics, drew the per-thread unpark away from the primary key.
CREATE INDEX shadow_offers_order ON ember.shadow_offers (signalled_at, thread_id);

-- Prefixes young enough to be hot are found by their age, not by reading every prefix.
CREATE INDEX shadow_prefixes_started ON ember.shadow_prefixes (request_started_at)
WHERE has_shadow_tool;

-- Failure backoff as state on the generation's progress row: failures since the generation's
-- last completed run, and when the latest of them finished. shadow_backoff_until reads these
-- instead of counting runs; the shadow_runs trigger keeps them (functions/080_write_state.sql).
ALTER TABLE ember.generation_progress
ADD COLUMN failures integer NOT NULL DEFAULT 0,
ADD COLUMN last_failed_at timestamptz;

-- Existing data: the same figures computed once from the rows.
UPDATE ember.generation_progress AS p SET
    failures = f.failures,
    last_failed_at = f.last_failed_at
FROM (
    SELECT
        r.generation_id,
        count(*)::integer AS failures,
        max(r.finished_at) AS last_failed_at
    FROM ember.shadow_runs AS r
    WHERE (r.status = 'failed' OR (r.status = 'abandoned' AND r.error = 'lease expired'))
        AND r.id > coalesce((
            SELECT max(c.id) FROM ember.shadow_runs AS c
            WHERE c.generation_id = r.generation_id AND c.status = 'completed'
        ), 0)
    GROUP BY r.generation_id
) AS f
WHERE p.generation_id = f.generation_id;

INSERT INTO ember.shadow_offers (thread_id, signalled_at)
SELECT
    s.thread_id,
    min(s.created_at) AS signalled_at
FROM ember.shadow_signals AS s
WHERE NOT s.deferred
GROUP BY s.thread_id;
