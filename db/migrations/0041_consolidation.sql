-- The consolidation job (issue 25, items 3 and 4; the seeds' 「整理组」): a low-frequency
-- pipeline over active facts across threads, in label-safe groups. The rules are in
-- functions/100_consolidation.sql .. functions/102_consolidation_review.sql.

INSERT INTO ember.settings (key, value, description, value_type, min_value, max_value, default_value)
VALUES
(
    'consolidation_interval', '"6 hours"',
    'how long after a group was last consolidated it may be read again (when its facts changed since)',
    'interval', '0 seconds', '30 days', '"6 hours"'
),
(
    'consolidation_group_facts', '40', 'active facts one consolidation run reads at most',
    'integer', '2', '1000', '40'
),
(
    'consolidation_min_confidence', '0.7',
    'below this confidence a merge, supersede or retire is not applied but queued for a person',
    'number', '0', '1', '0.7'
)
ON CONFLICT (key) DO NOTHING;

-- One row per consolidation run: its group (a label set), the facts it was shown, and usage,
-- price snapshot and latency under the column names of shadow_runs and steward_runs, so the
-- comparison's price expression reads all three pipelines alike.
CREATE TABLE ember.consolidation_runs (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    labels text[] NOT NULL,
    model text NOT NULL REFERENCES ember.models (id),
    status text NOT NULL DEFAULT 'running'
    CHECK (status IN ('running', 'completed', 'failed', 'abandoned')),
    error text,
    -- What the plan showed the model: the only facts its actions may name.
    fact_ids bigint[] NOT NULL,
    actions integer NOT NULL DEFAULT 0 CHECK (actions >= 0),
    input_tokens bigint NOT NULL DEFAULT 0 CHECK (input_tokens >= 0),
    cache_read_tokens bigint NOT NULL DEFAULT 0 CHECK (cache_read_tokens >= 0),
    cache_write_5m_tokens bigint NOT NULL DEFAULT 0 CHECK (cache_write_5m_tokens >= 0),
    cache_write_1h_tokens bigint NOT NULL DEFAULT 0 CHECK (cache_write_1h_tokens >= 0),
    output_tokens bigint NOT NULL DEFAULT 0 CHECK (output_tokens >= 0),
    price_as_of date,
    price_input numeric(12, 4),
    price_output numeric(12, 4),
    price_cache_write_5m numeric(12, 4),
    price_cache_write_1h numeric(12, 4),
    price_cache_read numeric(12, 4),
    started_at timestamptz NOT NULL,
    finished_at timestamptz,
    latency_ms bigint NOT NULL DEFAULT 0 CHECK (latency_ms >= 0),
    worker text NOT NULL,
    lease_token uuid NOT NULL,
    lease_expires_at timestamptz NOT NULL,
    CHECK ((status = 'running') = (finished_at IS NULL))
);

-- One run at a time: consolidation is a background chore, never a race.
CREATE UNIQUE INDEX consolidation_runs_one_running ON ember.consolidation_runs ((TRUE))
WHERE status = 'running';
CREATE INDEX consolidation_runs_labels ON ember.consolidation_runs (labels, started_at);

-- Every action a consolidation run proposed, applied or not, with its evidence pointers and
-- reason: applied (checked and done), refused (a check failed: error says which), flagged (a
-- contradiction the model doubts, or an action below consolidation_min_confidence: waits for a
-- person). A person's decision on a flagged action is review, reviewed_by, reviewed_at.
CREATE TABLE ember.consolidation_actions (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id bigint NOT NULL REFERENCES ember.consolidation_runs (id),
    ordinal integer NOT NULL,
    action text NOT NULL CHECK (action IN ('merge', 'supersede', 'retire', 'flag')),
    -- merge: the facts merged; supersede: [older, newer]; retire: [fact]; flag: the facts.
    fact_ids bigint[] NOT NULL,
    text text,
    reason text NOT NULL,
    confidence numeric(4, 3) CHECK (confidence BETWEEN 0 AND 1),
    -- The evidence pointers the action rests on, as the facts held them when it was checked.
    evidence jsonb NOT NULL DEFAULT '[]',
    status text NOT NULL CHECK (status IN ('applied', 'refused', 'flagged')),
    error text,
    -- The fact a merge wrote.
    result_fact bigint REFERENCES ember.facts (id),
    review text CHECK (review IN ('accepted', 'rejected')),
    reviewed_by text,
    reviewed_at timestamptz,
    review_note text,
    created_at timestamptz NOT NULL,
    UNIQUE (run_id, ordinal),
    CONSTRAINT refused_has_error CHECK ((status = 'refused') = (error IS NOT NULL)),
    CONSTRAINT review_complete CHECK (
        (review IS NULL) = (reviewed_by IS NULL) AND (review IS NULL) = (reviewed_at IS NULL)
    ),
    CONSTRAINT only_flagged_is_reviewed CHECK (review IS NULL OR status IN ('flagged', 'applied'))
);

CREATE INDEX consolidation_actions_queue ON ember.consolidation_actions (created_at)
WHERE status = 'flagged' AND review IS NULL;

-- A fact a consolidation merge wrote names its run (run_id stays the steward's column).
ALTER TABLE ember.facts
ADD COLUMN consolidation_run_id bigint REFERENCES ember.consolidation_runs (id);

-- History names the consolidation run and action behind a merge, supersede or retirement.
ALTER TABLE ember.fact_history
ADD COLUMN consolidation_run_id bigint REFERENCES ember.consolidation_runs (id),
ADD COLUMN consolidation_action_id bigint REFERENCES ember.consolidation_actions (id);
