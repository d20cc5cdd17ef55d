-- Comparison (seed 000 section 6): the tables behind semantic judging, the steward's run table
-- when the steward's own migration has not created it, and indexes the comparison views join on.
-- The views themselves are in functions/060_comparison.sql.

-- The steward's runs, with the same usage, price and latency columns as shadow_runs so the cost
-- and latency comparison reads both the same way. The steward's own migration (0013) creates
-- this table first and IF NOT EXISTS keeps that definition; this copy of it, column for column,
-- only lets the comparison stand on a branch where the steward has not landed yet.
CREATE TABLE IF NOT EXISTS ember.steward_runs (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    thread_id text NOT NULL DEFAULT 'memory-steward' REFERENCES ember.threads (id),
    generation_id uuid NOT NULL REFERENCES ember.generations (id),
    model text NOT NULL REFERENCES ember.models (id),
    status text NOT NULL DEFAULT 'running'
    CHECK (status IN ('running', 'completed', 'failed', 'abandoned')),
    error text,
    episode_id uuid NOT NULL DEFAULT gen_random_uuid() UNIQUE,
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

-- Text equality for comparison: Unicode NFKC (full-width forms fold to ASCII, compatibility
-- ligatures split), case folding, then no whitespace and no punctuation, CJK punctuation
-- included. PostgreSQL 18 has casefold(), which folds more than lower() (German sharp s, final
-- sigma); on older servers lower() is the closest there is, so the body is chosen when migrating.
DO $do$
DECLARE
    v_fold text := CASE WHEN current_setting('server_version_num')::int >= 180000 THEN 'casefold' ELSE 'lower' END;
BEGIN
    EXECUTE format($f$
        CREATE FUNCTION ember.normalize_fact_text(p_text text)
        RETURNS text
        LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
        AS $body$
            SELECT regexp_replace(
                %s(normalize(p_text, NFKC)),
                '[[:space:][:punct:]\u00a1\u00a7\u00ab\u00b6\u00b7\u00bb\u00bf\u2000-\u206f\u2e00-\u2e7f'
                '\u3000-\u303f\u30fb\ufe10-\ufe1f\ufe30-\ufe4f\ufe50-\ufe6b\uff01-\uff0f\uff1a-\uff20'
                '\uff3b-\uff40\uff5b-\uff65]+',
                '', 'g'
            )
        $body$
    $f$, v_fold);
END;
$do$;

COMMENT ON FUNCTION ember.normalize_fact_text(text) IS
'Comparison key of a fact text: NFKC, case folded, whitespace and punctuation (CJK included) removed.';

-- The comparison key of every fact and proposal text, stored: normalizing 100,000 texts on each
-- side for every summary was most of its time (bench/b5_comparison.py).
ALTER TABLE ember.facts ADD COLUMN text_key text GENERATED ALWAYS AS (ember.normalize_fact_text(text)) STORED;
ALTER TABLE ember.shadow_proposals
ADD COLUMN text_key text GENERATED ALWAYS AS (ember.normalize_fact_text(text)) STORED;

-- A proposal may carry an embedding (like facts) so the semantic judge can shortlist candidate
-- pairs by pgvector distance instead of sending every fact of a group.
ALTER TABLE ember.shadow_proposals ADD COLUMN IF NOT EXISTS embedding vector;

-- One semantic-judge call: one label-category group of one window. Priced like every other run
-- (a snapshot copied when the run is recorded) so its cost shows in comparison_cost.
CREATE TABLE ember.judge_runs (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    categories text[] NOT NULL,
    model text NOT NULL REFERENCES ember.models (id),
    status text NOT NULL CHECK (status IN ('completed', 'failed')),
    error text,
    window_since timestamptz,
    window_until timestamptz,
    -- What the judge was shown, in prompt order: index i of the reply means element i + 1.
    proposal_ids bigint[] NOT NULL,
    fact_ids bigint[] NOT NULL,
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
    finished_at timestamptz NOT NULL,
    latency_ms bigint CHECK (latency_ms >= 0),
    CHECK ((status = 'failed') = (error IS NOT NULL)),
    CHECK (finished_at >= started_at)
);

-- A pair the judge called equivalent: reviewable, not truth.
CREATE TABLE ember.judged_pairs (
    judge_run_id bigint NOT NULL REFERENCES ember.judge_runs (id) ON DELETE CASCADE,
    proposal_id bigint NOT NULL REFERENCES ember.shadow_proposals (id) ON DELETE CASCADE,
    fact_id bigint NOT NULL REFERENCES ember.facts (id) ON DELETE CASCADE,
    PRIMARY KEY (judge_run_id, proposal_id, fact_id)
);

CREATE INDEX judged_pairs_fact ON ember.judged_pairs (fact_id);
CREATE INDEX judged_pairs_proposal ON ember.judged_pairs (proposal_id);

-- The comparison joins pointers both ways and windows by creation time.
CREATE INDEX IF NOT EXISTS fact_evidence_message ON ember.fact_evidence (message_id);
CREATE INDEX IF NOT EXISTS fact_evidence_generation ON ember.fact_evidence (generation_id);
CREATE INDEX IF NOT EXISTS facts_created_at ON ember.facts (created_at);
CREATE INDEX IF NOT EXISTS shadow_proposals_created_at ON ember.shadow_proposals (created_at);
