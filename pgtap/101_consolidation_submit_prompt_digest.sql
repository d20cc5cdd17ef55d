BEGIN;
SELECT plan(5);

-- A consolidation run records the digest of the prompt text its request carried (prompt_sha256
-- in the outcome) and refuses a malformed one by name (EM140), writing nothing then.

SELECT ember.create_thread('default', 'a', 'side', 'A', NULL, 'open', NULL, '2030-07-01 08:00+00');
SELECT ember.append_message('default', 'a', 'user', 'I prefer tea.', p_now => '2030-07-01 09:00+00') AS m1 \gset
SELECT ember.append_message('default', 'a', 'user', 'I really prefer tea.', p_now => '2030-07-01 09:05+00') AS m2 \gset
INSERT INTO ember.facts (text, evidence_kind, categories, source_threads, created_at, updated_at) VALUES
('The user prefers tea.', 'user-stated', '{}', '{a}', '2030-07-01 12:00+00', '2030-07-01 12:00+00'),
('User prefers tea.', 'user-stated', '{}', '{a}', '2030-07-01 12:00+00', '2030-07-01 12:00+00');
INSERT INTO ember.fact_evidence (fact_id, ordinal, message_id)
SELECT f.id, 1, CASE WHEN f.text LIKE 'The%' THEN :m1 ELSE :m2 END::bigint FROM ember.facts AS f;

SELECT ember.claim_consolidation_run('w', '10 minutes', '2030-07-03 10:00+00') AS plan \gset
SELECT (:'plan'::jsonb ->> 'run_id')::bigint AS r \gset
SELECT lease_token AS t FROM ember.consolidation_runs WHERE id = :r \gset
SELECT ember.text_version('Consolidate the facts.') AS v1 \gset

CREATE FUNCTION pg_temp.outcome(p_digest jsonb) RETURNS jsonb LANGUAGE sql AS $$
    SELECT jsonb_build_object('status', 'completed', 'usage', jsonb_build_object('input_tokens', 300, 'output_tokens', 40),
                              'latency_ms', 700, 'finished_at', '2030-07-03 10:01+00', 'actions', '[]'::jsonb,
                              'prompt_sha256', p_digest)
$$;

SELECT ok(:r IS NOT NULL, 'test set-up: a consolidation run was claimed');
SELECT throws_ok(format('SELECT ember.submit_consolidation_run(%s, %L, %L)', :r, :'t', pg_temp.outcome('"abc"')),
                 'EM140',
                 format('consolidation run %s: prompt_sha256 must be 64 lower-case hex characters, got "abc"', :r),
                 'a malformed digest is refused by name, naming the run');
SELECT is((SELECT status FROM ember.consolidation_runs WHERE id = :r), 'running',
          'a refused digest writes nothing: the run is still running');
SELECT is(ember.submit_consolidation_run(:r, :'t', pg_temp.outcome(to_jsonb(:'v1'::text))) ->> 'status', 'completed',
          'a well-formed digest is accepted');
SELECT is((SELECT prompt_sha256 FROM ember.consolidation_runs WHERE id = :r), :'v1',
          'the run records the digest of the prompt text it was sent with');

SELECT * FROM finish();
ROLLBACK;
