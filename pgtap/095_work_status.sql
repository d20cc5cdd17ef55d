BEGIN;
SELECT plan(28);

-- T0 = 2026-03-01 12:00 UTC. Each thread is built to wait for one reason.
CREATE FUNCTION pg_temp.at(p_minutes numeric) RETURNS timestamptz
LANGUAGE sql AS $$ SELECT '2026-03-01 12:00+00'::timestamptz + p_minutes * interval '1 minute' $$;
-- The work_status row of a pipeline and reason at a time, as (items, oldest, until, detail).
CREATE FUNCTION pg_temp.status(p_pipeline text, p_reason text, p_minutes numeric)
RETURNS TABLE (items integer, oldest text, until timestamptz, detail text)
LANGUAGE sql AS $$
    SELECT s.items, s.oldest, s.until, s.detail FROM ember.work_status(pg_temp.at(p_minutes)) AS s
    WHERE s.pipeline = p_pipeline AND s.reason = p_reason
$$;
CREATE FUNCTION pg_temp.row_at(p_thread text, p_text text, p_minutes numeric) RETURNS bigint
LANGUAGE sql AS $$
    SELECT ember.append_message('default', p_thread, 'user', p_text, 'human', NULL, NULL, NULL, NULL, NULL, pg_temp.at(p_minutes))
$$;

-- Nothing set up: shadow was never activated, the steward's thread does not exist, no worker.
SELECT ember.create_thread('default', 'early', 'side', NULL, NULL, 'open', NULL, pg_temp.at(-70));
SELECT pg_temp.row_at('early', 'I prefer tea.', -60);
SELECT results_eq(
    $$SELECT items, oldest FROM pg_temp.status('shadow', 'shadow-not-activated', -59)$$,
    $$VALUES (1, 'early')$$,
    'rows waiting before shadow_activate() say that shadow was never activated');
SELECT results_eq(
    $$SELECT items, oldest FROM pg_temp.status('steward', 'steward-thread-missing', -59)$$,
    $$VALUES (1, 'early')$$,
    'and that the steward''s thread is missing');
SELECT alike((SELECT detail FROM pg_temp.status('steward', 'steward-thread-missing', -59)),
    '%ensure_steward_thread(tenant)%', 'naming the call that creates it');
SELECT is((SELECT items FROM pg_temp.status('workers', 'no-worker', -59)), 0, 'and that no worker is connected or seen');

-- The one-time set-up; main pinned to a model not tagged for health.
SELECT ember.define_category('health');
SELECT is((SELECT count(*)::int FROM ember.setup('default', '{}', 'main', 'claude-sonnet-4-6', true, pg_temp.at(-50)) WHERE changed),
    3, 'setup creates main and the steward''s thread, and activates shadow');
SELECT is((SELECT count(*)::int FROM ember.setup('default', '{}', 'main', 'claude-sonnet-4-6', true, pg_temp.at(-49)) WHERE changed),
    0, 'a second setup changes nothing');
SELECT is((SELECT count(*)::int FROM pg_temp.status('shadow', 'shadow-not-activated', -49)), 0,
    'once activated, that reason is gone');

-- held: claimed by worker w with a one-hour lease.
SELECT ember.create_thread('default', 'held', 'side', NULL, NULL, 'open', NULL, pg_temp.at(-46));
SELECT pg_temp.row_at('held', 'Call me Sam.', -45);
SELECT ember.task_ended('default', 'held', pg_temp.at(-45));
SELECT is(ember.claim_shadow_run('w', '1 hour', pg_temp.at(-44)) ->> 'thread_id', 'held', 'held is claimed');

-- hotty: a hot run whose host request carried no breakpoint on its last message.
SELECT ember.create_thread('default', 'hotty', 'side', NULL, NULL, 'open', NULL, pg_temp.at(-46));
SELECT pg_temp.row_at('hotty', 'Always book aisle seats.', -44);
SELECT ember.note_prefix('default', 'hotty',
    json_build_object(
        'model', 'claude-sonnet-4-6', 'max_tokens', 100,
        'system', json_build_array(json_build_object('type', 'text', 'text', repeat('system prompt ', 800),
                                                     'cache_control', json_build_object('type', 'ephemeral'))),
        'tools', json_build_array(json_build_object('name', 'shadow_memory_propose', 'input_schema', '{}'::json)),
        'messages', json_build_array(json_build_object('role', 'user', 'content', 'Always book aisle seats.'))
    )::text,
    '{"content":[{"type":"text","text":"Noted."}],"usage":{"input_tokens":500,"cache_read_input_tokens":0,"cache_creation_input_tokens":1600,"output_tokens":3}}',
    pg_temp.at(-43.5), pg_temp.at(-43.5));
SELECT ember.waiting_for_user('default', 'hotty', pg_temp.at(-43.4));
SELECT ember.claim_shadow_run('w', '5 minutes', pg_temp.at(-43)) AS hot \gset
SELECT is(:'hot'::jsonb ->> 'path', 'hot', 'hotty is claimed on the hot path');
SELECT results_eq(
    $$SELECT prefix_input_tokens::int, prefix_cache_marked FROM ember.shadow_runs WHERE thread_id = 'hotty'$$,
    $$VALUES (2100, false)$$,
    'the hot run records its prefix''s size from the host''s usage, and that its last message had no breakpoint');
SELECT ember.submit_shadow_run('default', (:'hot'::jsonb ->> 'run_id')::bigint, (:'hot'::jsonb ->> 'lease_token')::uuid,
    jsonb_build_object('status', 'completed', 'error', NULL,
        'usage', jsonb_build_object('input_tokens', 700, 'cache_read_input_tokens', 1600,
                                    'cache_creation_5m_input_tokens', 0, 'cache_creation_1h_input_tokens', 0,
                                    'output_tokens', 20),
        'latency_ms', 1000, 'finished_at', pg_temp.at(-42), 'proposals', '[]'::jsonb));
SELECT is(ember.hot_cache_shortfall('default', (:'hot'::jsonb ->> 'run_id')::bigint) ->> 'cause', 'no-breakpoint',
    'a hot run that read 76% of its prefix is a shortfall, caused by the missing breakpoint');

-- due: idle for 35 minutes, not yet offered by tick(). quiet: active 5 minutes ago.
SELECT ember.create_thread('default', 'due', 'side', NULL, NULL, 'open', NULL, pg_temp.at(-40));
SELECT pg_temp.row_at('due', 'I live in Porto.', -30);
SELECT ember.create_thread('default', 'quiet', 'side', NULL, NULL, 'open', NULL, pg_temp.at(-1));
SELECT pg_temp.row_at('quiet', 'Remember that I am vegetarian.', 0);
-- offered: its task ended. busy: a turn runs. care: a health chat no light model may read.
SELECT ember.create_thread('default', 'offered', 'side', NULL, NULL, 'open', NULL, pg_temp.at(-12));
SELECT pg_temp.row_at('offered', 'We decided to use Postgres.', -10);
SELECT ember.task_ended('default', 'offered', pg_temp.at(-10));
SELECT ember.create_thread('default', 'busy', 'side', NULL, NULL, 'open', NULL, pg_temp.at(-1));
SELECT ember.turn_started('default', 'busy', pg_temp.at(0));
SELECT pg_temp.row_at('busy', 'Never deploy on Fridays.', 0);
SELECT ember.task_ended('default', 'busy', pg_temp.at(0));
SELECT ember.create_thread('default', 'care', 'side', NULL, 'health', 'open', NULL, pg_temp.at(-12));
SELECT pg_temp.row_at('care', 'My knee hurts after running.', -10);
SELECT ember.task_ended('default', 'care', pg_temp.at(-10));
-- flaky: three failed runs in its generation, and a new offer.
SELECT ember.create_thread('default', 'flaky', 'side', NULL, NULL, 'open', NULL, pg_temp.at(-41));
SELECT pg_temp.row_at('flaky', 'I prefer email.', -40);
INSERT INTO ember.shadow_runs (thread_id, generation_id, path, model, status, error, from_seq, through_seq,
                               started_at, finished_at, worker, lease_token, lease_expires_at)
SELECT 'flaky', ember.current_generation('default', 'flaky'), 'cold', 'claude-haiku-4-5', 'failed', 'boom', 0, 0,
       pg_temp.at(-10 + i), pg_temp.at(-10 + i), 'w', gen_random_uuid(), pg_temp.at(i)
FROM generate_series(1, 3) AS i;
SELECT ember.task_ended('default', 'flaky', pg_temp.at(-5));

SELECT results_eq($$SELECT items, oldest, until FROM pg_temp.status('shadow', 'idle-not-reached', 5)$$,
    $$VALUES (1, 'quiet', pg_temp.at(20))$$, 'quiet: not idle long enough, and until when');
SELECT results_eq($$SELECT items, oldest FROM pg_temp.status('shadow', 'tick-due', 5)$$,
    $$VALUES (1, 'due')$$, 'due: idle long enough, offered at the next tick');
SELECT results_eq($$SELECT items, oldest FROM pg_temp.status('shadow', 'ready', 5)$$,
    $$VALUES (1, 'offered')$$, 'offered: ready now');
SELECT alike((SELECT detail FROM pg_temp.status('shadow', 'ready', 5)), 'cold path, model claude-haiku-4-5',
    'with its path and model');
SELECT results_eq($$SELECT items, oldest FROM pg_temp.status('shadow', 'turn-running', 5)$$,
    $$VALUES (1, 'busy')$$, 'busy: its turn is running');
SELECT results_eq($$SELECT items, oldest FROM pg_temp.status('shadow', 'model-not-tagged', 5)$$,
    $$VALUES (1, 'care')$$, 'care: waiting for a model tagged for health');
SELECT alike((SELECT detail FROM pg_temp.status('shadow', 'model-not-tagged', 5)), '%health%',
    'naming the label');
SELECT results_eq($$SELECT items, oldest, until FROM pg_temp.status('shadow', 'failure-backoff', 5)$$,
    $$VALUES (1, 'flaky', pg_temp.at(-7) + interval '6 hours')$$, 'flaky: in failure backoff until 6 hours after its last failure');
SELECT results_eq($$SELECT items, oldest, until FROM pg_temp.status('shadow', 'leased', 5)$$,
    $$VALUES (1, 'held', pg_temp.at(16))$$, 'held: leased by a worker until its lease expires');
SELECT results_eq($$SELECT items, oldest FROM pg_temp.status('shadow', 'lease-expired', 17)$$,
    $$VALUES (1, 'held')$$, 'and once the lease ran out, says that tick() will offer it again');
SELECT results_eq($$SELECT items, oldest FROM pg_temp.status('shadow', 'hot-cache-shortfall', 5)$$,
    $$VALUES (1, 'hotty')$$, 'the hot run that missed the cache is named');
SELECT alike((SELECT detail FROM pg_temp.status('shadow', 'hot-cache-shortfall', 5)), '%no cache breakpoint on its last message%',
    'with its likely cause');

-- The steward: what the next wake reads, what is not idle yet, what waits for a tagged model.
SELECT results_eq($$SELECT oldest FROM pg_temp.status('steward', 'ready', 5)$$,
    $$VALUES ('early')$$, 'the oldest generation the steward may read now');
SELECT results_eq($$SELECT min(until) FROM pg_temp.status('steward', 'idle-not-reached', 5)$$,
    $$VALUES (pg_temp.at(-10) + interval '20 minutes')$$, 'a generation not idle long enough, and until when');
SELECT results_eq($$SELECT oldest FROM pg_temp.status('steward', 'model-not-tagged', 5)$$,
    $$VALUES ('care')$$, 'a health chat the steward''s model may not read');
SELECT ember.claim_steward_run('w2', '10 minutes', pg_temp.at(6));
SELECT results_eq($$SELECT items, oldest, until FROM pg_temp.status('steward', 'leased', 7)$$,
    $$VALUES (1, 'memory-steward', pg_temp.at(16))$$, 'a running wake holds the steward until its lease expires');
SELECT results_eq(
    $$SELECT state, oldest FROM ember.work_status(pg_temp.at(7)) WHERE pipeline = 'workers' ORDER BY oldest$$,
    $$VALUES ('seen', 'w'), ('seen', 'w2')$$,
    'workers that claimed within status_window are seen, though not connected now');

SELECT * FROM finish();
ROLLBACK;
