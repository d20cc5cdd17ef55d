-- shadow_ready(): which threads have shadow work now, by which path and with which model
-- (seed 000 sections 3, 4 and 7). It only reads; claim_shadow_run() takes one of its rows.

-- When the thread's generation may be offered again after repeated failures, or NULL when it is
-- not held back. Failures count from the generation's last completed run: a success resets the
-- count. A run abandoned because its lease lapsed counts too: its worker died or wedged on this
-- thread's work, and an answer that does that once does it on every offer, each a paid call.
-- Cancelled runs and runs released at a shutdown neither count nor reset, since neither says
-- anything about the thread. The constants are the steward's (settings failure_backoff_after and
-- failure_backoff).
CREATE OR REPLACE FUNCTION ember.shadow_backoff_until(p_thread text, p_generation uuid)
RETURNS timestamptz
LANGUAGE sql STABLE
AS $$
    SELECT CASE
        WHEN count(*) >= ember.setting_int('failure_backoff_after')
            THEN max(r.finished_at) + ember.setting_interval('failure_backoff')
    END
    FROM ember.shadow_runs AS r
    WHERE r.thread_id = p_thread
        AND r.generation_id = p_generation
        AND (r.status = 'failed' OR (r.status = 'abandoned' AND r.error = 'lease expired'))
        AND r.id > coalesce((
            SELECT max(c.id) FROM ember.shadow_runs AS c
            WHERE c.thread_id = p_thread AND c.generation_id = p_generation AND c.status = 'completed'
        ), 0)
$$;

-- The cold path's model: the first light model tagged for every label of the generation
-- (route_model, which never downgrades). When there is none the work waits, and says for what,
-- instead of failing the whole ready() call: one category thread without a tagged model must not
-- stop every other thread's work.
CREATE OR REPLACE FUNCTION ember.shadow_light_model(p_generation uuid, OUT model text, OUT waiting_for text)
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_labels text[];
BEGIN
    v_labels := ember.generation_labels(p_generation);
    BEGIN
        model := ember.route_model('light', v_labels);
    EXCEPTION WHEN SQLSTATE 'EM022' THEN  -- category_model (docs/errors.md)
        model := NULL;
        waiting_for := format('a light model tagged for %s (%s)', array_to_string(v_labels, ', '), SQLERRM);
    END;
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
-- generation; the model is then the prefix's own (the model that already read all of it). Otherwise cold, with a light model from routing; model is NULL and
-- waiting_for says why when no light model may read the generation's labels.
--
-- p_thread limits the answer to one thread (claim uses it to re-check a thread it has locked).
CREATE OR REPLACE FUNCTION ember.shadow_ready(
    p_now timestamptz DEFAULT clock_timestamp(), p_thread text DEFAULT NULL
)
RETURNS TABLE (
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
    RETURN QUERY
    WITH cand AS (
        -- Only threads with a standing offer: the offers are few, the threads may be many.
        SELECT t.id AS tid
        FROM (
            SELECT DISTINCT s.thread_id FROM ember.shadow_signals AS s
            WHERE NOT s.deferred AND (p_thread IS NULL OR s.thread_id = p_thread)
        ) AS o
        INNER JOIN ember.threads AS t ON t.id = o.thread_id
        WHERE EXISTS (SELECT 1 FROM ember.shadow_activation)
            AND NOT ember.shadow_excluded(t.id)
            AND NOT EXISTS (
                SELECT 1 FROM ember.shadow_runs AS r WHERE r.thread_id = t.id AND r.status = 'running'
            )
            AND NOT EXISTS (
                SELECT 1 FROM ember.shadow_thread_state AS st
                WHERE st.thread_id = t.id AND st.turn_running AND NOT st.waiting_user
            )
    ),

    -- The earliest generation with unread rows, from the state the write path keeps
    -- (generation_progress: read_seq is shadow_read_position, last_seq the generation's max(seq)).
    gen AS (
        SELECT c.tid, u.gid, u.gen_open, u.pos, u.max_seq
        FROM cand AS c
        CROSS JOIN LATERAL (
            SELECT
                g.id AS gid,
                g.ended_at IS NULL AS gen_open,
                p.read_seq AS pos,
                p.last_seq AS max_seq
            FROM ember.generation_progress AS p
            INNER JOIN ember.generations AS g ON g.id = p.generation_id
            WHERE p.thread_id = c.tid AND p.unread
            ORDER BY g.ordinal
            LIMIT 1
        ) AS u
        WHERE coalesce(p_now >= ember.shadow_backoff_until(c.tid, u.gid), true)
    ),

    hot AS (
        SELECT gen.*, pf.model AS hot_model
        FROM gen
        LEFT JOIN LATERAL (
            SELECT p.model
            FROM ember.shadow_prefixes AS p
            INNER JOIN ember.models AS md ON md.id = p.model
            WHERE p.thread_id = gen.tid
                AND p.generation_id = gen.gid
                AND gen.gen_open
                AND p.has_shadow_tool
                AND (ember.hot_path_rule(p.model, p.estimated_tokens, p_now - p.request_started_at)).eligible
                -- Routing never downgrades (invariant 9), on the hot path too: that the host sent
                -- the thread to this model is no clearance for shadow to send it again.
                AND md.tags @> ember.generation_labels(gen.gid)
        ) AS pf ON true
    )

    SELECT
        h.tid,
        h.gid,
        CASE WHEN h.hot_model IS NOT NULL THEN 'hot' ELSE 'cold' END,
        coalesce(h.hot_model, lm.model),
        lm.waiting_for,
        ARRAY(
            SELECT s.reason FROM ember.shadow_signals AS s WHERE s.thread_id = h.tid
            GROUP BY s.reason ORDER BY min(s.created_at), s.reason
        ),
        h.pos,
        h.max_seq,
        (SELECT min(s.created_at) FROM ember.shadow_signals AS s WHERE s.thread_id = h.tid AND NOT s.deferred)
    FROM hot AS h
    LEFT JOIN LATERAL (
        SELECT l.model, l.waiting_for FROM ember.shadow_light_model(h.gid) AS l
        WHERE h.hot_model IS NULL
    ) AS lm ON true
    ORDER BY (h.hot_model IS NOT NULL) DESC, 9, h.tid;
END;
$$;
