BEGIN;
SELECT plan(4);

-- The steward's own generations (one per run) are not in the unread set when the run ends, nor
-- while it runs: shadow never reads the steward's record, so nothing would ever take them out.

SELECT ember.create_thread('default', 'plain', 'side', 'Plain', NULL, 'open', NULL, '2026-12-01 09:00Z');
SELECT ember.ensure_steward_thread('default', '2026-12-01 09:00Z');
SELECT ember.set_thread_status('default', 'plain', 'ended', '2026-12-01 09:03Z')
FROM (SELECT ember.append_message('default', 'plain', 'user', 'I prefer tea over coffee.', p_now => '2026-12-01 09:01Z')) AS m;

CREATE TEMP TABLE plan AS SELECT ember.claim_steward_run('w', '10 minutes', '2026-12-01 09:40Z') AS p;
CREATE FUNCTION pg_temp.run() RETURNS bigint LANGUAGE sql AS $$ SELECT (p ->> 'run_id')::bigint FROM plan $$;
CREATE FUNCTION pg_temp.token() RETURNS uuid LANGUAGE sql AS $$ SELECT (p ->> 'lease_token')::uuid FROM plan $$;
CREATE FUNCTION pg_temp.unread_steward_generations() RETURNS bigint LANGUAGE sql AS $$
    SELECT count(*) FROM ember.generation_progress WHERE thread_id = 'memory-steward' AND unread
$$;

SELECT ok(pg_temp.run() IS NOT NULL, 'the steward claims the ended thread''s row');
SELECT is(pg_temp.unread_steward_generations(), 0::bigint,
          'while it runs, its generation''s rows (the plan) are not unread');
SELECT ember.steward_step('default', pg_temp.run(), pg_temp.token(),
    jsonb_build_object('content', jsonb_build_array(jsonb_build_object(
        'type', 'tool_use', 'id', 'call-1', 'name', 'finish', 'input', jsonb_build_object(
            'through_message_id', (SELECT id FROM ember.messages WHERE thread_id = 'plain')))),
        'usage', '{"input_tokens": 100, "output_tokens": 10}'::jsonb),
    '{}', 250, '2026-12-01 09:41Z');
SELECT is((SELECT status FROM ember.steward_runs WHERE id = pg_temp.run()), 'completed', 'the run finishes');
SELECT is(pg_temp.unread_steward_generations(), 0::bigint,
          'and its generation leaves the unread set tick starts from');

SELECT * FROM finish();
ROLLBACK;
