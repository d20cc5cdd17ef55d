BEGIN;
SELECT plan(13);

SELECT ember.create_thread('default', 'main', 'main');
SELECT ember.create_thread('default', 's', 'side');
SELECT ember.create_thread('default', 'other', 'side');
SELECT ember.shadow_activate();

CREATE FUNCTION pg_temp.prefix(p_thread text) RETURNS boolean
LANGUAGE sql AS $$
    SELECT ember.note_prefix('default', p_thread, '{"model": "claude-sonnet-4-6", "tools": [{"name": "shadow_memory_propose"}]}', '{}')
$$;

SELECT has_trigger('ember', 'messages', 'shadow_cancel_on_user_message', 'messages carry the cancel trigger');

-- A running run, a standing offer and a prefix on s; the same on other.
SELECT ember.append_message('default', t, 'assistant', 'done') FROM unnest(ARRAY['s', 'other']) AS t;
SELECT ember.shadow_memory_changed('default', t, 'task-ended') FROM unnest(ARRAY['s', 'other']) AS t;
SELECT (ember.claim_shadow_run('w1', '10 minutes') ->> 'run_id')::bigint AS run_s \gset
SELECT (ember.claim_shadow_run('w1', '10 minutes') ->> 'run_id')::bigint AS run_other \gset
SELECT pg_temp.prefix(t) FROM unnest(ARRAY['s', 'other']) AS t;
SELECT ember.shadow_memory_changed('default', t, 'thread-active') FROM unnest(ARRAY['s', 'other']) AS t;
SELECT ember.turn_started('default', 's');
SELECT ember.waiting_for_user('default', 's');

-- Rows that are not the human speaking cancel nothing.
SELECT ember.append_message('default', 's', 'assistant', 'still thinking');
SELECT ember.append_message('default', 's', 'user', 'a task brief from main', 'main');
SELECT ember.append_message('default', 's', 'tool_result', 'ok', NULL, NULL, 'c1', 'tool', 'ok');
SELECT is((SELECT cancel_requested FROM ember.shadow_runs WHERE id = :run_s), false,
          'assistant, tool and non-human user rows do not cancel');
SELECT is((SELECT count(*)::int FROM ember.shadow_signals WHERE thread_id = 's'), 2,
          'and leave the offers standing');

-- A rolled-back human message cancels nothing.
SAVEPOINT before_user;
SELECT ember.append_message('default', 's', 'user', 'never mind');
ROLLBACK TO SAVEPOINT before_user;
SELECT is((SELECT cancel_requested FROM ember.shadow_runs WHERE id = :run_s), false,
          'a human message that rolls back cancels nothing');

-- The human speaks.
SELECT ember.append_message('default', 's', 'user', 'actually, coffee');
SELECT is((SELECT count(*)::int FROM ember.shadow_signals WHERE thread_id = 's'), 0,
          'a human user message withdraws the thread''s pending offers');
SELECT is((SELECT count(*)::int FROM ember.shadow_prefixes WHERE thread_id = 's'), 0,
          'and drops its prefix');
SELECT is((SELECT cancel_requested FROM ember.shadow_runs WHERE id = :run_s), true,
          'and asks its running run to cancel');
SELECT is((SELECT status FROM ember.shadow_runs WHERE id = :run_s), 'running',
          'the run stays running until its worker submits: only submit records it cancelled');
SELECT is((SELECT waiting_user FROM ember.shadow_thread_state WHERE thread_id = 's'), false,
          'a thread that was waiting for the user waits no more');
SELECT ok(NOT EXISTS (SELECT 1 FROM ember.shadow_ready() WHERE thread_id = 's'),
          'and, its turn still running, is not ready');
SELECT is((SELECT count(*)::int FROM ember.shadow_signals WHERE thread_id = 'other'), 1,
          'another thread''s offers stand');
SELECT is((SELECT count(*)::int FROM ember.shadow_prefixes WHERE thread_id = 'other'), 1,
          'another thread''s prefix stays');
SELECT is((SELECT cancel_requested FROM ember.shadow_runs WHERE id = :run_other), false,
          'another thread''s run goes on');

SELECT * FROM finish();
ROLLBACK;
