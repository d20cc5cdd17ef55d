BEGIN;
SELECT plan(27);

-- Lease renewal and release (functions/047_shadow_lease.sql). Time is fixed: runs start at 10:00
-- with a 10-minute lease.

CREATE FUNCTION pg_temp.new_run(p_thread text, p_reason text DEFAULT 'task-ended') RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_plan jsonb;
BEGIN
    PERFORM ember.append_message('default', p_thread, 'assistant', 'Noted.', p_now => '2030-01-01 09:59:59+00');
    PERFORM ember.shadow_memory_changed('default', p_thread, p_reason, '2030-01-01 10:00+00');
    v_plan := ember.claim_shadow_run('test-worker', '10 minutes', '2030-01-01 10:00+00');
    IF v_plan ->> 'thread_id' IS DISTINCT FROM p_thread THEN
        RAISE EXCEPTION 'test set-up: expected a claim of %, got %', p_thread, v_plan;
    END IF;
    RETURN (v_plan ->> 'run_id')::bigint;
END;
$$;

CREATE FUNCTION pg_temp.token(p_run bigint) RETURNS uuid LANGUAGE sql AS $$
    SELECT lease_token FROM ember.shadow_runs WHERE id = p_run
$$;

CREATE FUNCTION pg_temp.expires(p_run bigint) RETURNS timestamptz LANGUAGE sql AS $$
    SELECT lease_expires_at FROM ember.shadow_runs WHERE id = p_run
$$;

SELECT ember.create_thread('default', 'main', 'main');
SELECT ember.shadow_activate('2030-01-01 09:00+00');
SELECT ember.create_thread('default', 's1', 'side');
SELECT ember.create_thread('default', 's2', 'side');
SELECT ember.create_thread('default', 's3', 'side');

-- ---------------------------------------------------------------------------------------------
-- Renewal.
SELECT pg_temp.new_run('s1') AS r1 \gset
SELECT is(
    ember.extend_shadow_lease('default', :r1, pg_temp.token(:r1), '10 minutes', '2030-01-01 10:05+00'),
    jsonb_build_object('lease_expires_at', '2030-01-01 10:15+00'::timestamptz, 'cancel_requested', false),
    'a renewal moves the expiry to now plus the lease and reports no cancel'
);
SELECT is(pg_temp.expires(:r1), '2030-01-01 10:15+00'::timestamptz, 'the new expiry is stored');
SELECT lives_ok(
    format($$SELECT ember.extend_shadow_lease('default', %s, %L, '1 minute', '2030-01-01 10:06+00')$$, :r1, pg_temp.token(:r1)),
    'a shorter renewal is accepted'
);
SELECT is(pg_temp.expires(:r1), '2030-01-01 10:15+00'::timestamptz, 'but never shortens the lease');

SELECT throws_ok(
    format($$SELECT ember.extend_shadow_lease('default', %s, %L, '10 minutes', '2030-01-01 10:06+00')$$, :r1, gen_random_uuid()),
    'EM051', NULL, 'a foreign lease token cannot renew the run'
);
SELECT throws_ok(
    format($$SELECT ember.extend_shadow_lease('default', %s, NULL, '10 minutes', '2030-01-01 10:06+00')$$, :r1),
    'EM051', NULL, 'a missing lease token cannot renew the run'
);
SELECT throws_ok(
    $$SELECT ember.extend_shadow_lease('default', 999999, gen_random_uuid(), '10 minutes', '2030-01-01 10:06+00')$$,
    'EM051', NULL, 'an unknown run cannot be renewed'
);
SELECT throws_ok(
    format($$SELECT ember.extend_shadow_lease('default', %s, %L, '0 seconds', '2030-01-01 10:06+00')$$, :r1, pg_temp.token(:r1)),
    'EM050', NULL, 'a lease must be positive'
);
SELECT throws_ok(
    format($$SELECT ember.extend_shadow_lease('default', %s, %L, NULL, '2030-01-01 10:06+00')$$, :r1, pg_temp.token(:r1)),
    'EM050', NULL, 'a lease must be given'
);
SELECT throws_ok(
    format($$SELECT ember.extend_shadow_lease('default', %s, %L, '10 minutes', NULL)$$, :r1, pg_temp.token(:r1)),
    'EM012', NULL, 'a renewal needs a time'
);
SELECT throws_ok(
    format($$SELECT ember.extend_shadow_lease('default', %s, %L, '10 minutes', '2030-01-01 10:15+00')$$, :r1, pg_temp.token(:r1)),
    'EM051', NULL, 'a lapsed lease is not revived: tick may already have re-offered the thread'
);

-- A human message flags the run; the renewal reports it, so a lost NOTIFY is noticed.
SELECT ember.append_message('default', 's1', 'user', 'Wait.', 'human', p_now => '2030-01-01 10:07+00');
SELECT is(
    ember.extend_shadow_lease('default', :r1, pg_temp.token(:r1), '10 minutes', '2030-01-01 10:08+00') -> 'cancel_requested',
    'true'::jsonb,
    'a renewal reports a cancel asked for by a human message'
);
SELECT ok(ember.shadow_run_cancel_requested('default', :r1), 'the cancel check agrees');

-- ---------------------------------------------------------------------------------------------
-- Release on shutdown.
SELECT pg_temp.new_run('s2', 'waiting-user') AS r2 \gset
SELECT pg_temp.new_run('s3') AS r3 \gset
SELECT ok(NOT ember.shadow_run_cancel_requested('default', :r2), 'a running run is not cancelled');
SELECT is(
    (SELECT count(*)::int FROM ember.shadow_ready('2030-01-01 10:01+00') WHERE thread_id = 's2'), 0,
    'while claimed, the thread is not offered'
);
SELECT throws_ok(
    format($$SELECT ember.release_shadow_run('default', %s, %L, '2030-01-01 10:01+00')$$, :r2, gen_random_uuid()),
    'EM051', NULL, 'a foreign lease token cannot release the run'
);
SELECT is(
    ember.release_shadow_run('default', :r2, pg_temp.token(:r2), '2030-01-01 10:01+00'), 'abandoned',
    'a released run ends abandoned'
);
SELECT is(
    (SELECT error FROM ember.shadow_runs WHERE id = :r2), 'released', 'with the error "released"'
);
SELECT ok(ember.shadow_run_cancel_requested('default', :r2), 'a finished run reads as nothing to continue');
SELECT results_eq(
    $$SELECT thread_id, reasons FROM ember.shadow_ready('2030-01-01 10:01+00') WHERE thread_id = 's2'$$,
    $$VALUES ('s2'::text, ARRAY['waiting-user'])$$,
    'the thread is offered again at once, for the reason its claim answered'
);
SELECT throws_ok(
    format($$SELECT ember.release_shadow_run('default', %s, %L, '2030-01-01 10:02+00')$$, :r2, pg_temp.token(:r2)),
    'EM051', NULL, 'a run is released once'
);
SELECT throws_ok(
    format($$SELECT ember.extend_shadow_lease('default', %s, %L, '10 minutes', '2030-01-01 10:02+00')$$, :r2, pg_temp.token(:r2)),
    'EM051', NULL, 'a released run cannot be renewed'
);
SELECT is(ember.shadow_backoff_until('default', 's2', (SELECT generation_id FROM ember.shadow_runs WHERE id = :r2)), NULL,
          'a release does not count as a failure');

-- A run cancelled by a human message is released as cancelled, and nothing is offered again.
SELECT ember.append_message('default', 's3', 'user', 'Never mind.', 'human', p_now => '2030-01-01 10:01+00');
SELECT is(
    ember.release_shadow_run('default', :r3, pg_temp.token(:r3), '2030-01-01 10:02+00'), 'cancelled',
    'a cancelled run is released as cancelled'
);
SELECT is((SELECT error FROM ember.shadow_runs WHERE id = :r3), 'interrupted-by-user',
          'interrupted by the user');
SELECT is((SELECT count(*)::int FROM ember.shadow_signals WHERE thread_id = 's3'), 0,
          'and no offer is put back: the human message withdrew them');
SELECT is((SELECT count(*)::int FROM ember.shadow_proposals), 0, 'no lease operation writes proposals');

SELECT * FROM finish();
ROLLBACK;
