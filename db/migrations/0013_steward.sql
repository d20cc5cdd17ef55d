-- The memory steward (seed 001): runs that digest the backlog into facts, in the hidden
-- memory-steward thread. The rules are in functions/050_steward_claim.sql ..
-- functions/054_steward_search.sql.

INSERT INTO ember.settings (key, value, description) VALUES
('steward_max_rounds', '12', 'model calls one steward run may make before it fails unfinished'),
('steward_search_limit', '10', 'facts search_memory returns when the caller names no limit'),
(
    'embedding_model', '"all-MiniLM-L6-v2"',
    'the embedder whose vectors facts.embedding holds (384 dimensions, cosine)'
);

-- One row per wake. Usage, price snapshot and latency use the column names of shadow_runs, so
-- the comparison prices both pipelines with one expression.
CREATE TABLE ember.steward_runs (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- Always memory-steward: kept so the table is keyed by thread like every growing table.
    thread_id text NOT NULL DEFAULT 'memory-steward' REFERENCES ember.threads (id),
    -- The steward generation this run opened: its rows, and the facts it writes, carry the
    -- labels of what this run read and nothing older.
    generation_id uuid NOT NULL REFERENCES ember.generations (id),
    model text NOT NULL REFERENCES ember.models (id),
    status text NOT NULL DEFAULT 'running'
    CHECK (status IN ('running', 'completed', 'failed', 'abandoned')),
    error text,
    -- Written to messages.episode_id by finish, for the rows the run digested.
    episode_id uuid NOT NULL DEFAULT gen_random_uuid() UNIQUE,
    -- What the plan handed to the model: the only rows finish may mark and evidence may name.
    read_message_ids bigint[] NOT NULL,
    read_generations uuid[] NOT NULL,
    read_tokens integer NOT NULL CHECK (read_tokens >= 0),
    digested_rows integer NOT NULL DEFAULT 0 CHECK (digested_rows >= 0),
    rounds integer NOT NULL DEFAULT 0 CHECK (rounds >= 0),
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

-- One steward run at a time, whatever the claimers do.
CREATE UNIQUE INDEX steward_runs_one_running ON ember.steward_runs ((TRUE))
WHERE status = 'running';

-- Facts: why a fact was retired, which threads its evidence came from (so search can drop a fact
-- whose source was sealed later), an embedding for the HNSW index, and a full-text vector.
-- The embedding is a halfvec of 384 dimensions: the default embedder (worker/ember/embed.py)
-- makes 384, and half precision halves the index and the rows a search must touch at no cost to
-- a cosine ranking of normalised sentence vectors; another embedder of another size needs a
-- migration, which is honest, since mixed sizes cannot share an index.
ALTER TABLE ember.facts
ADD COLUMN retired_reason text,
ADD COLUMN source_threads text[] NOT NULL DEFAULT '{}',
ADD COLUMN embedding_model text,
ADD COLUMN search_text tsvector GENERATED ALWAYS AS (to_tsvector('english', text)) STORED,
ADD CONSTRAINT facts_run FOREIGN KEY (run_id) REFERENCES ember.steward_runs (id),
ADD CONSTRAINT facts_retired_has_reason CHECK (
    (status = 'retired') = (retired_reason IS NOT NULL)
),
ADD CONSTRAINT facts_merged_has_target CHECK ((status = 'merged') = (merged_into IS NOT NULL));

ALTER TABLE ember.facts ALTER COLUMN embedding TYPE halfvec(384);

-- Only active facts are searched: merged and retired ones stay out of the graph.
CREATE INDEX facts_embedding_hnsw ON ember.facts USING hnsw (embedding halfvec_cosine_ops)
WHERE status = 'active';
-- No pending list: facts arrive a few per wake, and a pending list is scanned by every search.
CREATE INDEX facts_search_text ON ember.facts USING gin (search_text) WITH (fastupdate = off);
CREATE INDEX facts_unembedded ON ember.facts (id) WHERE embedding IS NULL AND status = 'active';
CREATE INDEX fact_evidence_message ON ember.fact_evidence (message_id);
