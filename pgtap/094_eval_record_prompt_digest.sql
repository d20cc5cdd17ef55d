BEGIN;
SELECT plan(4);

-- An eval call records the digest of the prompt text its request carried (prompt_sha256 in the
-- call) and refuses a malformed one by name (EM140), storing no call then.

SELECT ember.eval_begin('locomo', 'small.json', repeat('a', 64), NULL, NULL, 3, NULL, '2030-01-01 09:00+00') AS run \gset
SELECT ember.create_thread('default', 'eval-0001', 'side', 'LoCoMo conv-a', NULL, 'open', NULL, '2023-05-08 13:56+00');
SELECT ember.append_message('default', 'eval-0001', 'user', 'Ada: I love pottery.', 'human', p_now => '2023-05-08 13:56+00');
SELECT ember.eval_add_conversation(
    :run, 'conv-a', 'eval-0001', '[{"ordinal": 1, "source": "session_1", "date": "1:56 pm on 8 May, 2023"}]',
    '[{"generation": 1, "position": 1, "source": "D1:1"}]'
);
SELECT ember.eval_add_questions(:run, '[{"question_id": "conv-a/0", "conversation": "conv-a",
    "category": "4 single-hop", "question": "What does Ada love?", "gold": "pottery"}]');

CREATE FUNCTION pg_temp.call_sql(p_run bigint, p_digest jsonb) RETURNS text LANGUAGE sql AS $$
    SELECT format('SELECT ember.eval_record_call(%s, %L)', p_run, jsonb_build_object(
        'question_id', 'conv-a/0', 'pipeline', 'steward', 'purpose', 'answer', 'model', 'claude-haiku-4-5',
        'status', 'completed', 'simulated', true, 'usage', '{"input_tokens": 10}'::jsonb,
        'started_at', '2030-01-01 12:00+00', 'finished_at', '2030-01-01 12:00:01+00', 'latency_ms', 1000,
        'prompt_sha256', p_digest))
$$;
SELECT ember.text_version('Answer from the facts shown.') AS v1 \gset

SELECT throws_ok(pg_temp.call_sql(:run, '"sha256"'), 'EM140',
                 format('eval run %s, call for question "conv-a/0": prompt_sha256 must be 64 lower-case hex characters, got "sha256"', :run),
                 'a malformed digest is refused by name, naming the run and the question');
SELECT is((SELECT count(*)::int FROM ember.eval_calls), 0, 'a refused digest stores no call');
SELECT lives_ok(pg_temp.call_sql(:run, to_jsonb(:'v1'::text)), 'a well-formed digest is accepted');
SELECT is((SELECT prompt_sha256 FROM ember.eval_calls), :'v1',
          'the call records the digest of the prompt text it was sent with');

SELECT * FROM finish();
ROLLBACK;
