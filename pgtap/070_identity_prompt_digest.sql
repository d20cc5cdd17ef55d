BEGIN;
SELECT plan(9);

-- ember.prompt_digest: a run's prompt digest as the worker reports it, the text_version of the
-- prompt text its requests carried. The runs tables hold the same rule as a CHECK.

SELECT is(ember.text_version(''), 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
          'text_version is the hex sha256 of the UTF-8 bytes (the empty text)');
SELECT is(ember.text_version('é'), encode(sha256('\xc3a9'::bytea), 'hex'),
          'text_version hashes UTF-8 bytes, not code points');
SELECT is(ember.prompt_digest(to_jsonb(ember.text_version('a prompt')), 'run 1'), ember.text_version('a prompt'),
          'a well-formed digest is returned as it is');
SELECT ok(ember.prompt_digest(NULL, 'run 1') IS NULL AND ember.prompt_digest('null', 'run 1') IS NULL,
          'no digest, absent or JSON null, is NULL');
SELECT throws_ok($$SELECT ember.prompt_digest('"sha256:abc"', 'shadow run 7')$$, 'EM140',
                 'shadow run 7: prompt_sha256 must be 64 lower-case hex characters, got "sha256:abc"',
                 'a malformed digest is refused by name, with where and what');
SELECT throws_ok(format('SELECT ember.prompt_digest(%L, %L)', to_jsonb(ember.text_version('x') || E'\n'), 'run 1'),
                 'EM140', NULL, 'a digest with a trailing line break is refused');
SELECT throws_ok($$SELECT ember.prompt_digest('{"sha256": "x"}', 'run 1')$$, 'EM140', NULL,
                 'a digest that is an object is refused');

-- The same rule as a CHECK on every runs table, for a write that bypasses the submit functions.
SELECT is(
    (SELECT array_agg(c.conrelid::regclass::text ORDER BY c.conrelid::regclass::text)
     FROM pg_constraint AS c
     WHERE c.contype = 'c' AND pg_get_constraintdef(c.oid) LIKE '%prompt_sha256%[0-9a-f]{64}%'),
    ARRAY['ember.consolidation_runs', 'ember.eval_calls', 'ember.judge_runs', 'ember.shadow_runs', 'ember.steward_runs'],
    'every runs table, and eval_calls, checks its prompt_sha256'
);
SELECT ember.submit_judge_run(jsonb_build_object(
    'categories', '[]'::jsonb, 'model', 'claude-haiku-4-5', 'proposal_ids', '[]'::jsonb, 'fact_ids', '[]'::jsonb,
    'pairs', '[]'::jsonb, 'status', 'completed', 'started_at', '2030-01-01 10:00+00',
    'finished_at', '2030-01-01 10:00:01+00'
));
SELECT throws_ok($$UPDATE ember.judge_runs SET prompt_sha256 = 'ABC'$$, '23514', NULL,
                 'a direct write of a malformed digest is refused by the CHECK');

SELECT * FROM finish();
ROLLBACK;
