BEGIN;
SELECT plan(6);
SET LOCAL client_min_messages = warning;

-- Idle time is the thread's own (seed 000 sections 3 and 4: idle for 20 minutes since the
-- thread's last activity). An imported history whose rows are two days old is digested at the
-- next ticks, generation after generation; tick's own signals are not activity, so the state row
-- they create does not restart the thread's idle clock at the moment tick looked.

-- T0 = 2026-03-01 12:00 UTC; the history is from two days before.
CREATE FUNCTION pg_temp.at(p_minutes numeric) RETURNS timestamptz
LANGUAGE sql AS $$ SELECT '2026-03-01 12:00+00'::timestamptz + p_minutes * interval '1 minute' $$;

CREATE FUNCTION pg_temp.message(p_line integer, p_generation integer, p_role text, p_at text)
RETURNS text LANGUAGE sql AS $$
    SELECT json_build_object(
        'type', 'message', 'thread', 'hist', 'generation', p_generation, 'role', p_role,
        'content', 'line ' || p_line, 'created_at', p_at
    )::text
$$;

CREATE FUNCTION pg_temp.complete(p_plan jsonb, p_finished timestamptz) RETURNS jsonb
LANGUAGE sql AS $$
    SELECT ember.submit_shadow_run('default', 
        (p_plan ->> 'run_id')::bigint, (p_plan ->> 'lease_token')::uuid,
        jsonb_build_object(
            'status', 'completed', 'error', NULL, 'latency_ms', 100, 'finished_at', p_finished,
            'usage', jsonb_build_object(
                'input_tokens', 100, 'cache_read_input_tokens', 0, 'cache_creation_5m_input_tokens', 0,
                'cache_creation_1h_input_tokens', 0, 'output_tokens', 10
            ),
            'proposals', '[]'::jsonb
        )
    )
$$;

SELECT ember.shadow_activate(pg_temp.at(-10000));

-- Through the import's own path (functions/083_import.sql): two generations, the first ended.
CREATE TEMP TABLE import_lines (lineno integer PRIMARY KEY, line text NOT NULL) ON COMMIT DROP;
INSERT INTO import_lines VALUES
(2, '{"type": "thread", "id": "hist", "kind": "side", "created_at": "2026-02-27T12:00:00Z"}'),
(3, '{"type": "generation", "thread": "hist", "ordinal": 1, "started_at": "2026-02-27T12:00:00Z", "ended_at": "2026-02-27T13:00:00Z"}'),
(4, '{"type": "generation", "thread": "hist", "ordinal": 2, "started_at": "2026-02-27T13:00:00Z"}'),
(5, pg_temp.message(5, 1, 'user', '2026-02-27T12:01:00Z')),
(6, pg_temp.message(6, 1, 'assistant', '2026-02-27T12:02:00Z')),
(7, pg_temp.message(7, 2, 'user', '2026-02-27T13:01:00Z')),
(8, pg_temp.message(8, 2, 'assistant', '2026-02-27T13:02:00Z'));
SELECT is(ember.import_staged() ->> 'messages', '4', 'the two-day-old history is imported');

SELECT is(ember.tick(pg_temp.at(0)) -> 'signalled', '{"default": {"hist": "generation-ended"}}'::jsonb,
          'the first tick offers the ended generation');
SELECT ok((SELECT st.last_activity_at <= '2026-02-27T13:02:00Z' FROM ember.shadow_thread_state AS st
           WHERE st.thread_id = 'hist'),
          'the state row tick''s signal creates starts from the thread''s history, not from the tick');

SELECT ember.claim_shadow_run('w', '5 minutes', pg_temp.at(1)) AS plan1 \gset
SELECT is(pg_temp.complete(:'plan1'::jsonb, pg_temp.at(2)) ->> 'status', 'completed',
          'a run reads the ended generation');

SELECT is(ember.tick(pg_temp.at(3)) -> 'signalled', '{"default": {"hist": "idle"}}'::jsonb,
          'the open generation, whose last row is two days old, is idle at the next tick, not 20 minutes after the first');

-- A host signal that is activity still counts from when it happened.
SELECT ember.create_thread('default', 'live', 'side', NULL, NULL, 'open', NULL, pg_temp.at(-60));
SELECT ember.append_message('default', 'live', 'assistant', 'hello', p_now => pg_temp.at(-50));
SELECT ember.waiting_for_user('default', 'live', pg_temp.at(5));
SELECT is((SELECT st.last_activity_at FROM ember.shadow_thread_state AS st WHERE st.thread_id = 'live'),
          pg_temp.at(5), 'a thread waiting for the user is active as of the signal');

SELECT * FROM finish();
ROLLBACK;
