BEGIN;
SELECT plan(21);

-- Shadow claims across tenants (functions/041_shadow_offers.sql, 043_shadow_claim.sql): a claim
-- spans tenants and its plan names the tenant; every call about the run is keyed by that tenant;
-- claims go round the tenants with work; a per-tenant cap on runs in flight holds. The
-- one-tenant guard (006_tenants.sql) is lifted for this transaction.

ALTER TABLE ember.tenants DISABLE TRIGGER tenants_hold_one;

CREATE FUNCTION pg_temp.at(p_minutes numeric) RETURNS timestamptz
LANGUAGE sql AS $$ SELECT '2026-03-01 12:00+00'::timestamptz + p_minutes * interval '1 minute' $$;

-- A thread of the tenant with two rows and a standing offer, at minute p_minute.
CREATE FUNCTION pg_temp.ready(p_tenant text, p_thread text, p_minute numeric) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM ember.create_thread(p_tenant, p_thread, 'side');
    PERFORM ember.append_message(p_tenant, p_thread, 'user', 'I prefer tea, says ' || p_tenant,
                                 NULL, NULL, NULL, NULL, NULL, NULL, pg_temp.at(p_minute));
    PERFORM ember.append_message(p_tenant, p_thread, 'assistant', 'Noted',
                                 NULL, NULL, NULL, NULL, NULL, NULL, pg_temp.at(p_minute));
    PERFORM ember.shadow_memory_changed(p_tenant, p_thread, 'task-ended', pg_temp.at(p_minute));
END;
$$;

CREATE FUNCTION pg_temp.done(p_plan jsonb) RETURNS jsonb
LANGUAGE sql AS $$
    SELECT ember.submit_shadow_run(p_plan ->> 'tenant', (p_plan ->> 'run_id')::bigint,
        (p_plan ->> 'lease_token')::uuid, jsonb_build_object(
            'status', 'completed', 'error', NULL,
            'usage', jsonb_build_object('input_tokens', 10, 'cache_read_input_tokens', 0,
                'cache_creation_5m_input_tokens', 0, 'cache_creation_1h_input_tokens', 0, 'output_tokens', 2),
            'latency_ms', 5, 'proposals', '[]'::jsonb,
            'finished_at', (SELECT r.started_at + interval '1 minute' FROM ember.shadow_runs AS r
                            WHERE r.tenant_id = p_plan ->> 'tenant' AND r.id = (p_plan ->> 'run_id')::bigint)))
$$;

SELECT ember.create_tenant(t) FROM (VALUES ('acme'), ('big')) AS x (t);
SELECT ember.shadow_activate(pg_temp.at(-10));

-- The same thread id in two tenants: each claim names the tenant it took, and reads its rows only.
SELECT pg_temp.ready('default', 'trip', 0);
SELECT pg_temp.ready('acme', 'trip', 1);
SELECT ember.claim_shadow_run('w1', '5 minutes', pg_temp.at(2)) AS p1 \gset
SELECT ember.claim_shadow_run('w2', '5 minutes', pg_temp.at(2)) AS p2 \gset
SELECT results_eq(
    format($$VALUES (%L::jsonb ->> 'tenant', %L::jsonb ->> 'thread_id'), (%L::jsonb ->> 'tenant', %L::jsonb ->> 'thread_id')$$,
           :'p1', :'p1', :'p2', :'p2'),
    $$VALUES ('default', 'trip'), ('acme', 'trip')$$,
    'two tenants'' threads of one id are claimed apart, each plan naming its tenant'
);
SELECT ok((:'p2'::jsonb -> 'pages')::text LIKE '%says acme%' AND (:'p2'::jsonb -> 'pages')::text NOT LIKE '%says default%',
          'the plan of acme''s trip renders acme''s rows only');
SELECT is((SELECT tenant_id FROM ember.shadow_runs WHERE id = (:'p2'::jsonb ->> 'run_id')::bigint), 'acme',
          'the run is acme''s');

-- Calls about a run are keyed by its tenant: another tenant's name finds no such run.
SELECT throws_ok(
    format($$SELECT ember.submit_shadow_run('default', %s, %L, '{}')$$, :'p2'::jsonb ->> 'run_id', :'p2'::jsonb ->> 'lease_token'),
    'EM040', format('unknown shadow run %s of tenant ''default''', :'p2'::jsonb ->> 'run_id'),
    'a submit naming another tenant finds no such run'
);
SELECT throws_ok(
    format($$SELECT ember.extend_shadow_lease('default', %s, %L, '5 minutes')$$, :'p2'::jsonb ->> 'run_id', :'p2'::jsonb ->> 'lease_token'),
    'EM051', NULL, 'so does a lease extension'
);
SELECT throws_ok(
    format($$SELECT ember.release_shadow_run('default', %s, %L)$$, :'p2'::jsonb ->> 'run_id', :'p2'::jsonb ->> 'lease_token'),
    'EM051', NULL, 'and a release'
);
SELECT ok(NOT ember.shadow_run_cancel_requested('default', (:'p2'::jsonb ->> 'run_id')::bigint)
          AND NOT ember.shadow_run_cancel_requested('acme', (:'p2'::jsonb ->> 'run_id')::bigint),
          'the cancel check of another tenant''s run answers nothing to stop');
SELECT is(pg_temp.done(:'p2'::jsonb) ->> 'status', 'completed', 'the submit naming its tenant is recorded');
SELECT is(
    (SELECT status FROM ember.shadow_runs WHERE tenant_id = 'default' AND id = (:'p1'::jsonb ->> 'run_id')::bigint),
    'running', 'and default''s run of the same thread id is untouched'
);

-- A human message in acme's trip cancels acme's run only.
SELECT pg_temp.done(:'p1'::jsonb);
SELECT ember.append_message('acme', 'trip', 'user', 'more', 'human', NULL, NULL, NULL, NULL, NULL, pg_temp.at(3));
SELECT ember.shadow_memory_changed('acme', 'trip', 'task-ended', pg_temp.at(3));
SELECT ember.shadow_memory_changed('default', 'trip', 'task-ended', pg_temp.at(3));
SELECT ember.append_message('default', 'trip', 'assistant', 'again', NULL, NULL, NULL, NULL, NULL, NULL, pg_temp.at(3));
SELECT ember.claim_shadow_run('w1', '5 minutes', pg_temp.at(4)) AS p3 \gset
SELECT ember.claim_shadow_run('w2', '5 minutes', pg_temp.at(4)) AS p4 \gset
SELECT ember.append_message('acme', 'trip', 'user', 'stop', 'human', NULL, NULL, NULL, NULL, NULL, pg_temp.at(5));
SELECT results_eq(
    $$SELECT tenant_id, cancel_requested FROM ember.shadow_runs WHERE status = 'running' ORDER BY tenant_id$$,
    $$VALUES ('acme', true), ('default', false)$$,
    'a human message cancels the run of its own tenant''s thread, not the same-named thread of another'
);
SELECT ok(ember.shadow_run_cancel_requested('acme', (SELECT id FROM ember.shadow_runs WHERE tenant_id = 'acme' AND status = 'running')),
          'and the cancel check of acme''s run says so');
SELECT pg_temp.done(p) FROM (VALUES (:'p3'::jsonb), (:'p4'::jsonb)) AS x (p);

-- Fairness: big has 30 threads waiting, signalled first; acme and default one each, later.
SELECT pg_temp.ready('big', 'b' || lpad(i::text, 2, '0'), 10 + i / 100.0) FROM generate_series(1, 30) AS i;
SELECT pg_temp.ready('acme', 'late', 20);
SELECT pg_temp.ready('default', 'late', 21);
SELECT is(
    (SELECT array_agg(tenant_id ORDER BY claim_round, signalled_at) FROM ember.shadow_offers WHERE claim_round <= 1),
    ARRAY['big', 'acme', 'default'],
    'the first round holds one offer of each tenant with work'
);
CREATE TEMP TABLE claimed AS
SELECT i, ember.claim_shadow_run('w' || i, '5 minutes', pg_temp.at(30)) AS plan FROM generate_series(1, 6) AS i;
SELECT results_eq(
    $$SELECT plan ->> 'tenant' FROM claimed ORDER BY i$$,
    $$VALUES ('big'), ('acme'), ('default'), ('big'), ('big'), ('big')$$,
    'claims go round the tenants with work: acme and default are served within the first round, not after big''s 30'
);
SELECT is((SELECT count(*)::int FROM claimed WHERE plan IS NULL), 0, 'every claim found work');

-- A tenant that had nothing waiting joins the round being served, not the first one.
SELECT pg_temp.ready('acme', 'later', 31);
SELECT cmp_ok(
    (SELECT claim_round FROM ember.shadow_offers WHERE tenant_id = 'acme' AND thread_id = 'later'), '=',
    (SELECT min(claim_round) FROM ember.shadow_offers WHERE parked_reason IS NULL),
    'a new offer of a tenant with none waiting takes the current round'
);
SELECT cmp_ok(
    (SELECT claim_round FROM ember.shadow_offers WHERE tenant_id = 'acme' AND thread_id = 'later'), '>', 1::bigint,
    'which is past the first: big''s served rounds are not handed out again'
);

-- The cap: with tenant_max_running_runs 5, big (4 running) gets one more, then is passed over.
UPDATE ember.settings SET value = '5' WHERE key = 'tenant_max_running_runs';
SELECT ember.claim_shadow_run('w7', '5 minutes', pg_temp.at(32)) ->> 'tenant' AS c7 \gset
SELECT ember.claim_shadow_run('w8', '5 minutes', pg_temp.at(32)) ->> 'tenant' AS c8 \gset
SELECT results_eq(
    format($$VALUES (%L), (%L)$$, :'c7', :'c8'),
    $$VALUES ('big'), ('acme')$$,
    'under the cap the round goes on: big''s fifth run (signalled first in the round), then acme''s new thread'
);
SELECT is(ember.claim_shadow_run('w9', '5 minutes', pg_temp.at(32)), NULL,
          'then big is at its cap and nobody else has work: no plan');
SELECT is((SELECT count(*)::int FROM ember.shadow_runs WHERE tenant_id = 'big' AND status = 'running'), 5,
          'big has exactly its cap of runs in flight');
SELECT is((SELECT count(*)::int FROM ember.shadow_offers WHERE tenant_id = 'big' AND parked_reason IS NOT NULL), 0,
          'a tenant at its cap is passed over, not parked: its threads are offered as soon as a run ends');
SELECT pg_temp.done(c.plan) FROM claimed AS c WHERE c.plan ->> 'tenant' = 'big' AND c.i = 1;
SELECT is(ember.claim_shadow_run('w10', '5 minutes', pg_temp.at(33)) ->> 'tenant', 'big',
          'one of big''s runs ends: the next claim serves big again');

SELECT * FROM finish();
ROLLBACK;
