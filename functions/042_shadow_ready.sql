-- shadow_ready(): which threads have shadow work now, by which path and with which model
-- (seed 000 sections 3, 4 and 7). It only reads; claim_shadow_run() takes one of its rows.

-- When the thread's generation may be offered again after repeated failures, or NULL when it is
-- not held back. Failures count from the generation's last completed run: a success resets the
-- count. A run abandoned because its lease lapsed counts too: its worker died or wedged on this
-- thread's work, and an answer that does that once does it on every offer, each a paid call.
-- Cancelled runs and runs released at a shutdown neither count nor reset, since neither says
-- anything about the thread. The constants are the steward's (settings failure_backoff_after and
-- failure_backoff). The count is state on the generation's progress row, kept by the shadow_runs
-- trigger (functions/080_write_state.sql), so this is one read by primary key however many runs
-- the generation has had.
CREATE OR REPLACE FUNCTION ember.shadow_backoff_until(p_tenant text, p_thread text, p_generation uuid)
RETURNS timestamptz
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_failures integer;
    v_last timestamptz;
BEGIN
    SELECT p.failures, p.last_failed_at INTO v_failures, v_last
    FROM ember.generation_progress AS p
    WHERE p.tenant_id = p_tenant AND p.generation_id = p_generation AND p.thread_id = p_thread;
    IF NOT FOUND THEN
        -- A generation with no rows has no progress row (and nothing to read): count its runs.
        SELECT count(*), max(r.finished_at) INTO v_failures, v_last
        FROM ember.shadow_runs AS r
        WHERE r.tenant_id = p_tenant
            AND r.thread_id = p_thread
            AND r.generation_id = p_generation
            AND (r.status = 'failed' OR (r.status = 'abandoned' AND r.error = 'lease expired'))
            AND r.id > coalesce((
                SELECT max(c.id) FROM ember.shadow_runs AS c
                WHERE c.tenant_id = p_tenant AND c.thread_id = p_thread AND c.generation_id = p_generation
                    AND c.status = 'completed'
            ), 0);
    END IF;
    IF v_failures >= ember.setting_int('failure_backoff_after') THEN
        RETURN v_last + ember.setting_interval('failure_backoff');
    END IF;
    RETURN NULL;
END;
$$;

-- The cold path's model: the first light model tagged for every label of the generation
-- (route_model_or_reason, which never downgrades). When there is none the work waits, and says
-- for what, instead of failing the whole ready() call: one category thread without a tagged model
-- must not stop every other thread's work. Asking costs no subtransaction: the router answers
-- NULL with its reason rather than raising.
CREATE OR REPLACE FUNCTION ember.shadow_light_model(p_generation uuid, OUT model text, OUT waiting_for text)
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_labels text[];
    v_route record;
BEGIN
    v_labels := ember.generation_labels(p_generation);
    v_route := ember.route_model_or_reason('light', v_labels);
    model := v_route.model;
    IF model IS NULL THEN
        waiting_for := format('a light model tagged for %s (%s)', array_to_string(v_labels, ', '), v_route.reason);
    END IF;
END;
$$;

-- Readiness of one thread, decided from its own rows only (every lookup is by the thread's or
-- its generation's key): the row shadow_ready() gives for the thread, or, when it gives none,
-- not_ready saying why and, for failure backoff, not_ready_until saying until when. The claim
-- asks this for the thread it picked, and records a not-ready answer on the offer
-- (shadow_offers.parked_*) so that later claims pass over it until something it depends on
-- changes. shadow_ready() is this, for every thread with a standing offer.
--
-- Its length: the claim asks it for every thread it picks (B3, B11), so the thread's conditions
-- are one statement and the generation's another; a function per condition is a call per pick.
CREATE OR REPLACE FUNCTION ember.shadow_thread_readiness(
    p_tenant text, p_thread text, p_now timestamptz DEFAULT clock_timestamp()
)
RETURNS TABLE (
    tenant_id text,
    thread_id text,
    generation_id uuid,
    path text,
    model text,
    waiting_for text,
    reasons text[],
    from_seq bigint,
    through_seq bigint,
    signalled_at timestamptz,
    not_ready text,
    not_ready_until timestamptz
)
LANGUAGE plpgsql STABLE
AS $$
#variable_conflict use_column
DECLARE
    g record;
    v_until timestamptz;
    v_route record;
BEGIN
    tenant_id := p_tenant;
    thread_id := p_thread;
    -- The thread-level conditions in one statement: the claim asks this for every thread it
    -- picks, and each statement of a plpgsql function has a cost of its own.
    SELECT
        CASE
            WHEN o.signalled_at IS NULL THEN 'no standing offer'
            WHEN NOT EXISTS (SELECT 1 FROM ember.shadow_activation) THEN 'shadow is not activated'
            WHEN ember.shadow_excluded(p_tenant, p_thread) THEN 'a thread shadow never reads'
            WHEN EXISTS (
                SELECT 1 FROM ember.shadow_runs AS r
                WHERE r.tenant_id = p_tenant AND r.thread_id = p_thread AND r.status = 'running'
            ) THEN 'a run is running'
            WHEN EXISTS (
                SELECT 1 FROM ember.shadow_thread_state AS st
                WHERE st.tenant_id = p_tenant AND st.thread_id = p_thread AND st.turn_running AND NOT st.waiting_user
            ) THEN 'a turn is running'
        END,
        o.signalled_at
    INTO not_ready, signalled_at
    FROM (
        SELECT min(s.created_at) AS signalled_at
        FROM ember.shadow_signals AS s
        WHERE s.tenant_id = p_tenant AND s.thread_id = p_thread AND NOT s.deferred
    ) AS o;
    IF not_ready IS NOT NULL THEN
        signalled_at := NULL;
        RETURN NEXT;
        RETURN;
    END IF;

    -- The earliest generation with unread rows, from the state the write path keeps
    -- (generation_progress: read_seq is shadow_read_position, last_seq the generation's max(seq)),
    -- and the prefix's model when the generation may take the hot path: the thread's prefix
    -- belongs to this generation, the generation is open, the prefix carries the shadow tool and
    -- passes the hot-path rule, and its model is tagged for every label (routing never
    -- downgrades, invariant 9, on the hot path too).
    SELECT
        gn.id, gn.ended_at IS NULL AS gen_open, gn.labels, p.read_seq, p.last_seq,
        -- The settings are read only for a generation that has failed at all.
        CASE WHEN p.failures > 0 AND p.failures >= ember.setting_int('failure_backoff_after')
            THEN p.last_failed_at + ember.setting_interval('failure_backoff') END AS backoff_until,
        (
            SELECT pf.model
            FROM ember.shadow_prefixes AS pf
            INNER JOIN ember.models AS md ON md.id = pf.model
            WHERE pf.tenant_id = p_tenant
                AND pf.thread_id = p_thread
                AND pf.generation_id = gn.id
                AND gn.ended_at IS NULL
                AND pf.has_shadow_tool
                AND (ember.hot_path_rule(pf.model, pf.estimated_tokens, p_now - pf.request_started_at)).eligible
                AND md.tags @> gn.labels
        ) AS hot_model
    INTO g
    FROM ember.generation_progress AS p
    INNER JOIN ember.generations AS gn ON gn.tenant_id = p.tenant_id AND gn.id = p.generation_id
    WHERE p.tenant_id = p_tenant AND p.thread_id = p_thread AND p.unread
    ORDER BY gn.ordinal
    LIMIT 1;
    IF NOT FOUND THEN
        signalled_at := NULL;
        not_ready := 'nothing unread';
        RETURN NEXT;
        RETURN;
    END IF;
    IF p_now < g.backoff_until THEN
        signalled_at := NULL;
        not_ready := 'failure backoff';
        not_ready_until := g.backoff_until;
        RETURN NEXT;
        RETURN;
    END IF;

    generation_id := g.id;
    from_seq := g.read_seq;
    through_seq := g.last_seq;
    IF g.hot_model IS NOT NULL THEN
        path := 'hot';
        model := g.hot_model;
    ELSE
        path := 'cold';
        v_route := ember.route_model_or_reason('light', g.labels);
        model := v_route.model;
        IF model IS NULL THEN
            waiting_for := format('a light model tagged for %s (%s)',
                                  array_to_string(g.labels, ', '), v_route.reason);
        END IF;
    END IF;
    reasons := ARRAY(
        SELECT s.reason FROM ember.shadow_signals AS s WHERE s.tenant_id = p_tenant AND s.thread_id = p_thread
        GROUP BY s.reason ORDER BY min(s.created_at), s.reason
    );
    RETURN NEXT;
END;
$$;

-- One row per thread with shadow work: the thread, the generation to read (its earliest one with
-- unread rows, so an ended generation is finished before the next is started), the path and model,
-- the pending reasons, and the rows to read: seq above from_seq, up to through_seq.
--
-- A thread is ready when shadow is activated, it is not main, the steward or isolated, it has a
-- standing (not deferred) offer, unread rows, no running run, no running turn (a turn blocked on the
-- user does not count: waiting-user is the hottest moment), and its generation is not in failure
-- backoff.
--
-- Path: hot when the thread's prefix belongs to that generation and the generation is still the
-- current one, is younger than its model's cache TTL (measured from the original request's start,
-- since that is when the cache entry's lifetime began), has the shadow tool in its tools, and is at
-- least the model's minimum cacheable length, and that model is tagged for every label of the
-- generation; the model is then the prefix's own (the model that already read all of it). Otherwise
-- cold, with a light model from routing; model is NULL and waiting_for says why when no light model
-- may read the generation's labels.
--
-- The rule for one thread is shadow_thread_readiness(); this lists it for every thread with a
-- standing offer, read from the signals themselves (not from the claim's shadow_offers), so it
-- is also the from-scratch answer the maintained offers are tested against.
-- It spans tenants (the worker's claims do); p_tenant limits the answer to one tenant, and
-- p_tenant with p_thread to one thread.
CREATE OR REPLACE FUNCTION ember.shadow_ready(
    p_now timestamptz DEFAULT clock_timestamp(), p_tenant text DEFAULT NULL, p_thread text DEFAULT NULL
)
RETURNS TABLE (
    tenant_id text,
    thread_id text,
    generation_id uuid,
    path text,
    model text,
    waiting_for text,
    reasons text[],
    from_seq bigint,
    through_seq bigint,
    signalled_at timestamptz
)
LANGUAGE plpgsql STABLE
AS $$
#variable_conflict use_column
BEGIN
    PERFORM ember.require_now(p_now);
    IF p_thread IS NOT NULL THEN
        IF p_tenant IS NULL THEN
            RAISE EXCEPTION 'shadow_ready: a thread is named within its tenant; p_tenant is missing'
                USING ERRCODE = 'EM151';
        END IF;
        RETURN QUERY
        SELECT r.tenant_id, r.thread_id, r.generation_id, r.path, r.model, r.waiting_for, r.reasons,
            r.from_seq, r.through_seq, r.signalled_at
        FROM ember.shadow_thread_readiness(p_tenant, p_thread, p_now) AS r
        WHERE r.not_ready IS NULL;
        RETURN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM ember.shadow_activation) THEN
        RETURN;
    END IF;
    RETURN QUERY
    SELECT r.tenant_id, r.thread_id, r.generation_id, r.path, r.model, r.waiting_for, r.reasons,
        r.from_seq, r.through_seq, r.signalled_at
    FROM (
        SELECT DISTINCT s.tenant_id, s.thread_id FROM ember.shadow_signals AS s
        WHERE NOT s.deferred AND (p_tenant IS NULL OR s.tenant_id = p_tenant)
    ) AS o
    CROSS JOIN LATERAL ember.shadow_thread_readiness(o.tenant_id, o.thread_id, p_now) AS r
    -- Only for the order: the claim's, hot first, then by claim round (041_shadow_offers.sql).
    LEFT JOIN ember.shadow_offers AS so ON so.tenant_id = r.tenant_id AND so.thread_id = r.thread_id
    WHERE r.not_ready IS NULL
    ORDER BY (r.path = 'hot') DESC, so.claim_round, r.signalled_at, r.tenant_id, r.thread_id;
END;
$$;
