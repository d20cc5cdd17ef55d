BEGIN;
SELECT plan(12);

-- A thread's seal may tighten (open to isolated) and is then honoured everywhere at once; it never
-- loosens, since an isolated thread may hold rows forwarded or copied from other isolated threads.
SELECT ember.create_thread('default', 'main', 'main');
SELECT ember.ensure_steward_thread('default', now() - interval '1 hour');
SELECT ember.create_thread('default', 'notes', 'side', 'Notes', NULL, 'open', 'claude-haiku-4-5');
SELECT ember.create_thread('default', 'peer', 'side', 'Peer', NULL, 'open', 'claude-haiku-4-5');
SELECT ember.create_thread('default', 'vault', 'side', 'Private', NULL, 'isolated');
SELECT ember.shadow_activate(now() - interval '1 hour');

SELECT ember.append_message('default', 'notes', 'user', 'my knee hurts');
SELECT ember.append_message('default', 'notes', 'assistant', 'see a doctor');
SELECT ember.shadow_memory_changed('default', 'notes', 'task-ended');
SELECT (ember.claim_shadow_run('w1', '10 minutes') ->> 'run_id')::bigint AS run_id,
       (ember.claim_shadow_run('w1', '10 minutes')) IS NULL AS nothing_else \gset
SELECT (SELECT lease_token FROM ember.shadow_runs WHERE id = :run_id) AS token \gset
SELECT ember.note_prefix('default', 'notes', '{"model": "claude-sonnet-4-6", "tools": [{"name": "shadow_memory_propose"}]}', '{}');
SELECT ember.append_message('default', 'notes', 'assistant', 'and rest');
SELECT ember.shadow_memory_changed('default', 'notes', 'thread-active');

SELECT lives_ok($$UPDATE ember.threads SET seal_tier = 'isolated' WHERE id = 'notes'$$,
                'an open thread may be sealed');
SELECT is((SELECT cancel_requested FROM ember.shadow_runs WHERE id = :run_id), true,
          'sealing asks the thread''s running shadow run to cancel');
SELECT is((SELECT count(*)::int FROM ember.shadow_signals WHERE thread_id = 'notes'), 0,
          'and withdraws its offers');
SELECT is((SELECT count(*)::int FROM ember.shadow_prefixes WHERE thread_id = 'notes'), 0,
          'and drops its prefix');
SELECT is(
    ember.submit_shadow_run('default', :run_id, :'token', jsonb_build_object(
        'status', 'completed', 'error', NULL, 'latency_ms', 10,
        'usage', '{"input_tokens": 1, "cache_read_input_tokens": 0, "cache_creation_5m_input_tokens": 0,
                   "cache_creation_1h_input_tokens": 0, "output_tokens": 1}'::jsonb,
        'proposals', jsonb_build_array(jsonb_build_object(
            'text', 'knee hurts', 'evidence_kind', 'user-stated',
            'evidence', jsonb_build_array(jsonb_build_object(
                'message_id', (SELECT id FROM ember.messages WHERE content = 'my knee hurts')))))))
        ->> 'status',
    'cancelled', 'the run''s late submit is recorded cancelled, not refused'
);
SELECT is((SELECT count(*)::int FROM ember.shadow_proposals WHERE thread_id = 'notes'), 0,
          'and commits no proposal about the sealed thread');
SELECT is((SELECT count(*)::int FROM ember.backlog WHERE thread_id = 'notes'), 0,
          'the sealed thread''s rows leave the backlog');
SELECT ok(NOT EXISTS (SELECT 1 FROM ember.shadow_ready() WHERE thread_id = 'notes'),
          'and it is never ready for shadow');
SELECT throws_ok($$SELECT * FROM ember.read_thread('default', 'peer', 'notes')$$, 'EM028', NULL,
                 'and no automated viewer may read it');

SELECT throws_ok($$UPDATE ember.threads SET seal_tier = 'open' WHERE id = 'notes'$$, 'EM015', NULL,
                 'a sealed thread is never opened again');
SELECT throws_ok($$UPDATE ember.threads SET seal_tier = 'open' WHERE id = 'vault'$$, 'EM015', NULL,
                 'a thread created isolated is never opened');
SELECT is((SELECT seal_tier FROM ember.threads WHERE id = 'vault'), 'isolated', 'and stays isolated');

SELECT * FROM finish();
ROLLBACK;
