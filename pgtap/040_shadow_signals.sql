BEGIN;
SELECT plan(34);

SELECT ember.create_thread('default', 'main', 'main');
SELECT ember.create_thread('default', 's1', 'side');
SELECT ember.create_thread('default', 's2', 'side');
SELECT ember.create_thread('default', 's3', 'side');
SELECT ember.create_thread('default', 'task1', 'task');
SELECT ember.create_thread('default', 'vault', 'side', NULL, NULL, 'isolated');
SELECT ember.ensure_steward_thread('default');
SELECT ember.shadow_activate();
SELECT ember.append_message('default', t, 'user', 'hello ' || t)
FROM unnest(ARRAY['main', 's1', 's2', 's3', 'task1', 'vault']) AS t;
SELECT ember.append_steward_record('default', 'user', 'hello memory-steward');

CREATE FUNCTION pg_temp.signals(p_thread text) RETURNS text[]
LANGUAGE sql AS $$
    SELECT coalesce(array_agg(reason || CASE WHEN deferred THEN ' (deferred)' ELSE '' END ORDER BY id), '{}')
    FROM ember.shadow_signals WHERE thread_id = p_thread
$$;
CREATE FUNCTION pg_temp.ready(p_thread text) RETURNS boolean
LANGUAGE sql AS $$ SELECT EXISTS (SELECT 1 FROM ember.shadow_ready() WHERE thread_id = p_thread) $$;

-- The entry point refuses what it does not know.
SELECT throws_ok($$SELECT ember.shadow_memory_changed('default', 's1', 'bored')$$, 'EM030',
                 'thread "s1": unknown shadow reason "bored"', 'an unknown reason is refused by name');
SELECT throws_ok($$SELECT ember.shadow_memory_changed('default', 's1', NULL)$$, 'EM030', NULL, 'a null reason is refused');
SELECT throws_ok($$SELECT ember.shadow_memory_changed('default', 'nope', 'task-ended')$$, 'EM001', NULL,
                 'an unknown thread is refused');
SELECT lives_ok($$SELECT ember.shadow_memory_changed('default', 's3', r) FROM unnest(ARRAY['idle-or-ended', 'task-ended',
                  'generation-ended', 'thread-active', 'thread-ended', 'thread-archived']) AS r$$,
                'every reason of the seed is accepted');
DELETE FROM ember.shadow_signals;

-- Threads shadow never reads take no offers.
SELECT is(ember.shadow_memory_changed('default', 'main', 'task-ended'), 'ignored', 'main takes no offers');
SELECT is(ember.shadow_memory_changed('default', 'vault', 'waiting-user'), 'ignored', 'an isolated thread takes no offers');
SELECT is(ember.shadow_memory_changed('default', 'memory-steward', 'task-ended'), 'ignored', 'the steward takes no offers');
SELECT is((SELECT count(*)::int FROM ember.shadow_signals), 0, 'ignored offers leave no rows');

-- Busy: an offer during a turn waits for the turn boundary.
SELECT ember.turn_started('default', 's1');
SELECT is(ember.task_ended('default', 's1'), 'deferred', 'an offer while a turn runs is deferred');
SELECT is(pg_temp.signals('s1'), ARRAY['task-ended (deferred)'], 'and kept as a deferred signal');
SELECT ok(NOT pg_temp.ready('s1'), 'a busy thread is not ready');
SELECT is(ember.turn_ended('default', 's1', true), 'drained', 'the turn boundary drains deferred offers');
SELECT is(pg_temp.signals('s1'), ARRAY['task-ended'], 'the drained offer now stands');
SELECT ok(pg_temp.ready('s1'), 'and the thread is ready after its turn');

-- A turn boundary alone is no work.
SELECT ember.turn_started('default', 's2');
SELECT is(ember.turn_ended('default', 's2', true), 'none', 'a turn boundary with nothing deferred reports none');
SELECT is(pg_temp.signals('s2'), '{}'::text[], 'a turn boundary alone creates no signal');
SELECT ok(NOT pg_temp.ready('s2'), 'a turn boundary alone makes nothing ready, even with unread rows');

-- A failed turn is an offer of its own, and it also drains.
SELECT ember.turn_started('default', 's2');
SELECT ember.shadow_memory_changed('default', 's2', 'idle-or-ended');
SELECT is(ember.turn_ended('default', 's2', false), 'pending', 'a failed turn is an offer at once');
SELECT is(pg_temp.signals('s2'), ARRAY['idle-or-ended', 'turn-failed'],
          'a failed turn drains the deferred offers and adds its own');

-- Waiting for the user: ready while the turn still runs.
SELECT ember.turn_started('default', 's3');
SELECT is(ember.waiting_for_user('default', 's3'), 'pending', 'waiting-user is never deferred');
SELECT ok(pg_temp.ready('s3'), 'a thread waiting for the user is ready while its turn runs');
SELECT is((SELECT turn_running FROM ember.shadow_thread_state WHERE thread_id = 's3'), true,
          'the turn is still running');
SELECT ember.waiting_for_user('default', 's3');
SELECT is(pg_temp.signals('s3'), ARRAY['waiting-user'], 'repeating a standing offer adds nothing');
SELECT is(ember.shadow_memory_changed('default', 's3', 'task-ended'), 'pending',
          'while the turn waits for the user, other offers stand too');

-- The core host calls report their reasons.
SELECT ember.start_generation('default', 'task1');
SELECT is(pg_temp.signals('task1'), ARRAY['generation-ended'], 'start_generation offers generation-ended');
SELECT ember.set_thread_status('default', 'task1', 'ended');
SELECT is(pg_temp.signals('task1'), ARRAY['generation-ended', 'thread-ended'],
          'set_thread_status offers thread-<status>');

-- note_prefix
SELECT is(ember.note_prefix('default', 'main', '{"model":"claude-haiku-4-5"}', '{}'), false, 'a prefix of main is ignored');
SELECT is(ember.note_prefix('default', 'vault', '{"model":"claude-haiku-4-5"}', '{}'), false,
          'a prefix of an isolated thread is ignored');
SELECT is((SELECT count(*)::int FROM ember.shadow_prefixes), 0, 'ignored prefixes are not stored');
SELECT is(
    ember.note_prefix('default', 's1', '{"model": "claude-sonnet-4-6", "tools": [{"name": "read"}, {"name": "shadow_memory_propose"}]}',
                      '{"content": []}', '2026-01-01 10:00+00'),
    true, 'a side thread''s prefix is stored');
SELECT results_eq(
    $$SELECT model, has_shadow_tool, estimated_tokens, request_started_at, generation_id FROM ember.shadow_prefixes
      WHERE thread_id = 's1'$$,
    $$SELECT 'claude-sonnet-4-6'::text, true, 24, '2026-01-01 10:00+00'::timestamptz, ember.current_generation('default', 's1')$$,
    'the prefix records its model, shadow tool, estimated tokens over the request text, start and generation');
SELECT ember.note_prefix('default', 's1', '{"model": "claude-sonnet-4-6", "tools": [{"name": "read"}]}', '{}');
SELECT is((SELECT has_shadow_tool FROM ember.shadow_prefixes WHERE thread_id = 's1'), false,
          'a request without the shadow tool is recorded as such, replacing the older prefix');
SELECT throws_ok($$SELECT ember.note_prefix('default', 's1', 'not json', '{}')$$, 'EM032', NULL,
                 'a request that is not JSON is refused');
SELECT throws_ok($$SELECT ember.note_prefix('default', 's1', '[1, 2]', '{}')$$, 'EM032', NULL,
                 'a request that is not a JSON object is refused');

SELECT * FROM finish();
ROLLBACK;
