-- Forgetting and fact history (issue 17). The rules are in functions/085_fact_history.sql ..
-- functions/089_export_facts.sql.

-- One row per forget call: what was asked, why, and what it touched. The reason is kept because
-- the history of a forgotten fact keeps "that it existed and why it went"; the erased text is not.
CREATE TABLE ember.forgettings (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- 'messages' (forget_messages) or 'thread' (forget_thread, with its thread).
    scope text NOT NULL CHECK (scope IN ('messages', 'thread')),
    thread_id text REFERENCES ember.threads (id),
    reason text NOT NULL CHECK (btrim(reason) <> ''),
    requested_at timestamptz NOT NULL,
    result jsonb NOT NULL DEFAULT '{}',
    CONSTRAINT thread_scope_names_thread CHECK ((scope = 'thread') = (thread_id IS NOT NULL))
);

-- An erased row keeps its id, seq, thread, generation, role, author and time (cursors and
-- pointers stay consistent); erased_by says which forget call emptied it.
ALTER TABLE ember.messages ADD COLUMN erased_by bigint REFERENCES ember.forgettings (id);

CREATE INDEX messages_erased ON ember.messages (generation_id) WHERE erased_by IS NOT NULL;
CREATE INDEX messages_copied_from ON ember.messages (copied_from) WHERE copied_from IS NOT NULL;

-- A fact retired because its source was forgotten has no text left. Every other fact keeps one.
-- retired_reason is the steward's column (its migration adds it first when both are applied).
ALTER TABLE ember.facts ADD COLUMN IF NOT EXISTS retired_reason text;
ALTER TABLE ember.facts ALTER COLUMN text DROP NOT NULL;
ALTER TABLE ember.facts ADD CONSTRAINT facts_text_only_gone_when_forgotten CHECK (
    text IS NOT NULL OR (status = 'retired' AND retired_reason = 'source-forgotten')
);

CREATE INDEX IF NOT EXISTS fact_evidence_message ON ember.fact_evidence (message_id);
CREATE INDEX IF NOT EXISTS fact_evidence_generation ON ember.fact_evidence (generation_id);
CREATE INDEX facts_merged_into ON ember.facts (merged_into) WHERE merged_into IS NOT NULL;

-- The comparison's proposal embedding (its migration adds it first when both are applied): a
-- proposal that loses its text loses this too.
ALTER TABLE ember.shadow_proposals ADD COLUMN IF NOT EXISTS embedding vector;
ALTER TABLE ember.shadow_proposals ADD COLUMN forgotten_by bigint REFERENCES ember.forgettings (id);

-- Every change of a fact, appended by triggers on facts and fact_evidence, so whatever writes
-- facts (the steward's tools, forgetting, a hand-written fix) is recorded without calling this
-- code. No text column: a fact's text never changes (only erasure empties it), so facts_as_of
-- reads the text from the fact itself and a forgotten fact's text cannot come back from here.
-- The one free-text field, detail (a retirement reason written by the steward's model), is
-- emptied when its fact is forgotten, since such a reason may quote the fact.
CREATE TABLE ember.fact_history (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    fact_id bigint NOT NULL REFERENCES ember.facts (id),
    at timestamptz NOT NULL,
    change text NOT NULL CHECK (
        change IN ('written', 'merged', 'retired', 'evidence-shrunk', 're-embedded', 'forgotten')
    ),
    -- The fact's status after the change, and for a merge its target.
    status text NOT NULL,
    merged_into bigint REFERENCES ember.facts (id),
    retired_reason text,
    detail text,
    -- Pointers removed by this change: [{"message_id": n} | {"generation_id": uuid}, ...].
    evidence_removed jsonb,
    -- What caused it: the steward run, or the forget call, when known; and the transaction.
    run_id bigint,
    forgetting_id bigint REFERENCES ember.forgettings (id),
    xact bigint NOT NULL DEFAULT txid_current(),
    recorded_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE INDEX fact_history_fact ON ember.fact_history (fact_id, at, id);
CREATE INDEX fact_history_at ON ember.fact_history (at);

COMMENT ON TABLE ember.fact_history IS
'Append-only log of every change of a fact; facts_as_of(ts) and explain_fact read it.';

-- Facts that exist when this migration runs get their first history row now, so facts_as_of
-- answers for them too (from their creation time; later changes are unknown).
INSERT INTO ember.fact_history (fact_id, at, change, status, run_id)
SELECT
    f.id,
    f.created_at,
    'written' AS change,
    'active' AS status,
    f.run_id
FROM ember.facts AS f;

INSERT INTO ember.fact_history (fact_id, at, status, merged_into, retired_reason, change)
SELECT
    f.id,
    f.updated_at,
    f.status,
    f.merged_into,
    f.retired_reason,
    CASE f.status WHEN 'merged' THEN 'merged' ELSE 'retired' END AS change
FROM ember.facts AS f
WHERE f.status <> 'active';

-- Forgetting looks up which wake owns a steward generation (its redaction of the steward's
-- record), and which wakes started after a time. The steward's migration (or the comparison's
-- copy of its table) creates steward_runs first.
CREATE INDEX steward_runs_generation ON ember.steward_runs (generation_id);
CREATE INDEX steward_runs_started_at ON ember.steward_runs (started_at);
