-- work_status(): why nothing is happening, or what is (issue 22). One row per pipeline, state and
-- reason, with how many items (threads for shadow, generations for the steward, workers for the
-- fleet), the one that has waited longest, since when, until when (when the wait has an end),
-- and a line that says what to do. `ember status` prints it, the worker logs its waiting reasons
-- when it has been idle a while, and the demo's "no work left" check counts its rows.
--
-- It reads the public readiness functions (shadow_ready, shadow_tick_candidates,
-- shadow_backoff_until, steward_backlog_generations, the backlog_waiting view) and the runs
-- tables; the little it needs beyond them (which threads have unread rows, whose turn is
-- running) sits in work_status_shadow_threads below, the one place to re-point when readiness
-- moves to other state. It is for operators: a full pass over the waiting work, never called
-- from a claim.
--
-- Reasons (state: reason):
--   shadow   waiting: shadow-not-activated  rows wait, but shadow_activate() was never called
--            running: leased                a worker holds a run until its lease expires
--            waiting: lease-expired         a run's lease ran out; the next tick() offers it again
--            ready:   ready                 claimable now (path and model in detail)
--            waiting: model-not-tagged      no model tagged for the generation's labels may read it
--            waiting: failure-backoff       repeated failures in the generation, until a time
--            waiting: turn-running          the thread's turn is running; offers wait for its end
--            waiting: tick-due              due; tick() offers it at its next run
--            waiting: idle-not-reached      not idle for idle_before_digest yet, until a time
--            notice:  hot-cache-shortfall   hot runs that read too little of their prefix from the
--                                           cache in the last status_window, by likely cause
--   steward  waiting: steward-thread-missing ensure_steward_thread() was never called
--            waiting: no-model              no steward model (no pin and no light model)
--            running: leased                the one wake in flight, until its lease expires
--            ready:   ready                 generations the next wake reads
--            waiting: model-not-tagged      threads whose labels the steward's model is not tagged for
--            waiting: idle-not-reached      a generation's thread not idle long enough, until a time
--   cutover  active:  shadow-owns           an active cut-over: its scope's undigested rows above
--                                           the point are shadow's, those at or below the steward's
--   workers  connected: worker              a worker connected now (its connections in detail)
--            seen:    worker                a worker not connected now that claimed within status_window
--            none:    no-worker             no worker connected, and none claimed within status_window

-- The threads shadow has work in (unread rows, or a run out), with what work_status needs to
-- say why they wait: the last activity idle time is measured from, and whether a turn is running.
CREATE OR REPLACE FUNCTION ember.work_status_shadow_threads()
RETURNS TABLE (thread_id text, last_activity_at timestamptz, last_row_at timestamptz, turn_running boolean)
LANGUAGE sql STABLE
AS $$
    SELECT
        t.id,
        greatest(st.last_activity_at, u.last_row_at, t.created_at),
        u.last_row_at,
        coalesce(st.turn_running AND NOT st.waiting_user, false)
    FROM (
        SELECT w.thread_id, max(w.last_row_at) AS last_row_at
        FROM (
            SELECT p.thread_id, p.last_message_at AS last_row_at
            FROM ember.generation_progress AS p WHERE p.unread
            UNION ALL
            SELECT r.thread_id, NULL FROM ember.shadow_runs AS r WHERE r.status = 'running'
        ) AS w
        GROUP BY w.thread_id
    ) AS u
    INNER JOIN ember.threads AS t ON t.id = u.thread_id
    LEFT JOIN ember.shadow_thread_state AS st ON st.thread_id = t.id
    WHERE NOT ember.shadow_excluded(t.tenant_id, t.id)
$$;

-- Before the row was a type (db/migrations/0047_work_status_row.sql) these returned a TABLE of
-- the same columns; CREATE OR REPLACE cannot change a return type, so a function of the old
-- kind is dropped first.
SELECT ember.drop_if_result_changed('ember.work_status_shadow(timestamptz)', 'work_status_row');
SELECT ember.drop_if_result_changed('ember.work_status_steward(timestamptz)', 'work_status_row');
SELECT ember.drop_if_result_changed('ember.work_status_workers(timestamptz)', 'work_status_row');
SELECT ember.drop_if_result_changed('ember.work_status(timestamptz)', 'work_status_row');

-- work_status's shadow rows: per thread with work, why it waits or who holds it; and the hot runs
-- that read too little of their prefix from the cache.
--
-- Its length: one statement whose CASEs (state, reason, since, until, detail) test the same
-- conditions in the same order, so a reason's columns read side by side, as the list above.
CREATE OR REPLACE FUNCTION ember.work_status_shadow(p_now timestamptz)
RETURNS SETOF ember.work_status_row
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_idle interval := ember.setting_interval('idle_before_digest');
    v_window interval := ember.setting_interval('status_window');
    v_idle_text text := ember.setting('idle_before_digest') #>> '{}';
    v_activated boolean := EXISTS (SELECT 1 FROM ember.shadow_activation);
BEGIN
    RETURN QUERY
    WITH
    threads AS MATERIALIZED (SELECT * FROM ember.work_status_shadow_threads()),
    ready AS MATERIALIZED (SELECT * FROM ember.shadow_ready(p_now)),
    ticks AS MATERIALIZED (SELECT * FROM ember.shadow_tick_candidates(p_now)),
    shadow_items AS (
        SELECT
            th.thread_id,
            CASE
                WHEN NOT v_activated THEN 'waiting'
                WHEN run.lease_expires_at <= p_now THEN 'waiting'
                WHEN run.id IS NOT NULL THEN 'running'
                WHEN rd.model IS NOT NULL THEN 'ready'
                ELSE 'waiting'
            END AS state,
            CASE
                WHEN NOT v_activated THEN 'shadow-not-activated'
                WHEN run.lease_expires_at <= p_now THEN 'lease-expired'
                WHEN run.id IS NOT NULL THEN 'leased'
                WHEN rd.model IS NOT NULL THEN 'ready'
                WHEN rd.thread_id IS NOT NULL THEN 'model-not-tagged'
                WHEN bo.until > p_now THEN 'failure-backoff'
                WHEN th.turn_running THEN 'turn-running'
                WHEN tk.condition IS NOT NULL THEN 'tick-due'
                WHEN tk.thread_id IS NOT NULL THEN 'idle-not-reached'
                -- An offer deferred to a turn boundary that has not come.
                ELSE 'turn-running'
            END AS reason,
            CASE
                WHEN NOT v_activated THEN th.last_row_at
                WHEN run.id IS NOT NULL THEN run.started_at
                WHEN rd.thread_id IS NOT NULL THEN rd.signalled_at
                WHEN bo.until > p_now THEN bo.failed_at
                ELSE th.last_activity_at
            END AS since,
            CASE
                WHEN NOT v_activated THEN NULL
                WHEN run.id IS NOT NULL THEN run.lease_expires_at
                WHEN rd.thread_id IS NOT NULL THEN NULL
                WHEN bo.until > p_now THEN bo.until
                WHEN tk.thread_id IS NOT NULL AND tk.condition IS NULL THEN th.last_activity_at + v_idle
            END AS until,
            CASE
                WHEN NOT v_activated THEN
                    'shadow memory was never activated: ember init, Host.setup() or SELECT ember.shadow_activate()'
                WHEN run.lease_expires_at <= p_now THEN format(
                    'the lease of worker %s ran out: the next tick() abandons the run and offers the thread again',
                    run.worker)
                WHEN run.id IS NOT NULL THEN format('worker %s holds the run', run.worker)
                WHEN rd.model IS NOT NULL THEN format('%s path, model %s', rd.path, rd.model)
                WHEN rd.thread_id IS NOT NULL THEN
                    format('waiting for %s: tag a model for them (UPDATE ember.models SET tags = ...)', rd.waiting_for)
                WHEN bo.until > p_now THEN format(
                    '%s failed runs in a row in this generation (settings failure_backoff_after, failure_backoff)',
                    ember.setting_int('failure_backoff_after'))
                WHEN th.turn_running THEN 'a turn is running: its offers wait for turn_ended()'
                WHEN tk.condition IS NOT NULL THEN format('tick() offers it at its next run (%s)', tk.condition)
                WHEN tk.thread_id IS NOT NULL THEN
                    format('the thread has been idle less than idle_before_digest (%s)', v_idle_text)
                ELSE 'offered during a turn: the offer stands once turn_ended() is called'
            END AS detail
        FROM threads AS th
        LEFT JOIN ember.shadow_runs AS run ON run.thread_id = th.thread_id AND run.status = 'running'
        LEFT JOIN ready AS rd ON rd.thread_id = th.thread_id
        LEFT JOIN ticks AS tk ON tk.thread_id = th.thread_id
        LEFT JOIN LATERAL (
            -- The generation of the thread's latest failure, and whether it is held back.
            SELECT r.finished_at AS failed_at, ember.shadow_backoff_until(r.tenant_id, r.thread_id, r.generation_id) AS until
            FROM ember.shadow_runs AS r
            WHERE r.thread_id = th.thread_id AND r.status = 'failed'
            ORDER BY r.id DESC
            LIMIT 1
        ) AS bo ON true
    ),

    shortfalls AS (
        SELECT c.check ->> 'cause' AS cause, c.check ->> 'thread_id' AS thread_id, r.finished_at,
            (c.check ->> 'share')::numeric AS share
        FROM ember.shadow_runs AS r
        CROSS JOIN LATERAL (SELECT ember.hot_cache_check(r) AS check) AS c
        WHERE r.path = 'hot' AND r.status = 'completed'
            AND r.finished_at > p_now - v_window AND r.finished_at <= p_now
            AND c.check IS NOT NULL
    )

    SELECT 'shadow', si.state, si.reason, count(*)::integer,
        (array_agg(si.thread_id ORDER BY si.since NULLS LAST, si.thread_id))[1],
        min(si.since), min(si.until), si.detail
    FROM shadow_items AS si
    GROUP BY si.state, si.reason, si.detail
    UNION ALL
    SELECT 'shadow', 'notice', 'hot-cache-shortfall', count(*)::integer,
        (array_agg(sf.thread_id ORDER BY sf.finished_at DESC))[1],
        min(sf.finished_at), NULL,
        format('%s hot runs read %s%% to %s%% of the old prefix from the cache, below %s%%: %s',
            count(*), round(min(sf.share) * 100), round(max(sf.share) * 100),
            round(ember.setting('hot_cache_min_read_share')::numeric * 100), ember.hot_cache_cause_text(sf.cause))
    FROM shortfalls AS sf
    GROUP BY sf.cause;
END;
$$;

-- work_status's steward rows: the wake in flight, and per backlog generation why it waits.
--
-- Its length: as work_status_shadow, one statement whose CASEs share one order of conditions.
CREATE OR REPLACE FUNCTION ember.work_status_steward(p_now timestamptz)
RETURNS SETOF ember.work_status_row
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_idle interval := ember.setting_interval('idle_before_digest');
    v_idle_text text := ember.setting('idle_before_digest') #>> '{}';
    v_steward text := ember.steward_thread_id();
    v_steward_model text;
BEGIN
    IF v_steward IS NOT NULL THEN
        v_steward_model := ember.steward_model(ember.sole_tenant());
    END IF;

    RETURN QUERY
    WITH
    gens AS MATERIALIZED (SELECT * FROM ember.steward_backlog_generations(ember.sole_tenant(), p_now)),
    steward_run AS MATERIALIZED (
        SELECT r.id, r.worker, r.started_at, r.lease_expires_at
        FROM ember.steward_runs AS r WHERE r.status = 'running' AND r.lease_expires_at > p_now
    ),
    steward_items AS (
        SELECT
            g.thread_id,
            CASE WHEN v_steward IS NULL OR v_steward_model IS NULL OR NOT g.covered OR NOT g.ready
                THEN 'waiting' ELSE 'ready' END AS state,
            CASE
                WHEN v_steward IS NULL THEN 'steward-thread-missing'
                WHEN v_steward_model IS NULL THEN 'no-model'
                WHEN NOT g.covered THEN 'model-not-tagged'
                WHEN NOT g.ready THEN 'idle-not-reached'
                ELSE 'ready'
            END AS reason,
            first_row.created_at AS since,
            CASE WHEN v_steward IS NOT NULL AND g.covered AND NOT g.ready THEN last_row.created_at + v_idle END
                AS until,
            CASE
                WHEN v_steward IS NULL THEN
                    'the steward''s thread does not exist: ember init, Host.setup() or SELECT ember.ensure_steward_thread(tenant)'
                WHEN v_steward_model IS NULL THEN
                    'the steward has no model: no pin and no light model in ember.models'
                WHEN NOT g.covered THEN format('the steward''s model %s is not tagged for %s', v_steward_model, g.labels)
                WHEN NOT g.ready THEN
                    format('its thread has been idle less than idle_before_digest (%s) and the generation is open', v_idle_text)
                WHEN EXISTS (SELECT 1 FROM steward_run) THEN 'read by a wake after the running one'
                ELSE format('read by the next wake (up to %s generations, about %s tokens)',
                    ember.setting_int('steward_wake_generations'), ember.setting_int('steward_wake_tokens'))
            END AS detail
        FROM gens AS g
        LEFT JOIN LATERAL (
            SELECT m.created_at FROM ember.messages AS m WHERE m.generation_id = g.generation_id AND m.seq = g.first_seq
        ) AS first_row ON true
        LEFT JOIN LATERAL (
            SELECT m.created_at FROM ember.messages AS m
            WHERE m.thread_id = g.thread_id ORDER BY m.seq DESC LIMIT 1
        ) AS last_row ON true
        UNION ALL
        -- Threads the backlog leaves out for their labels (backlog_waiting says why).
        SELECT w.thread_id, 'waiting',
            CASE WHEN v_steward IS NULL THEN 'steward-thread-missing' ELSE 'model-not-tagged' END,
            NULL, NULL,
            CASE WHEN v_steward IS NULL
                THEN 'the steward''s thread does not exist: ember init, Host.setup() or SELECT ember.ensure_steward_thread(tenant)'
                ELSE format('%s (labels %s): tag it for them, or pin the steward to a model that is', w.reason, w.labels)
            END
        FROM ember.backlog_waiting AS w
    )

    SELECT 'steward', 'running', 'leased', 1, v_steward, sr.started_at, sr.lease_expires_at,
        format('worker %s holds wake %s', sr.worker, sr.id)
    FROM steward_run AS sr
    UNION ALL
    SELECT 'steward', st.state, st.reason, count(*)::integer,
        (array_agg(st.thread_id ORDER BY st.since NULLS LAST, st.thread_id))[1],
        min(st.since), min(st.until), st.detail
    FROM steward_items AS st
    GROUP BY st.state, st.reason, st.detail;
END;
$$;

-- work_status's cutover rows: for each active cut-over, which pipeline owns its scope's pending
-- rows, by the one rule of ownership (cutover_from_seq): the undigested rows above the point are
-- shadow's (items), those at or below it the steward's until it digests them.
-- plpgsql: the cut-over functions it reads come later (097_cutover.sql).
CREATE OR REPLACE FUNCTION ember.work_status_cutover()
RETURNS SETOF ember.work_status_row
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    RETURN QUERY
    SELECT 'cutover'::text, 'active'::text, 'shadow-owns'::text, n.above::integer,
        c.scope || coalesce(':' || c.scope_value, ''), c.from_at, NULL::timestamptz,
        format('cut-over %s: shadow owns the %s undigested row(s) above seq %s; the steward still digests %s '
               'at or below it; roll back with ember cutover --scope %s --rollback',
               c.id, n.above, c.from_seq, n.below, c.scope || coalesce(':' || c.scope_value, ''))
    FROM ember.cutovers AS c
    CROSS JOIN LATERAL (
        SELECT count(*) FILTER (WHERE m.seq > c.from_seq) AS above,
            count(*) FILTER (WHERE m.seq <= c.from_seq) AS below
        FROM ember.cutover_scope_threads(c.scope, c.scope_value) AS t (id)
        INNER JOIN ember.messages AS m ON m.thread_id = t.id AND m.episode_id IS NULL
        -- A thread two cut-overs cover belongs to the earlier (cutover_for_thread).
        WHERE ember.cutover_for_thread(t.id) = c.id
    ) AS n
    WHERE c.rolled_back_at IS NULL;
END;
$$;

-- work_status's workers rows: each worker connected now or seen claiming within status_window,
-- or one row saying there is none.
CREATE OR REPLACE FUNCTION ember.work_status_workers(p_now timestamptz)
RETURNS SETOF ember.work_status_row
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_window interval := ember.setting_interval('status_window');
    v_window_text text := ember.setting('status_window') #>> '{}';
BEGIN
    RETURN QUERY
    WITH
    workers AS (
        SELECT
            coalesce(c.name, s.name) AS name,
            c.connections,
            c.purposes,
            ft.ticked_at AS ticked_at,
            s.last_claim
        FROM (
            SELECT
                -- ember-worker:NAME:PURPOSE (worker/ember/worker/loop.py); NAME may hold colons.
                substring(a.application_name FROM '^ember-worker:(.*):[^:]*$') AS name,
                count(*)::integer AS connections,
                string_agg(DISTINCT substring(a.application_name FROM ':([^:]*)$'), ', ') AS purposes
            FROM pg_catalog.pg_stat_activity AS a
            WHERE a.datname = current_database() AND a.application_name LIKE 'ember-worker:%'
            GROUP BY 1
        ) AS c
        FULL JOIN (
            SELECT x.worker AS name, max(x.started_at) AS last_claim
            FROM (
                SELECT r.worker, r.started_at FROM ember.shadow_runs AS r WHERE r.started_at > p_now - v_window
                UNION ALL
                SELECT r.worker, r.started_at FROM ember.steward_runs AS r WHERE r.started_at > p_now - v_window
            ) AS x
            GROUP BY x.worker
        ) AS s ON s.name = c.name
        LEFT JOIN ember.fleet_tick AS ft ON ft.worker = coalesce(c.name, s.name)
    )

    SELECT 'workers', CASE WHEN w.connections IS NOT NULL THEN 'connected' ELSE 'seen' END, 'worker',
        coalesce(w.connections, 0), w.name, w.last_claim, NULL::timestamptz,
        concat_ws('; ',
            CASE WHEN w.connections IS NOT NULL THEN format('connected now (%s)', w.purposes) ELSE 'not connected now' END,
            'ticked for the fleet last, at ' || w.ticked_at::text,
            coalesce('last claimed a run at ' || w.last_claim::text, 'claimed nothing within status_window'))
    FROM workers AS w
    UNION ALL
    SELECT 'workers', 'none', 'no-worker', 0, NULL, NULL, NULL,
        format('no ember worker is connected to this database, and none claimed a run within status_window (%s)',
            v_window_text)
    WHERE NOT EXISTS (SELECT 1 FROM workers);
END;
$$;

CREATE OR REPLACE FUNCTION ember.work_status(p_now timestamptz DEFAULT clock_timestamp())
RETURNS SETOF ember.work_status_row
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    PERFORM ember.require_now(p_now);
    RETURN QUERY
    SELECT * FROM ember.work_status_shadow(p_now)
    UNION ALL
    SELECT * FROM ember.work_status_steward(p_now)
    UNION ALL
    SELECT * FROM ember.work_status_cutover()
    UNION ALL
    SELECT * FROM ember.work_status_workers(p_now)
    ORDER BY 1, 2, 3, 5;
END;
$$;

-- The analyst may ask too (ember_analyst reads no table: the function reads as its owner, and
-- names no content, only thread ids, counts and times; isolated threads never appear).
REVOKE ALL ON FUNCTION ember.work_status(timestamptz) FROM public;
GRANT EXECUTE ON FUNCTION ember.work_status(timestamptz) TO ember_analyst;
