-- Shadow activation and cursors (seed 000 section 7): where shadow starts reading each thread.
--
-- Reading every thread from its first row would re-run all history through shadow and fill the
-- comparison window with old facts the steward wrote long ago; so at activation each thread's
-- history is split once: what the steward already digested stays digested, and the rest is left to
-- shadow (initialization 'steward'); a thread the steward never touched starts after the
-- activation watermark (initialization 'enabled'). After that the cursor never moves: shadow's read
-- position advances only by its own completed runs (invariant 5), because a shadow that followed
-- the steward would miss exactly what the steward misses, and the comparison would mean nothing.

CREATE OR REPLACE FUNCTION ember.shadow_activate(p_now timestamptz DEFAULT clock_timestamp())
RETURNS jsonb
LANGUAGE plpgsql
AS $$
DECLARE
    a ember.shadow_activation;
    v_created integer;
    v_steward integer;
BEGIN
    PERFORM ember.require_now(p_now);
    -- Two concurrent activations would both see "no cursor yet"; the second one waits here and then
    -- finds the first one's cursors. The watermark row itself is guarded by its singleton key.
    PERFORM pg_advisory_xact_lock(hashtext('ember.shadow_activate'));

    INSERT INTO ember.shadow_activation (through_seq, activated_at)
    SELECT coalesce(max(seq), 0), p_now FROM ember.messages
    ON CONFLICT (singleton) DO NOTHING;
    SELECT * INTO a FROM ember.shadow_activation;

    -- One cursor per generation of each thread that has none yet. Only threads without any
    -- cursor are initialized: a thread initialized before keeps its baselines, and a generation
    -- it starts later has no cursor and is read from its own start. Only digestion at or below the
    -- watermark is inherited: on a later call, a thread born after activation would otherwise take
    -- the steward's current position and shadow would skip rows it never read (invariant 5).
    WITH todo AS (
        SELECT
            t.tenant_id,
            t.id,
            EXISTS (
                SELECT 1 FROM ember.messages AS m
                WHERE m.tenant_id = t.tenant_id AND m.thread_id = t.id AND m.episode_id IS NOT NULL AND m.seq <= a.through_seq
            ) AS digested
        FROM ember.threads AS t
        WHERE NOT ember.shadow_excluded(t.tenant_id, t.id)
            AND NOT EXISTS (
                SELECT 1 FROM ember.shadow_cursors AS c WHERE c.tenant_id = t.tenant_id AND c.thread_id = t.id
            )
    ),

    ins AS (
        INSERT INTO ember.shadow_cursors (
            tenant_id, thread_id, generation_id, baseline_seq, initialization, created_at
        )
        SELECT
            todo.tenant_id,
            todo.id,
            g.id,
            coalesce(CASE
                WHEN todo.digested THEN (
                    SELECT max(m.seq) FROM ember.messages AS m
                    WHERE m.tenant_id = g.tenant_id AND m.generation_id = g.id AND m.episode_id IS NOT NULL
                        AND m.seq <= a.through_seq
                )
                ELSE (
                    SELECT max(m.seq) FROM ember.messages AS m
                    WHERE m.tenant_id = g.tenant_id AND m.generation_id = g.id AND m.seq <= a.through_seq
                )
            END, 0),
            CASE WHEN todo.digested THEN 'steward' ELSE 'enabled' END,
            p_now
        FROM todo
        INNER JOIN ember.generations AS g ON g.tenant_id = todo.tenant_id AND g.thread_id = todo.id
        ON CONFLICT (tenant_id, thread_id, generation_id) DO NOTHING
        RETURNING initialization
    )

    SELECT count(*), count(*) FILTER (WHERE initialization = 'steward')
    INTO v_created, v_steward
    FROM ins;

    RETURN jsonb_build_object(
        'through_seq', a.through_seq,
        'activated_at', a.activated_at,
        'cursors_created', v_created,
        'steward_cursors', v_steward,
        'enabled_cursors', v_created - v_steward
    );
END;
$$;

-- Where shadow reads a thread's generation from: rows with seq above this are unread. The
-- greater of the cursor's baseline (0 without a cursor: a generation begun after activation reads
-- from its own start) and the furthest completed run of that generation. Failed, cancelled and
-- abandoned runs do not move it: their rows are read again.
CREATE OR REPLACE FUNCTION ember.shadow_read_position(p_tenant text, p_thread text, p_generation uuid)
RETURNS bigint
LANGUAGE sql STABLE
AS $$
    SELECT greatest(
        coalesce((
            SELECT c.baseline_seq FROM ember.shadow_cursors AS c
            WHERE c.tenant_id = p_tenant AND c.thread_id = p_thread AND c.generation_id = p_generation
        ), 0),
        coalesce((
            SELECT max(r.through_seq) FROM ember.shadow_runs AS r
            WHERE r.tenant_id = p_tenant AND r.thread_id = p_thread AND r.generation_id = p_generation
                AND r.status = 'completed'
        ), 0)
    )
$$;
