-- The consolidation job (issue 25, item 3; seed 000 section 9: shadow cannot deduplicate across
-- threads, so merging, retiring and checking across threads is left to an independent
-- low-frequency job, the seeds' 「整理组」).
--
-- A run reads the active facts of one label set (a group) and proposes actions through one write
-- procedure, submit_consolidation_run. Every action is checked here, never trusted from the model:
--   merge      two or more facts of one evidence kind become one new fact holding the union of
--              their evidence and labels (the evidence checked again under that kind); the
--              sources are marked merged into it
--   supersede  [older, newer]: the newer fact contradicts the older; it needs evidence newer than
--              all of the older's; the older is closed (valid_until, status superseded,
--              superseded_by) and stays in history and explain
--   retire     a fact whose evidence was forgotten, or no longer supports its kind
--   flag       a contradiction the model doubts: nothing changes, a person decides
-- A merge, supersede or retire below consolidation_min_confidence is not applied but queued for a
-- person like a flag (102_consolidation_review.sql). Every action is a consolidation_actions row
-- with its pointers and reason; every change is in fact history with the run and the action.
--
-- Label safety, as for the semantic judge: a group is one label set, read only by a model tagged
-- for all of it (route_model), and a fact derived from an isolated thread is never in a group.

-- The light model a group goes to, or NULL when none is tagged for all its labels (the group then
-- waits, as routing never downgrades: invariant 9).
CREATE OR REPLACE FUNCTION ember.consolidation_model(p_labels text[])
RETURNS text
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    RETURN ember.route_model('light', p_labels);
EXCEPTION WHEN SQLSTATE 'EM022' THEN
    RETURN NULL;
END;
$$;

-- The groups that may be read now: label sets with at least two active facts, a model tagged for
-- them, a change since the group's last completed run, and no run of the group within
-- consolidation_interval.
CREATE OR REPLACE FUNCTION ember.consolidation_groups(p_now timestamptz DEFAULT clock_timestamp())
RETURNS TABLE (labels text[], facts integer, changed_at timestamptz, model text, due boolean)
LANGUAGE sql STABLE
AS $$
    WITH g AS (
        SELECT ember.label_set(f.categories) AS labels, count(*)::integer AS facts,
            max(greatest(f.created_at, f.updated_at)) AS changed_at
        FROM ember.facts AS f
        WHERE f.status = 'active' AND f.text IS NOT NULL
            AND NOT EXISTS (SELECT 1 FROM unnest(f.source_threads) AS s WHERE ember.is_isolated(s))
        GROUP BY 1
        HAVING count(*) >= 2
    )
    SELECT g.labels, g.facts, g.changed_at, ember.consolidation_model(g.labels),
        ember.consolidation_model(g.labels) IS NOT NULL
        AND NOT EXISTS (
            SELECT 1 FROM ember.consolidation_runs AS r
            WHERE r.labels = g.labels AND r.status = 'completed' AND r.started_at >= g.changed_at
        )
        AND NOT EXISTS (
            SELECT 1 FROM ember.consolidation_runs AS r
            WHERE r.labels = g.labels
                AND r.started_at > ember.require_now(p_now) - ember.setting_interval('consolidation_interval')
        )
    FROM g
    ORDER BY g.changed_at, g.labels
$$;

-- One fact as the model is shown it, and its evidence's time span.
CREATE OR REPLACE FUNCTION ember.consolidation_fact_json(f ember.facts)
RETURNS jsonb
LANGUAGE sql STABLE
AS $$
    SELECT jsonb_build_object(
        'id', f.id, 'text', f.text, 'evidence_kind', f.evidence_kind, 'categories', to_jsonb(f.categories),
        'threads', to_jsonb(f.source_threads), 'valid_from', f.valid_from,
        'evidence_from', t.first_at, 'evidence_until', t.last_at
    )
    FROM (
        SELECT min(coalesce(m.created_at, g.started_at)) AS first_at, max(coalesce(m.created_at, g.started_at)) AS last_at
        FROM ember.fact_evidence AS e
        LEFT JOIN ember.messages AS m ON m.id = e.message_id
        LEFT JOIN ember.generations AS g ON g.id = e.generation_id
        WHERE e.fact_id = f.id
    ) AS t
$$;

CREATE OR REPLACE FUNCTION ember.consolidation_abandon_expired(p_now timestamptz DEFAULT clock_timestamp())
RETURNS bigint
LANGUAGE sql
AS $$
    UPDATE ember.consolidation_runs
    SET status = 'abandoned', error = 'lease expired', finished_at = greatest(lease_expires_at, started_at)
    WHERE status = 'running' AND lease_expires_at <= ember.require_now(p_now)
    RETURNING id
$$;

-- The claim: the next due group, its facts rendered one line each. NULL when nothing is due or a
-- run is out. A try-lock instead of a wait: a second claimer returns at once.
CREATE OR REPLACE FUNCTION ember.claim_consolidation_run(
    p_worker text, p_lease interval, p_now timestamptz DEFAULT clock_timestamp()
)
RETURNS jsonb
LANGUAGE plpgsql
AS $$
DECLARE
    grp record;
    md ember.models;
    v_facts jsonb;
    v_ids bigint[];
    r ember.consolidation_runs;
    v_lines text;
BEGIN
    PERFORM ember.require_now(p_now);
    IF p_worker IS NULL OR btrim(p_worker) = '' OR p_lease IS NULL OR p_lease <= interval '0' THEN
        RAISE EXCEPTION 'a consolidation claim needs a worker name and a positive lease' USING ERRCODE = 'EM130';
    END IF;
    IF NOT pg_try_advisory_xact_lock(hashtext('ember.consolidation')) THEN
        RETURN NULL;
    END IF;
    PERFORM ember.consolidation_abandon_expired(p_now);
    IF EXISTS (SELECT 1 FROM ember.consolidation_runs WHERE status = 'running') THEN
        RETURN NULL;
    END IF;
    SELECT * INTO grp FROM ember.consolidation_groups(p_now) AS c WHERE c.due LIMIT 1;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    SELECT * INTO md FROM ember.models WHERE id = grp.model;

    SELECT jsonb_agg(ember.consolidation_fact_json(f) ORDER BY f.id), array_agg(f.id ORDER BY f.id)
    INTO v_facts, v_ids
    FROM (
        SELECT * FROM ember.facts AS x
        WHERE x.status = 'active' AND x.text IS NOT NULL AND ember.label_set(x.categories) = grp.labels
            AND NOT EXISTS (SELECT 1 FROM unnest(x.source_threads) AS s WHERE ember.is_isolated(s))
        ORDER BY x.id
        LIMIT ember.setting_int('consolidation_group_facts')
    ) AS f;

    INSERT INTO ember.consolidation_runs (
        labels, model, fact_ids, price_as_of, price_input, price_output, price_cache_write_5m,
        price_cache_write_1h, price_cache_read, started_at, worker, lease_token, lease_expires_at
    ) VALUES (
        grp.labels, grp.model, v_ids, md.price_as_of, md.price_input, md.price_output, md.price_cache_write_5m,
        md.price_cache_write_1h, md.price_cache_read, p_now, p_worker, gen_random_uuid(), p_now + p_lease
    )
    RETURNING * INTO r;

    -- One line per fact; the texts are quoted as JSON strings, since they are content, not
    -- instructions.
    SELECT string_agg(format('F%s [%s] evidence %s .. %s, threads %s: %s', x ->> 'id', x ->> 'evidence_kind',
                             x ->> 'evidence_from', x ->> 'evidence_until',
                             (SELECT string_agg(t, ', ') FROM jsonb_array_elements_text(x -> 'threads') AS t),
                             to_jsonb(x ->> 'text')::text), E'\n' ORDER BY (x ->> 'id')::bigint)
    INTO v_lines
    FROM jsonb_array_elements(v_facts) AS x;

    RETURN jsonb_build_object(
        'run_id', r.id, 'lease_token', r.lease_token, 'lease_expires_at', r.lease_expires_at,
        'thread_id', 'consolidation', 'model', r.model, 'labels', to_jsonb(r.labels),
        'facts', v_facts,
        'content', format('Facts to consolidate (%s, labels %s):', jsonb_array_length(v_facts),
                          coalesce(nullif(array_to_string(r.labels, ', '), ''), 'none')) || E'\n' || v_lines,
        'min_confidence', (ember.setting('consolidation_min_confidence') #>> '{}')::numeric
    );
END;
$$;
