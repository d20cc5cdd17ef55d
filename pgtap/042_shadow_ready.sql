BEGIN;
SELECT plan(28);

-- T0 = 2026-03-01 12:00 UTC; every call passes its time.
SELECT ember.define_category('health');
SELECT ember.define_category('finance');
SELECT ember.create_thread('default', 'main', 'main');
SELECT ember.create_thread('default', 'vault', 'side', NULL, NULL, 'isolated');
SELECT ember.ensure_steward_thread('default');
SELECT ember.create_thread('default', 'h', 'side', NULL, NULL, 'open', 'claude-sonnet-4-6', '2026-03-01 11:00+00');
SELECT ember.shadow_activate('2026-03-01 11:00+00');

CREATE FUNCTION pg_temp.req(p_model text, p_tool boolean, p_chars integer) RETURNS text
LANGUAGE sql AS $$
    SELECT format('{"model": "%s", "system": "%s", "tools": [%s], "messages": []}', p_model, repeat('s', p_chars),
                  CASE WHEN p_tool THEN '{"name": "read"}, {"name": "shadow_memory_propose", "input_schema": {}}'
                       ELSE '{"name": "read"}' END)
$$;
CREATE FUNCTION pg_temp.at(p_minutes numeric) RETURNS timestamptz
LANGUAGE sql AS $$ SELECT '2026-03-01 12:00+00'::timestamptz + p_minutes * interval '1 minute' $$;
CREATE FUNCTION pg_temp.path(p_thread text, p_minutes numeric) RETURNS text
LANGUAGE sql AS $$
    SELECT path || ' ' || coalesce(model, 'none') FROM ember.shadow_ready(pg_temp.at(p_minutes)) WHERE thread_id = p_thread
$$;
-- A thread with unread rows and a standing offer.
CREATE FUNCTION pg_temp.offer(p_thread text) RETURNS void
LANGUAGE sql AS $$
    SELECT ember.append_message('default', p_thread, 'assistant', 'something worth remembering', NULL, NULL, NULL, NULL, NULL,
                                NULL, pg_temp.at(0));
    SELECT ember.shadow_memory_changed('default', p_thread, 'task-ended', pg_temp.at(0));
$$;

-- Hot path: a prefix of the current generation, younger than the TTL, with the tool, long enough.
SELECT pg_temp.offer('h');
SELECT ember.note_prefix('default', 'h', pg_temp.req('claude-sonnet-4-6', true, 9000), '{"content": []}', pg_temp.at(0));
SELECT is(pg_temp.path('h', 1), 'hot claude-sonnet-4-6', 'a warm, long prefix with the shadow tool is hot, on its own model');
SELECT is(pg_temp.path('h', 4.9), 'hot claude-sonnet-4-6', 'still hot just before the TTL');
SELECT is(pg_temp.path('h', 5), 'cold claude-haiku-4-5', 'cold once the TTL has passed, on the light model');
SELECT ember.note_prefix('default', 'h', pg_temp.req('claude-sonnet-4-6', true, 9000), '{"content": []}', pg_temp.at(-4));
SELECT is(pg_temp.path('h', 1.5), 'cold claude-haiku-4-5',
          'the TTL counts from the original request''s start, not from when the prefix was noted');
SELECT ember.note_prefix('default', 'h', pg_temp.req('claude-sonnet-4-6', false, 9000), '{"content": []}', pg_temp.at(0));
SELECT is(pg_temp.path('h', 1), 'cold claude-haiku-4-5', 'a prefix without the shadow tool is cold');
SELECT ember.note_prefix('default', 'h', pg_temp.req('claude-sonnet-4-6', true, 3900), '{"content": []}', pg_temp.at(0));
SELECT is(pg_temp.path('h', 1), 'cold claude-haiku-4-5',
          'a prefix shorter than the model''s minimum cacheable length is cold');
SELECT ember.note_prefix('default', 'h', pg_temp.req('claude-haiku-4-5', true, 5000), '{"content": []}', pg_temp.at(0));
SELECT is(pg_temp.path('h', 1), 'cold claude-haiku-4-5',
          'the minimum is the prefix model''s own (haiku needs 4,096 tokens)');
SELECT ember.note_prefix('default', 'h', pg_temp.req('claude-haiku-4-5', true, 17000), '{"content": []}', pg_temp.at(0));
SELECT is(pg_temp.path('h', 1), 'hot claude-haiku-4-5', 'a haiku prefix above its minimum is hot');
SELECT ember.note_prefix('default', 'h', pg_temp.req('gpt-0', true, 20000), '{"content": []}', pg_temp.at(0));
SELECT is(pg_temp.path('h', 1), 'cold claude-haiku-4-5', 'a prefix of a model not in the registry is cold');
UPDATE ember.models SET cache_ttl = '1 hour' WHERE id = 'claude-sonnet-4-6';
SELECT ember.note_prefix('default', 'h', pg_temp.req('claude-sonnet-4-6', true, 9000), '{"content": []}', pg_temp.at(0));
SELECT is(pg_temp.path('h', 30), 'hot claude-sonnet-4-6', 'the TTL is the model''s configured cache_ttl');
UPDATE ember.models SET cache_ttl = '5 minutes' WHERE id = 'claude-sonnet-4-6';
SELECT ember.start_generation('default', 'h', pg_temp.at(0));
SELECT pg_temp.offer('h');
INSERT INTO ember.shadow_runs (thread_id, generation_id, path, model, status, from_seq, through_seq,
                               started_at, finished_at, worker, lease_token, lease_expires_at)
SELECT 'h', g.id, 'cold', 'claude-haiku-4-5', 'completed', 0, 1000000, now(), now(), 'w', gen_random_uuid(), now()
FROM ember.generations AS g WHERE g.thread_id = 'h' AND g.ordinal = 1;
SELECT is((SELECT g.ordinal FROM ember.shadow_ready(pg_temp.at(1)) AS r JOIN ember.generations AS g ON g.id = r.generation_id
           WHERE r.thread_id = 'h'), 2, 'the new generation is the one to read');
SELECT is(pg_temp.path('h', 1), 'cold claude-haiku-4-5', 'a prefix of an earlier generation is cold');

-- What ready returns: the reasons and the unread range.
SELECT ember.create_thread('default', 'r', 'task');
SELECT ember.append_message('default', 'r', 'user', 'first') AS first_id \gset
SELECT ember.append_message('default', 'r', 'assistant', 'second') AS second_id \gset
SELECT ember.shadow_memory_changed('default', 'r', 'task-ended', pg_temp.at(0));
SELECT ember.shadow_memory_changed('default', 'r', 'thread-ended', pg_temp.at(1));
SELECT results_eq(
    $$SELECT reasons, from_seq, through_seq FROM ember.shadow_ready(pg_temp.at(2)) WHERE thread_id = 'r'$$,
    format($$SELECT ARRAY['task-ended', 'thread-ended'], 0::bigint, (SELECT seq FROM ember.messages WHERE id = %s)$$,
           :second_id),
    'a ready row names its reasons and the unread range (from_seq exclusive, through_seq inclusive)');

-- Not ready.
SELECT ember.create_thread('default', 'quiet', 'side');
SELECT ember.append_message('default', 'quiet', 'assistant', 'unread but unoffered');
SELECT ok(NOT EXISTS (SELECT 1 FROM ember.shadow_ready(pg_temp.at(1)) WHERE thread_id = 'quiet'),
          'unread rows without an offer are not ready');
SELECT ember.create_thread('default', 'read', 'side');
SELECT ember.shadow_memory_changed('default', 'read', 'task-ended', pg_temp.at(0));
SELECT ok(NOT EXISTS (SELECT 1 FROM ember.shadow_ready(pg_temp.at(1)) WHERE thread_id = 'read'),
          'an offer without unread rows is not ready');
INSERT INTO ember.shadow_signals (thread_id, reason, created_at)
SELECT t, 'task-ended', pg_temp.at(0) FROM unnest(ARRAY['main', 'vault', 'memory-steward']) AS t;
SELECT ember.append_message('default', t, 'assistant', 'x') FROM unnest(ARRAY['main', 'vault']) AS t;
SELECT ember.append_steward_record('default', 'assistant', 'x');
SELECT is((SELECT count(*)::int FROM ember.shadow_ready(pg_temp.at(1)) WHERE thread_id IN ('main', 'vault', 'memory-steward')),
          0, 'main, isolated and steward threads are never ready, even with a stray offer');
SELECT pg_temp.offer('r');
INSERT INTO ember.shadow_runs (thread_id, generation_id, path, model, from_seq, through_seq,
                               started_at, worker, lease_token, lease_expires_at)
VALUES ('r', ember.current_generation('default', 'r'), 'cold', 'claude-haiku-4-5', 0, 1, pg_temp.at(0), 'w',
        gen_random_uuid(), pg_temp.at(10));
SELECT ok(NOT EXISTS (SELECT 1 FROM ember.shadow_ready(pg_temp.at(1)) WHERE thread_id = 'r'),
          'a thread with a running run is not ready');

-- Busy and waiting.
SELECT ember.create_thread('default', 'w', 'side');
SELECT pg_temp.offer('w');
SELECT ember.turn_started('default', 'w', pg_temp.at(1));
SELECT ok(NOT EXISTS (SELECT 1 FROM ember.shadow_ready(pg_temp.at(1)) WHERE thread_id = 'w'),
          'a thread whose turn runs is not ready, even with a standing offer');
SELECT ember.waiting_for_user('default', 'w', pg_temp.at(2));
SELECT ok(EXISTS (SELECT 1 FROM ember.shadow_ready(pg_temp.at(2)) WHERE thread_id = 'w'),
          'waiting-user is ready while the turn runs');
SELECT ember.create_thread('default', 'tb', 'side');
SELECT ember.append_message('default', 'tb', 'assistant', 'unread');
SELECT ember.turn_started('default', 'tb', pg_temp.at(0));
SELECT ember.turn_ended('default', 'tb', true, pg_temp.at(1));
SELECT ok(NOT EXISTS (SELECT 1 FROM ember.shadow_ready(pg_temp.at(1)) WHERE thread_id = 'tb'),
          'turn-boundary alone creates no work');

-- Routing (seed section 3): light lists an untagged model first; a category thread routes to the tagged one.
INSERT INTO ember.models (id, position, tier, min_cacheable_tokens, thinking_retention, price_as_of,
                          price_input, price_output, price_cache_write_5m, price_cache_write_1h, price_cache_read)
VALUES ('light-untagged', 5, 'light', 1024, 'all', '2026-11-30', 0.5, 2.5, 0.625, 1, 0.05);
UPDATE ember.models SET tags = '{health}' WHERE id = 'claude-haiku-4-5';
SELECT ember.create_thread('default', 'plain', 'side');
SELECT ember.create_thread('default', 'doctor', 'side', NULL, 'health');
SELECT ember.create_thread('default', 'bank', 'side', NULL, 'finance');
SELECT pg_temp.offer(t) FROM unnest(ARRAY['plain', 'doctor', 'bank']) AS t;
SELECT is(pg_temp.path('plain', 1), 'cold light-untagged', 'an unlabelled thread takes the first light model');
SELECT is(pg_temp.path('doctor', 1), 'cold claude-haiku-4-5',
          'a category thread goes to the light model tagged for it, not the first one listed');
SELECT is(pg_temp.path('bank', 1), 'cold none', 'with no light model tagged for its category the work has no model');
SELECT alike((SELECT waiting_for FROM ember.shadow_ready(pg_temp.at(1)) WHERE thread_id = 'bank'), '%finance%',
            'and says what it waits for');
SELECT is((SELECT count(*)::int FROM ember.shadow_ready(pg_temp.at(1)) WHERE thread_id IN ('plain', 'doctor')), 2,
          'a waiting thread does not stop the others');

-- The hot path replays to the prefix's model: only when that model may read the generation's labels.
SELECT ember.note_prefix('default', 'doctor', pg_temp.req('claude-sonnet-4-6', true, 9000), '{"content": []}', pg_temp.at(0));
SELECT is(pg_temp.path('doctor', 1), 'cold claude-haiku-4-5',
          'a warm prefix on a model not tagged for the thread''s category is not replayed: cold, on a tagged model');
SELECT ember.note_prefix('default', 'bank', pg_temp.req('claude-sonnet-4-6', true, 9000), '{"content": []}', pg_temp.at(0));
SELECT is(pg_temp.path('bank', 1), 'cold none', 'and with no tagged light model either, the work waits');
UPDATE ember.models SET tags = '{health}' WHERE id = 'claude-sonnet-4-6';
SELECT is(pg_temp.path('doctor', 1), 'hot claude-sonnet-4-6', 'once the prefix''s model is tagged, it is hot again');

SELECT * FROM finish();
ROLLBACK;
