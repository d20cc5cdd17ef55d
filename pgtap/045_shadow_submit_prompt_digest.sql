BEGIN;
SELECT plan(11);

-- A shadow run records the digest of the prompt text its worker sent (prompt_sha256 in the
-- outcome), refuses a malformed one by name (EM140) and writes nothing then. Time is fixed: runs
-- start at 10:00 with a 10-minute lease, outcomes finish at 10:01.

CREATE FUNCTION pg_temp.new_run(p_thread text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    v_plan jsonb;
BEGIN
    PERFORM ember.append_message('default', p_thread, 'assistant', 'Noted.', p_now => '2030-01-01 09:59:59+00');
    PERFORM ember.shadow_memory_changed('default', p_thread, 'idle-or-ended', '2030-01-01 10:00+00');
    v_plan := ember.claim_shadow_run('test-worker', '10 minutes', '2030-01-01 10:00+00');
    IF v_plan ->> 'thread_id' IS DISTINCT FROM p_thread THEN
        RAISE EXCEPTION 'test set-up: expected a claim of %, got %', p_thread, v_plan;
    END IF;
    RETURN (v_plan ->> 'run_id')::bigint;
END;
$$;

CREATE FUNCTION pg_temp.token(p_run bigint) RETURNS uuid LANGUAGE sql AS $$
    SELECT lease_token FROM ember.shadow_runs WHERE id = p_run
$$;

-- A completed outcome with no proposals, and the digest p_digest under prompt_sha256 unless it is
-- SQL NULL (then the key is left out, as a worker from before migration 0046 sent it).
CREATE FUNCTION pg_temp.outcome(p_digest jsonb, p_status text DEFAULT 'completed') RETURNS jsonb LANGUAGE sql AS $$
    SELECT jsonb_build_object(
        'status', p_status,
        'error', CASE WHEN p_status = 'failed' THEN 'model call failed' END,
        'usage', jsonb_build_object(
            'input_tokens', 120, 'cache_read_input_tokens', 0, 'cache_creation_5m_input_tokens', 0,
            'cache_creation_1h_input_tokens', 0, 'output_tokens', 55
        ),
        'latency_ms', 1800,
        'finished_at', '2030-01-01 10:01+00',
        'proposals', '[]'::jsonb
    ) || CASE WHEN p_digest IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('prompt_sha256', p_digest) END
$$;

CREATE FUNCTION pg_temp.submit_sql(p_run bigint, p_digest jsonb) RETURNS text LANGUAGE sql AS $$
    SELECT format('SELECT ember.submit_shadow_run(''default'', %s, %L, %L)', p_run, pg_temp.token(p_run), pg_temp.outcome(p_digest))
$$;

SELECT ember.shadow_activate('2030-01-01 09:00+00');
SELECT ember.create_thread('default', 's1', 'side', 'One');
SELECT ember.create_thread('default', 's2', 'side', 'Two');
SELECT ember.create_thread('default', 's3', 'side', 'Three');
SELECT ember.create_thread('default', 's4', 'side', 'Four');
SELECT ember.create_thread('default', 's5', 'side', 'Five');
SELECT ember.append_message('default', t, 'user', 'I like trains.', p_now => '2030-01-01 09:30+00')
FROM unnest(ARRAY['s1', 's2', 's3', 's4', 's5']) AS t;

-- The digest as the worker computes it: the hex sha256 of the text's UTF-8 bytes.
SELECT ember.text_version('You read a conversation and propose durable facts.') AS v1 \gset

SELECT pg_temp.new_run('s1') AS r1 \gset
SELECT is(ember.submit_shadow_run('default', :r1, pg_temp.token(:r1), pg_temp.outcome(to_jsonb(:'v1'::text))) ->> 'status',
          'completed', 'a run with a well-formed prompt digest completes');
SELECT is((SELECT prompt_sha256 FROM ember.shadow_runs WHERE id = :r1), :'v1',
          'the run records the digest of the prompt text it was sent with');

SELECT pg_temp.new_run('s2') AS r2 \gset
SELECT ember.submit_shadow_run('default', :r2, pg_temp.token(:r2), pg_temp.outcome(NULL));
SELECT ok((SELECT status = 'completed' AND prompt_sha256 IS NULL FROM ember.shadow_runs WHERE id = :r2),
          'an outcome without prompt_sha256 is recorded, with no digest');

SELECT pg_temp.new_run('s3') AS r3 \gset
SELECT throws_ok(pg_temp.submit_sql(:r3, to_jsonb(upper(:'v1'))), 'EM140',
                 format('shadow run %s: prompt_sha256 must be 64 lower-case hex characters, got %s',
                        :r3, to_jsonb(upper(:'v1'))),
                 'an upper-case digest is refused by name, naming the run and the value');
SELECT throws_ok(pg_temp.submit_sql(:r3, to_jsonb(left(:'v1', 63))), 'EM140', NULL,
                 'a digest of 63 hex characters is refused');
SELECT throws_ok(pg_temp.submit_sql(:r3, to_jsonb(:'v1' || '0')), 'EM140', NULL,
                 'a digest of 65 hex characters is refused');
SELECT throws_ok(pg_temp.submit_sql(:r3, to_jsonb(overlay(:'v1' PLACING 'g' FROM 1))), 'EM140', NULL,
                 'a digest with a character that is not hex is refused');
SELECT throws_ok(pg_temp.submit_sql(:r3, '12'::jsonb), 'EM140', NULL,
                 'a digest that is not a string is refused');
SELECT ok((SELECT status = 'running' AND finished_at IS NULL AND prompt_sha256 IS NULL
           FROM ember.shadow_runs WHERE id = :r3),
          'a refused digest writes nothing: the run is still running');

-- A run cancelled while out still says which prompt it was sent with.
SELECT pg_temp.new_run('s4') AS r4 \gset
SELECT ember.append_message('default', 's4', 'user', 'Stop.', p_author => 'human', p_now => '2030-01-01 10:00:30+00');
SELECT is(ember.submit_shadow_run('default', :r4, pg_temp.token(:r4), pg_temp.outcome(to_jsonb(:'v1'::text))) ->> 'status',
          'cancelled', 'a human message cancels the run');
SELECT is((SELECT prompt_sha256 FROM ember.shadow_runs WHERE id = :r4), :'v1',
          'a cancelled run records the digest of the prompt it was sent with');

SELECT * FROM finish();
ROLLBACK;
