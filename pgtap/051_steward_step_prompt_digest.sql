BEGIN;
SELECT plan(10);

-- A steward run records the digest of the steward prompt its requests carried: steward_step and
-- fail_steward_run take it (p_prompt_sha256), a NULL keeps what an earlier round recorded, and a
-- malformed one is refused by name (EM140) before the step writes anything.

SELECT ember.create_thread('default', 'plain', 'side', 'Plain', NULL, 'open', NULL, '2026-12-01 09:00Z');
SELECT ember.ensure_steward_thread('default', '2026-12-01 09:00Z');
SELECT ember.append_message('default', 'plain', 'user', 'I prefer tea over coffee.', p_now => '2026-12-01 09:01Z');
SELECT ember.set_thread_status('default', 'plain', 'ended', '2026-12-01 09:02Z');

CREATE TEMP TABLE plan AS SELECT ember.claim_steward_run('w', '10 minutes', '2026-12-01 09:40Z') AS p;
CREATE FUNCTION pg_temp.run() RETURNS bigint LANGUAGE sql AS $$ SELECT (p ->> 'run_id')::bigint FROM plan $$;
CREATE FUNCTION pg_temp.token() RETURNS uuid LANGUAGE sql AS $$ SELECT (p ->> 'lease_token')::uuid FROM plan $$;
CREATE FUNCTION pg_temp.digest() RETURNS text LANGUAGE sql AS $$
    SELECT prompt_sha256 FROM ember.steward_runs WHERE id = pg_temp.run()
$$;
-- One round that writes nothing (text only, so the reminder comes back), with digest p_digest.
CREATE FUNCTION pg_temp.step_sql(p_digest text) RETURNS text LANGUAGE sql AS $$
    SELECT format(
        'SELECT ember.steward_step(''default'', %s, %L, %L, p_now => %L, p_prompt_sha256 => %L)',
        pg_temp.run(), pg_temp.token(),
        '{"content": [{"type": "text", "text": "reading"}], "usage": {"input_tokens": 10, "output_tokens": 1}}',
        '2026-12-01 09:41Z', p_digest
    )
$$;

SELECT ok((SELECT p ? 'run_id' FROM plan), 'test set-up: the steward claimed a run');
SELECT ember.text_version('You are the memory steward.') AS v1 \gset
SELECT ember.text_version('You are the memory steward, edited.') AS v2 \gset

SELECT throws_ok(pg_temp.step_sql(upper(:'v1')), 'EM140',
                 format('steward run %s: prompt_sha256 must be 64 lower-case hex characters, got %s',
                        pg_temp.run(), to_jsonb(upper(:'v1'))),
                 'a step with an upper-case digest is refused by name, naming the run');
SELECT throws_ok(pg_temp.step_sql(left(:'v1', 40)), 'EM140', NULL, 'a step with a short digest is refused');
SELECT ok((SELECT rounds = 0 AND input_tokens = 0 AND prompt_sha256 IS NULL
           FROM ember.steward_runs WHERE id = pg_temp.run()),
          'a refused step writes nothing: no round, no tokens, no digest');

SELECT lives_ok(pg_temp.step_sql(:'v1'), 'a step with a well-formed digest is applied');
SELECT is(pg_temp.digest(), :'v1', 'the run records the digest of the steward prompt it was sent with');
SELECT lives_ok(pg_temp.step_sql(NULL), 'a step without a digest is applied');
SELECT is(pg_temp.digest(), :'v1', 'a round without a digest keeps the one recorded before');

SELECT throws_ok(format('SELECT ember.fail_steward_run(''default'', %s, %L, %L, p_now => %L, p_prompt_sha256 => %L)',
                        pg_temp.run(), pg_temp.token(), 'model call failed', '2026-12-01 09:42Z', 'not a digest'),
                 'EM140', NULL, 'a failed run with a malformed digest is refused, and stays running');
SELECT ember.fail_steward_run('default', pg_temp.run(), pg_temp.token(), 'model call failed',
                              p_now => '2026-12-01 09:42Z', p_prompt_sha256 => :'v2');
SELECT is((SELECT status || ' ' || prompt_sha256 FROM ember.steward_runs WHERE id = pg_temp.run()),
          'failed ' || :'v2', 'a failed run records the digest of the prompt its last request carried');

SELECT * FROM finish();
ROLLBACK;
