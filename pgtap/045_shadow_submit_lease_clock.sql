BEGIN;
SELECT plan(5);

-- submit_shadow_run judges the lease on the database's clock, not on the worker's finished_at.
SELECT ember.create_thread('default', 'main', 'main');
SELECT ember.create_thread('default', 's', 'side');
SELECT ember.shadow_activate(now() - interval '1 hour');
CREATE FUNCTION pg_temp.outcome(p_finished timestamptz) RETURNS jsonb LANGUAGE sql AS $$
    SELECT jsonb_build_object('status', 'completed', 'error', NULL, 'latency_ms', 1, 'finished_at', p_finished,
        'usage', '{"input_tokens": 1, "cache_read_input_tokens": 0, "cache_creation_5m_input_tokens": 0,
                   "cache_creation_1h_input_tokens": 0, "output_tokens": 1}'::jsonb, 'proposals', '[]'::jsonb)
$$;
CREATE FUNCTION pg_temp.offer_and_claim() RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN
    PERFORM ember.append_message('default', 's', 'assistant', 'step ' || clock_timestamp());
    PERFORM ember.shadow_memory_changed('default', 's', 'task-ended');
    RETURN ember.claim_shadow_run('w', '5 minutes');
END;
$$;

-- Claimed (by the database's clock) 5 minutes 2 seconds ago, with a 5-minute lease.
CREATE TEMP TABLE late AS SELECT pg_temp.offer_and_claim() AS p;
UPDATE ember.shadow_runs SET claimed_clock = claimed_clock - interval '5 minutes 2 seconds',
    started_at = started_at - interval '5 minutes 2 seconds',
    lease_expires_at = lease_expires_at - interval '5 minutes 2 seconds'
WHERE id = (SELECT (p ->> 'run_id')::bigint FROM late);
SELECT throws_ok(format('SELECT ember.submit_shadow_run(''default'', %s, %L, pg_temp.outcome(%L))',
                        (SELECT p ->> 'run_id' FROM late), (SELECT p ->> 'lease_token' FROM late),
                        (SELECT started_at + interval '4 minutes 59 seconds' FROM ember.shadow_runs
                         WHERE id = (SELECT (p ->> 'run_id')::bigint FROM late))),
                 'EM042', NULL, 'a finished_at back-dated into the lease does not pass a lease that lapsed by the clock');
SELECT is((SELECT status FROM ember.shadow_runs WHERE id = (SELECT (p ->> 'run_id')::bigint FROM late)), 'running',
          'and nothing is recorded');
UPDATE ember.shadow_runs SET status = 'abandoned', error = 'lease expired', finished_at = now()
WHERE id = (SELECT (p ->> 'run_id')::bigint FROM late);

-- Claimed just now; the worker's clock runs ten minutes fast.
CREATE TEMP TABLE fast AS SELECT pg_temp.offer_and_claim() AS p;
SELECT is(ember.submit_shadow_run('default', (SELECT (p ->> 'run_id')::bigint FROM fast), (SELECT (p ->> 'lease_token')::uuid FROM fast),
                                  pg_temp.outcome(clock_timestamp() + interval '10 minutes')) ->> 'status',
          'completed', 'an on-time outcome from a worker whose clock runs fast is accepted');
SELECT ok((SELECT finished_at <= clock_timestamp() FROM ember.shadow_runs WHERE id = (SELECT (p ->> 'run_id')::bigint FROM fast)),
          'and recorded as finished no later than the database''s clock');

-- Simulated time still replays: an outcome whose finished_at is inside a simulated lease.
CREATE TEMP TABLE sim AS SELECT pg_temp.offer_and_claim() AS p;
SELECT is(ember.submit_shadow_run('default', (SELECT (p ->> 'run_id')::bigint FROM sim), (SELECT (p ->> 'lease_token')::uuid FROM sim),
                                  pg_temp.outcome(clock_timestamp() + interval '1 second')) ->> 'status',
          'completed', 'a prompt outcome is accepted');

SELECT * FROM finish();
ROLLBACK;
