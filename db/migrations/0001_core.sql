-- Core schema: settings, categories, the model registry, threads, generations, messages, facts.
-- Every table that grows with traffic is keyed by thread_id (design.md section 7).

CREATE EXTENSION IF NOT EXISTS vector;

-- Constants of design.md section 5, one row each, overridable by the operator and in tests.
CREATE TABLE ember.settings (
    key text PRIMARY KEY,
    value jsonb NOT NULL,
    description text NOT NULL
);

INSERT INTO ember.settings (key, value, description) VALUES
('idle_before_digest', '"20 minutes"', 'a thread idle this long is signalled idle-or-ended'),
('tick_interval', '"1 minute"', 'how often the worker calls tick()'),
('cold_page_tokens', '12000', 'estimated tokens per cold-path page'),
('failure_backoff_after', '3', 'consecutive failed runs in one generation before backoff'),
('failure_backoff', '"6 hours"', 'how long a thread waits after repeated failures'),
('steward_wake_generations', '4', 'generations the steward reads per wake, at most'),
('steward_wake_tokens', '80000', 'estimated tokens the steward reads per wake, about');

-- Content categories. A model may read a category only when it is tagged with it.
CREATE TABLE ember.categories (
    name text PRIMARY KEY CHECK (name ~ '^[a-z][a-z0-9_-]*$'),
    description text
);

-- The model registry. `position` is registry order: routing takes the first fit.
CREATE TABLE ember.models (
    id text PRIMARY KEY,
    position integer NOT NULL UNIQUE,
    tier text NOT NULL CHECK (tier IN ('light', 'standard', 'frontier')),
    tags text[] NOT NULL DEFAULT '{}',
    cache_ttl interval NOT NULL DEFAULT '5 minutes' CHECK (cache_ttl > '0'),
    min_cacheable_tokens integer NOT NULL CHECK (min_cacheable_tokens > 0),
    thinking_retention text NOT NULL CHECK (thinking_retention IN ('all', 'last-turn')),
    price_as_of date NOT NULL,
    price_input numeric(12, 4) NOT NULL CHECK (price_input >= 0),
    price_output numeric(12, 4) NOT NULL CHECK (price_output >= 0),
    price_cache_write_5m numeric(12, 4) NOT NULL CHECK (price_cache_write_5m >= 0),
    price_cache_write_1h numeric(12, 4) NOT NULL CHECK (price_cache_write_1h >= 0),
    price_cache_read numeric(12, 4) NOT NULL CHECK (price_cache_read >= 0)
);

COMMENT ON TABLE ember.models IS
'List prices per million tokens, a dated snapshot: an estimate, not a bill.';

-- Anthropic list prices as of the snapshot date (write 5m = 1.25x input, 1h = 2x, read = 0.1x).
-- The simulator's worker/ember/sim/models.json carries the same rows; a test keeps them equal.
INSERT INTO ember.models (
    id, position, tier, min_cacheable_tokens, thinking_retention, price_as_of,
    price_input, price_output, price_cache_write_5m, price_cache_write_1h, price_cache_read
) VALUES
('claude-haiku-4-5', 10, 'light', 4096, 'last-turn', '2026-11-30', 1, 5, 1.25, 2, 0.10),
('claude-sonnet-4-5', 20, 'standard', 1024, 'last-turn', '2026-11-30', 3, 15, 3.75, 6, 0.30),
('claude-sonnet-4-6', 30, 'standard', 1024, 'all', '2026-11-30', 3, 15, 3.75, 6, 0.30),
('claude-opus-4-1', 40, 'frontier', 1024, 'last-turn', '2026-11-30', 15, 75, 18.75, 30, 1.50),
('claude-opus-4-5', 50, 'frontier', 4096, 'all', '2026-11-30', 5, 25, 6.25, 10, 0.50),
('claude-opus-4-6', 60, 'frontier', 4096, 'all', '2026-11-30', 5, 25, 6.25, 10, 0.50),
('claude-opus-4-7', 70, 'frontier', 2048, 'all', '2026-11-30', 5, 25, 6.25, 10, 0.50),
('claude-opus-4-8', 80, 'frontier', 1024, 'all', '2026-11-30', 5, 25, 6.25, 10, 0.50);

CREATE TABLE ember.threads (
    id text PRIMARY KEY CHECK (id <> ''),
    kind text NOT NULL CHECK (kind IN ('main', 'side', 'task', 'steward')),
    title text,
    category text REFERENCES ember.categories (name),
    seal_tier text NOT NULL DEFAULT 'open' CHECK (seal_tier IN ('open', 'isolated')),
    status text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'ended', 'archived')),
    origin jsonb NOT NULL DEFAULT '{}',
    hidden boolean NOT NULL DEFAULT FALSE,
    -- Per-thread model pin and thinking level (the seeds' prefs).
    model text REFERENCES ember.models (id),
    thinking_level text NOT NULL DEFAULT 'off'
    CHECK (thinking_level IN ('off', 'low', 'medium', 'high')),
    created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    status_changed_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    -- The steward's record is the thread named memory-steward, and only that one.
    CONSTRAINT steward_has_fixed_id CHECK ((kind = 'steward') = (id = 'memory-steward'))
);

-- At most one main and one steward.
CREATE UNIQUE INDEX threads_one_main_one_steward ON ember.threads (kind)
WHERE kind IN ('main', 'steward');

CREATE TABLE ember.generations (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    thread_id text NOT NULL REFERENCES ember.threads (id),
    ordinal integer NOT NULL,
    started_at timestamptz NOT NULL,
    ended_at timestamptz,
    UNIQUE (thread_id, ordinal),
    CHECK (ended_at IS NULL OR ended_at >= started_at)
);

-- One open generation per thread.
CREATE UNIQUE INDEX generations_one_open ON ember.generations (thread_id)
WHERE ended_at IS NULL;

-- Global order of rows. Taken while the thread row is locked, so within a thread seq order is
-- commit order (invariant 8).
CREATE SEQUENCE ember.message_seq AS bigint;

CREATE TABLE ember.messages (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    seq bigint NOT NULL UNIQUE,
    thread_id text NOT NULL REFERENCES ember.threads (id),
    generation_id uuid NOT NULL REFERENCES ember.generations (id),
    role text NOT NULL CHECK (role IN ('user', 'assistant', 'tool_result', 'event')),
    author text NOT NULL CHECK (author IN ('human', 'agent', 'system', 'main')),
    content text NOT NULL,
    -- The provider's raw content blocks, byte for byte: json, not jsonb.
    blocks json,
    tool_call_id text,
    tool_name text,
    tool_status text CHECK (tool_status IN ('ok', 'error', 'pending')),
    from_thread text REFERENCES ember.threads (id),
    -- The steward's digestion marker; only the steward writes it.
    episode_id uuid,
    -- Label categories the row carries (stamped at insert).
    categories text[] NOT NULL DEFAULT '{}',
    created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    CONSTRAINT tool_status_only_on_tool_rows CHECK (
        (role = 'tool_result') = (tool_status IS NOT NULL)
    ),
    CONSTRAINT human_only_types CHECK (author <> 'human' OR role = 'user')
);

CREATE INDEX messages_thread_seq ON ember.messages (thread_id, seq);
CREATE INDEX messages_generation_seq ON ember.messages (generation_id, seq);
CREATE INDEX messages_undigested ON ember.messages (thread_id, seq) WHERE episode_id IS NULL;

-- Production facts: only the steward writes them; every pipeline is checked against them.
CREATE TABLE ember.facts (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    text text NOT NULL CHECK (btrim(text) <> ''),
    status text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'merged', 'retired')),
    evidence_kind text NOT NULL CHECK (
        evidence_kind IN ('user-stated', 'user-accepted', 'tool-verified', 'observed-outcome')
    ),
    categories text[] NOT NULL DEFAULT '{}',
    run_id bigint,
    merged_into bigint REFERENCES ember.facts (id),
    embedding vector,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE TABLE ember.fact_evidence (
    fact_id bigint NOT NULL REFERENCES ember.facts (id) ON DELETE CASCADE,
    ordinal integer NOT NULL,
    message_id bigint REFERENCES ember.messages (id),
    generation_id uuid REFERENCES ember.generations (id),
    PRIMARY KEY (fact_id, ordinal),
    CONSTRAINT one_pointer CHECK ((message_id IS NULL) <> (generation_id IS NULL))
);
