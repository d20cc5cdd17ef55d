-- Which prompt text a run was sent with (issue 27): the hex sha256 of the UTF-8 bytes of the
-- prompts/ text the worker put in the run's requests (shadow_question or cold_reader, steward,
-- consolidation, semantic_judge, and eval_answer or eval_judge for an eval call), as the worker
-- sent it, so an analyst can group runs by prompt version. The same digest as ember.text_version, which versions the identity documents.
--
-- Computed by the worker, not here: the texts live in files the worker reads once per process,
-- and only the process knows which bytes it sent (one started before an edit keeps sending the
-- old text). NULL for runs recorded before this column, and for a run that failed before any
-- request was built. The submit functions refuse a malformed digest by name (EM140); the CHECK
-- also holds against a direct write.
ALTER TABLE ember.shadow_runs
ADD COLUMN prompt_sha256 text CHECK (prompt_sha256 ~ '^[0-9a-f]{64}$');

ALTER TABLE ember.steward_runs
ADD COLUMN prompt_sha256 text CHECK (prompt_sha256 ~ '^[0-9a-f]{64}$');

ALTER TABLE ember.consolidation_runs
ADD COLUMN prompt_sha256 text CHECK (prompt_sha256 ~ '^[0-9a-f]{64}$');

ALTER TABLE ember.judge_runs
ADD COLUMN prompt_sha256 text CHECK (prompt_sha256 ~ '^[0-9a-f]{64}$');

ALTER TABLE ember.eval_calls
ADD COLUMN prompt_sha256 text CHECK (prompt_sha256 ~ '^[0-9a-f]{64}$');

-- The steward's two writes take the digest as a new last argument (functions/051_steward_step.sql):
-- the old signatures go, or a call by position would be ambiguous between the two.
DROP FUNCTION IF EXISTS ember.steward_step(bigint, uuid, jsonb, jsonb, bigint, timestamptz, jsonb);
DROP FUNCTION IF EXISTS ember.fail_steward_run(bigint, uuid, text, jsonb, bigint, timestamptz);
