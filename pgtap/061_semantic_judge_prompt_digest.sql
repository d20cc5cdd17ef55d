BEGIN;
SELECT plan(4);

-- A judge run records the digest of the prompt text its request carried (prompt_sha256 in the
-- outcome) and refuses a malformed one by name (EM140), storing no run then.

CREATE FUNCTION pg_temp.outcome(p_digest jsonb) RETURNS jsonb LANGUAGE sql AS $$
    SELECT jsonb_build_object(
        'categories', '[]'::jsonb, 'model', 'claude-haiku-4-5', 'proposal_ids', '[]'::jsonb,
        'fact_ids', '[]'::jsonb, 'pairs', '[]'::jsonb, 'status', 'completed', 'error', NULL,
        'usage', jsonb_build_object('input_tokens', 10, 'output_tokens', 2),
        'started_at', '2030-01-01 10:00+00', 'finished_at', '2030-01-01 10:00:01+00', 'latency_ms', 1000,
        'prompt_sha256', p_digest
    )
$$;

SELECT ember.text_version('Which of these say the same thing?') AS v1 \gset

SELECT throws_ok(format('SELECT ember.submit_judge_run(%L)', pg_temp.outcome(to_jsonb(repeat('A', 64)))),
                 'EM140',
                 format('judge outcome of group {}: prompt_sha256 must be 64 lower-case hex characters, got %s',
                        to_jsonb(repeat('A', 64))),
                 'a malformed digest is refused by name, naming the group');
SELECT is((SELECT count(*)::int FROM ember.judge_runs), 0, 'a refused digest stores no judge run');
SELECT is((ember.submit_judge_run(pg_temp.outcome(to_jsonb(:'v1'::text))) ->> 'status'), 'completed',
          'a well-formed digest is accepted');
SELECT is((SELECT prompt_sha256 FROM ember.judge_runs), :'v1',
          'the judge run records the digest of the prompt text it was sent with');

SELECT * FROM finish();
ROLLBACK;
