BEGIN;
SELECT plan(17);

-- Time is a parameter (invariant 10); a NULL "now" is a caller's bug, refused by name before
-- anything is written, never a raw not-null violation and never a silent no-op.
SELECT ember.create_thread('default', 'main', 'main');
SELECT ember.create_thread('default', 's', 'side');
SELECT ember.create_thread('default', 't', 'side');
SELECT ember.append_message('default', 's', 'assistant', 'worth remembering') AS m_id \gset
SELECT ember.shadow_activate('2026-01-01 00:00+00');
SELECT ember.note_prefix('default', 's', '{"model": "claude-haiku-4-5"}', '{}');

SELECT throws_ok($$SELECT ember.create_thread('default', 'x', 'side', p_now => NULL)$$, 'EM012', NULL, 'create_thread');
SELECT throws_ok($$SELECT ember.start_generation('default', 's', NULL)$$, 'EM012', NULL, 'start_generation');
SELECT throws_ok($$SELECT ember.append_message('default', 's', 'user', 'hi', p_now => NULL)$$, 'EM012', NULL, 'append_message');
SELECT throws_ok($$SELECT ember.set_thread_status('default', 's', 'ended', NULL)$$, 'EM012', NULL, 'set_thread_status');
SELECT throws_ok($$SELECT ember.ensure_steward_thread('default', NULL)$$, 'EM012', NULL, 'ensure_steward_thread');
SELECT throws_ok(format($$SELECT ember.copy_messages('default', 's', ARRAY[%s], 't', NULL)$$, :m_id), 'EM012', NULL,
                 'copy_messages');
SELECT throws_ok($$SELECT ember.shadow_memory_changed('default', 's', 'task-ended', NULL)$$, 'EM012', NULL,
                 'shadow_memory_changed');
SELECT throws_ok($$SELECT ember.note_prefix('default', 's', '{}', '{}', now(), NULL)$$, 'EM012', NULL, 'note_prefix');
SELECT throws_ok($$SELECT ember.turn_started('default', 's', NULL)$$, 'EM012', NULL, 'turn_started');
SELECT throws_ok($$SELECT ember.turn_ended('default', 's', true, NULL)$$, 'EM012', NULL, 'turn_ended');
SELECT throws_ok($$SELECT ember.waiting_for_user('default', 's', NULL)$$, 'EM012', NULL, 'waiting_for_user');
SELECT throws_ok($$SELECT ember.task_ended('default', 's', NULL)$$, 'EM012', NULL, 'task_ended');
SELECT throws_ok($$SELECT ember.shadow_activate(NULL)$$, 'EM012', NULL, 'shadow_activate');
SELECT throws_ok($$SELECT * FROM ember.shadow_ready(NULL)$$, 'EM012', NULL, 'shadow_ready');
SELECT throws_ok($$SELECT ember.claim_shadow_run('w', '1 minute', NULL)$$, 'EM012', NULL, 'claim_shadow_run');
SELECT throws_ok($$SELECT ember.tick(NULL)$$, 'EM012', NULL, 'tick');
SELECT is((SELECT count(*)::int FROM ember.shadow_prefixes WHERE thread_id = 's'), 1,
          'a tick without a time drops no prefix');

SELECT * FROM finish();
ROLLBACK;
