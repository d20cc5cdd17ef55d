BEGIN;
SELECT plan(37);

-- Tables hold their own invariants (issue 8, item 9), whatever writes to them.
SELECT ember.define_category('health');
UPDATE ember.models SET tags = '{health}' WHERE id = 'claude-opus-4-8';
SELECT ember.create_thread('default', 'main', 'main', p_now => '2026-03-01 08:00Z');
SELECT ember.create_thread('default', 'doc', 'side', 'Doctor', 'health', 'open', 'claude-opus-4-8', '2026-03-01 08:00Z');
SELECT ember.create_thread('default', 'open1', 'side', 'Open', NULL, 'open', NULL, '2026-03-01 08:00Z');
SELECT ember.create_thread('default', 'vault', 'side', 'Private', NULL, 'isolated', NULL, '2026-03-01 08:00Z');
SELECT ember.ensure_steward_thread('default', '2026-03-01 07:00Z');
SELECT ember.append_message('default', 'open1', 'user', 'I prefer tea.', p_now => '2026-03-01 09:00Z') AS m_open \gset
SELECT ember.append_message('default', 'vault', 'user', 'my diary', p_now => '2026-03-01 09:00Z') AS m_vault \gset
SELECT ember.append_message('default', 'doc', 'user', 'knee hurts', p_now => '2026-03-01 09:00Z') AS m_doc \gset
SELECT ember.append_message('default', 'main', 'event', 'doc: booked', NULL, NULL, NULL, NULL, NULL, 'doc', '2026-03-01 09:01Z')
    AS m_brought \gset

-- Message rows are immutable.
SELECT throws_ok(format($$UPDATE ember.messages SET content = 'I prefer coffee.' WHERE id = %s$$, :m_open), 'EM017', NULL,
                 'a message''s content cannot be rewritten');
SELECT throws_ok(format($$UPDATE ember.messages SET thread_id = 'open1', generation_id = ember.latest_generation('default', 'open1') WHERE id = %s$$,
                        :m_vault), 'EM017', NULL,
                 'an isolated row cannot be moved into an open thread');
SELECT is((SELECT count(*)::int FROM ember.backlog WHERE id = :m_vault), 0, 'so it never reaches the backlog');
SELECT throws_ok(format($$UPDATE ember.messages SET generation_id = gen_random_uuid() WHERE id = %s$$, :m_open), 'EM017',
                 NULL, 'a row cannot be moved to another generation');
SELECT throws_ok(format($$UPDATE ember.messages SET from_thread = NULL WHERE id = %s$$, :m_brought), 'EM017', NULL,
                 'from_thread cannot be cleared');
SELECT throws_ok(format($$UPDATE ember.messages SET seq = seq + 1000 WHERE id = %s$$, :m_open), 'EM017', NULL,
                 'a row cannot be renumbered');
SELECT throws_ok(format($$UPDATE ember.messages SET author = 'human', role = 'user' WHERE id = %s$$, :m_brought), 'EM017',
                 NULL, 'a row cannot be turned into a human message');
SELECT throws_ok(format($$DELETE FROM ember.messages WHERE id = %s$$, :m_brought), 'EM017', NULL,
                 'the row that brought a label cannot be deleted');
SELECT is(ember.thread_call_labels('main'), '{health}'::text[], 'and main keeps the label it brought');
SET LOCAL client_min_messages = warning;
SELECT throws_ok($$TRUNCATE ember.messages CASCADE$$, 'EM017', NULL, 'messages cannot be truncated');
SELECT throws_ok(format($$UPDATE ember.messages SET categories = '{}' WHERE id = %s$$, :m_brought), 'EM021', NULL,
                 'a row''s labels cannot change');
SELECT lives_ok(format($$UPDATE ember.messages SET episode_id = gen_random_uuid() WHERE id = %s$$, :m_open),
                'the digestion mark may be set');
SELECT throws_ok(format($$UPDATE ember.messages SET episode_id = gen_random_uuid() WHERE id = %s$$, :m_open), 'EM017', NULL,
                 'but only once');
SELECT throws_ok(format($$UPDATE ember.messages SET episode_id = NULL WHERE id = %s$$, :m_open), 'EM017', NULL,
                 'and never cleared');
SELECT ember.append_message('default', 'open1', 'assistant', 'noted', p_now => '2026-03-01 09:02Z') AS m_copy \gset
SELECT lives_ok(format($$UPDATE ember.messages SET copied_from = %s WHERE id = %s$$, :m_open, :m_copy),
                'the copy lineage may be set');
SELECT throws_ok(format($$UPDATE ember.messages SET copied_from = NULL WHERE id = %s$$, :m_copy), 'EM017', NULL,
                 'but only once');

-- Erasure by forgetting is the one way to rewrite or delete content.
SET LOCAL ember.erasing = 'on';
SELECT lives_ok(format($$UPDATE ember.messages SET content = '[forgotten]', blocks = NULL WHERE id = %s$$, :m_copy),
                'with ember.erasing on, content may be erased');
SELECT throws_ok(format($$UPDATE ember.messages SET thread_id = 'main' WHERE id = %s$$, :m_copy), 'EM017', NULL,
                 'but a row is never moved, even when erasing');
SELECT lives_ok(format($$DELETE FROM ember.messages WHERE id = %s$$, :m_copy), 'and a row may be deleted');
SET LOCAL ember.erasing = 'off';
SELECT throws_ok(format($$UPDATE ember.messages SET content = 'x' WHERE id = %s$$, :m_open), 'EM017', NULL,
                 'with the flag off again, content is immutable again');

-- Generations.
SELECT throws_ok($$UPDATE ember.generations SET labels = '{}' WHERE thread_id = 'main'$$, 'EM021', NULL,
                 'a generation''s labels never narrow');
SELECT throws_ok($$UPDATE ember.generations SET thread_id = 'open1' WHERE thread_id = 'vault'$$, 'EM017', NULL,
                 'a generation never moves to another thread');
SELECT throws_ok($$DELETE FROM ember.generations WHERE thread_id = 'open1'$$, 'EM017', NULL, 'generations are never deleted');
SELECT throws_ok($$SELECT ember.start_generation('default', 'open1', '2026-03-01 07:59Z')$$, 'EM019', NULL,
                 'a generation may not start before the previous one started');
SELECT lives_ok($$SELECT ember.start_generation('default', 'open1', '2026-03-01 08:00Z')$$, 'at the same instant it may');
SELECT throws_ok($$UPDATE ember.generations SET ended_at = '2026-03-01 10:00Z' WHERE thread_id = 'open1' AND ordinal = 1$$,
                 'EM017', NULL, 'an ended generation''s end never moves');

-- A thread's model changes only through the routing rule.
SELECT throws_ok($$UPDATE ember.threads SET model = 'claude-haiku-4-5' WHERE id = 'doc'$$, 'EM022', NULL,
                 'a direct UPDATE cannot downgrade a labelled thread''s model');
SELECT throws_ok($$UPDATE ember.threads SET model = NULL WHERE id = 'doc'$$, 'EM022', NULL,
                 'nor unpin it');
SELECT lives_ok($$UPDATE ember.threads SET model = 'claude-haiku-4-5' WHERE id = 'open1'$$,
                'an unlabelled thread may take any model');

-- Reserved and unsafe ids are named errors, not raw check violations.
SELECT throws_ok($$SELECT ember.create_thread('default', 'memory-steward', 'side')$$, 'EM016',
                 'thread id "memory-steward" is reserved for the memory steward''s record',
                 'the steward''s id is reserved, by name');
SELECT throws_ok($$INSERT INTO ember.threads (id, kind) VALUES ('memory-steward', 'task')$$, 'EM016', NULL,
                 'also for a direct insert');

-- Seals are not retroactive: a row forwarded or copied from a thread while it was open stays
-- the receiving thread's row after the thread is sealed; only evidence citing its lineage fails.
SELECT ember.create_thread('default', 'diary', 'side', 'Diary', NULL, 'open', NULL, '2026-03-01 08:00Z');
SELECT ember.append_message('default', 'diary', 'user', 'I sleep badly', p_now => '2026-03-01 09:00Z') AS m_diary \gset
SELECT ember.copy_messages('default', 'diary', ARRAY[:m_diary]::bigint[], 'open1', '2026-03-01 09:05Z') AS copied \gset
UPDATE ember.threads SET seal_tier = 'isolated' WHERE id = 'diary';
SELECT is((SELECT count(*)::int FROM ember.backlog WHERE thread_id = 'diary'), 0, 'the sealed thread''s own rows leave the backlog');
SELECT is((SELECT count(*)::int FROM ember.backlog WHERE content = 'I sleep badly' AND thread_id = 'open1'), 1,
          'a copy made before the seal stays in the open thread (a seal is not retroactive)');
SELECT matches(ember.check_evidence('open1', 'user-stated',
                                    jsonb_build_array(jsonb_build_object('message_id', (:'copied'::bigint[])[1])), false),
               'isolated', 'but evidence citing the copy follows its lineage into the sealed thread and fails');

-- Refusals do not tell an agent what it may not know.
SELECT throws_ok($$SELECT * FROM ember.read_thread('default', 'open1', 'vault')$$, 'EM028',
                 'read_thread: no thread "vault" is readable by viewer "open1"',
                 'an isolated thread is refused without saying it is isolated');
SELECT throws_ok($$SELECT * FROM ember.read_thread('default', 'open1', 'nosuch')$$, 'EM028',
                 'read_thread: no thread "nosuch" is readable by viewer "open1"',
                 'exactly like a thread that does not exist');
SELECT throws_ok($$SELECT * FROM ember.read_thread('default', 'open1', 'doc')$$, 'EM028',
                 'read_thread: no thread "doc" is readable by viewer "open1"',
                 'a thread hidden by labels is refused without naming them');

SELECT * FROM finish();
ROLLBACK;
