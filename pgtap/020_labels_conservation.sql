BEGIN;
SELECT plan(22);

-- Labels follow content through every thread (issue 8, item 1), not only through main and the
-- steward: the three scenarios of the review, then copies and reads.
SELECT ember.define_category('health');
UPDATE ember.models SET tags = '{health}' WHERE id IN ('claude-opus-4-8', 'claude-sonnet-4-6');
SELECT ember.create_thread('default', 'main', 'main', 'Front desk', p_now => '2026-03-01 08:00Z');
SELECT ember.create_thread('default', 'doc', 'side', 'Doctor', 'health', p_now => '2026-03-01 08:00Z');
SELECT ember.create_thread('default', 'x', 'side', 'Planner', NULL, 'open', 'claude-opus-4-8', '2026-03-01 08:00Z');
SELECT ember.create_thread('default', 'u', 'side', 'Unpinned', p_now => '2026-03-01 08:00Z');
SELECT ember.create_thread('default', 'cheap', 'side', 'Cheap', NULL, 'open', 'claude-haiku-4-5', '2026-03-01 08:00Z');
SELECT ember.ensure_steward_thread('default', '2026-03-01 07:00Z');
SELECT ember.set_thread_model('default', 'memory-steward', 'claude-haiku-4-5');
SELECT ember.shadow_activate('2026-03-01 07:30Z');

-- Scenario 1: main carries {health} and sends a row to x, whose model is tagged for health.
SELECT ember.append_message('default', 'main', 'event', 'doc: knee injury, physio booked', NULL, NULL, NULL, NULL, NULL, 'doc',
                            '2026-03-01 09:00Z');
SELECT ember.set_thread_model('default', 'main', 'claude-opus-4-8');
SELECT ember.append_message('default', 'x', 'event', 'main: plan the week', 'main', NULL, NULL, NULL, NULL, 'main', '2026-03-01 09:01Z');
SELECT is(ember.thread_call_labels('x'), '{health}'::text[], 'x carries what main sent it');
SELECT ember.append_message('default', 'x', 'assistant', 'Planning around your knee injury', p_now => '2026-03-01 09:02Z') AS reply \gset
SELECT is((SELECT categories FROM ember.messages WHERE id = :reply), '{health}'::text[],
          'x''s own reply after it is stamped with the label');
SELECT ember.latest_generation('default', 'x') AS x_gen1 \gset

-- ... the steward reads x's generation: its labels grow.
SELECT is(ember.report_read_generations(ember.latest_generation('default', 'memory-steward'), ARRAY[:'x_gen1'::uuid]),
          '{health}'::text[], 'the steward reading x''s generation carries health');

-- ... x sends a progress row into a fresh main generation: main's labels grow.
SELECT ember.start_generation('default', 'main', '2026-03-01 10:00Z');
SELECT is(ember.thread_call_labels('main'), '{}'::text[], 'a fresh main generation starts empty');
SELECT ember.append_message('default', 'main', 'event', 'x: week planned', NULL, NULL, NULL, NULL, NULL, 'x', '2026-03-01 10:01Z');
SELECT is(ember.thread_call_labels('main'), '{health}'::text[],
          'a progress row from x brings health into the fresh main generation (two hops from doc)');
SELECT throws_ok($$SELECT ember.check_carrier_flow('default', 'main', 'cheap')$$, 'EM024', NULL,
                 'so main, labelled again, cannot send to an untagged thread');

-- ... x starts a new generation: its earlier reply keeps its label everywhere.
SELECT ember.start_generation('default', 'x', '2026-03-01 11:00Z');
SELECT is(ember.generation_labels(:'x_gen1'), '{health}'::text[], 'the ended generation of x keeps health');
SELECT is((SELECT categories FROM ember.messages WHERE id = :reply), '{health}'::text[], 'the reply is still stamped health');
SELECT is((SELECT count(*)::int FROM ember.backlog WHERE id = :reply), 0,
          'and it is not in the backlog of a steward whose model is not tagged for health');
SELECT is((SELECT labels FROM ember.backlog_waiting WHERE thread_id = 'x'), '{health}'::text[],
          'it waits, saying it needs health');
SELECT ember.shadow_memory_changed('default', 'x', 'task-ended', '2026-03-01 11:01Z');
SELECT is((SELECT coalesce(model, 'waits') FROM ember.shadow_ready('2026-03-01 11:02Z') WHERE thread_id = 'x'), 'waits',
          'shadow offers x''s labelled generation to no untagged light model: it waits');
UPDATE ember.models SET tags = '{health}' WHERE id = 'claude-haiku-4-5';
SELECT is((SELECT model FROM ember.shadow_ready('2026-03-01 11:02Z') WHERE thread_id = 'x'), 'claude-haiku-4-5',
          'once the light model is tagged, shadow routes to it');
SELECT is((SELECT count(*)::int FROM ember.backlog WHERE id = :reply), 1, 'and the steward reads the reply');
SELECT ember.set_thread_model('default', 'memory-steward', 'claude-sonnet-4-6');
UPDATE ember.models SET tags = '{}' WHERE id = 'claude-haiku-4-5';

-- Scenario 2: a health row copied back into a fresh main generation brings its label.
SELECT ember.start_generation('default', 'main', '2026-03-01 12:00Z');
SELECT ember.set_thread_model('default', 'main', 'claude-haiku-4-5');
SELECT is(ember.thread_call_labels('main'), '{}'::text[], 'a fresh, unlabelled main may take an untagged model');
SELECT is(cardinality(ember.copy_messages('default', 'x', ARRAY[(SELECT id FROM ember.messages WHERE content = 'main: plan the week')],
                                          'main', '2026-03-01 12:01Z')), 1,
          'a row whose from_thread is main itself is copied back into main');
SELECT is(ember.thread_call_labels('main'), '{health}'::text[],
          'and main''s generation carries the copied row''s labels, though the row names main as its sender');
SELECT throws_ok($$SELECT ember.append_message('default', 'u', 'event', 'the user has diabetes', 'main', NULL, NULL, NULL, NULL, 'main')$$,
                 'EM024', NULL, 'so a forward from there to an unpinned thread is refused');
SELECT throws_ok($$SELECT ember.set_thread_model('default', 'main', 'claude-sonnet-4-5')$$, 'EM022', NULL,
                 'and main, now labelled, cannot be repinned to an untagged model');
SELECT is((SELECT count(*)::int FROM ember.messages WHERE thread_id = 'u'), 0, 'and no untagged claim plan can ever hold it');

-- Scenario 3: a read brings the labels of what was read, even from a thread without a category.
SELECT ember.create_thread('default', 'a', 'side', 'Carries health without a category', NULL, 'open', 'claude-opus-4-8',
                           '2026-03-01 08:00Z');
SELECT ember.append_message('default', 'a', 'event', 'doc: the user has diabetes', NULL, NULL, NULL, NULL, NULL, 'doc',
                            '2026-03-01 12:30Z');
SELECT ember.start_generation('default', 'main', '2026-03-01 13:00Z');
SELECT is(ember.thread_call_labels('main'), '{}'::text[], 'main starts a clean generation');
SELECT ember.create_thread('default', 'reader', 'side', 'Reader', NULL, 'open', 'claude-opus-4-8', '2026-03-01 08:00Z');
SELECT is((SELECT count(*)::int FROM ember.read_thread('default', 'reader', 'a')), 1, 'a side thread reads a');
SELECT is(ember.thread_call_labels('reader'), '{health}'::text[],
          'and carries the health content a holds, though a has no category');

SELECT * FROM finish();
ROLLBACK;
