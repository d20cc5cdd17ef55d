BEGIN;
SELECT plan(12);

-- steward_has_work(): answered from generation_progress, and never false when a claim would find
-- work. Also the non-raising router and the one-thread readiness the claim asks.
SELECT ember.define_category('health');
SELECT ember.create_thread('default', 'main', 'main', NULL, NULL, 'open', 'claude-haiku-4-5', '2026-12-01 09:00Z');
SELECT ember.create_thread('default', 'plain', 'side', NULL, NULL, 'open', NULL, '2026-12-01 09:00Z');
SELECT ember.create_thread('default', 'doc', 'side', NULL, 'health', 'open', NULL, '2026-12-01 09:00Z');
SELECT ember.create_thread('default', 'vault', 'side', NULL, NULL, 'isolated', NULL, '2026-12-01 09:00Z');
SELECT ember.append_message('default', 'main', 'user', 'before the steward', p_now => '2026-12-01 09:01Z');

SELECT is(ember.steward_has_work('2026-12-01 12:00Z'), false, 'no steward thread, no steward work');
SELECT ember.ensure_steward_thread('default', '2026-12-01 09:05Z');
SELECT is(ember.steward_has_work('2026-12-01 12:00Z'), false,
          'main''s rows from before the steward are not its work, however idle');
SELECT ember.append_message('default', 'vault', 'user', 'secret', p_now => '2026-12-01 09:06Z');
SELECT ember.append_message('default', 'doc', 'user', 'knee hurts', p_now => '2026-12-01 09:06Z');
SELECT is(ember.steward_has_work('2026-12-01 12:00Z'), false,
          'nor an isolated thread''s rows, nor rows the steward''s model is not tagged for');
SELECT ember.append_message('default', 'plain', 'user', 'I prefer tea.', p_now => '2026-12-01 09:10Z');
SELECT is(ember.steward_has_work('2026-12-01 09:20Z'), false, 'a thread active ten minutes ago is no work yet');
SELECT is(ember.steward_has_work('2026-12-01 09:31Z'), true, 'idle for idle_before_digest, it is');
SELECT isnt(ember.claim_steward_run('w', '5 minutes', '2026-12-01 09:31Z'), NULL, 'and a claim finds it');
SELECT ember.start_generation('default', 'plain', '2026-12-01 09:32Z');
SELECT ember.append_message('default', 'plain', 'user', 'and milk', p_now => '2026-12-01 09:33Z');
UPDATE ember.messages SET episode_id = gen_random_uuid() WHERE thread_id = 'plain' AND content = 'I prefer tea.';
SELECT is(ember.steward_has_work('2026-12-01 09:34Z'), false, 'digested rows are no work, and fresh ones not yet');
SELECT ember.start_generation('default', 'plain', '2026-12-01 09:35Z');
SELECT is(ember.steward_has_work('2026-12-01 09:36Z'), true, 'an ended generation with undigested rows is work at once');

SELECT results_eq(
    $$SELECT model, reason, missing FROM ember.route_model_or_reason('light', '{health}')$$,
    $$VALUES (NULL::text, 'category_model: no light model is tagged for {health}'::text, '{health}'::text[])$$,
    'route_model_or_reason answers NULL with the reason instead of raising'
);
SELECT throws_ok($$SELECT ember.route_model('light', '{health}')$$, 'EM022',
                 'category_model: no light model is tagged for {health}',
                 'route_model raises the same reason as category_model');
SELECT throws_ok($$SELECT ember.route_model_or_reason('light', NULL)$$, 'EM012', NULL,
                 'a caller''s lost categories still raise');

SELECT ember.shadow_activate('2026-12-01 09:00Z');
SELECT ember.append_message('default', 'plain', 'assistant', 'noted', p_now => '2026-12-01 09:40Z');
SELECT ember.turn_started('default', 'plain', '2026-12-01 09:41Z');
SELECT ember.task_ended('default', 'plain', '2026-12-01 09:42Z');
SELECT is((SELECT not_ready FROM ember.shadow_thread_readiness('default', 'plain', '2026-12-01 09:43Z')), 'a turn is running',
          'one thread''s readiness says why it is not ready');

SELECT * FROM finish();
ROLLBACK;
