-- claim_steward_run(): one wake of the memory steward (seed 001 sections 1, 3 and 5). A worker
-- takes the next slice of the backlog and gets everything the model call needs in one jsonb
-- plan; the run row holds an expiring lease instead of a transaction held open across the model
-- calls, and steward_step() is the only way back in (functions/051_steward_step.sql).
--
-- One run at a time: the steward thread's row is locked FOR UPDATE SKIP LOCKED, so a second
-- claimer returns at once instead of queueing, and the unique index on running runs is the last
-- guard. A lapsed lease is abandoned by the next claim (nothing it read was marked digested, so
-- the rows are simply offered again).

-- The steward's model of a tenant: its pin (copied once from main by ensure_steward_thread),
-- else the first light model for unlabelled content. Unpinned, the steward sees only unlabelled
-- rows (the backlog reads its tags as empty), so the routed model is never a downgrade.
CREATE OR REPLACE FUNCTION ember.steward_model(p_tenant text)
RETURNS text
LANGUAGE sql STABLE
AS $$
    SELECT coalesce(
        (SELECT t.model FROM ember.threads AS t
         WHERE t.tenant_id = p_tenant AND t.kind = 'steward' AND ember.is_steward_thread(p_tenant, t.id)),
        ember.route_model('light', '{}')
    )
$$;

-- A tenant's backlog by generation, oldest first, with whether each may be read now and why not.
--   ready      the generation has ended, or its thread has been idle for idle_before_digest
--   labelled   the whole generation's labels (ember.generation_labels) are covered by the
--              steward model's tags; checked per generation, not per row, because reading part
--              of a generation reports the whole generation as read (report_read_generations)
-- The backlog already leaves out isolated threads, the steward's own record, main's rows from
-- before the steward existed, and rows whose own labels the model is not tagged for.
CREATE OR REPLACE FUNCTION ember.steward_backlog_generations(
    p_tenant text, p_now timestamptz DEFAULT clock_timestamp()
)
RETURNS TABLE (
    generation_id uuid,
    thread_id text,
    first_seq bigint,
    row_count integer,
    labels text[],
    ready boolean,
    covered boolean
)
LANGUAGE sql STABLE
AS $$
    WITH b AS (
        SELECT bl.generation_id, bl.thread_id, min(bl.seq) AS first_seq, count(*)::integer AS row_count
        FROM ember.steward_backlog(p_tenant) AS bl
        GROUP BY bl.generation_id, bl.thread_id
    )
    SELECT
        b.generation_id,
        b.thread_id,
        b.first_seq,
        b.row_count,
        ember.generation_labels(b.generation_id),
        g.ended_at IS NOT NULL
        OR (
            SELECT m.created_at FROM ember.messages AS m
            WHERE m.tenant_id = p_tenant AND m.thread_id = b.thread_id ORDER BY m.seq DESC LIMIT 1
        ) <= ember.require_now(p_now) - ember.setting_interval('idle_before_digest'),
        ember.generation_labels(b.generation_id) <@ coalesce(
            (SELECT md.tags FROM ember.models AS md WHERE md.id = ember.steward_model(p_tenant)), '{}'
        )
    FROM b
    INNER JOIN ember.generations AS g ON g.tenant_id = p_tenant AND g.id = b.generation_id
    ORDER BY b.first_seq
$$;

-- Whether generation p_generation of thread p_thread has undigested rows the steward owns: all of
-- them while the thread is not cut over, else only those at or below the cut-over point, the one
-- rule of ownership (ember.cutover_from_seq) that the backlog reads too. Rows above the point
-- are shadow's, and never wake the steward.
CREATE OR REPLACE FUNCTION ember.steward_owns_undigested(p_tenant text, p_thread text, p_generation uuid)
RETURNS boolean
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_from bigint := ember.cutover_from_seq(p_tenant, p_thread);
BEGIN
    IF v_from IS NULL THEN
        RETURN true;
    END IF;
    RETURN EXISTS (
        SELECT 1 FROM ember.messages AS m
        WHERE m.tenant_id = p_tenant AND m.generation_id = p_generation AND m.seq <= v_from
            AND m.episode_id IS NULL
    );
END;
$$;

-- Whether a claim could find steward work of one tenant now, answered from generation_progress
-- through its partial indexes (tenant first, db/migrations/0053_tenant_thread_indexes.sql)
-- without reading the backlog: some generation the steward reads has undigested rows, is covered
-- by the steward model's tags, and has ended or has had no row for idle_before_digest. It may say
-- true when the backlog's finer rules (a carrier's rows from before the steward, a thread hidden
-- from the steward) leave nothing to read, which costs one claim; it never says false when a
-- claim would find work, since a generation's last row is never later than its thread's.
CREATE OR REPLACE FUNCTION ember.steward_tenant_has_work(
    p_tenant text, p_now timestamptz DEFAULT clock_timestamp()
)
RETURNS boolean
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_tags text[];
    v_model text;
BEGIN
    SELECT t.model INTO v_model FROM ember.threads AS t
    WHERE t.tenant_id = p_tenant AND t.kind = 'steward' AND ember.is_steward_thread(p_tenant, t.id);
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    v_model := coalesce(v_model, (ember.route_model_or_reason('light', '{}')).model);
    v_tags := coalesce((SELECT md.tags FROM ember.models AS md WHERE md.id = v_model), '{}');
    RETURN EXISTS (
        SELECT 1
        FROM ember.generation_progress AS p
        INNER JOIN ember.generations AS g ON g.tenant_id = p.tenant_id AND g.id = p.generation_id
        WHERE p.tenant_id = p_tenant AND p.undigested > 0 AND p.steward_reads AND p.ended
            AND g.labels <@ v_tags
            AND ember.steward_owns_undigested(p_tenant, p.thread_id, p.generation_id)
    ) OR EXISTS (
        SELECT 1
        FROM ember.generation_progress AS p
        INNER JOIN ember.generations AS g ON g.tenant_id = p.tenant_id AND g.id = p.generation_id
        WHERE p.tenant_id = p_tenant AND p.undigested > 0 AND p.steward_reads
            AND p.last_message_at <= ember.require_now(p_now) - ember.setting_interval('idle_before_digest')
            AND g.labels <@ v_tags
            AND ember.steward_owns_undigested(p_tenant, p.thread_id, p.generation_id)
    );
END;
$$;

-- The tenants with a generation the steward may be due to read (undigested, ended or idle for
-- idle_before_digest), from the partial indexes of pending generations: the candidates that
-- steward_tenant_has_work then decides, so the cost follows the tenants with pending work.
CREATE OR REPLACE FUNCTION ember.steward_candidate_tenants(p_now timestamptz)
RETURNS TABLE (tenant_id text)
LANGUAGE sql STABLE
AS $$
    SELECT p.tenant_id FROM ember.generation_progress AS p
    WHERE p.undigested > 0 AND p.steward_reads AND p.ended
    UNION
    SELECT p.tenant_id FROM ember.generation_progress AS p
    WHERE p.undigested > 0 AND p.steward_reads
        AND p.last_message_at <= ember.require_now(p_now) - ember.setting_interval('idle_before_digest')
$$;

-- The tenants whose steward has work now (steward_tenant_has_work), in the order claims serve
-- them: the tenant whose steward was claimed longest ago (or never) first, so a tenant with a
-- large backlog takes one wake in turn with every other tenant that has work, never all of them.
-- The candidates come from the partial indexes of pending generations, so the cost follows the
-- tenants with pending work, not every tenant the deployment holds.
CREATE OR REPLACE FUNCTION ember.steward_work_tenants(p_now timestamptz DEFAULT clock_timestamp())
RETURNS TABLE (tenant_id text)
LANGUAGE sql STABLE
AS $$
    SELECT c.tenant_id
    FROM ember.steward_candidate_tenants(p_now) AS c
    WHERE ember.steward_tenant_has_work(c.tenant_id, p_now)
    ORDER BY (SELECT max(r.id) FROM ember.steward_runs AS r WHERE r.tenant_id = c.tenant_id) NULLS FIRST, c.tenant_id
$$;

-- Whether a claim could find steward work of any tenant now. The worker asks this before it
-- claims (in the same statement), so an idle steward costs an index probe, not a lock.
CREATE OR REPLACE FUNCTION ember.steward_has_work(p_now timestamptz DEFAULT clock_timestamp())
RETURNS boolean
LANGUAGE sql STABLE
AS $$
    SELECT EXISTS (
        SELECT 1
        FROM ember.steward_candidate_tenants(p_now) AS c
        WHERE ember.steward_tenant_has_work(c.tenant_id, p_now)
    )
$$;

-- Pages for the steward: each generation's rows through the one pager (ember.render_pages),
-- generation after generation in backlog order, each page a text of lines. Paging per generation
-- rather than over all ids at once keeps a thread's rows together: the pager orders by seq, and
-- rows of several threads interleaved by seq would read as one conversation switching speakers.
-- The pager's header line names the thread and the generation, which a model may cite whole.
CREATE OR REPLACE FUNCTION ember.steward_pages(p_tenant text, p_message_ids bigint[])
RETURNS jsonb
LANGUAGE sql STABLE
AS $$
    SELECT coalesce(jsonb_agg(page.text ORDER BY g.first_seq, page.ord), '[]')
    FROM (
        SELECT m.generation_id, min(m.seq) AS first_seq, array_agg(m.id) AS ids
        FROM ember.messages AS m WHERE m.tenant_id = p_tenant AND m.id = ANY(p_message_ids)
        GROUP BY m.generation_id
    ) AS g
    CROSS JOIN LATERAL (
        SELECT p.ord, (SELECT string_agg(l.line, E'\n' ORDER BY l.o)
                       FROM jsonb_array_elements_text(p.lines) WITH ORDINALITY AS l (line, o)) AS text
        FROM jsonb_array_elements(ember.render_pages(p_tenant, g.ids)) WITH ORDINALITY AS p (lines, ord)
    ) AS page
$$;

-- Abandon the tenant's running steward run if its lease lapsed. Returns the run abandoned, if any.
CREATE OR REPLACE FUNCTION ember.steward_abandon_expired(p_tenant text, p_now timestamptz DEFAULT clock_timestamp())
RETURNS bigint
LANGUAGE sql
AS $$
    UPDATE ember.steward_runs
    SET status = 'abandoned', error = 'lease expired',
        finished_at = greatest(lease_expires_at, started_at)
    WHERE tenant_id = p_tenant AND status = 'running' AND lease_expires_at <= ember.require_now(p_now)
    RETURNING id
$$;

-- Its length: one wake's claim under the steward thread's lock, in order (work, lock, expired runs,
-- pages within the token budget, model check, run insert); benchmarked (B6, B11).
--
-- Tenants. The claim spans tenants and takes one tenant's backlog: the first tenant of
-- steward_work_tenants (the one served longest ago) whose steward thread it can lock and whose
-- steward has no run out. Each tenant's steward runs one wake at a time, so concurrent claims
-- serve different tenants; the plan names the tenant, and every later call about the run takes it.
CREATE OR REPLACE FUNCTION ember.claim_steward_run(
    p_worker text, p_lease interval, p_now timestamptz DEFAULT clock_timestamp()
)
RETURNS jsonb
LANGUAGE plpgsql
AS $$
DECLARE
    v_model text;
    md ember.models;
    v_gens uuid[] := '{}';
    v_read_gens uuid[] := '{}';
    v_ids bigint[] := '{}';
    v_budget integer := ember.setting_int('steward_wake_tokens');
    v_tokens integer := 0;
    v_row_tokens integer;
    v_generation uuid;
    v_labels text[];
    v_pages jsonb;
    v_blocks jsonb;
    v_intro text;
    v_message bigint;
    v_run ember.steward_runs;
    v_tenant text;
    v_found boolean := false;
    m ember.messages;
BEGIN
    PERFORM ember.require_now(p_now);
    IF p_worker IS NULL OR btrim(p_worker) = '' THEN
        RAISE EXCEPTION 'a steward claim needs a worker name' USING ERRCODE = 'EM060';
    END IF;
    IF p_lease IS NULL OR p_lease <= interval '0' THEN
        RAISE EXCEPTION 'a steward claim needs a positive lease, got %', coalesce(p_lease::text, 'none')
            USING ERRCODE = 'EM060';
    END IF;

    -- Nothing to read, nothing to lock: asked first, the claim with no work writes nothing (the
    -- row lock below is a write). An expired run then waits for the next claim with work.
    FOR v_tenant IN SELECT w.tenant_id FROM ember.steward_work_tenants(p_now) AS w LOOP
        -- No steward thread, no steward (ensure_steward_thread runs at system start). Locked
        -- SKIP LOCKED: another claim has this tenant's steward, or a write to it is open.
        PERFORM 1 FROM ember.threads AS t
        WHERE t.tenant_id = v_tenant AND t.kind = 'steward' AND ember.is_steward_thread(v_tenant, t.id)
        FOR UPDATE SKIP LOCKED;
        CONTINUE WHEN NOT FOUND;
        PERFORM ember.steward_abandon_expired(v_tenant, p_now);
        CONTINUE WHEN EXISTS (
            SELECT 1 FROM ember.steward_runs WHERE tenant_id = v_tenant AND status = 'running'
        );
        v_model := ember.steward_model(v_tenant);
        SELECT * INTO md FROM ember.models WHERE id = v_model;
        CONTINUE WHEN NOT FOUND;
        v_gens := ARRAY(
            SELECT s.generation_id FROM ember.steward_backlog_generations(v_tenant, p_now) AS s
            WHERE s.ready AND s.covered
            ORDER BY s.first_seq
            LIMIT ember.setting_int('steward_wake_generations')
        );
        v_found := cardinality(v_gens) > 0;
        EXIT WHEN v_found;
    END LOOP;
    IF NOT v_found THEN
        RETURN NULL;
    END IF;

    -- Whole generations in order while the token budget lasts; the generation that crosses it is
    -- read up to the budget (at least one row, so one huge row never blocks the backlog) and its
    -- rest waits for the next wake.
    FOR m IN
        SELECT msg.*
        FROM ember.steward_backlog(v_tenant) AS b
        INNER JOIN ember.messages AS msg ON msg.tenant_id = v_tenant AND msg.id = b.id AND msg.thread_id = b.thread_id
        INNER JOIN unnest(v_gens) WITH ORDINALITY AS g (id, ord) ON g.id = b.generation_id
        ORDER BY g.ord, b.seq
    LOOP
        v_row_tokens := ember.estimate_tokens(ember.render_row(m)) + 1;
        EXIT WHEN cardinality(v_ids) > 0 AND v_tokens + v_row_tokens > v_budget;
        v_ids := v_ids || m.id;
        v_tokens := v_tokens + v_row_tokens;
        IF NOT m.generation_id = ANY(v_read_gens) THEN
            v_read_gens := v_read_gens || m.generation_id;
        END IF;
    END LOOP;

    -- A fresh steward generation per wake: its rows and facts carry what this wake read, not
    -- the union of every wake before it (labels only grow within a generation).
    v_generation := ember.start_generation(v_tenant, 'memory-steward', p_now);
    v_labels := ember.report_read_generations(v_generation, v_read_gens);
    IF NOT v_labels <@ md.tags THEN
        RAISE EXCEPTION 'steward claim: the read carries %, and model "%" is not tagged for all of them',
            v_labels, v_model
            USING ERRCODE = 'EM022';
    END IF;

    v_pages := ember.steward_pages(v_tenant, v_ids);
    v_intro := format('Backlog to digest: %s rows in %s pages. Cite rows by the number after "m:".',
                      cardinality(v_ids), jsonb_array_length(v_pages));
    v_blocks := jsonb_build_array(jsonb_build_object('type', 'text', 'text', v_intro))
        || (SELECT jsonb_agg(jsonb_build_object('type', 'text', 'text', x.value) ORDER BY x.o)
            FROM jsonb_array_elements_text(v_pages) WITH ORDINALITY AS x (value, o));
    -- The steward's record holds what it was given, exactly as the worker sends it.
    v_message := ember.append_steward_record(
        v_tenant, 'user',
        v_intro || E'\n\n' || (SELECT string_agg(x.value, E'\n\n' ORDER BY x.o)
                               FROM jsonb_array_elements_text(v_pages) WITH ORDINALITY AS x (value, o)),
        'system', v_blocks::json, p_now => p_now
    );

    INSERT INTO ember.steward_runs (
        tenant_id, generation_id, model, read_message_ids, read_generations, read_tokens,
        price_as_of, price_input, price_output, price_cache_write_5m, price_cache_write_1h,
        price_cache_read, started_at, worker, lease_token, lease_expires_at
    ) VALUES (
        v_tenant, v_generation, v_model, v_ids, v_read_gens, v_tokens,
        md.price_as_of, md.price_input, md.price_output, md.price_cache_write_5m,
        md.price_cache_write_1h, md.price_cache_read, p_now, p_worker, gen_random_uuid(), p_now + p_lease
    )
    RETURNING * INTO v_run;

    RETURN jsonb_build_object(
        'run_id', v_run.id,
        'lease_token', v_run.lease_token,
        'lease_expires_at', v_run.lease_expires_at,
        'tenant', v_tenant,
        'thread_id', 'memory-steward',
        'generation_id', v_generation,
        'episode_id', v_run.episode_id,
        'model', v_model,
        'labels', to_jsonb(v_labels),
        'generations', to_jsonb(v_read_gens),
        'row_count', cardinality(v_ids),
        'first_message_id', v_ids[1],
        'last_message_id', (SELECT m2.id FROM ember.messages AS m2
                            WHERE m2.tenant_id = v_tenant AND m2.id = ANY(v_ids)
                            ORDER BY m2.seq DESC LIMIT 1),
        'read_tokens', v_tokens,
        'pages', v_pages,
        'content', v_blocks,
        'message_id', v_message,
        'max_rounds', ember.setting_int('steward_max_rounds')
    );
END;
$$;

-- Push the lease of a running run forward (a long run between rounds). Refused like a step:
-- unknown run EM061, wrong token EM062, lapsed lease EM063, run not running EM064.
CREATE OR REPLACE FUNCTION ember.extend_steward_lease(
    p_tenant text, p_run bigint, p_lease_token uuid, p_lease interval, p_now timestamptz DEFAULT clock_timestamp()
)
RETURNS timestamptz
LANGUAGE plpgsql
AS $$
DECLARE
    r ember.steward_runs;
BEGIN
    IF p_lease IS NULL OR p_lease <= interval '0' THEN
        RAISE EXCEPTION 'a steward lease must be positive, got %', coalesce(p_lease::text, 'none')
            USING ERRCODE = 'EM060';
    END IF;
    r := ember.steward_run_for_write(p_tenant, p_run, p_lease_token, p_now);
    UPDATE ember.steward_runs SET lease_expires_at = ember.require_now(p_now) + p_lease
    WHERE tenant_id = p_tenant AND id = p_run
    RETURNING lease_expires_at INTO r.lease_expires_at;
    RETURN r.lease_expires_at;
END;
$$;
