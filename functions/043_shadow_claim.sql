-- claim_shadow_run(): a worker takes one ready thread and gets everything it needs for the model
-- call in one jsonb plan. The run row holds an expiring lease instead of a transaction held open
-- across the model call; submit_shadow_run() is the only way back in.
--
-- Concurrency. The pick locks the thread's row FOR UPDATE SKIP LOCKED: two claimers skip each
-- other's thread instead of queueing on it, and append_message (which takes the same row lock)
-- cannot add a row to the thread while the claim reads it. A thread with an append still open is
-- skipped too, and is claimed once that append has committed; so the rows a plan reads are exactly
-- the thread's committed rows up to through_seq, and no row can later commit with a seq at or below
-- through_seq (invariant 8): within a thread seq is drawn under that lock, in commit order.
-- through_seq is the highest seq among the rows the plan actually rendered, never the global
-- sequence's position, which may be ahead of rows other transactions have not committed yet.
--
-- The pick's snapshot predates its lock: a competing claim may have committed a run for the same
-- thread in between. So the thread is checked under the lock, in a new statement (a fresh
-- snapshot under READ COMMITTED), before a run is written; the unique index on running runs is
-- the last guard. Doing it in one INSERT ... SELECT would trust the stale snapshot.
--
-- Cost. The pick walks shadow_offers (one row per thread with a standing offer) in claim order
-- through an index, locks the first thread it can, and asks shadow_thread_readiness for that
-- thread alone; a claim costs the same with 200 or 20,000 threads ready. Hot work comes first:
-- the first pass walks only the offers with a prefix young enough to be hot (few: tick drops the
-- rest). A thread found not claimable is parked on its offer (shadow_offers.parked_*) under its
-- lock, so the next claims pass over it until something it depends on changes
-- (functions/041_shadow_offers.sql); it is never consulted by computing shadow_ready() for all.
--
-- Tenants. A claim spans tenants, and its plan names the one it took. The walk goes by claim
-- round first (each offer's, set when it was made: functions/041_shadow_offers.sql), so every
-- tenant with work is served once a round, and a tenant with 10,000 threads waiting cannot starve
-- one with a single thread. With setting tenant_max_running_runs above 0, a tenant with that many
-- runs in flight is passed over: the count is taken under a transaction lock of the tenant's, so
-- two claims cannot both take its last place.

-- Its length: one claim under one lock, in the order it must happen (pick and park, hot re-check,
-- model lock, run insert, payload); it is benchmarked (B3, B11), and each split is a call per claim.
CREATE OR REPLACE FUNCTION ember.claim_shadow_run(
    p_worker text, p_lease interval, p_now timestamptz DEFAULT clock_timestamp()
)
RETURNS jsonb
LANGUAGE plpgsql
AS $$
DECLARE
    v_tenant text;
    v_thread text;
    v_cap integer;
    v_capped text[] := '{}';
    v_pass integer;
    v_cursor refcursor;
    v_epoch bigint;
    r record;
    v_found boolean := false;
    v_path text;
    v_model text;
    v_tags text[];
    v_ids bigint[];
    v_through bigint;
    pf ember.shadow_prefixes;
    v_run ember.shadow_runs;
    v_plan jsonb;
    v_rows jsonb;
    v_pages jsonb;
    v_prediction jsonb;
    v_ratio numeric;
BEGIN
    PERFORM ember.require_now(p_now);
    IF p_worker IS NULL OR btrim(p_worker) = '' THEN
        RAISE EXCEPTION 'a claim needs a worker name' USING ERRCODE = 'EM033';
    END IF;
    IF p_lease IS NULL OR p_lease <= interval '0' THEN
        RAISE EXCEPTION 'a claim needs a positive lease, got %', coalesce(p_lease::text, 'none')
            USING ERRCODE = 'EM033';
    END IF;

    IF NOT EXISTS (SELECT 1 FROM ember.shadow_activation) THEN
        RETURN NULL;
    END IF;
    -- Read before any readiness is decided, and recorded with each park (shadow_park_epoch).
    SELECT e.epoch INTO v_epoch FROM ember.shadow_park_epoch AS e;
    v_cap := ember.setting_int('tenant_max_running_runs');

    -- Hot candidates first, then every offer; by round, then oldest signal, within each pass. Each
    -- candidate is locked (SKIP LOCKED: another claimer has it, or a write to it is open) and its
    -- readiness decided under the lock. A thread that is not claimable is parked on its offer
    -- with the reason; one found cold in the hot pass is left for the second pass, in its turn.
    FOR v_pass IN 1..2 LOOP
        IF v_pass = 1 THEN
            OPEN v_cursor FOR
                SELECT o.tenant_id, o.thread_id
                FROM ember.shadow_prefixes AS p
                INNER JOIN ember.models AS md ON md.id = p.model
                INNER JOIN ember.shadow_offers AS o ON o.tenant_id = p.tenant_id AND o.thread_id = p.thread_id
                WHERE p.has_shadow_tool
                    AND p.request_started_at > p_now - (SELECT max(m.cache_ttl) FROM ember.models AS m)
                    AND p_now < p.request_started_at + md.cache_ttl
                    AND (o.parked_until IS NULL OR o.parked_until <= p_now OR o.parked_epoch <> v_epoch)
                ORDER BY o.claim_round, o.signalled_at, o.tenant_id, o.thread_id;
        ELSE
            OPEN v_cursor FOR
                SELECT o.tenant_id, o.thread_id
                FROM ember.shadow_offers AS o
                WHERE o.parked_until IS NULL OR o.parked_until <= p_now OR o.parked_epoch <> v_epoch
                ORDER BY o.claim_round, o.signalled_at, o.tenant_id, o.thread_id;
        END IF;
        LOOP
            FETCH v_cursor INTO v_tenant, v_thread;
            EXIT WHEN NOT FOUND;
            CONTINUE WHEN v_tenant = ANY (v_capped);
            PERFORM 1 FROM ember.threads AS t WHERE t.tenant_id = v_tenant AND t.id = v_thread FOR UPDATE SKIP LOCKED;
            CONTINUE WHEN NOT FOUND;
            SELECT * INTO r FROM ember.shadow_thread_readiness(v_tenant, v_thread, p_now) AS rd;
            IF r.not_ready IS NULL AND r.model IS NOT NULL THEN
                IF v_cap > 0 AND (v_pass = 2 OR r.path = 'hot') THEN
                    -- Not parked: the tenant's cap frees when one of its runs ends, not this thread.
                    PERFORM pg_advisory_xact_lock(hashtext('ember.tenant_running_runs'), hashtext(v_tenant));
                    IF (
                        SELECT count(*) FROM ember.shadow_runs AS sr
                        WHERE sr.tenant_id = v_tenant AND sr.status = 'running'
                    ) >= v_cap THEN
                        v_capped := v_capped || v_tenant;
                        CONTINUE;
                    END IF;
                END IF;
                v_found := v_pass = 2 OR r.path = 'hot';
                EXIT WHEN v_found;
            ELSIF r.not_ready IS DISTINCT FROM 'no standing offer' THEN
                UPDATE ember.shadow_offers SET
                    parked_until = coalesce(r.not_ready_until, 'infinity'),
                    parked_reason = coalesce(r.not_ready, r.waiting_for),
                    parked_epoch = v_epoch
                WHERE tenant_id = v_tenant AND thread_id = v_thread;
            END IF;
        END LOOP;
        CLOSE v_cursor;
        EXIT WHEN v_found;
    END LOOP;
    IF NOT v_found THEN
        RETURN NULL;
    END IF;

    v_path := r.path;
    v_model := r.model;
    IF v_path = 'hot' THEN
        -- The pick read readiness before it held the thread: a prefix dropped in between (by
        -- tick() or a human row, both under the thread lock) is gone now, so go cold.
        SELECT * INTO pf FROM ember.shadow_prefixes AS p
        WHERE p.tenant_id = v_tenant AND p.thread_id = v_thread FOR SHARE;
        IF NOT FOUND THEN
            v_path := 'cold';
            v_model := (ember.shadow_light_model(r.generation_id)).model;
            IF v_model IS NULL THEN
                RETURN NULL;
            END IF;
        END IF;
    END IF;

    SELECT array_agg(m.id ORDER BY m.seq), max(m.seq) INTO v_ids, v_through
    FROM ember.messages AS m
    WHERE m.tenant_id = v_tenant AND m.generation_id = r.generation_id AND m.seq > r.from_seq;
    IF v_ids IS NULL THEN
        RETURN NULL;
    END IF;

    IF v_path = 'hot' THEN
        -- The rows go along for the shadow question, which must give the model real ids to cite:
        -- a row written before the recorded request is in the replayed conversation already, and
        -- so is the recorded answer (the first row after the request, when it is the assistant's:
        -- the replay appends the stored response), so each goes as a line of the key (its id,
        -- place and first words: render_key_row); any other row written after the request (a
        -- tool result since) is not, and goes whole.
        SELECT jsonb_agg(CASE WHEN g.created_at <= pf.request_started_at
                                   OR (g.after = 1 AND g.role = 'assistant')
                              THEN ember.render_key_row(g.m, g.position)
                              ELSE ember.render_row(g.m) END ORDER BY g.seq)
        INTO v_rows
        FROM (
            SELECT x AS m, x.id, x.seq, x.created_at, x.role,
                row_number() OVER (ORDER BY x.seq) AS position,
                -- The place among the rows written after the request: 1 is the answer's.
                CASE WHEN x.created_at > pf.request_started_at
                     THEN row_number() OVER (PARTITION BY x.created_at > pf.request_started_at ORDER BY x.seq)
                END AS after
            FROM ember.messages AS x
            WHERE x.tenant_id = v_tenant AND x.generation_id = r.generation_id AND x.seq <= v_through
        ) AS g
        WHERE g.id = ANY (v_ids);
        v_prediction := ember.shadow_cost_prediction(v_tenant, r.generation_id, v_ids, v_model, pf.response, v_rows, NULL);
        -- hot_max_cost_ratio (0: off): a hot run predicted to cost more than that many times its
        -- cold run goes cold, and says so in its reasons.
        v_ratio := ember.setting('hot_max_cost_ratio')::numeric;
        IF v_ratio > 0 AND (v_prediction ->> 'hot_usd')::numeric > v_ratio * (v_prediction ->> 'cold_usd')::numeric THEN
            v_path := 'cold';
            v_model := v_prediction ->> 'cold_model';
            r.reasons := r.reasons || 'hot-costlier'::text;
        END IF;
    END IF;
    IF v_path = 'cold' THEN
        v_pages := ember.render_pages(v_tenant, v_ids);
        v_prediction := coalesce(
            v_prediction, ember.shadow_cost_prediction(v_tenant, r.generation_id, v_ids, NULL, NULL, NULL, v_pages)
        );
    END IF;

    -- Lock the model row the plan routes to (FOR SHARE) and check its tags again: a tag removal
    -- that committed after shadow_ready looked is seen here (a locked row is read in its latest
    -- version), and one that has not committed waits for this claim, and then finds the running
    -- run that relies on the tag (models_tags_known refuses it). Without the lock, labelled pages
    -- could go to a model that lost the tag a moment before. A failed re-check gives no plan now;
    -- the thread's offer stands, and the next claim routes afresh.
    SELECT md.tags INTO v_tags FROM ember.models AS md WHERE md.id = v_model FOR SHARE;
    IF NOT coalesce(v_tags @> ember.generation_labels(r.generation_id), false) THEN
        RETURN NULL;
    END IF;

    INSERT INTO ember.shadow_runs (
        tenant_id, thread_id, generation_id, path, model, reason, from_seq, through_seq,
        price_as_of, price_input, price_output, price_cache_write_5m, price_cache_write_1h,
        price_cache_read, started_at, worker, lease_token, lease_expires_at,
        predicted_hot_usd, predicted_cold_usd, cost_prediction
    )
    SELECT
        v_tenant, v_thread, r.generation_id, v_path, md.id, array_to_string(r.reasons, ','), r.from_seq, v_through,
        md.price_as_of, md.price_input, md.price_output, md.price_cache_write_5m, md.price_cache_write_1h,
        md.price_cache_read, p_now, p_worker, gen_random_uuid(), p_now + p_lease,
        (v_prediction ->> 'hot_usd')::numeric, (v_prediction ->> 'cold_usd')::numeric, v_prediction
    FROM ember.models AS md
    WHERE md.id = v_model
    RETURNING * INTO v_run;

    -- The run answers every offer standing for the thread, but it reads one generation: the
    -- earliest with unread rows, from from_seq through through_seq. When it completes and an
    -- ended generation of the thread is still unread, the completion offers the thread again
    -- (shadow_runs_note_progress, functions/080_write_state.sql), so consecutive claims read a
    -- thread's unread generations one after another without waiting for tick().
    DELETE FROM ember.shadow_signals WHERE tenant_id = v_tenant AND thread_id = v_thread;

    v_plan := jsonb_build_object(
        'run_id', v_run.id,
        'lease_token', v_run.lease_token,
        'lease_expires_at', v_run.lease_expires_at,
        'tenant', v_tenant,
        'thread_id', v_thread,
        'generation_id', r.generation_id,
        'path', v_path,
        'model', v_model,
        'reasons', to_jsonb(r.reasons),
        'from_seq', r.from_seq,
        'through_seq', v_through,
        'row_count', cardinality(v_ids),
        'predicted_cost', v_prediction
    );
    IF v_path = 'hot' THEN
        -- The stored bytes as JSON strings: a jsonb string keeps every character, so the worker
        -- gets back exactly the text the host recorded (key order and whitespace included).
        v_plan := v_plan || jsonb_build_object(
            'request', pf.request,
            'response', pf.response,
            'request_started_at', pf.request_started_at,
            'rows', v_rows
        );
    ELSE
        v_plan := v_plan || jsonb_build_object('pages', v_pages);
    END IF;
    RETURN v_plan;
END;
$$;
