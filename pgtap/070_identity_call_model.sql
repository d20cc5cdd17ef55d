BEGIN;
SELECT plan(17);

-- Main pinned to a model not tagged for health; a health chat pinned to one that is.
SELECT ember.define_category('health');
UPDATE ember.models SET tags = '{health}' WHERE id = 'claude-opus-4-6';
SELECT ember.create_thread('default', 'main', 'main', NULL, NULL, 'open', 'claude-sonnet-4-6');
SELECT ember.create_thread('default', 'knee', 'side', 'Knee rehab', 'health', 'open', 'claude-opus-4-6');
SELECT ember.create_thread('default', 'chat', 'side', 'Chat', NULL, 'open', 'claude-sonnet-4-6');
SELECT ember.ensure_steward_thread('default');

SELECT is(ember.turn_identity('main') -> 'model',
          '{"thread": "main", "model": "claude-sonnet-4-6", "labels": []}'::jsonb,
          'turn_identity names the model main''s call goes to and the labels it carries');

-- First way in: a progress report from the health chat.
SELECT ember.append_message('default', 'knee', 'user', 'My knee hurts after running.');
SELECT ember.report_progress('toolu_1', 'knee', 'Physio booked for Monday.');
SELECT is(ember.thread_call_labels('main'), '{health}'::text[], 'the report brings its label into main');
SELECT throws_ok($$SELECT ember.turn_identity('main')$$, 'EM022',
    'category_model: thread "main" carries {health}, and its pinned model "claude-sonnet-4-6" is not tagged for {health}',
    'main''s next call is refused, naming the labels and the model, instead of going to an untagged model');
SELECT throws_ok($$SELECT ember.thread_call_model('main')$$, 'EM022', NULL,
    'and so is thread_call_model for main');
SELECT is((SELECT count(*)::int FROM ember.identity_segments WHERE thread_id = 'main'), 1,
    'the refused turn recorded nothing');
-- The hint names a model that would do.
CREATE FUNCTION pg_temp.hint_of(p_sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    v_hint text;
BEGIN
    EXECUTE p_sql;
    RETURN NULL;
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS v_hint = PG_EXCEPTION_HINT;
    RETURN v_hint;
END;
$$;
SELECT alike(pg_temp.hint_of($$SELECT ember.turn_identity('main')$$),
    '%set_thread_model(''main'', ''claude-opus-4-6'')%', 'the refusal''s hint names a tagged model to pin');
SELECT throws_ok($$SELECT ember.set_thread_model('default', 'main', 'claude-haiku-4-5')$$, 'EM022', NULL,
    'switching main to another untagged model is refused too');
SELECT lives_ok($$SELECT ember.set_thread_model('default', 'main', 'claude-opus-4-6')$$,
    'pinning main to a model tagged for health is allowed');
SELECT is(ember.turn_identity('main') -> 'model',
          '{"thread": "main", "model": "claude-opus-4-6", "labels": ["health"]}'::jsonb,
          'and main''s next turn then goes to it');

-- Second way in: rows copied into a fresh generation of main pinned to an untagged model.
SELECT ember.start_generation('default', 'main');
SELECT ember.set_thread_model('default', 'main', 'claude-sonnet-4-6');
SELECT lives_ok($$SELECT ember.turn_identity('main')$$, 'a fresh generation of main carries nothing');
SELECT ember.copy_messages('default', 'knee', ARRAY(SELECT id FROM ember.messages WHERE thread_id = 'knee'), 'main');
SELECT throws_ok($$SELECT ember.turn_identity('main')$$, 'EM022',
    'category_model: thread "main" carries {health}, and its pinned model "claude-sonnet-4-6" is not tagged for {health}',
    'rows copied from the health chat into main refuse main''s next call the same way');

-- Any thread: a labelled thread with no pinned model proves no tags.
SELECT ember.create_thread('default', 'loose', 'side', 'Unpinned', 'health');
SELECT throws_ok($$SELECT ember.turn_identity('loose')$$, 'EM022',
    'category_model: thread "loose" carries {health}, and no model is pinned for it',
    'a labelled thread without a pinned model is refused');
SELECT is(ember.turn_identity('chat') -> 'model' ->> 'model', 'claude-sonnet-4-6',
    'an unlabelled thread''s call goes to its pin');

-- The steward's record is never a row's source.
SELECT throws_ok($$SELECT ember.append_message('default', 'chat', 'event', 'from the steward', NULL, NULL, NULL, NULL, NULL,
                                               'memory-steward')$$,
    'EM027', NULL, 'append_message with the steward''s thread as from_thread is refused by name');
SELECT throws_ok($$SELECT ember.queue_event('chat', 'thread-event', 'progress-report', 'digest done', 'memory-steward')$$,
    'EM027', NULL, 'queue_event from the steward''s thread is refused by name');
SELECT throws_ok($$SELECT ember.append_messages('default', 'chat', '[{"role": "event", "content": "x", "from_thread": "memory-steward"}]')$$,
    'EM027', NULL, 'and so is a batch append naming it');
SELECT is((SELECT count(*)::int FROM ember.messages WHERE thread_id = 'chat'), 0, 'nothing of them was written');

SELECT * FROM finish();
ROLLBACK;
