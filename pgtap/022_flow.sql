BEGIN;
SELECT plan(51);

SELECT ember.define_category('health');
SELECT ember.define_category('finance');
UPDATE ember.models SET tags = '{health}' WHERE id = 'claude-opus-4-8';
SELECT ember.create_thread('default', 'main', 'main', NULL, NULL, 'open', 'claude-haiku-4-5');
SELECT ember.create_thread('default', 'doc', 'side', 'Doctor', 'health');
SELECT ember.create_thread('default', 'clinic', 'side', 'Clinic', 'health');
SELECT ember.create_thread('default', 'plain', 'side', 'Plain', NULL, 'open', 'claude-sonnet-4-5');
SELECT ember.create_thread('default', 'tagged', 'side', 'Tagged', NULL, 'open', 'claude-opus-4-8');
SELECT ember.create_thread('default', 'nomodel', 'side', 'No model');
SELECT ember.create_thread('default', 'vault', 'side', 'Private', NULL, 'isolated');
SELECT ember.create_thread('default', 'vault2', 'side', 'Private too', NULL, 'isolated');
SELECT ember.ensure_steward_thread('default');

-- Flow: what leaves a carrier carries its current labels.
SELECT is(ember.check_carrier_flow('default', 'main', 'plain'), '{}'::text[],
          'an unlabelled main may send to a thread with an untagged model');
SELECT ember.append_message('default', 'main', 'user', 'plain question');
SELECT ember.append_message('default', 'main', 'event', 'doc: blood test booked', NULL, NULL, NULL, NULL, NULL, 'doc');
SELECT ember.append_message('default', 'main', 'assistant', 'labelled answer');
SELECT throws_ok($$SELECT ember.check_carrier_flow('default', 'main', 'plain')$$, 'EM024',
                 'carrier_label_flow: "main" carries {health}, but the model of "plain" (claude-sonnet-4-5) is not tagged for {health}',
                 'flow from a labelled main to a thread with an untagged model is refused, naming the missing category');
SELECT is(ember.check_carrier_flow('default', 'main', 'tagged'), '{health}'::text[],
          'flow from a labelled main to a thread whose model is tagged is allowed');
SELECT throws_ok($$SELECT ember.check_carrier_flow('default', 'main', 'nomodel')$$, 'EM024', NULL,
                 'a thread without a pinned model receives nothing labelled');
SELECT throws_ok($$SELECT ember.check_carrier_flow('default', 'doc', 'plain')$$, 'EM024', NULL,
          'a category thread''s labels do not flow to an untagged thread either');
SELECT is(ember.check_carrier_flow('default', 'doc', 'main'), '{health}'::text[],
          'a label carrier gathers from a thread that is not one: the labels travel, and grow its set');
SELECT throws_ok($$SELECT ember.check_carrier_flow('default', 'ghost', 'plain')$$, 'EM001', NULL, 'an unknown sender is a named error');
SELECT throws_ok($$SELECT ember.check_carrier_flow('default', 'main', 'ghost')$$, 'EM001', NULL, 'an unknown receiver is a named error');

SELECT throws_ok($$SELECT ember.append_message('default', 'plain', 'event', 'main says stop', 'main', NULL, NULL, NULL, NULL, 'main')$$,
                 'EM024', NULL, 'the database refuses a row from a labelled main into an untagged thread');
SELECT is((SELECT count(*)::int FROM ember.messages WHERE content = 'main says stop'), 0, 'and writes nothing');
SELECT lives_ok($$SELECT ember.append_message('default', 'tagged', 'event', 'main says go on', 'main', NULL, NULL, NULL, NULL, 'main')$$,
                'a row from a labelled main into a tagged thread is accepted');

SELECT ember.report_read_generations(ember.latest_generation('default', 'memory-steward'), ARRAY[ember.latest_generation('default', 'doc')]);
SELECT throws_ok($$SELECT ember.check_carrier_flow('default', 'memory-steward', 'plain')$$, 'EM024', NULL,
                 'the steward is a carrier too: its labels do not flow to an untagged thread');

-- Copy (fork, clone, quote).
SELECT throws_ok(format($$SELECT ember.copy_messages('default', 'main', ARRAY[%s], 'tagged')$$,
                        (SELECT id FROM ember.messages WHERE content = 'labelled answer')),
                 'EM025', NULL, 'a labelled row of main is never copied, even to a tagged thread');
SELECT throws_ok(format($$SELECT ember.copy_messages('default', 'main', ARRAY[%s, %s], 'tagged')$$,
                        (SELECT id FROM ember.messages WHERE content = 'plain question'),
                        (SELECT id FROM ember.messages WHERE content = 'doc: blood test booked')),
                 'EM025', NULL, 'one labelled row refuses the whole copy');
SELECT is((SELECT count(*)::int FROM ember.messages WHERE content = 'plain question'), 1,
          'and nothing of it is copied');
SELECT is(cardinality(ember.copy_messages('default', 'main', ARRAY[(SELECT id FROM ember.messages WHERE content = 'plain question')], 'plain')),
          1, 'an unlabelled row of main may be copied');
SELECT ember.append_steward_record('default', 'assistant', 'steward note');
SELECT throws_ok(format($$SELECT ember.copy_messages('default', 'memory-steward', ARRAY[%s], 'tagged')$$,
                        (SELECT id FROM ember.messages WHERE content = 'steward note')),
                 'EM027', NULL, 'the steward''s record is never copied');
SELECT throws_ok(format($$SELECT ember.copy_messages('default', 'plain', ARRAY[%s], 'memory-steward')$$,
                        (SELECT id FROM ember.messages WHERE content = 'plain question' AND thread_id = 'plain')),
                 'EM027', NULL, 'nor copied into');

SELECT ember.append_message('default', 'nomodel', 'user', 'first');
SELECT ember.append_message('default', 'nomodel', 'assistant', 'second', NULL, '[{"type":"text","text":"second"}]');
SELECT ember.append_message('default', 'nomodel', 'tool_result', 'third', NULL, NULL, 'call_9', 'lookup', 'ok');
CREATE TEMP TABLE copied AS
SELECT ember.copy_messages('default', 'nomodel', ARRAY(SELECT id FROM ember.messages WHERE thread_id = 'nomodel' ORDER BY id DESC),
                           'plain') AS ids;
SELECT is(
    (SELECT array_agg(m.role || ':' || m.author || ':' || m.content || ':' || coalesce(m.blocks::text, '-')
                      || ':' || coalesce(m.tool_status, '-') ORDER BY m.seq)
     FROM ember.messages AS m WHERE m.id = ANY(ARRAY(SELECT unnest(ids) FROM copied))),
    ARRAY['user:human:first:-:-', 'assistant:agent:second:[{"type":"text","text":"second"}]:-',
          'tool_result:system:third:-:ok'],
    'ordinary rows are copied whole, in conversation order, whatever order the ids come in');
SELECT is((SELECT array_agg(m.id ORDER BY m.seq) FROM ember.messages AS m WHERE m.id = ANY(ARRAY(SELECT unnest(ids) FROM copied))),
          (SELECT ids FROM copied), 'the new ids are returned in that order');
SELECT is((SELECT count(*)::int FROM ember.messages WHERE thread_id = 'plain' AND content IN ('first', 'second', 'third')),
          3, 'into the target thread');
SELECT ok((SELECT bool_and(c.id > o.id) FROM ember.messages AS o JOIN ember.messages AS c
           ON c.content = o.content AND c.thread_id = 'plain' WHERE o.thread_id = 'nomodel'),
          'as new rows with new ids');

-- Missing ids: a named error and nothing partially copied.
SELECT throws_ok(format($$SELECT ember.copy_messages('default', 'nomodel', ARRAY[%s, 999999], 'tagged')$$,
                        (SELECT id FROM ember.messages WHERE content = 'first' AND thread_id = 'nomodel')),
                 'EM026', 'copy from "nomodel": no such messages in that thread: {999999}',
                 'a copy of a missing id is a named error');
SELECT throws_ok(format($$SELECT ember.copy_messages('default', 'nomodel', ARRAY[%s], 'tagged')$$,
                        (SELECT id FROM ember.messages WHERE content = 'plain question' AND thread_id = 'main')),
                 'EM026', NULL, 'a row of another thread is not a row of the source');
SELECT throws_ok($$SELECT ember.copy_messages('default', 'nomodel', ARRAY[NULL::bigint], 'tagged')$$, 'EM026', NULL,
                 'a null id is refused');
SELECT throws_ok($$SELECT ember.copy_messages('default', 'nomodel', NULL, 'tagged')$$, 'EM012', NULL,
                 'a null id list is refused');
SELECT throws_ok($$SELECT ember.copy_messages('default', 'ghost', '{}', 'tagged')$$, 'EM001', NULL, 'an unknown source thread');
SELECT throws_ok($$SELECT ember.copy_messages('default', 'nomodel', '{}', 'ghost')$$, 'EM001', NULL, 'an unknown target thread');
SELECT is((SELECT count(*)::int FROM ember.messages WHERE thread_id = 'tagged'), 1,
          'refused copies wrote nothing');

-- All or nothing when a later row is refused by the append itself.
SELECT ember.append_message('default', 'tagged', 'user', 'ordinary in tagged');
SELECT throws_ok($$SELECT ember.copy_messages('default', 'tagged', ARRAY(SELECT id FROM ember.messages WHERE thread_id = 'tagged'), 'plain')$$,
                 'EM024', NULL, 'a row that came from a labelled main cannot be copied on to an untagged thread');
SELECT is((SELECT count(*)::int FROM ember.messages WHERE thread_id = 'plain' AND content = 'ordinary in tagged'), 0,
          'and the rows before it are not copied either');

-- Labels travel with copies of ordinary rows.
SELECT ember.append_message('default', 'doc', 'user', 'my knee hurts');
SELECT throws_ok(format($$SELECT ember.copy_messages('default', 'doc', ARRAY[%s], 'tagged')$$,
                        (SELECT id FROM ember.messages WHERE content = 'my knee hurts')),
                 'EM024', NULL, 'rows of a category thread are not copied into a thread whose rows would drop the label');
CREATE TEMP TABLE to_clinic AS
SELECT ember.copy_messages('default', 'doc', ARRAY[(SELECT id FROM ember.messages WHERE content = 'my knee hurts')], 'clinic') AS ids;
SELECT is((SELECT categories FROM ember.messages WHERE id = (SELECT ids[1] FROM to_clinic)),
          '{health}'::text[], 'they may be copied into a thread of the same category');
SELECT ember.start_generation('default', 'main');
CREATE TEMP TABLE to_main AS
SELECT ember.copy_messages('default', 'doc', ARRAY[(SELECT id FROM ember.messages WHERE content = 'my knee hurts' AND thread_id = 'doc')],
                           'main') AS ids;
SELECT is((SELECT categories FROM ember.messages WHERE id = (SELECT ids[1] FROM to_main)),
          '{health}'::text[], 'copied into a carrier, they label the carrier''s row');
SELECT is(ember.generation_labels(ember.latest_generation('default', 'main')), '{health}'::text[],
          'and the carrier''s generation records the copy as a source');

-- Isolated rows stay in isolated threads.
SELECT ember.append_message('default', 'vault', 'user', 'secret');
SELECT throws_ok(format($$SELECT ember.copy_messages('default', 'vault', ARRAY[%s], 'plain')$$,
                        (SELECT id FROM ember.messages WHERE content = 'secret')),
                 'EM028', NULL, 'rows of an isolated thread are not copied into an open one');
SELECT is(cardinality(ember.copy_messages('default', 'vault', ARRAY[(SELECT id FROM ember.messages WHERE content = 'secret')], 'vault2')),
          1, 'an isolated thread may be forked into another isolated thread');
SELECT throws_ok($$SELECT ember.append_message('default', 'main', 'event', 'vault: report', NULL, NULL, NULL, NULL, NULL, 'vault')$$,
                 'EM028', NULL, 'a progress row from an isolated thread is refused in main');
SELECT throws_ok($$SELECT ember.append_message('default', 'plain', 'event', 'vault: report', NULL, NULL, NULL, NULL, NULL, 'vault')$$,
                 'EM028', NULL, 'a row from an isolated thread is refused in an open side thread');
SELECT is((SELECT count(*)::int FROM ember.messages WHERE content = 'vault: report'), 0,
          'and nothing of an isolated thread reaches an open thread (nor its backlog or shadow plan)');
SELECT lives_ok($$SELECT ember.append_message('default', 'vault2', 'event', 'vault: report', NULL, NULL, NULL, NULL, NULL, 'vault')$$,
                'a row from an isolated thread may go to another isolated thread');
SELECT throws_ok(format($$SELECT ember.copy_messages('default', 'vault2', ARRAY[%s], 'plain')$$,
                        (SELECT id FROM ember.messages WHERE content = 'vault: report')),
                 'EM028', NULL, 'and is never copied on into an open thread');

-- A fresh generation of main carries nothing, so it may send again.
SELECT ember.start_generation('default', 'main');
SELECT is(ember.check_carrier_flow('default', 'main', 'plain'), '{}'::text[],
          'a new generation of main may send to an untagged thread again');

-- Labels that leave a carrier stay on what carries them in the receiving thread.
SELECT ember.shadow_activate();
SELECT ember.append_message('default', 'main', 'event', 'doc: knee surgery on friday', NULL, NULL, NULL, NULL, NULL, 'doc');
SELECT ember.append_message('default', 'tagged', 'event', 'main: surgery friday', 'main', NULL, NULL, NULL, NULL, 'main')
    AS sent_id \gset
SELECT is((SELECT categories FROM ember.messages WHERE id = :sent_id), '{health}'::text[],
          'a row a labelled main sends to a tagged thread carries main''s labels there');
SELECT is(ember.thread_call_labels('tagged'), '{health}'::text[],
          'and the receiving generation carries them too');
SELECT ember.shadow_memory_changed('default', 'tagged', 'task-ended');
SELECT is((SELECT coalesce(model, 'none') FROM ember.shadow_ready() WHERE thread_id = 'tagged'), 'none',
          'so shadow does not hand the receiving thread to an untagged light model');
SELECT throws_ok(format($$SELECT * FROM ember.read_thread('default', 'plain', 'tagged')$$), 'EM028', NULL,
                 'nor may an untagged viewer read it');
SELECT ember.start_generation('default', 'main');
SELECT is(ember.check_carrier_flow('default', 'main', 'plain'), '{}'::text[], 'once main starts afresh it may send to plain');
SELECT throws_ok(format($$SELECT ember.copy_messages('default', 'tagged', ARRAY[%s], 'plain')$$, :sent_id), 'EM024', NULL,
                 'but the labelled row it sent earlier is still not copied on into an untagged thread');

SELECT ember.create_thread('default', 'fin', 'side', 'Money', 'finance');
SELECT is(ember.copy_messages('default', 'fin', '{}', 'main'), '{}'::bigint [], 'an empty copy copies nothing');
SELECT ok(NOT EXISTS (SELECT 1 FROM ember.generation_sources WHERE source_thread = 'fin'),
          'and records no source in the carrier: nothing was read');

SELECT * FROM finish();
ROLLBACK;
