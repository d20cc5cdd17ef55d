BEGIN;
SELECT plan(19);

-- T0 = 2026-03-01 12:00 UTC.
CREATE FUNCTION pg_temp.at(p_minutes numeric) RETURNS timestamptz
LANGUAGE sql AS $$ SELECT '2026-03-01 12:00+00'::timestamptz + p_minutes * interval '1 minute' $$;
-- One offer: a failed turn offers the thread, a worker claims it, the model call fails.
-- Returns the run id, or NULL when nothing was claimed.
CREATE FUNCTION pg_temp.failing_offer(p_thread text, p_minutes numeric) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_plan jsonb;
BEGIN
    PERFORM ember.shadow_memory_changed('default', p_thread, 'turn-failed', pg_temp.at(p_minutes));
    v_plan := ember.claim_shadow_run('w', '5 minutes', pg_temp.at(p_minutes + 1));
    IF v_plan IS NULL THEN
        RETURN NULL;
    END IF;
    PERFORM ember.submit_shadow_run('default', (v_plan ->> 'run_id')::bigint, (v_plan ->> 'lease_token')::uuid, jsonb_build_object(
        'status', 'failed', 'error', 'model output was not a tool call',
        'usage', jsonb_build_object('input_tokens', 1000, 'cache_read_input_tokens', 20,
                                    'cache_creation_5m_input_tokens', 30, 'cache_creation_1h_input_tokens', 0,
                                    'output_tokens', 7),
        'latency_ms', 900, 'finished_at', pg_temp.at(p_minutes + 2), 'proposals', '[]'::jsonb));
    RETURN (v_plan ->> 'run_id')::bigint;
END;
$$;

SELECT ember.create_thread('default', 's', 'side');
SELECT ember.shadow_activate(pg_temp.at(-10));
SELECT ember.append_message('default', 's', 'assistant', 'hard to summarise', NULL, NULL, NULL, NULL, NULL, NULL, pg_temp.at(0));

SELECT isnt(pg_temp.failing_offer('s', 10), NULL, 'the first failing offer runs');
SELECT isnt(pg_temp.failing_offer('s', 20), NULL, 'the second failing offer runs');
SELECT isnt(pg_temp.failing_offer('s', 30), NULL, 'the third failing offer runs');
SELECT is(pg_temp.failing_offer('s', 40), NULL, 'the fourth offer after three failures does not run');
SELECT is((SELECT count(*)::int FROM ember.shadow_runs WHERE thread_id = 's'), 3, 'four failing offers, three runs');
SELECT results_eq(
    $$SELECT sum(input_tokens)::int, sum(cache_read_tokens)::int, sum(cache_write_5m_tokens)::int,
             sum(output_tokens)::int, count(*)::int
      FROM ember.shadow_runs WHERE thread_id = 's' AND status = 'failed'$$,
    $$VALUES (3000, 60, 90, 21, 3)$$,
    'failed runs still record their tokens');
SELECT ok(NOT EXISTS (SELECT 1 FROM ember.shadow_ready(pg_temp.at(32) + interval '6 hours' - interval '1 second')),
          'still held back just before 6 hours after the last failure');
SELECT ok(EXISTS (SELECT 1 FROM ember.shadow_ready(pg_temp.at(32) + interval '6 hours') WHERE thread_id = 's'),
          'the fourth offer is ready 6 hours after the last failure');
SELECT ember.claim_shadow_run('w', '5 minutes', pg_temp.at(32) + interval '6 hours') AS fourth \gset
SELECT is(:'fourth'::jsonb ->> 'reasons', '["turn-failed"]', 'and runs then, as the fourth run');

-- A completed run resets the count.
SELECT ember.submit_shadow_run('default', (:'fourth'::jsonb ->> 'run_id')::bigint, (:'fourth'::jsonb ->> 'lease_token')::uuid,
    jsonb_build_object('status', 'completed', 'error', NULL,
        'usage', jsonb_build_object('input_tokens', 1, 'cache_read_input_tokens', 0, 'cache_creation_5m_input_tokens', 0,
                                    'cache_creation_1h_input_tokens', 0, 'output_tokens', 1),
        'latency_ms', 1, 'finished_at', pg_temp.at(33) + interval '6 hours', 'proposals', '[]'::jsonb));
SELECT ember.append_message('default', 's', 'assistant', 'more', NULL, NULL, NULL, NULL, NULL, NULL, pg_temp.at(400));
SELECT pg_temp.failing_offer('s', 410);
SELECT pg_temp.failing_offer('s', 420);
SELECT isnt(pg_temp.failing_offer('s', 430), NULL, 'after a success, failures count from zero again');
SELECT is(pg_temp.failing_offer('s', 440), NULL, 'and three new failures hold the thread back again');

-- Failures count within one generation.
SELECT ember.create_thread('default', 'g', 'side', p_now => pg_temp.at(-60));
SELECT ember.append_message('default', 'g', 'assistant', 'gen 1 row', NULL, NULL, NULL, NULL, NULL, NULL, pg_temp.at(0));
INSERT INTO ember.shadow_runs (thread_id, generation_id, path, model, status, error, from_seq, through_seq,
                               started_at, finished_at, worker, lease_token, lease_expires_at)
SELECT 'g', ember.current_generation('default', 'g'), 'cold', 'claude-haiku-4-5', 'failed', 'boom', 0, 0,
       pg_temp.at(i), pg_temp.at(i), 'w', gen_random_uuid(), pg_temp.at(i + 5)
FROM generate_series(1, 3) AS i;
SELECT ember.shadow_memory_changed('default', 'g', 'task-ended', pg_temp.at(4));
SELECT ok(NOT EXISTS (SELECT 1 FROM ember.shadow_ready(pg_temp.at(5)) WHERE thread_id = 'g'),
          'three failures in the generation to read hold the thread back');
-- The first generation is read through (a cursor placed there for the test); the new one has not failed.
INSERT INTO ember.shadow_cursors (thread_id, generation_id, baseline_seq, initialization, created_at)
SELECT 'g', ember.current_generation('default', 'g'), (SELECT max(seq) FROM ember.messages WHERE thread_id = 'g'), 'enabled', pg_temp.at(5);
SELECT ember.start_generation('default', 'g', pg_temp.at(6));
SELECT ember.append_message('default', 'g', 'assistant', 'gen 2 row', NULL, NULL, NULL, NULL, NULL, NULL, pg_temp.at(6));
SELECT ok(EXISTS (SELECT 1 FROM ember.shadow_ready(pg_temp.at(7)) WHERE thread_id = 'g'),
          'failures of another generation do not hold back the next one');


-- Cancelled and abandoned runs neither count toward the backoff nor reset it (issue 8, item 10c).
SELECT ember.create_thread('default', 'k', 'side', p_now => pg_temp.at(-60));
SELECT ember.create_thread('default', 'k2', 'side', p_now => pg_temp.at(-60));
CREATE FUNCTION pg_temp.run_as(p_thread text, p_status text, p_minute integer) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO ember.shadow_runs (thread_id, generation_id, path, model, status, error, from_seq, through_seq,
                                   started_at, finished_at, worker, lease_token, lease_expires_at)
    VALUES (p_thread, ember.current_generation('default', p_thread), 'cold', 'claude-haiku-4-5', p_status,
            CASE WHEN p_status <> 'completed' THEN p_status END, 0, 0,
            pg_temp.at(p_minute), pg_temp.at(p_minute), 'w', gen_random_uuid(), pg_temp.at(p_minute + 5))
$$;
SELECT pg_temp.run_as('k', s, m) FROM (VALUES ('failed', 1), ('failed', 2), ('cancelled', 3), ('abandoned', 4),
                                             ('failed', 5)) AS v (s, m);
SELECT is(ember.shadow_backoff_until('default', 'k', ember.current_generation('default', 'k')), pg_temp.at(5) + interval '6 hours',
          'a cancelled and an abandoned run between failures do not reset the count');
SELECT pg_temp.run_as('k2', s, m) FROM (VALUES ('failed', 1), ('failed', 2), ('cancelled', 3), ('abandoned', 4))
    AS v (s, m);
SELECT is(ember.shadow_backoff_until('default', 'k2', ember.current_generation('default', 'k2')), NULL,
          'nor count as failures: two failures, a cancel and an abandon hold nothing back');

-- A run whose lease lapsed lost its worker on this thread: a poison answer that kills or wedges
-- the worker does it again on every offer, so lapsed leases count like failures (and the model is
-- not called every lease period forever). A run released on shutdown says nothing of the thread.
SELECT ember.create_thread('default', 'lapse', 'side', p_now => pg_temp.at(-60));
SELECT ember.create_thread('default', 'rel', 'side', p_now => pg_temp.at(-60));
CREATE FUNCTION pg_temp.run_err(p_thread text, p_status text, p_error text, p_minute integer) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO ember.shadow_runs (thread_id, generation_id, path, model, status, error, from_seq, through_seq,
                                   started_at, finished_at, worker, lease_token, lease_expires_at)
    VALUES (p_thread, ember.current_generation('default', p_thread), 'cold', 'claude-haiku-4-5', p_status, p_error, 0, 0,
            pg_temp.at(p_minute), pg_temp.at(p_minute), 'w', gen_random_uuid(), pg_temp.at(p_minute + 5))
$$;
SELECT pg_temp.run_err('lapse', 'abandoned', 'lease expired', m) FROM generate_series(1, 3) AS m;
SELECT is(ember.shadow_backoff_until('default', 'lapse', ember.current_generation('default', 'lapse')), pg_temp.at(3) + interval '6 hours',
          'three lapsed leases in a generation hold it back like three failures');
SELECT pg_temp.run_err('rel', 'abandoned', 'released', m) FROM generate_series(1, 3) AS m;
SELECT is(ember.shadow_backoff_until('default', 'rel', ember.current_generation('default', 'rel')), NULL,
          'runs released at a shutdown do not count');

-- A run the user interrupted whose worker never reports back is recorded cancelled by tick (item 4).
SELECT ember.create_thread('default', 'u', 'side', p_now => pg_temp.at(-60));
SELECT ember.append_message('default', 'u', 'assistant', 'working on it', NULL, NULL, NULL, NULL, NULL, NULL, pg_temp.at(500));
SELECT ember.shadow_memory_changed('default', 'u', 'task-ended', pg_temp.at(501));
SELECT (ember.claim_shadow_run('w', '5 minutes', pg_temp.at(502)) ->> 'run_id')::bigint AS u_run \gset
-- The human speaks in the claimed run's thread (whichever ready thread the claim took).
SELECT ember.append_message('default', (SELECT thread_id FROM ember.shadow_runs WHERE id = :u_run), 'user', 'stop, wrong plan',
                            NULL, NULL, NULL, NULL, NULL, NULL, pg_temp.at(503));
SELECT is(ember.tick(pg_temp.at(510)) -> 'runs_cancelled', jsonb_build_array(:u_run),
          'tick reports the expired, user-interrupted run as cancelled');
SELECT results_eq(format('SELECT status, error FROM ember.shadow_runs WHERE id = %s', :u_run),
                  $$VALUES ('cancelled'::text, 'interrupted-by-user'::text)$$,
                  'recorded cancelled / interrupted-by-user, not abandoned / lease expired');

SELECT * FROM finish();
ROLLBACK;
