BEGIN;
SELECT plan(8);

-- The write-path state (functions/080_write_state.sql) against a recomputation from scratch,
-- after a seeded random mix of appends (single and bulk), generations, status changes, offers,
-- claims, submits (completed and failed), human cancels, tick() and a late activation.

CREATE FUNCTION pg_temp.at(p_minutes numeric) RETURNS timestamptz
LANGUAGE sql AS $$ SELECT '2026-03-01 12:00+00'::timestamptz + p_minutes * interval '1 minute' $$;

-- The generations' figures as they were computed before the write path kept them.
CREATE FUNCTION pg_temp.recomputed_progress()
RETURNS TABLE (generation_id uuid, thread_id text, last_seq bigint, last_message_at timestamptz, read_seq bigint)
LANGUAGE sql AS $$
    SELECT m.generation_id, min(m.thread_id), max(m.seq), max(m.created_at),
           ember.shadow_read_position('default', min(m.thread_id), m.generation_id)
    FROM ember.messages AS m GROUP BY m.generation_id
$$;

-- tick's candidates as computed before, over every thread and every message.
CREATE FUNCTION pg_temp.recomputed_candidates(p_now timestamptz)
RETURNS TABLE (tenant_id text, thread_id text, condition text)
LANGUAGE sql AS $$
    SELECT
        t.tenant_id,
        t.id,
        CASE
            WHEN t.status <> 'active' THEN 'thread-' || t.status
            WHEN EXISTS (
                SELECT 1 FROM ember.generations AS g
                WHERE g.thread_id = t.id AND g.ended_at IS NOT NULL
                    AND (SELECT max(m.seq) FROM ember.messages AS m WHERE m.generation_id = g.id)
                    > ember.shadow_read_position('default', t.id, g.id)
            ) THEN 'generation-ended'
            WHEN st.seen_generation_id IS DISTINCT FROM cur.id AND st.seen_generation_id IS NOT NULL
                THEN 'generation-changed'
            WHEN greatest(
                st.last_activity_at,
                (SELECT max(m.created_at) FROM ember.messages AS m WHERE m.thread_id = t.id),
                t.created_at
            ) + ember.setting_interval('idle_before_digest') <= p_now THEN 'idle'
        END
    FROM ember.threads AS t
    LEFT JOIN ember.shadow_thread_state AS st ON st.thread_id = t.id
    LEFT JOIN ember.generations AS cur ON cur.thread_id = t.id AND cur.ended_at IS NULL
    WHERE EXISTS (SELECT 1 FROM ember.shadow_activation)
        AND NOT ember.shadow_excluded('default', t.id)
        AND NOT EXISTS (SELECT 1 FROM ember.shadow_signals AS s WHERE s.thread_id = t.id)
        AND NOT EXISTS (SELECT 1 FROM ember.shadow_runs AS r WHERE r.thread_id = t.id AND r.status = 'running')
        AND EXISTS (
            SELECT 1 FROM ember.generations AS g
            WHERE g.thread_id = t.id
                AND (SELECT max(m.seq) FROM ember.messages AS m WHERE m.generation_id = g.id)
                > ember.shadow_read_position('default', t.id, g.id)
        )
$$;

-- Threads whose remembered generation is not their open one: each must be listed for tick.
CREATE FUNCTION pg_temp.unrecorded_generation_changes()
RETURNS TABLE (thread_id text)
LANGUAGE sql AS $$
    SELECT t.id FROM ember.threads AS t
    INNER JOIN ember.generations AS g ON g.thread_id = t.id AND g.ended_at IS NULL
    LEFT JOIN ember.shadow_thread_state AS st ON st.thread_id = t.id
    WHERE NOT ember.shadow_excluded('default', t.id) AND st.seen_generation_id IS DISTINCT FROM g.id
    EXCEPT
    SELECT c.thread_id FROM ember.generation_changes AS c
$$;

CREATE TABLE pg_temp.mismatches (step integer, what text);

-- One random step at minute p_minute; checks the state after it.
CREATE FUNCTION pg_temp.step(p_step integer, p_minute numeric) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_thread text := 't' || (1 + floor(random() * 6))::int;
    v_now timestamptz := pg_temp.at(p_minute);
    v_dice double precision := random();
    v_plan jsonb;
    v_run ember.shadow_runs;
    v_status text;
BEGIN
    IF v_dice < 0.30 THEN
        PERFORM ember.append_message('default', v_thread, (ARRAY['assistant', 'event', 'user'])[1 + floor(random() * 3)::int],
            'row ' || p_step, CASE WHEN random() < 0.5 THEN 'agent' ELSE NULL END, NULL, NULL, NULL, NULL, NULL, v_now)
        FROM ember.threads WHERE id = v_thread AND status <> 'archived';
    ELSIF v_dice < 0.45 THEN
        PERFORM ember.append_messages('default', v_thread, json_build_array(
            json_build_object('role', 'assistant', 'content', 'bulk a ' || p_step),
            json_build_object('role', 'tool_result', 'content', 'bulk b', 'tool_status', 'ok',
                              'created_at', v_now - interval '30 seconds'),
            json_build_object('role', 'user', 'content', 'bulk c', 'author', 'main')
        ), v_now)
        FROM ember.threads WHERE id = v_thread AND status <> 'archived';
    ELSIF v_dice < 0.55 THEN
        PERFORM ember.start_generation('default', v_thread, v_now) FROM ember.threads WHERE id = v_thread AND status <> 'archived';
    ELSIF v_dice < 0.62 THEN
        PERFORM ember.set_thread_status('default', v_thread, (ARRAY['active', 'ended', 'archived', 'active'])[1 + floor(random() * 4)::int], v_now);
    ELSIF v_dice < 0.70 THEN
        PERFORM ember.shadow_memory_changed('default', v_thread, (ARRAY['task-ended', 'turn-failed', 'waiting-user'])[1 + floor(random() * 3)::int], v_now);
    ELSIF v_dice < 0.80 THEN
        v_plan := ember.claim_shadow_run('w', '60 minutes', v_now);
    ELSIF v_dice < 0.90 THEN
        SELECT * INTO v_run FROM ember.shadow_runs WHERE status = 'running' ORDER BY random() LIMIT 1;
        IF FOUND AND v_run.lease_expires_at > v_now THEN
            v_status := CASE WHEN random() < 0.75 THEN 'completed' ELSE 'failed' END;
            PERFORM ember.submit_shadow_run('default', v_run.id, v_run.lease_token, jsonb_build_object(
                'status', v_status,
                'error', CASE WHEN v_status = 'failed' THEN 'model error' END,
                'usage', jsonb_build_object('input_tokens', 1, 'cache_read_input_tokens', 0,
                    'cache_creation_5m_input_tokens', 0, 'cache_creation_1h_input_tokens', 0, 'output_tokens', 1),
                'latency_ms', 5, 'finished_at', v_now, 'proposals', '[]'::jsonb));
        END IF;
    ELSIF v_dice < 0.95 THEN
        PERFORM ember.append_message('default', v_thread, 'user', 'stop ' || p_step, NULL, NULL, NULL, NULL, NULL, NULL, v_now)
        FROM ember.threads WHERE id = v_thread AND status <> 'archived';
    ELSE
        PERFORM ember.tick(v_now);
    END IF;
    IF p_step = 40 THEN
        PERFORM ember.shadow_activate(v_now);
    END IF;

    INSERT INTO pg_temp.mismatches
    SELECT p_step, 'progress ' || x::text FROM (
        (SELECT * FROM pg_temp.recomputed_progress() EXCEPT SELECT generation_id, thread_id, last_seq, last_message_at, read_seq FROM ember.generation_progress)
        UNION ALL
        (SELECT generation_id, thread_id, last_seq, last_message_at, read_seq FROM ember.generation_progress EXCEPT SELECT * FROM pg_temp.recomputed_progress())
    ) AS x;
    INSERT INTO pg_temp.mismatches
    SELECT p_step, 'candidate ' || x::text FROM (
        (SELECT * FROM pg_temp.recomputed_candidates(v_now) EXCEPT SELECT * FROM ember.shadow_tick_candidates(v_now))
        UNION ALL
        (SELECT * FROM ember.shadow_tick_candidates(v_now) EXCEPT SELECT * FROM pg_temp.recomputed_candidates(v_now))
    ) AS x;
    INSERT INTO pg_temp.mismatches
    SELECT p_step, 'generation change not listed for ' || u.thread_id FROM pg_temp.unrecorded_generation_changes() AS u;
END;
$$;

SELECT ember.create_thread('default', 'main', 'main', p_now => pg_temp.at(0));
SELECT ember.create_thread('default', 't' || i, CASE WHEN i = 6 THEN 'task' ELSE 'side' END, p_now => pg_temp.at(0)) FROM generate_series(1, 6) AS i;
SELECT ember.append_message('default', 't1', 'assistant', 'history before activation', NULL, NULL, NULL, NULL, NULL, NULL, pg_temp.at(0));

SELECT setseed(0.13);
SELECT pg_temp.step(i, i * 3) FROM generate_series(1, 400) AS i;

SELECT is_empty($$SELECT * FROM pg_temp.mismatches ORDER BY step LIMIT 5$$,
                'after every step the maintained state equals its recomputation');
SELECT results_eq(
    $$SELECT generation_id, thread_id, last_seq, last_message_at, read_seq FROM ember.generation_progress ORDER BY generation_id$$,
    $$SELECT * FROM pg_temp.recomputed_progress() ORDER BY generation_id$$,
    'generation_progress equals a recomputation from messages, cursors and runs, row by row'
);
SELECT ok((SELECT count(*) FROM ember.shadow_runs WHERE status = 'completed') > 5, 'the mix completed runs');
SELECT ok((SELECT count(*) FROM ember.shadow_runs WHERE status IN ('failed', 'cancelled')) > 0
          OR (SELECT count(*) FROM ember.shadow_runs WHERE cancel_requested) > 0, 'and failed or cancelled some');
SELECT ok((SELECT count(*) FROM ember.generations) > 20, 'and started generations');
SELECT ok((SELECT count(*) FROM ember.messages WHERE content LIKE 'bulk%') > 20, 'and appended in bulk');
SELECT ok((SELECT count(*) FROM ember.generation_progress WHERE last_seq > read_seq) > 0
          AND (SELECT count(*) FROM ember.generation_progress WHERE last_seq <= read_seq) > 0,
          'and ends with both read and unread generations');

-- A thread with several unread ended generations is read one generation per claim, with no tick
-- in between: the completion of each run offers the thread again.
SELECT ember.create_thread('default', 'sessions', 'side', p_now => pg_temp.at(1900));
SELECT ember.append_message('default', 'sessions', 'assistant', 'session ' || i, NULL, NULL, NULL, NULL, NULL, NULL, pg_temp.at(2000 + i))
       || ember.start_generation('default', 'sessions', pg_temp.at(2000 + i))::text
FROM generate_series(1, 5) AS i;
SELECT ember.shadow_memory_changed('default', 'sessions', 'generation-ended', pg_temp.at(2010));
CREATE FUNCTION pg_temp.drain() RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    v_plan jsonb;
    v_minute integer := 2020;
    v_claims integer := 0;
BEGIN
    -- Other threads of the mix may be ready too: their runs are submitted alike, not counted.
    LOOP
        v_minute := v_minute + 1;
        SELECT p INTO v_plan FROM ember.claim_shadow_run('w', '10 minutes', pg_temp.at(v_minute)) AS p;
        EXIT WHEN v_plan IS NULL;
        IF v_plan ->> 'thread_id' = 'sessions' THEN
            v_claims := v_claims + 1;
        END IF;
        PERFORM ember.submit_shadow_run('default', (v_plan ->> 'run_id')::bigint, (v_plan ->> 'lease_token')::uuid, jsonb_build_object(
            'status', 'completed', 'error', NULL,
            'usage', jsonb_build_object('input_tokens', 1, 'cache_read_input_tokens', 0,
                'cache_creation_5m_input_tokens', 0, 'cache_creation_1h_input_tokens', 0, 'output_tokens', 1),
            'latency_ms', 5, 'finished_at', pg_temp.at(v_minute), 'proposals', '[]'::jsonb));
    END LOOP;
    RETURN v_claims;
END;
$$;
SELECT is(pg_temp.drain(), 5, 'five unread sessions are drained by five consecutive claims without a tick');

SELECT * FROM finish();
ROLLBACK;
