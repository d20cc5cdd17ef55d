-- tick(): the minute housekeeping of the shadow pipeline (seed 000 sections 3 and 4). The worker
-- calls it about once a minute (setting tick_interval); it returns what it did, and NOTIFY
-- ember_wake goes out (at commit) when it made work ready.

-- Threads tick should offer as idle-or-ended now. Each condition of the seed counts (idle for
-- idle_before_digest, generation changed since tick last looked, a generation ended, thread no
-- longer active), but only for a thread that has rows shadow has not read and no offer already
-- standing or deferred, and no running run. That is what stops tick from offering the same thread
-- every minute forever: an offer stands until a claim answers it, and a completed run leaves no
-- unread rows. A thread whose runs keep failing is offered again, and failure backoff bounds that.
--
-- The walk starts from the unread generations (generation_progress, kept by the write path,
-- functions/080_write_state.sql) through a partial index, so its cost follows the threads with
-- unread rows, not the number of threads or messages ever written.
CREATE OR REPLACE FUNCTION ember.shadow_tick_candidates(p_now timestamptz DEFAULT clock_timestamp())
RETURNS TABLE (tenant_id text, thread_id text, condition text)
LANGUAGE sql STABLE
AS $$
    SELECT
        t.tenant_id,
        t.id,
        CASE
            WHEN t.status <> 'active' THEN 'thread-' || t.status
            WHEN EXISTS (
                SELECT 1
                FROM ember.generation_progress AS p
                INNER JOIN ember.generations AS g ON g.tenant_id = p.tenant_id AND g.id = p.generation_id
                WHERE p.tenant_id = t.tenant_id AND p.thread_id = t.id AND p.unread AND g.ended_at IS NOT NULL
            ) THEN 'generation-ended'
            WHEN st.seen_generation_id IS DISTINCT FROM cur.id AND st.seen_generation_id IS NOT NULL
                THEN 'generation-changed'
            WHEN greatest(
                st.last_activity_at,
                (
                    SELECT max(p.last_message_at) FROM ember.generation_progress AS p
                    WHERE p.tenant_id = t.tenant_id AND p.thread_id = t.id
                ),
                t.created_at
            ) + ember.setting_interval('idle_before_digest') <= p_now THEN 'idle'
        END AS condition
    FROM (
        SELECT DISTINCT u.tenant_id, u.thread_id AS id
        FROM ember.generation_progress AS u
        WHERE u.unread
    ) AS unread
    INNER JOIN ember.threads AS t ON t.tenant_id = unread.tenant_id AND t.id = unread.id
    LEFT JOIN ember.shadow_thread_state AS st ON st.tenant_id = t.tenant_id AND st.thread_id = t.id
    LEFT JOIN ember.generations AS cur
        ON cur.tenant_id = t.tenant_id AND cur.thread_id = t.id AND cur.ended_at IS NULL
    WHERE EXISTS (SELECT 1 FROM ember.shadow_activation)
        AND NOT ember.shadow_excluded(t.tenant_id, t.id)
        AND NOT EXISTS (
            SELECT 1 FROM ember.shadow_signals AS s WHERE s.tenant_id = t.tenant_id AND s.thread_id = t.id
        )
        AND NOT EXISTS (
            SELECT 1 FROM ember.shadow_runs AS r
            WHERE r.tenant_id = t.tenant_id AND r.thread_id = t.id AND r.status = 'running'
        )
$$;

-- Its length: every step works on the threads the first statement locked, in key order; split into
-- functions the lock set would have to be passed along, and the lock-order rule read in two places.
--
-- It spans tenants: its answer names each thread with its tenant ({"tenant": {"thread": …}} for
-- signalled, {"tenant": [threads]} for prefixes_dropped); run ids are unique across tenants.
CREATE OR REPLACE FUNCTION ember.tick(p_now timestamptz DEFAULT clock_timestamp())
RETURNS jsonb
LANGUAGE plpgsql
AS $$
DECLARE
    v_tenants text[];
    v_threads text[];
    v_dropped jsonb;
    v_abandoned bigint[] := '{}';
    v_cancelled bigint[] := '{}';
    v_signalled jsonb := '{}';
    v_ready integer;
    rec record;
BEGIN
    PERFORM ember.require_now(p_now);
    -- Two ticks at once would each offer the same threads; the second waits and finds the offers.
    PERFORM pg_advisory_xact_lock(hashtext('ember.tick'));

    -- Lock order. The host takes a thread's row first and then writes that thread's state rows
    -- (prefix, run, signals, shadow_thread_state, generation_changes), and a host transaction
    -- that writes several threads takes them in key order. Tick writes the same kinds of rows
    -- for many threads, so it locks every thread it will write for, in key order (tenant, id),
    -- in this one statement, and every statement below is confined to those threads. Writing a
    -- row before holding its thread (as the prefix delete and the generation_changes upsert once
    -- did) let a host transaction holding that row wait for a thread tick held: `deadlock
    -- detected`. A thread that only becomes due after this statement is left for the next tick.
    -- The lock set is two arrays of one order: v_tenants[i], v_threads[i] is one thread.
    SELECT coalesce(array_agg(l.tenant_id ORDER BY l.tenant_id, l.id), '{}'),
        coalesce(array_agg(l.id ORDER BY l.tenant_id, l.id), '{}')
    INTO v_tenants, v_threads
    FROM (
        SELECT t.tenant_id, t.id
        FROM ember.threads AS t
        WHERE (t.tenant_id, t.id) IN (
            SELECT p.tenant_id, p.thread_id FROM ember.shadow_prefixes AS p
            WHERE NOT EXISTS (
                SELECT 1 FROM ember.models AS md
                WHERE md.id = p.model AND p_now < p.request_started_at + md.cache_ttl
            )
            UNION
            SELECT r.tenant_id, r.thread_id FROM ember.shadow_runs AS r
            WHERE r.status = 'running' AND r.lease_expires_at <= p_now
            UNION
            SELECT c.tenant_id, c.thread_id FROM ember.shadow_tick_candidates(p_now) AS c
            WHERE c.condition IS NOT NULL
            UNION
            SELECT gc.tenant_id, gc.thread_id FROM ember.generation_changes AS gc
        )
        ORDER BY t.tenant_id, t.id
        FOR UPDATE OF t
    ) AS l;

    -- A prefix older than its model's cache TTL, counted from the original request's start, would
    -- be replayed at full input price while pretending to be hot. A prefix whose model is not in
    -- the registry can never be hot either.
    WITH dropped AS (
        DELETE FROM ember.shadow_prefixes AS p
        WHERE (p.tenant_id, p.thread_id) IN (SELECT * FROM unnest(v_tenants, v_threads))
            AND NOT EXISTS (
                SELECT 1 FROM ember.models AS md
                WHERE md.id = p.model AND p_now < p.request_started_at + md.cache_ttl
            )
        RETURNING p.tenant_id, p.thread_id
    )
    SELECT coalesce(jsonb_object_agg(x.tenant_id, x.threads), '{}') INTO v_dropped
    FROM (
        SELECT d.tenant_id, jsonb_agg(d.thread_id ORDER BY d.thread_id) AS threads
        FROM dropped AS d GROUP BY d.tenant_id
    ) AS x;

    -- A run whose lease ran out lost its worker; it can no longer be submitted (submit_shadow_run
    -- refuses it), and its thread is offered again. The claim consumed the thread's offers, so
    -- without a new one the thread would wait for the next reason to come along.
    -- A run the user interrupted (cancel_requested) is recorded as cancelled, the way its own
    -- submit would have recorded it: the database already knows why it stopped, and "lease
    -- expired" would count it as a lost worker. Neither kind counts toward failure backoff.
    FOR rec IN
        UPDATE ember.shadow_runs
        SET status = CASE WHEN cancel_requested THEN 'cancelled' ELSE 'abandoned' END,
            finished_at = greatest(p_now, started_at),
            error = CASE
                WHEN NOT cancel_requested THEN 'lease expired'
                WHEN ember.is_isolated(tenant_id, thread_id) THEN 'thread-isolated'
                ELSE 'interrupted-by-user'
            END
        WHERE status = 'running' AND lease_expires_at <= p_now
            AND (tenant_id, thread_id) IN (SELECT * FROM unnest(v_tenants, v_threads))
        RETURNING id, tenant_id, thread_id, status
    LOOP
        IF rec.status = 'cancelled' THEN
            v_cancelled := v_cancelled || rec.id;
        ELSE
            v_abandoned := v_abandoned || rec.id;
            PERFORM ember.shadow_memory_changed(rec.tenant_id, rec.thread_id, 'idle-or-ended', p_now);
        END IF;
    END LOOP;

    -- Re-read under the locks: a host write that committed meanwhile may have settled a thread.
    FOR rec IN SELECT c.tenant_id, c.thread_id, c.condition FROM ember.shadow_tick_candidates(p_now) AS c
        WHERE c.condition IS NOT NULL
            AND (c.tenant_id, c.thread_id) IN (SELECT * FROM unnest(v_tenants, v_threads))
        ORDER BY c.tenant_id, c.thread_id
    LOOP
        PERFORM ember.shadow_memory_changed(rec.tenant_id, rec.thread_id, 'idle-or-ended', p_now);
        v_signalled := jsonb_set(
            v_signalled, ARRAY[rec.tenant_id],
            coalesce(v_signalled -> rec.tenant_id, '{}') || jsonb_build_object(rec.thread_id, rec.condition)
        );
    END LOOP;

    -- Remember the current generation of each thread whose generation changed since the last
    -- tick (the write path lists them in generation_changes), so the next tick can tell that it
    -- changed. Every other thread's remembered generation is already its current one.
    WITH changed AS (
        DELETE FROM ember.generation_changes AS gc
        WHERE (gc.tenant_id, gc.thread_id) IN (SELECT * FROM unnest(v_tenants, v_threads))
        RETURNING gc.tenant_id, gc.thread_id
    )
    INSERT INTO ember.shadow_thread_state AS s (tenant_id, thread_id, last_activity_at, seen_generation_id)
    SELECT t.tenant_id, t.id, t.created_at, g.id
    FROM changed AS c
    INNER JOIN ember.threads AS t ON t.tenant_id = c.tenant_id AND t.id = c.thread_id
    INNER JOIN ember.generations AS g ON g.tenant_id = t.tenant_id AND g.thread_id = t.id AND g.ended_at IS NULL
    WHERE NOT ember.shadow_excluded(t.tenant_id, t.id)
    ON CONFLICT (tenant_id, thread_id) DO UPDATE SET seen_generation_id = excluded.seen_generation_id
    WHERE s.seen_generation_id IS DISTINCT FROM excluded.seen_generation_id;

    SELECT count(*) INTO v_ready FROM ember.shadow_ready(p_now) AS r WHERE r.model IS NOT NULL;
    IF v_ready > 0 THEN
        PERFORM pg_notify('ember_wake', '');
    END IF;

    RETURN jsonb_build_object(
        'prefixes_dropped', v_dropped,
        'runs_abandoned', to_jsonb(v_abandoned),
        'runs_cancelled', to_jsonb(v_cancelled),
        'signalled', v_signalled,
        'ready', v_ready
    );
END;
$$;

-- tick() for a fleet of workers: each worker calls this every tick interval, and about one tick an
-- interval runs. A worker finds the last tick in ember.fleet_tick; younger than half of p_every,
-- it is left alone (NULL). Nothing is held between calls: a worker that stops ticking, dead or
-- frozen with its connections open, is simply not the last to tick any more, and the next
-- worker's next call ticks. The transaction lock only keeps two callers from both deciding to
-- tick at once; tick() itself would serialize them too (its own lock), a second time for nothing.
-- Returns tick()'s answer and the worker that ticked before (ticker_before), so a worker can say
-- when it took over.
CREATE OR REPLACE FUNCTION ember.fleet_tick(p_worker text, p_every interval)
RETURNS jsonb
LANGUAGE plpgsql
AS $$
DECLARE
    v_last ember.fleet_tick;
    v_result jsonb;
BEGIN
    IF p_worker IS NULL OR p_worker = '' OR length(p_worker) > 200 THEN
        RAISE EXCEPTION 'fleet_tick: the worker name must be 1 to 200 characters'
            USING ERRCODE = '22023';
    END IF;
    IF p_every IS NULL OR p_every <= interval '0' OR p_every > interval '1 day' THEN
        RAISE EXCEPTION 'fleet_tick: the tick interval must be above 0 and at most a day, not %',
            p_every USING ERRCODE = '22023';
    END IF;
    IF NOT pg_try_advisory_xact_lock(hashtext('ember.fleet_tick')) THEN
        RETURN NULL;  -- another worker is deciding, or ticking, right now
    END IF;
    SELECT * INTO v_last FROM ember.fleet_tick WHERE one;
    IF v_last.ticked_at > clock_timestamp() - p_every / 2 AND v_last.ticked_at <= clock_timestamp() THEN
        RETURN NULL;
    END IF;
    v_result := ember.tick();
    INSERT INTO ember.fleet_tick (one, worker, ticked_at) VALUES (true, p_worker, clock_timestamp())
    ON CONFLICT (one) DO UPDATE SET worker = excluded.worker, ticked_at = excluded.ticked_at;
    RETURN v_result || jsonb_build_object('ticker_before', v_last.worker);
END;
$$;
