-- `ember eval` (issue 28): both pipelines answering the questions of a public long-conversation
-- benchmark (LoCoMo, LongMemEval) from memory, judged against the gold answers. The rules are in
-- functions/093_eval.sql (writing a run) and functions/094_eval_report.sql (reading it).
--
-- A run lives in a database of its own, created fresh by `ember eval`: eval_begin refuses a
-- database that holds anything, so nothing here ever sits beside production memory.

CREATE TABLE ember.eval_runs (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    benchmark text NOT NULL CHECK (benchmark IN ('locomo', 'longmemeval')),
    -- The file as the user named it, and its SHA-256: which data the figures are about.
    source text NOT NULL,
    source_sha256 text NOT NULL CHECK (source_sha256 ~ '^[0-9a-f]{64}$'),
    answer_model text NOT NULL REFERENCES ember.models (id),
    judge_model text NOT NULL REFERENCES ember.models (id),
    top_k integer NOT NULL CHECK (top_k BETWEEN 1 AND 100),
    question_limit integer CHECK (question_limit > 0),
    status text NOT NULL DEFAULT 'running' CHECK (status IN ('running', 'completed', 'failed')),
    error text,
    started_at timestamptz NOT NULL,
    finished_at timestamptz,
    CHECK ((status = 'running') = (finished_at IS NULL)),
    CHECK ((status = 'failed') = (error IS NOT NULL))
);

-- One benchmark conversation (a LoCoMo sample, a LongMemEval question's haystack) = one thread.
CREATE TABLE ember.eval_conversations (
    run_id bigint NOT NULL REFERENCES ember.eval_runs (id),
    conversation text NOT NULL,
    thread_id text NOT NULL UNIQUE REFERENCES ember.threads (id),
    ordinal integer NOT NULL CHECK (ordinal > 0),
    status text NOT NULL DEFAULT 'imported' CHECK (status IN ('imported', 'answered')),
    PRIMARY KEY (run_id, conversation),
    UNIQUE (run_id, ordinal)
);

-- Each session of a conversation = one generation; each turn = one message. The source ids (a
-- LoCoMo session_N and dia_id "D1:3", a LongMemEval haystack session id and "<session>#<n>")
-- let a report name a fact's evidence as the benchmark names it.
CREATE TABLE ember.eval_sessions (
    generation_id uuid PRIMARY KEY REFERENCES ember.generations (id),
    run_id bigint NOT NULL,
    conversation text NOT NULL,
    source_id text NOT NULL,
    source_date text NOT NULL,
    FOREIGN KEY (run_id, conversation) REFERENCES ember.eval_conversations (run_id, conversation)
);

CREATE TABLE ember.eval_turns (
    message_id bigint PRIMARY KEY REFERENCES ember.messages (id),
    run_id bigint NOT NULL,
    conversation text NOT NULL,
    source_id text NOT NULL,
    -- LongMemEval marks the turns that hold the answer; LoCoMo names them in each question.
    has_answer boolean NOT NULL DEFAULT FALSE,
    FOREIGN KEY (run_id, conversation) REFERENCES ember.eval_conversations (run_id, conversation)
);

CREATE TABLE ember.eval_questions (
    run_id bigint NOT NULL,
    question_id text NOT NULL CHECK (btrim(question_id) <> ''),
    conversation text NOT NULL,
    ordinal integer NOT NULL CHECK (ordinal > 0),
    category text NOT NULL CHECK (btrim(category) <> ''),
    question text NOT NULL,
    gold text NOT NULL,
    question_date text,
    -- The benchmark's own evidence: LoCoMo dia_ids, LongMemEval answer session ids.
    evidence text[] NOT NULL DEFAULT '{}',
    -- On the exclusion list (known-wrong gold answers): kept, counted, never asked.
    excluded boolean NOT NULL DEFAULT FALSE,
    PRIMARY KEY (run_id, question_id),
    UNIQUE (run_id, ordinal),
    FOREIGN KEY (run_id, conversation) REFERENCES ember.eval_conversations (run_id, conversation)
);

-- One pipeline's answer to one question and the judge's verdict. A failed answer or judge call
-- leaves status 'failed' with the error, no verdict, and counts as not correct.
CREATE TABLE ember.eval_answers (
    run_id bigint NOT NULL,
    question_id text NOT NULL,
    pipeline text NOT NULL CHECK (pipeline IN ('steward', 'shadow')),
    status text NOT NULL CHECK (status IN ('judged', 'failed')),
    answer text,
    verdict text CHECK (verdict IN ('correct', 'wrong')),
    reason text,
    error text,
    -- Memory context shown to the answer model, by Ember's token estimate (ember.estimate_tokens).
    context_tokens integer NOT NULL CHECK (context_tokens >= 0),
    -- search_memory as the client saw it, round trip included.
    search_ms double precision NOT NULL CHECK (search_ms >= 0),
    recorded_at timestamptz NOT NULL,
    PRIMARY KEY (run_id, question_id, pipeline),
    FOREIGN KEY (run_id, question_id) REFERENCES ember.eval_questions (run_id, question_id),
    CHECK ((status = 'judged') = (verdict IS NOT NULL AND reason IS NOT NULL AND answer IS NOT NULL)),
    CHECK ((status = 'failed') = (error IS NOT NULL))
);

-- What the answer model was shown, in search order. The steward's memory is its facts; shadow's
-- is its proposals as if cut over, so a shown item of shadow names the proposal (the fact that
-- stood for it existed only inside the rolled-back cut-over, see eval_cut_over).
CREATE TABLE ember.eval_context (
    run_id bigint NOT NULL,
    question_id text NOT NULL,
    pipeline text NOT NULL CHECK (pipeline IN ('steward', 'shadow')),
    rank integer NOT NULL CHECK (rank > 0),
    fact_id bigint REFERENCES ember.facts (id),
    proposal_id bigint REFERENCES ember.shadow_proposals (id),
    score double precision,
    -- The answer model named it among the facts it used.
    cited boolean NOT NULL DEFAULT FALSE,
    PRIMARY KEY (run_id, question_id, pipeline, rank),
    FOREIGN KEY (run_id, question_id, pipeline) REFERENCES ember.eval_answers (run_id, question_id, pipeline),
    CHECK ((fact_id IS NULL) <> (proposal_id IS NULL)),
    CHECK ((pipeline = 'steward') = (fact_id IS NOT NULL))
);

-- Every answer and judge call, priced like every other run: the model's list-price snapshot is
-- copied when the call is recorded, so a later edit of the registry never reprices it.
CREATE TABLE ember.eval_calls (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id bigint NOT NULL,
    question_id text NOT NULL,
    pipeline text NOT NULL CHECK (pipeline IN ('steward', 'shadow')),
    purpose text NOT NULL CHECK (purpose IN ('answer', 'judge')),
    model text NOT NULL REFERENCES ember.models (id),
    status text NOT NULL CHECK (status IN ('completed', 'failed')),
    error text,
    -- Answered by ember sim's rule-based responder (its x-ember-sim-responder header), not a model.
    simulated boolean NOT NULL,
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
    -- The model's length tiers, copied with the prices (ember.copy_price_tiers).
    price_tiers jsonb,
    started_at timestamptz NOT NULL,
    finished_at timestamptz NOT NULL,
    latency_ms bigint CHECK (latency_ms >= 0),
    FOREIGN KEY (run_id, question_id) REFERENCES ember.eval_questions (run_id, question_id),
    CHECK ((status = 'failed') = (error IS NOT NULL)),
    CHECK (finished_at >= started_at)
);

CREATE INDEX eval_calls_run ON ember.eval_calls (run_id, pipeline, purpose);

-- Which fact stands for which proposal while shadow is cut over for a conversation. Written only
-- inside the cut-over transaction that `ember eval` rolls back, so outside it the table is empty
-- and no fact of the database ever came from a proposal (invariant 3 holds).
CREATE TABLE ember.eval_promotions (
    fact_id bigint PRIMARY KEY REFERENCES ember.facts (id),
    proposal_id bigint NOT NULL REFERENCES ember.shadow_proposals (id),
    run_id bigint NOT NULL REFERENCES ember.eval_runs (id)
);
