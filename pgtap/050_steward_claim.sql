BEGIN;
SELECT plan(26);

SELECT ember.define_category('health');
SELECT ember.create_thread('default', 'main', 'main', NULL, NULL, 'open', 'claude-haiku-4-5', '2026-12-01 09:00Z');
SELECT ember.create_thread('default', 'doc', 'side', 'Doctor', 'health', 'open', NULL, '2026-12-01 09:00Z');
SELECT ember.create_thread('default', 'plain', 'side', 'Plain', NULL, 'open', NULL, '2026-12-01 09:00Z');
SELECT ember.create_thread('default', 'vault', 'side', 'Private', NULL, 'isolated', NULL, '2026-12-01 09:00Z');

CREATE FUNCTION pg_temp.mid(p_content text) RETURNS bigint LANGUAGE sql AS $$
    SELECT id FROM ember.messages WHERE content = p_content AND thread_id <> 'memory-steward'
$$;

SELECT throws_ok($$SELECT ember.claim_steward_run('', '5 minutes', '2026-12-01 09:00Z')$$, 'EM060', NULL,
                 'a claim needs a worker name');
SELECT throws_ok($$SELECT ember.claim_steward_run('w', '0 minutes', '2026-12-01 09:00Z')$$, 'EM060', NULL,
                 'and a positive lease');

SELECT ember.append_message('default', 'main', 'tool_result', 'old steward tool call', NULL, NULL, 'c1', 'steward_write',
                            'ok', NULL, '2026-12-01 09:01Z');
SELECT ember.append_message('default', 'plain', 'user', 'before the steward', p_now => '2026-12-01 09:02Z');
SELECT is(ember.claim_steward_run('w', '5 minutes', '2026-12-01 09:40Z'), NULL,
          'no steward thread, no steward run');

SELECT ember.ensure_steward_thread('default', '2026-12-01 09:10Z');
SELECT ember.append_message('default', 'plain', 'user', 'I prefer tea over coffee.', p_now => '2026-12-01 09:12Z');
SELECT ember.append_message('default', 'plain', 'tool_result', 'deploy succeeded', NULL, NULL, 'c2', 'bash', 'ok', NULL,
                            '2026-12-01 09:13Z');
SELECT ember.append_message('default', 'main', 'user', 'Never call me before 9.', p_now => '2026-12-01 09:16Z');
SELECT ember.append_message('default', 'doc', 'user', 'knee hurts', p_now => '2026-12-01 09:17Z');
SELECT ember.append_message('default', 'vault', 'user', 'secret diary', p_now => '2026-12-01 09:18Z');

SELECT is(ember.claim_steward_run('w', '5 minutes', '2026-12-01 09:30Z'), NULL,
          'threads active less than idle_before_digest ago are not read yet');

CREATE TEMP TABLE plan1 AS SELECT ember.claim_steward_run('w', '5 minutes', '2026-12-01 09:40Z') AS p;
SELECT isnt((SELECT p FROM plan1), NULL, 'once idle, the backlog is claimed');
SELECT is((SELECT p ->> 'model' FROM plan1), 'claude-haiku-4-5', 'by the steward''s model, pinned from main');
SELECT ok(NOT pg_temp.mid('old steward tool call') = ANY(r.read_message_ids),
          'main''s rows from before the steward existed are never read')
FROM ember.steward_runs AS r;
SELECT is((SELECT array_agg(m.content ORDER BY m.seq) FROM ember.steward_runs AS r
           JOIN ember.messages AS m ON m.id = ANY(r.read_message_ids)),
          '{"before the steward","I prefer tea over coffee.","deploy succeeded","Never call me before 9."}'::text[],
          'the run reads main''s later rows and the open threads'' rows, never labelled or isolated ones');
SELECT ok((SELECT p -> 'pages' ->> 0 FROM plan1) LIKE '%' || E'\n' || 'm:' || pg_temp.mid('I prefer tea over coffee.')
          || ' user(human)%: I prefer tea over coffee.%',
          'pages come from the one renderer, rows cited by m:<id>');
SELECT ok((SELECT p -> 'pages' ->> 0 FROM plan1) LIKE '# Plain · thread plain · generation %',
          'each page opens with the renderer''s header: thread and generation');
SELECT is((SELECT content FROM ember.messages WHERE id = (SELECT (p ->> 'message_id')::bigint FROM plan1)),
          (SELECT (p -> 'content' -> 0 ->> 'text') || E'\n\n' || (p -> 'pages' ->> 0) || E'\n\n' || (p -> 'pages' ->> 1)
           FROM plan1),
          'what the steward was given is the first row of its new generation');
SELECT is((SELECT thread_id FROM ember.generations WHERE id = (SELECT (p ->> 'generation_id')::uuid FROM plan1)),
          'memory-steward', 'each wake opens a steward generation of its own');
SELECT is((SELECT price_input FROM ember.steward_runs), 1.0000, 'the run copies its model''s price snapshot');
SELECT is(ember.claim_steward_run('w2', '5 minutes', '2026-12-01 09:41Z'), NULL,
          'one steward run at a time');

-- A lapsed lease is abandoned by the next claim, and the same rows are offered again.
CREATE TEMP TABLE plan2 AS SELECT ember.claim_steward_run('w2', '5 minutes', '2026-12-01 09:46Z') AS p;
SELECT is((SELECT status FROM ember.steward_runs WHERE id = (SELECT (p ->> 'run_id')::bigint FROM plan1)),
          'abandoned', 'a run whose lease lapsed is abandoned');
SELECT is((SELECT r2.read_message_ids FROM ember.steward_runs AS r2
           WHERE r2.id = (SELECT (p ->> 'run_id')::bigint FROM plan2)),
          (SELECT r1.read_message_ids FROM ember.steward_runs AS r1
           WHERE r1.id = (SELECT (p ->> 'run_id')::bigint FROM plan1)),
          'and nothing it read was digested: the next wake reads the same rows');
SELECT ember.fail_steward_run('default', (SELECT (p ->> 'run_id')::bigint FROM plan2), (SELECT (p ->> 'lease_token')::uuid FROM plan2),
                              'model unavailable', NULL, NULL, '2026-12-01 09:47Z');

-- The wake limits: at most steward_wake_generations generations, about steward_wake_tokens.
UPDATE ember.settings SET value = '1' WHERE key = 'steward_wake_generations';
CREATE TEMP TABLE plan3 AS SELECT ember.claim_steward_run('w3', '5 minutes', '2026-12-01 09:48Z') AS p;
SELECT is((SELECT jsonb_array_length(p -> 'generations') FROM plan3), 1,
          'a wake reads at most steward_wake_generations generations');
SELECT ember.fail_steward_run('default', (SELECT (p ->> 'run_id')::bigint FROM plan3), (SELECT (p ->> 'lease_token')::uuid FROM plan3),
                              'stop', NULL, NULL, '2026-12-01 09:48Z');
UPDATE ember.settings SET value = '4' WHERE key = 'steward_wake_generations';
UPDATE ember.settings SET value = '20' WHERE key = 'steward_wake_tokens';
CREATE TEMP TABLE plan4 AS SELECT ember.claim_steward_run('w4', '5 minutes', '2026-12-01 09:49Z') AS p;
SELECT is((SELECT (p ->> 'row_count')::int FROM plan4), 1,
          'and about steward_wake_tokens: the generation that crosses the budget is read only in part');
SELECT ember.fail_steward_run('default', (SELECT (p ->> 'run_id')::bigint FROM plan4), (SELECT (p ->> 'lease_token')::uuid FROM plan4),
                              'stop', NULL, NULL, '2026-12-01 09:49Z');
UPDATE ember.settings SET value = '80000' WHERE key = 'steward_wake_tokens';

-- Labels: a category generation waits until the steward's model is tagged for it; then the
-- steward's generation carries its label.
SELECT ok(EXISTS (SELECT 1 FROM ember.backlog_waiting WHERE thread_id = 'doc'),
          'a category thread the steward''s model is not tagged for waits in backlog_waiting');
UPDATE ember.models SET tags = '{health}' WHERE id = 'claude-haiku-4-5';
CREATE TEMP TABLE plan5 AS SELECT ember.claim_steward_run('w5', '5 minutes', '2026-12-01 09:50Z') AS p;
SELECT ok((SELECT pg_temp.mid('knee hurts') = ANY(read_message_ids) FROM ember.steward_runs
           WHERE id = (SELECT (p ->> 'run_id')::bigint FROM plan5)),
          'once tagged, the steward reads it');
SELECT is((SELECT p -> 'labels' FROM plan5), '["health"]'::jsonb,
          'and the read is reported: the steward generation carries the category');
SELECT is((SELECT categories FROM ember.messages WHERE id = (SELECT (p ->> 'message_id')::bigint FROM plan5)),
          '{health}'::text[], 'so do the steward''s rows');
SELECT ember.fail_steward_run('default', (SELECT (p ->> 'run_id')::bigint FROM plan5), (SELECT (p ->> 'lease_token')::uuid FROM plan5),
                              'stop', NULL, NULL, '2026-12-01 09:50Z');

-- A main generation labelled beyond the steward's tags waits as a whole, even though its
-- earlier rows were stamped before the label arrived and the backlog view lists them.
UPDATE ember.messages SET episode_id = gen_random_uuid() WHERE thread_id IN ('plain', 'doc');
SELECT ember.define_category('finance');
SELECT ember.create_thread('default', 'bank', 'side', 'Bank', 'finance', 'open', NULL, '2026-12-01 09:00Z');
SELECT ember.append_message('default', 'main', 'event', 'bank: paid', NULL, NULL, NULL, NULL, NULL, 'bank',
                            '2026-12-01 09:51Z');
SELECT ok(EXISTS (SELECT 1 FROM ember.backlog_waiting WHERE thread_id = 'main'),
          'a main generation with labels beyond the steward''s tags waits in backlog_waiting');
SELECT is(ember.claim_steward_run('w6', '5 minutes', '2026-12-01 10:30Z'), NULL,
          'and is never read by the untagged model, not even its earlier unlabelled rows');

SELECT ember.start_generation('default', 'main', '2026-12-01 11:00Z');
SELECT ember.append_message('default', 'main', 'user', 'new day', p_now => '2026-12-01 11:01Z');
SELECT ok(NOT EXISTS (SELECT 1 FROM ember.backlog WHERE content = 'Never call me before 9.'),
          'with main''s new generation clean, the old labelled generation stays out of the backlog');
CREATE TEMP TABLE plan6 AS SELECT ember.claim_steward_run('w7', '5 minutes', '2026-12-01 11:30Z') AS p;
SELECT is((SELECT array_agg(m.content ORDER BY m.seq) FROM ember.steward_runs AS r
           JOIN ember.messages AS m ON m.id = ANY(r.read_message_ids)
           WHERE r.id = (SELECT (p ->> 'run_id')::bigint FROM plan6)),
          '{"new day"}'::text[],
          'but the claim reads whole generations only: the labelled one waits, the clean one is read');

SELECT * FROM finish();
ROLLBACK;
