BEGIN;
SELECT plan(9);

SELECT ember.create_thread('default', 'main', 'main', NULL, NULL, 'open', 'claude-haiku-4-5');
SELECT ember.set_thread_model('default', 'main', 'claude-haiku-4-5', 'low');

SELECT is(ember.ensure_steward_thread('default'), 'memory-steward', 'the steward thread is created');
SELECT is((SELECT kind || '/' || seal_tier || '/' || hidden FROM ember.threads WHERE id = 'memory-steward'),
          'steward/open/true', 'kind steward, open, hidden');
SELECT is((SELECT origin FROM ember.threads WHERE id = 'memory-steward'),
          '{"system": "memory-steward"}'::jsonb, 'origin names the system');
SELECT is((SELECT model || '/' || thinking_level FROM ember.threads WHERE id = 'memory-steward'),
          'claude-haiku-4-5/low', 'main''s pin and thinking level are copied');

SELECT ember.set_thread_model('default', 'main', 'claude-opus-4-8', 'high');
SELECT is((SELECT model || '/' || thinking_level FROM ember.threads WHERE id = 'memory-steward'),
          'claude-haiku-4-5/low', 'switching main to a frontier model leaves the steward''s pin unchanged');

SELECT is(ember.ensure_steward_thread('default'), 'memory-steward', 'a second call returns the same thread');
SELECT is((SELECT count(*)::int FROM ember.threads WHERE kind = 'steward'), 1, 'and creates nothing');
SELECT is((SELECT count(*)::int FROM ember.generations WHERE thread_id = 'memory-steward'), 1,
          'not even a generation');
SELECT is((SELECT model || '/' || thinking_level FROM ember.threads WHERE id = 'memory-steward'),
          'claude-haiku-4-5/low', 'nor re-copies main''s new pin');

SELECT * FROM finish();
ROLLBACK;
