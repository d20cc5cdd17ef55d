BEGIN;
SELECT plan(5);

-- The cost view prices each run from the snapshot copied at claim, per million tokens, and says
-- NULL rather than undercount when a price is missing.

SELECT ember.create_thread('default', 'main', 'main');
SELECT ember.shadow_activate('2030-01-01 09:00+00');
SELECT ember.create_thread('default', 's1', 'side');
SELECT ember.append_message('default', 's1', 'assistant', 'one', p_now => '2030-01-01 09:58+00');
SELECT ember.append_message('default', 's1', 'assistant', 'two', p_now => '2030-01-01 09:59+00');
SELECT ember.shadow_memory_changed('default', 's1', 'task-ended', '2030-01-01 10:00+00');
SELECT (ember.claim_shadow_run('w', '10 minutes', '2030-01-01 10:00+00') ->> 'run_id')::bigint AS r1 \gset
SELECT ember.submit_shadow_run('default', :r1, (SELECT lease_token FROM ember.shadow_runs WHERE id = :r1), jsonb_build_object(
    'status', 'completed', 'error', NULL, 'latency_ms', 10, 'finished_at', '2030-01-01 10:01+00',
    'proposals', '[]'::jsonb,
    'usage', jsonb_build_object(
        'input_tokens', 1000000, 'cache_read_input_tokens', 2000000, 'cache_creation_5m_input_tokens', 1000000,
        'cache_creation_1h_input_tokens', 1000000, 'output_tokens', 1000000
    )
));

-- claude-haiku-4-5: input 1, output 5, 5m write 1.25, 1h write 2, read 0.10 per million.
SELECT is((SELECT cost_usd FROM ember.shadow_run_cost WHERE run_id = :r1), 1 + 5 + 1.25 + 2 + 0.2,
          'every token kind is priced by its own price');
SELECT is((SELECT messages_read FROM ember.shadow_run_cost WHERE run_id = :r1), 2::bigint,
          'the run read two messages');

UPDATE ember.models SET price_input = 100 WHERE id = 'claude-haiku-4-5';
SELECT is((SELECT cost_usd FROM ember.shadow_run_cost WHERE run_id = :r1), 1 + 5 + 1.25 + 2 + 0.2,
          'a later price change does not reprice a finished run');

UPDATE ember.shadow_runs SET price_cache_write_1h = NULL WHERE id = :r1;
SELECT is((SELECT cost_usd FROM ember.shadow_run_cost WHERE run_id = :r1), NULL,
          'a missing price makes the cost unknown, never an undercount');
UPDATE ember.shadow_runs SET price_cache_write_1h = 2, cache_write_1h_tokens = 0 WHERE id = :r1;
SELECT is((SELECT cost_usd FROM ember.shadow_run_cost WHERE run_id = :r1), 1 + 5 + 1.25 + 0.2,
          'with every price known, a zero count costs nothing');

SELECT * FROM finish();
ROLLBACK;
