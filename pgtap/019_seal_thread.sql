BEGIN;
SELECT plan(9);

-- What README tells the host to call, the host role may call; and the host can seal a thread.
SELECT ok(has_function_privilege('ember_host', 'ember.shadow_activate(timestamptz)', 'EXECUTE'),
          'ember_host may call shadow_activate, which README lists for the host');
SELECT ok(has_function_privilege('ember_host', 'ember.seal_thread(text, text)', 'EXECUTE'),
          'ember_host may seal a thread');
SELECT ok(NOT has_function_privilege('ember_worker', 'ember.seal_thread(text, text)', 'EXECUTE'),
          'the worker may not');

SELECT ember.create_thread('default', 'main', 'main');
SELECT ember.create_thread('default', 'notes', 'side', 'Notes', NULL, 'open', 'claude-haiku-4-5');
SELECT ember.shadow_activate(now() - interval '1 hour');
SELECT ember.append_message('default', 'notes', 'assistant', 'the build passed');
SELECT ember.shadow_memory_changed('default', 'notes', 'task-ended');
SELECT (ember.claim_shadow_run('w1', '10 minutes') ->> 'run_id')::bigint AS run_id \gset

SET ROLE ember_host;
SELECT is(ember.seal_thread('default', 'notes'), true, 'the host seals an open thread as ember_host');
SELECT is(ember.seal_thread('default', 'notes'), false, 'sealing it again changes nothing');
SELECT throws_ok($$SELECT ember.seal_thread('default', 'nope')$$, 'EM001', NULL, 'an unknown thread is named');
SELECT throws_ok($$SELECT ember.seal_thread('default', 'main')$$, 'EM011', NULL, 'main is never sealed');
RESET ROLE;

SELECT is((SELECT seal_tier FROM ember.threads WHERE id = 'notes'), 'isolated', 'the thread is isolated');
SELECT is((SELECT cancel_requested FROM ember.shadow_runs WHERE id = :run_id), true,
          'and its running shadow run is asked to cancel, as on a direct seal');

SELECT * FROM finish();
ROLLBACK;
