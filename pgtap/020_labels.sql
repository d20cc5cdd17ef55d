BEGIN;
SELECT plan(45);

SELECT ember.define_category('health');
SELECT ember.define_category('finance');
SELECT ember.define_category('travel');
SELECT ember.create_thread('default', 'main', 'main');
SELECT ember.create_thread('default', 'doc', 'side', 'Doctor', 'health');
SELECT ember.create_thread('default', 'bank', 'side', 'Bank', 'finance');
SELECT ember.create_thread('default', 'chat', 'side', 'Chat');
SELECT ember.ensure_steward_thread('default');

SELECT has_table('ember', 'generation_sources', 'generation sources are a table');
SELECT is(ember.generation_labels(ember.latest_generation('default', 'main')), '{}'::text[],
          'a new generation of main carries no labels');

-- Carrier rows: stamped with what the generation has read at insert time.
SELECT ember.append_message('default', 'main', 'user', 'how is it going?');
SELECT is((SELECT categories FROM ember.messages WHERE content = 'how is it going?'), '{}'::text[],
          'a plain user message in main carries no labels');
SELECT ember.append_message('default', 'main', 'event', 'doc: appointment booked', NULL, NULL, NULL, NULL, NULL, 'doc');
SELECT is((SELECT categories FROM ember.messages WHERE content = 'doc: appointment booked'), '{health}'::text[],
          'a progress row from a category thread is itself labelled with that category');
SELECT is((SELECT via || '/' || source_thread FROM ember.generation_sources
           WHERE message_id = (SELECT id FROM ember.messages WHERE content = 'doc: appointment booked')),
          'message/doc', 'the progress row is recorded as a source of main''s generation');
SELECT ember.append_message('default', 'main', 'assistant', 'good news');
SELECT is((SELECT categories FROM ember.messages WHERE content = 'good news'), '{health}'::text[],
          'a carrier row inserted after a category source arrives carries that category');
SELECT is((SELECT categories FROM ember.messages WHERE content = 'how is it going?'), '{}'::text[],
          'rows stamped before the source arrived keep their stamp');
SELECT ember.append_message('default', 'main', 'event', 'bank: paid', NULL, NULL, NULL, NULL, NULL, 'bank');
SELECT ember.append_message('default', 'main', 'event', 'doc: reminder', NULL, NULL, NULL, NULL, NULL, 'doc');
SELECT is(ember.generation_labels(ember.latest_generation('default', 'main')), '{finance,health}'::text[],
          'labels are the sorted, de-duplicated union of the sources'' categories');
SELECT is((SELECT count(*)::int FROM ember.generation_sources WHERE thread_id = 'main'), 2,
          'a source already read adds no second row');
SELECT ember.append_message('default', 'main', 'event', 'chat: hello', NULL, NULL, NULL, NULL, NULL, 'chat');
SELECT is((SELECT categories FROM ember.messages WHERE content = 'chat: hello'), '{finance,health}'::text[],
          'an uncategorised source adds no label but takes none away');

-- Other threads' rows carry their thread's category.
SELECT ember.append_message('default', 'doc', 'user', 'my knee hurts');
SELECT is((SELECT categories FROM ember.messages WHERE content = 'my knee hurts'), '{health}'::text[],
          'a category thread''s rows carry its category');
SELECT ember.append_message('default', 'chat', 'user', 'hi there');
SELECT is((SELECT categories FROM ember.messages WHERE content = 'hi there'), '{}'::text[],
          'an uncategorised thread''s rows carry no labels');
UPDATE ember.models SET tags = '{health}' WHERE id = 'claude-sonnet-4-5';
SELECT ember.set_thread_model('default', 'chat', 'claude-sonnet-4-5');
SELECT ember.append_message('default', 'chat', 'event', 'from doc', NULL, NULL, NULL, NULL, NULL, 'doc');
SELECT is((SELECT categories FROM ember.messages WHERE content = 'from doc'), '{health}'::text[],
          'a non-carrier row with from_thread carries what the row brought');
SELECT is(ember.generation_labels(ember.latest_generation('default', 'chat')), '{health}'::text[],
          'and so does the receiving generation of a thread that is not a carrier');
SELECT is((SELECT via || '/' || source_thread FROM ember.generation_sources WHERE thread_id = 'chat'), 'message/doc',
          'and it records the source like any generation');
-- A writer past the host API (messages_arrival_guard refuses it unless the insert is marked).
SELECT set_config('ember.inserting_message', 'on', true);
INSERT INTO ember.messages (seq, thread_id, generation_id, role, author, content, categories)
VALUES (nextval('ember.message_seq'), 'chat', ember.latest_generation('default', 'chat'), 'user', 'human',
        'forged', '{finance}');
SELECT set_config('ember.inserting_message', '', true);
SELECT is((SELECT categories FROM ember.messages WHERE content = 'forged'), '{health}'::text[],
          'the writer''s own categories are ignored: the row carries its generation''s labels');

-- Labels never shrink.
SELECT throws_ok($$UPDATE ember.generation_sources SET source_thread = 'chat' WHERE source_thread = 'doc'$$,
                 'EM021', NULL, 'updating a generation source is refused');
SELECT throws_ok($$DELETE FROM ember.generation_sources WHERE source_thread = 'doc'$$,
                 'EM021', NULL, 'deleting a generation source is refused');
SELECT throws_ok($$TRUNCATE ember.generation_sources$$,
                 'EM021', NULL, 'truncating generation sources is refused');
SELECT is(ember.generation_labels(ember.latest_generation('default', 'main')), '{finance,health}'::text[],
          'after the refused changes main''s labels are unchanged');
SELECT throws_ok($$UPDATE ember.messages SET categories = '{}' WHERE content = 'good news'$$,
                 'EM021', NULL, 'a stamped row''s labels cannot be removed');
SELECT lives_ok($$UPDATE ember.messages SET episode_id = gen_random_uuid() WHERE content = 'good news'$$,
                'other columns of a labelled row may still be updated');
SELECT throws_ok($$UPDATE ember.threads SET category = 'finance' WHERE id = 'doc'$$,
                 'EM021', 'thread "doc": category "health" cannot be changed or removed (to "finance")',
                 'a thread''s category cannot be changed');
SELECT throws_ok($$UPDATE ember.threads SET category = NULL WHERE id = 'doc'$$,
                 'EM021', NULL, 'a thread''s category cannot be removed');
SELECT throws_ok($$UPDATE ember.threads SET category = 'travel' WHERE id = 'chat'$$,
                 'EM021', 'thread "chat" already has rows: it cannot be categorised "travel" afterwards',
                 'a thread with rows cannot be categorised afterwards (its old stamps would not carry it)');
SELECT ember.create_thread('default', 'empty', 'side');
SELECT lives_ok($$UPDATE ember.threads SET category = 'travel' WHERE id = 'empty'$$,
                'a thread without rows may still be given a category');

-- A new generation starts empty; the old one keeps its labels.
SELECT ember.start_generation('default', 'main');
SELECT is(ember.generation_labels(ember.latest_generation('default', 'main')), '{}'::text[],
          'a new generation of main starts with no labels');
SELECT ember.append_message('default', 'main', 'user', 'fresh start');
SELECT is((SELECT categories FROM ember.messages WHERE content = 'fresh start'), '{}'::text[],
          'and its rows carry none');
SELECT is(ember.generation_labels((SELECT id FROM ember.generations WHERE thread_id = 'main' AND ordinal = 1)),
          '{finance,health}'::text[], 'the ended generation keeps its labels');
SELECT throws_ok($$SELECT ember.generation_labels('00000000-0000-0000-0000-000000000000')$$,
                 'EM020', 'unknown generation "00000000-0000-0000-0000-000000000000"',
                 'labels of an unknown generation are a named error');

-- The steward reports the generations it read.
SELECT is(ember.report_read_generations(ember.latest_generation('default', 'memory-steward'),
                                        ARRAY[ember.latest_generation('default', 'doc')]),
          '{health}'::text[], 'reading a category thread''s generation labels the steward''s generation');
SELECT ember.append_steward_record('default', 'assistant', 'noted the knee');
SELECT is((SELECT categories FROM ember.messages WHERE content = 'noted the knee'), '{health}'::text[],
          'the steward''s next row carries that label');
SELECT is(ember.report_read_generations(ember.latest_generation('default', 'memory-steward'),
                                        ARRAY[(SELECT id FROM ember.generations WHERE thread_id = 'main' AND ordinal = 1)]),
          '{finance,health}'::text[],
          'reading a generation of main carries everything that generation had read');
SELECT is((SELECT source_generation FROM ember.generation_sources
           WHERE thread_id = 'memory-steward' AND source_thread = 'bank'),
          (SELECT id FROM ember.generations WHERE thread_id = 'main' AND ordinal = 1),
          'the source row names the generation that was read');
SELECT is(ember.report_read_generations(ember.latest_generation('default', 'empty'), ARRAY[ember.latest_generation('default', 'bank')]),
          '{finance,travel}'::text[], 'any generation that reads grows by the labels of what it read');
SELECT throws_ok(format($$SELECT ember.report_read_generations(%L, ARRAY[%L::uuid, '00000000-0000-0000-0000-000000000001'])$$,
                        ember.latest_generation('default', 'memory-steward'), ember.latest_generation('default', 'chat')),
                 'EM020', NULL, 'an unknown generation read is a named error');
SELECT is((SELECT count(*)::int FROM ember.generation_sources
           WHERE thread_id = 'memory-steward' AND source_thread = 'chat' AND via = 'read'
             AND source_generation = ember.latest_generation('default', 'chat')), 0,
          'and nothing of that report is recorded');
SELECT throws_ok($$SELECT ember.report_read_generations('00000000-0000-0000-0000-000000000002', '{}')$$,
                 'EM020', NULL, 'reporting for an unknown generation is a named error');

-- A row from one carrier into another would carry everything the sender had read, but the only
-- carriers are main and the steward, and the steward's record is written by the steward alone
-- (EM027): it takes labels by reading (above), never by a row sent in.
UPDATE ember.models SET tags = '{finance,health}' WHERE id = 'claude-opus-4-8';
SELECT ember.set_thread_model('default', 'main', 'claude-opus-4-8');
SELECT ember.set_thread_model('default', 'memory-steward', 'claude-opus-4-8');
SELECT ember.append_message('default', 'main', 'event', 'doc: again', NULL, NULL, NULL, NULL, NULL, 'doc');
SELECT ember.append_message('default', 'main', 'event', 'bank: again', NULL, NULL, NULL, NULL, NULL, 'bank');
SELECT ember.start_generation('default', 'memory-steward');
SELECT throws_ok($$SELECT ember.append_message('default', 'memory-steward', 'event', 'main: digest this', NULL, NULL, NULL,
                                               NULL, NULL, 'main')$$,
                 'EM027', NULL, 'a row sent into the steward''s record is refused, from main too');
SELECT is(ember.generation_labels(ember.latest_generation('default', 'memory-steward')), '{}'::text[],
          'and the steward''s new generation carries nothing it did not read');
SELECT throws_ok($$SELECT ember.append_message('default', 'main', 'event', 'steward: digest done', NULL, NULL, NULL, NULL,
                                               NULL, 'memory-steward')$$,
                 'EM027', NULL, 'a row whose source is the steward''s record is refused by name');

-- The shadow label source: what a call from a thread carries now.
SELECT ember.start_generation('default', 'main');
SELECT ember.append_message('default', 'main', 'user', 'plain question');
SELECT is(ember.thread_call_labels('main'), '{}'::text[],
          'after a plain user message in main, a call from main carries no category');
SELECT ember.append_message('default', 'main', 'event', 'doc: progress', NULL, NULL, NULL, NULL, NULL, 'doc');
SELECT is(ember.thread_call_labels('main'), '{health}'::text[],
          'after a progress row from a category thread, the next call carries that category');
SELECT is(ember.thread_call_labels('doc'), '{health}'::text[], 'a category thread''s calls carry its category');
SELECT throws_ok($$SELECT ember.thread_call_labels('nope')$$, 'EM001', NULL, 'an unknown thread is a named error');

SELECT * FROM finish();
ROLLBACK;
