BEGIN;
SELECT plan(20);

-- T0 = 2026-03-01 12:00 UTC.
CREATE FUNCTION pg_temp.at(p_minutes numeric) RETURNS timestamptz
LANGUAGE sql AS $$ SELECT '2026-03-01 12:00+00'::timestamptz + p_minutes * interval '1 minute' $$;
CREATE FUNCTION pg_temp.say(p_thread text, p_minutes numeric) RETURNS bigint
LANGUAGE sql AS $$
    SELECT ember.append_message('default', p_thread, 'assistant', 'row at ' || p_minutes, NULL, NULL, NULL, NULL, NULL, NULL,
                                pg_temp.at(p_minutes))
$$;
CREATE FUNCTION pg_temp.prefix(p_thread text, p_model text, p_minutes numeric) RETURNS boolean
LANGUAGE sql AS $$
    SELECT ember.note_prefix('default', p_thread, format('{"model": "%s"}', p_model), '{}', pg_temp.at(p_minutes), pg_temp.at(p_minutes))
$$;

SELECT ember.create_thread('default', 'main', 'main', NULL, NULL, 'open', NULL, pg_temp.at(-60));
SELECT ember.create_thread('default', 'vault', 'side', NULL, NULL, 'isolated', NULL, pg_temp.at(-60));
SELECT ember.create_thread('default', 'idle', 'side', NULL, NULL, 'open', NULL, pg_temp.at(-60));
SELECT ember.create_thread('default', 'fresh', 'side', NULL, NULL, 'open', NULL, pg_temp.at(-60));
SELECT ember.create_thread('default', 'caught_up', 'side', NULL, NULL, 'open', NULL, pg_temp.at(-60));

SELECT pg_temp.say(t, 0) FROM unnest(ARRAY['main', 'vault', 'idle', 'caught_up']) AS t;
SELECT is(ember.tick(pg_temp.at(30)) -> 'signalled', '{}'::jsonb, 'before activation tick offers nothing');
SELECT ember.shadow_activate(pg_temp.at(-30));
SELECT pg_temp.say(t, 0) FROM unnest(ARRAY['main', 'vault', 'idle', 'fresh']) AS t;
SELECT pg_temp.say('fresh', 10);

-- Prefixes
SELECT pg_temp.prefix('idle', 'claude-sonnet-4-6', 0);
SELECT pg_temp.prefix('fresh', 'claude-sonnet-4-6', 10);
SELECT pg_temp.prefix('caught_up', 'gpt-0', 10);
UPDATE ember.models SET cache_ttl = '1 hour' WHERE id = 'claude-opus-4-8';
SELECT ember.create_thread('default', 'long_ttl', 'side', NULL, NULL, 'open', NULL, pg_temp.at(-60));
SELECT pg_temp.prefix('long_ttl', 'claude-opus-4-8', 0);

SELECT ember.tick(pg_temp.at(12)) AS t1 \gset
SELECT is(:'t1'::jsonb -> 'prefixes_dropped', '{"default": ["caught_up", "idle"]}'::jsonb,
          'tick drops prefixes older than their model''s TTL, and those of unknown models');
SELECT is((SELECT array_agg(thread_id ORDER BY thread_id) FROM ember.shadow_prefixes), ARRAY['fresh', 'long_ttl'],
          'a prefix within its TTL stays (the TTL is per model)');

-- Idle
SELECT is(:'t1'::jsonb -> 'signalled', '{}'::jsonb, 'no thread has been idle for 20 minutes yet');
SELECT ember.tick(pg_temp.at(20)) AS t2 \gset
SELECT is(:'t2'::jsonb -> 'signalled', '{"default": {"idle": "idle"}}'::jsonb,
          'a thread idle for 20 minutes with unread rows is offered idle-or-ended');
SELECT is((SELECT array_agg(reason) FROM ember.shadow_signals WHERE thread_id = 'idle'), ARRAY['idle-or-ended'],
          'through the entry point, as an idle-or-ended signal');
SELECT is((:'t2'::jsonb ->> 'ready')::int, 1, 'tick reports how many threads are ready');
SELECT ok(NOT (:'t2'::jsonb -> 'signalled' -> 'default') ? 'caught_up',
          'an idle thread with nothing unread is not offered');
SELECT is(ember.tick(pg_temp.at(25)) -> 'signalled', '{}'::jsonb,
          'idleness counts from the thread''s last activity (fresh spoke at minute 10)');
SELECT is(ember.tick(pg_temp.at(30)) -> 'signalled', '{"default": {"fresh": "idle"}}'::jsonb,
          'and it is offered 20 minutes after that');
SELECT is(ember.tick(pg_temp.at(31)) -> 'signalled', '{}'::jsonb,
          'a thread is not offered again while its offer stands');
SELECT ember.claim_shadow_run('w', '5 minutes', pg_temp.at(32)) ->> 'run_id' AS run_idle \gset
UPDATE ember.shadow_runs SET status = 'completed', finished_at = pg_temp.at(33) WHERE id = :run_idle;
SELECT ok(NOT coalesce(ember.tick(pg_temp.at(34)) -> 'signalled' -> 'default', '{}') ? 'idle',
          'once shadow has read the thread, tick stops offering it');
SELECT ok((SELECT count(*) = 0 FROM ember.shadow_signals WHERE thread_id IN ('main', 'vault')),
          'main and isolated threads are never offered');

-- Abandoned leases
SELECT ember.claim_shadow_run('w', '5 minutes', pg_temp.at(35)) ->> 'run_id' AS run_fresh \gset
SELECT pg_temp.say('fresh', 38);  -- not idle when the lease lapses: only the abandonment offers it again
SELECT is(ember.tick(pg_temp.at(39)) -> 'runs_abandoned', '[]'::jsonb, 'a run within its lease is left alone');
SELECT is(ember.tick(pg_temp.at(40)) -> 'runs_abandoned', jsonb_build_array(:run_fresh),
          'a run whose lease expired is abandoned');
SELECT results_eq(format('SELECT status, finished_at FROM ember.shadow_runs WHERE id = %s', :run_fresh),
                  $$SELECT 'abandoned'::text, pg_temp.at(40)$$, 'marked abandoned when tick saw it');
SELECT ok(EXISTS (SELECT 1 FROM ember.shadow_ready(pg_temp.at(40)) WHERE thread_id = 'fresh'),
          'and its thread is ready again');

-- Generation ended, generation changed, no longer active.
SELECT ember.create_thread('default', 'gen', 'task', NULL, NULL, 'open', NULL, pg_temp.at(50));
SELECT pg_temp.say('gen', 50);
SELECT ember.start_generation('default', 'gen', pg_temp.at(51));
DELETE FROM ember.shadow_signals WHERE thread_id = 'gen';
SELECT is(ember.tick(pg_temp.at(52)) -> 'signalled' -> 'default' -> 'gen', '"generation-ended"'::jsonb,
          'a thread with unread rows in an ended generation is offered at once');
DELETE FROM ember.shadow_signals WHERE thread_id = 'gen';
INSERT INTO ember.shadow_runs (thread_id, generation_id, path, model, status, from_seq, through_seq,
                               started_at, finished_at, worker, lease_token, lease_expires_at)
SELECT 'gen', id, 'cold', 'claude-haiku-4-5', 'completed', 0, 1000000, pg_temp.at(52), pg_temp.at(52), 'w',
       gen_random_uuid(), pg_temp.at(52)
FROM ember.generations WHERE thread_id = 'gen' AND ordinal = 1;
SELECT ember.tick(pg_temp.at(53));
SELECT ember.start_generation('default', 'gen', pg_temp.at(54));
SELECT pg_temp.say('gen', 54);
DELETE FROM ember.shadow_signals WHERE thread_id = 'gen';
SELECT is(ember.tick(pg_temp.at(55)) -> 'signalled' -> 'default' -> 'gen', '"generation-changed"'::jsonb,
          'a thread whose generation changed since the last tick is offered');
DELETE FROM ember.shadow_signals WHERE thread_id = 'gen';
SELECT ember.set_thread_status('default', 'gen', 'ended', pg_temp.at(56));
DELETE FROM ember.shadow_signals WHERE thread_id = 'gen';
SELECT is(ember.tick(pg_temp.at(57)) -> 'signalled' -> 'default' -> 'gen', '"thread-ended"'::jsonb,
          'a thread that is no longer active is offered');

SELECT * FROM finish();
ROLLBACK;
