-- Shadow memory: activation, cursors, signals, prefixes, runs and proposals (seed 000).
-- The shadow pipeline writes only these tables; never facts, never messages.episode_id.

-- Written once, ever: the global max(seq) when shadow memory was switched on.
CREATE TABLE ember.shadow_activation (
    singleton boolean PRIMARY KEY DEFAULT TRUE CHECK (singleton),
    through_seq bigint NOT NULL,
    activated_at timestamptz NOT NULL
);

-- Where shadow starts reading each generation of a thread. After initialization a cursor is
-- never moved again: the read position advances only by shadow's own completed runs.
CREATE TABLE ember.shadow_cursors (
    thread_id text NOT NULL REFERENCES ember.threads (id),
    generation_id uuid NOT NULL REFERENCES ember.generations (id),
    baseline_seq bigint NOT NULL CHECK (baseline_seq >= 0),
    initialization text NOT NULL CHECK (initialization IN ('steward', 'enabled')),
    created_at timestamptz NOT NULL,
    PRIMARY KEY (thread_id, generation_id)
);

-- Per-thread turn state reported by the host (turn_started / turn_ended / waiting_for_user).
CREATE TABLE ember.shadow_thread_state (
    thread_id text PRIMARY KEY REFERENCES ember.threads (id),
    turn_running boolean NOT NULL DEFAULT FALSE,
    waiting_user boolean NOT NULL DEFAULT FALSE,
    last_activity_at timestamptz NOT NULL,
    -- The generation tick() last saw, to notice a generation change.
    seen_generation_id uuid REFERENCES ember.generations (id)
);

-- Pending trigger reasons. A signal raised while a turn runs waits (deferred) for the turn
-- boundary; waiting-user is never deferred.
CREATE TABLE ember.shadow_signals (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    thread_id text NOT NULL REFERENCES ember.threads (id),
    reason text NOT NULL,
    deferred boolean NOT NULL DEFAULT FALSE,
    created_at timestamptz NOT NULL
);

CREATE INDEX shadow_signals_thread ON ember.shadow_signals (thread_id);

-- The thread's last real request and response, byte for byte (text, never jsonb: jsonb
-- reorders keys and drops whitespace, and one changed byte is a cache miss). Unlogged: after a
-- crash the prefixes are gone and the next shadow run takes the cold path, which is only cost.
CREATE UNLOGGED TABLE ember.shadow_prefixes (
    thread_id text PRIMARY KEY REFERENCES ember.threads (id),
    generation_id uuid NOT NULL REFERENCES ember.generations (id),
    request text NOT NULL,
    response text NOT NULL,
    model text,
    request_started_at timestamptz NOT NULL,
    has_shadow_tool boolean NOT NULL,
    estimated_tokens integer NOT NULL CHECK (estimated_tokens >= 0),
    noted_at timestamptz NOT NULL
);

CREATE TABLE ember.shadow_runs (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    thread_id text NOT NULL REFERENCES ember.threads (id),
    generation_id uuid NOT NULL REFERENCES ember.generations (id),
    path text NOT NULL CHECK (path IN ('hot', 'cold')),
    model text NOT NULL REFERENCES ember.models (id),
    reason text,
    status text NOT NULL DEFAULT 'running'
    CHECK (status IN ('running', 'completed', 'failed', 'cancelled', 'abandoned')),
    error text,
    from_seq bigint NOT NULL,
    through_seq bigint NOT NULL,
    input_tokens bigint NOT NULL DEFAULT 0 CHECK (input_tokens >= 0),
    cache_read_tokens bigint NOT NULL DEFAULT 0 CHECK (cache_read_tokens >= 0),
    cache_write_5m_tokens bigint NOT NULL DEFAULT 0 CHECK (cache_write_5m_tokens >= 0),
    cache_write_1h_tokens bigint NOT NULL DEFAULT 0 CHECK (cache_write_1h_tokens >= 0),
    output_tokens bigint NOT NULL DEFAULT 0 CHECK (output_tokens >= 0),
    -- The model's list-price snapshot, copied at claim time: later price edits never reprice
    -- a finished run.
    price_as_of date,
    price_input numeric(12, 4),
    price_output numeric(12, 4),
    price_cache_write_5m numeric(12, 4),
    price_cache_write_1h numeric(12, 4),
    price_cache_read numeric(12, 4),
    started_at timestamptz NOT NULL,
    finished_at timestamptz,
    latency_ms bigint CHECK (latency_ms >= 0),
    worker text NOT NULL,
    lease_token uuid NOT NULL,
    lease_expires_at timestamptz NOT NULL,
    cancel_requested boolean NOT NULL DEFAULT FALSE,
    CHECK (through_seq >= from_seq),
    CHECK ((status = 'running') = (finished_at IS NULL))
);

-- At most one running run per thread, whatever the claimers do.
CREATE UNIQUE INDEX shadow_runs_one_running ON ember.shadow_runs (thread_id)
WHERE status = 'running';

CREATE INDEX shadow_runs_thread_generation ON ember.shadow_runs (thread_id, generation_id, id);

CREATE TABLE ember.shadow_proposals (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id bigint NOT NULL REFERENCES ember.shadow_runs (id),
    thread_id text NOT NULL REFERENCES ember.threads (id),
    generation_id uuid NOT NULL REFERENCES ember.generations (id),
    ordinal integer NOT NULL,
    text text,
    -- Unchecked on purpose: a proposal with an unknown kind is kept, with its
    -- validation_error, as comparison data.
    evidence_kind text,
    evidence jsonb,
    categories text[] NOT NULL DEFAULT '{}',
    validation_error text,
    created_at timestamptz NOT NULL,
    UNIQUE (run_id, ordinal),
    CONSTRAINT valid_rows_are_complete CHECK (
        validation_error IS NOT NULL
        OR (
            text IS NOT NULL
            AND evidence IS NOT NULL
            AND evidence_kind IN ('user-stated', 'user-accepted', 'tool-verified', 'observed-outcome')
        )
    )
);

CREATE INDEX shadow_proposals_thread ON ember.shadow_proposals (thread_id);
