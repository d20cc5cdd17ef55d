BEGIN;
SELECT plan(22);

SELECT ember.define_category('health');
SELECT ember.define_category('finance');
SELECT ember.create_thread('default', 'main', 'main', NULL, NULL, 'open', 'claude-haiku-4-5', '2026-12-01 09:00Z');
SELECT ember.create_thread('default', 'doc', 'side', 'Doctor', 'health', 'open', NULL, '2026-12-01 09:00Z');
SELECT ember.create_thread('default', 'bank', 'side', 'Bank', 'finance', 'open', NULL, '2026-12-01 09:00Z');
SELECT ember.create_thread('default', 'plain', 'side', 'Plain', NULL, 'open', NULL, '2026-12-01 09:00Z');
SELECT ember.create_thread('default', 'vault', 'side', 'Private', NULL, 'isolated', NULL, '2026-12-01 09:00Z');

-- Before the steward thread exists: main was the old steward's record.
SELECT ember.append_message('default', 'main', 'tool_result', 'old steward tool call', NULL, NULL, 'c1', 'steward_write',
                            'ok', NULL, '2026-12-01 09:01Z');
SELECT ember.append_message('default', 'plain', 'user', 'plain before', NULL, NULL, NULL, NULL, NULL, NULL, '2026-12-01 09:02Z');
SELECT ember.append_message('default', 'doc', 'user', 'knee hurts', NULL, NULL, NULL, NULL, NULL, NULL, '2026-12-01 09:03Z');
SELECT ember.append_message('default', 'vault', 'user', 'diary', NULL, NULL, NULL, NULL, NULL, NULL, '2026-12-01 09:04Z');

SELECT is((SELECT count(*)::int FROM ember.backlog WHERE thread_id = 'main'), 0,
          'with no steward thread yet, no row of main is in the backlog');
SELECT is((SELECT array_agg(content) FROM ember.backlog WHERE thread_id = 'plain'), '{"plain before"}'::text[],
          'with no steward thread yet, unlabelled threads are in the backlog');
SELECT is((SELECT count(*)::int FROM ember.backlog WHERE thread_id = 'doc'), 0,
          'with no steward model, labelled rows are not');
SELECT is((SELECT waiting_rows FROM ember.backlog_waiting WHERE thread_id = 'doc'), 1,
          'they wait, and backlog_waiting says so');

SELECT ember.ensure_steward_thread('default', '2026-12-01 09:10Z');
SELECT ember.append_message('default', 'main', 'user', 'remember I hate calls', NULL, NULL, NULL, NULL, NULL, NULL,
                            '2026-12-01 09:20Z');
SELECT ember.append_steward_record('default', 'assistant', 'wrote a fact', p_now => '2026-12-01 09:21Z');

SELECT is((SELECT array_agg(content) FROM ember.backlog WHERE thread_id = 'main'), '{"remember I hate calls"}'::text[],
          'main''s rows from after the steward thread was created are in the backlog');
SELECT is((SELECT count(*)::int FROM ember.backlog WHERE content = 'old steward tool call'), 0,
          'main''s rows from before the steward existed never are');
SELECT is((SELECT count(*)::int FROM ember.backlog_waiting WHERE thread_id = 'main'), 0,
          'and they do not wait either');
SELECT is((SELECT count(*)::int FROM ember.backlog WHERE thread_id = 'memory-steward'), 0,
          'the steward''s own rows are never in its backlog');
SELECT is((SELECT count(*)::int FROM ember.backlog WHERE thread_id = 'vault'), 0,
          'an isolated thread''s rows are never in the backlog');
SELECT is((SELECT count(*)::int FROM ember.backlog_waiting WHERE thread_id IN ('vault', 'memory-steward')), 0,
          'nor waiting for it');

-- Digested rows leave the backlog.
UPDATE ember.messages SET episode_id = gen_random_uuid() WHERE content = 'plain before';
SELECT is((SELECT count(*)::int FROM ember.backlog WHERE thread_id = 'plain'), 0, 'digested rows are not in the backlog');

-- Category threads wait for a tagged steward model.
SELECT is((SELECT reason FROM ember.backlog_waiting WHERE thread_id = 'doc'),
          '"doc" carries {health}; the model of viewer "memory-steward" is not tagged for {health}',
          'a category thread waits for the steward''s model to be tagged, and says why');
UPDATE ember.models SET tags = '{health}' WHERE id = 'claude-haiku-4-5';
SELECT is((SELECT array_agg(content) FROM ember.backlog WHERE thread_id = 'doc'), '{"knee hurts"}'::text[],
          'once the steward''s model is tagged, the category thread''s rows are in the backlog');
SELECT is((SELECT count(*)::int FROM ember.backlog_waiting WHERE thread_id = 'doc'), 0, 'and no longer wait');

-- Main waits like a category thread while its labels exceed the steward's tags.
SELECT ember.append_message('default', 'main', 'event', 'bank: paid', NULL, NULL, NULL, NULL, NULL, 'bank', '2026-12-01 09:30Z');
SELECT is((SELECT count(*)::int FROM ember.backlog WHERE thread_id = 'main'), 0,
          'a main labelled beyond the steward''s tags leaves the backlog');
SELECT is((SELECT waiting_rows || ' ' || labels::text FROM ember.backlog_waiting WHERE thread_id = 'main'),
          '2 {finance}', 'and waits, with the labels it needs');
UPDATE ember.models SET tags = '{finance,health}' WHERE id = 'claude-haiku-4-5';
SELECT is((SELECT count(*)::int FROM ember.backlog WHERE thread_id = 'main'), 2,
          'a steward model tagged for main''s labels reads main again');

-- Rows are checked too: an earlier generation may be wider than main's current one.
SELECT ember.start_generation('default', 'main', '2026-12-01 10:00Z');
SELECT ember.append_message('default', 'main', 'user', 'new day', NULL, NULL, NULL, NULL, NULL, NULL, '2026-12-01 10:01Z');
UPDATE ember.models SET tags = '{health}' WHERE id = 'claude-haiku-4-5';
SELECT is((SELECT array_agg(content ORDER BY seq) FROM ember.backlog WHERE thread_id = 'main'),
          '{"new day"}'::text[],
          'a clean generation of main is read; every row of the wider earlier generation waits, even one stamped before the label arrived (its generation is reported read as a whole)');
SELECT is((SELECT waiting_rows FROM ember.backlog_waiting WHERE thread_id = 'main'), 2,
          'the earlier generation''s rows wait, together');
SELECT ok((SELECT bool_and(NOT ember.is_steward_thread(thread_id) AND NOT ember.is_isolated(thread_id))
           FROM ember.backlog), 'no backlog row belongs to the steward or an isolated thread');


-- A main row written at exactly the steward thread's creation time is out of both views, as the
-- seed's "created_at >" predicate has it; one a microsecond later is in (issue 8, item 10a).
SELECT ember.append_message('default', 'main', 'user', 'at the instant', p_now => (SELECT created_at FROM ember.threads
                                                                       WHERE id = 'memory-steward'));
SELECT ember.append_message('default', 'main', 'user', 'just after', p_now => (SELECT created_at + interval '1 microsecond'
                                                                    FROM ember.threads WHERE id = 'memory-steward'));
SELECT is((SELECT array_agg(content ORDER BY seq) FROM ember.backlog
           WHERE content IN ('at the instant', 'just after')), '{"just after"}'::text[],
          'the backlog starts strictly after the steward''s creation');
SELECT is((SELECT waiting_rows FROM ember.backlog_waiting WHERE thread_id = 'main'), 2,
          'and backlog_waiting agrees: the row at the instant does not wait either');

SELECT * FROM finish();
ROLLBACK;
