BEGIN;
SELECT plan(10);

-- The whole of stage two under a seeded random schedule: appends, steward wakes that write facts,
-- shadow runs (promoted inside a cut-over), consolidation runs (merge, supersede, retire, flag),
-- cut-overs, rollbacks, forgetting and a seal, mixed; after every step the invariants below are
-- checked, and a violation names its step. The seed and the counts are printed, so a failure
-- replays: `make test-long` runs the same schedule with more steps (psql variable steps).
--
-- The invariants:
--   I1 no row is digested by the steward and cited by an active promoted fact (both pipelines);
--   I2 the steward's backlog is exactly the undigested rows of open threads that no active
--      cut-over gives shadow (neither pipeline, or both, would be a gap or a double read);
--   I3 every active fact not derived from an isolated thread has evidence that passes its kind;
--   I4 no superseded fact's closer is retired (a retired closer reopens it);
--   I5 after the seal, no automated change (steward, promotion, consolidation) touches a fact
--      derived from the sealed thread;
--   I6 after a rollback nothing it took back holds: cutover_taken_back of a rolled-back cut-over
--      is empty, for ever.
-- At the end everything is rolled back and the steward catches up: no promoted fact and no merge
-- of one is left, every row is digested exactly once.

\if :{?steps}
\else
\set steps 500
\endif
\if :{?seed}
\else
\set seed 0.4242
\endif

SELECT ember.create_thread('default', 'main', 'main', NULL, NULL, 'open', 'claude-haiku-4-5', '2030-04-01 08:00+00');
SELECT ember.ensure_steward_thread('default', '2030-04-01 08:00+00');
SELECT ember.define_category('travel');
SELECT ember.create_thread('default', 'a', 'side', 'A', NULL, 'open', NULL, '2030-04-01 08:00+00');
SELECT ember.create_thread('default', 'b', 'side', 'B', 'travel', 'open', NULL, '2030-04-01 08:00+00');
SELECT ember.create_thread('default', 'c', 'task', 'C', NULL, 'open', NULL, '2030-04-01 08:00+00');
SELECT ember.create_thread('default', 'd', 'side', 'D', NULL, 'open', NULL, '2030-04-01 08:00+00');
UPDATE ember.models SET tags = '{travel}' WHERE tier = 'light' OR id = 'claude-haiku-4-5';
UPDATE ember.settings SET value = '"0 seconds"' WHERE key = 'consolidation_interval';
SELECT ember.shadow_activate('2030-04-01 08:30+00');

CREATE TEMP TABLE counts (what text PRIMARY KEY, n integer DEFAULT 0);
INSERT INTO counts (what) VALUES ('append'), ('cut-over'), ('refused-overlap'), ('rollback'), ('steward-wake'),
    ('steward-fact'), ('shadow-run'), ('consolidation-run'), ('merge'), ('supersede'), ('retire'), ('forget'),
    ('seal'), ('reopened');
\ir lib/stage_two_schedule.psql

-- Its length: one check per invariant, each a query and its violation.
CREATE FUNCTION pg_temp.check_state(p_step integer) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_bad bigint[];
    v_open text[] := ARRAY(SELECT t FROM unnest(ARRAY['a', 'b', 'c', 'd']) AS t WHERE NOT pg_temp.is_sealed(t));
BEGIN
    v_bad := ARRAY(
        SELECT e.message_id FROM ember.fact_evidence AS e
        INNER JOIN ember.facts AS f ON f.id = e.fact_id
        INNER JOIN ember.messages AS m ON m.id = e.message_id
        WHERE f.cutover_id IS NOT NULL AND f.status = 'active' AND m.episode_id IS NOT NULL
    );
    IF cardinality(v_bad) > 0 THEN
        PERFORM pg_temp.violation(p_step, format('I1 rows digested by both pipelines: %s', v_bad));
    END IF;
    v_bad := ARRAY(
        (SELECT m.id FROM ember.messages AS m
         WHERE m.thread_id = ANY(v_open) AND m.episode_id IS NULL AND NOT pg_temp.oracle_shadow(m.thread_id, m.seq)
         EXCEPT SELECT b.id FROM ember.backlog AS b)
        UNION ALL
        (SELECT b.id FROM ember.backlog AS b WHERE b.thread_id <> 'main'
         EXCEPT SELECT m.id FROM ember.messages AS m
         WHERE m.thread_id = ANY(v_open) AND m.episode_id IS NULL AND NOT pg_temp.oracle_shadow(m.thread_id, m.seq))
    );
    IF cardinality(v_bad) > 0 THEN
        PERFORM pg_temp.violation(p_step, format('I2 the backlog differs from the oracle on rows %s', v_bad));
    END IF;
    v_bad := ARRAY(
        SELECT f.id FROM ember.facts AS f
        WHERE f.status = 'active' AND ember.fact_visible(TRUE, '{}', f.categories, f.source_threads)
            AND (NOT EXISTS (SELECT 1 FROM ember.fact_evidence AS e WHERE e.fact_id = f.id)
                 OR ember.check_evidence(NULL, f.evidence_kind, ember.facts_evidence_union(ARRAY[f.id]), FALSE)
                    IS NOT NULL)
    );
    IF cardinality(v_bad) > 0 THEN
        PERFORM pg_temp.violation(p_step, format('I3 active facts without valid evidence: %s', v_bad));
    END IF;
    v_bad := ARRAY(
        SELECT f.id FROM ember.facts AS f INNER JOIN ember.facts AS n ON n.id = f.superseded_by
        WHERE f.status = 'superseded' AND n.status = 'retired'
    );
    IF cardinality(v_bad) > 0 THEN
        PERFORM pg_temp.violation(p_step, format('I4 superseded facts whose closer is retired: %s', v_bad));
    END IF;
    v_bad := ARRAY(
        SELECT DISTINCT f.id FROM ember.facts AS f
        INNER JOIN sealed AS s ON s.thread = ANY(f.source_threads)
        INNER JOIN ember.fact_history AS h ON h.fact_id = f.id AND h.at > s.at
        WHERE h.consolidation_run_id IS NOT NULL OR h.proposal_id IS NOT NULL OR (h.run_id IS NOT NULL AND h.change <> 'forgotten')
    );
    IF cardinality(v_bad) > 0 THEN
        PERFORM pg_temp.violation(p_step, format('I5 automated changes to facts of a sealed thread: %s', v_bad));
    END IF;
    v_bad := ARRAY(
        SELECT t.fact_id FROM ember.cutovers AS c CROSS JOIN LATERAL ember.cutover_taken_back(c.id) AS t
        WHERE c.rolled_back_at IS NOT NULL
    );
    IF cardinality(v_bad) > 0 THEN
        PERFORM pg_temp.violation(p_step, format('I6 facts a rollback took back still hold: %s', v_bad));
    END IF;
END;
$$;

-- p_n of p_ids drawn at random, the same for the same seed whatever order the rows were read in
-- (a scan's order depends on the plan, the random draws must not).
CREATE FUNCTION pg_temp.pick(p_ids bigint [], p_n integer) RETURNS bigint [] LANGUAGE sql AS $$
    SELECT ARRAY(SELECT x.i FROM (SELECT i, random() AS r FROM unnest(ARRAY(SELECT i FROM unnest(p_ids) AS i ORDER BY i)) AS i) AS x
                 ORDER BY x.r LIMIT p_n)
$$;

-- One consolidation run: a few random actions on the facts it was shown.
CREATE FUNCTION pg_temp.consolidate(p_now timestamptz) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_plan jsonb;
    v_ids bigint[];
    v_actions jsonb;
    v_kind text;
    v_pick bigint[];
    v_res jsonb;
BEGIN
    v_plan := ember.claim_consolidation_run('w', '10 minutes', p_now);
    IF v_plan IS NULL THEN
        RETURN;
    END IF;
    v_ids := ARRAY(SELECT (x ->> 'id')::bigint FROM jsonb_array_elements(v_plan -> 'facts') AS x);
    -- A fact that lost evidence to forgetting is retired (the one retirement the job may apply).
    v_actions := coalesce((
        SELECT jsonb_agg(jsonb_build_object('action', 'retire', 'fact_ids', jsonb_build_array(x.i),
                                            'reason', 'evidence forgotten', 'confidence', 0.9) ORDER BY x.i)
        FROM (SELECT i, random() AS r FROM unnest(ARRAY(SELECT i FROM unnest(v_ids) AS i ORDER BY i)) AS i) AS x
        WHERE x.r < 0.5
            AND EXISTS (SELECT 1 FROM ember.fact_history AS h WHERE h.fact_id = x.i AND h.change = 'evidence-shrunk')
    ), '[]');
    v_ids := ARRAY(SELECT i FROM unnest(v_ids) AS i
                   WHERE NOT EXISTS (SELECT 1 FROM jsonb_array_elements(v_actions) AS a
                                     WHERE (a -> 'fact_ids' ->> 0)::bigint = i));
    FOR i IN 1 .. 1 + floor(random() * 3)::integer LOOP
        EXIT WHEN cardinality(v_ids) < 2;
        v_pick := pg_temp.pick(v_ids, 2);
        v_kind := (ARRAY['merge', 'merge', 'supersede', 'supersede', 'retire', 'flag'])[1 + floor(random() * 6)::integer];
        v_actions := v_actions || jsonb_build_array(jsonb_strip_nulls(jsonb_build_object(
            'action', v_kind,
            'fact_ids', to_jsonb(CASE v_kind WHEN 'retire' THEN v_pick[1:1] ELSE ARRAY[least(v_pick[1], v_pick[2]),
                                                                                      greatest(v_pick[1], v_pick[2])] END),
            'text', CASE WHEN v_kind = 'merge' THEN 'Merged ' || v_pick[1] || ' and ' || v_pick[2] END,
            'reason', 'schedule', 'confidence', 0.9)));
    END LOOP;
    v_res := ember.submit_consolidation_run((v_plan ->> 'run_id')::bigint, (v_plan ->> 'lease_token')::uuid,
        jsonb_build_object('status', 'completed', 'usage', '{}'::jsonb, 'latency_ms', 5,
                           'finished_at', p_now + interval '1 minute', 'actions', v_actions));
    PERFORM pg_temp.bump('consolidation-run');
    PERFORM pg_temp.bump(a.action) FROM ember.consolidation_actions AS a
    WHERE a.run_id = (v_plan ->> 'run_id')::bigint AND a.status = 'applied' AND a.action <> 'flag';
END;
$$;

-- Its length: one branch per kind of step, drawn from one roll.
CREATE FUNCTION pg_temp.run_schedule(p_seed double precision, p_steps integer) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := '2030-04-01 09:00+00';
    v_roll double precision;
    v_threads text[] := ARRAY['a', 'b', 'c', 'd'];
    v_cut jsonb;
    v_msg bigint;
    o record;
BEGIN
    PERFORM setseed(p_seed);
    FOR v_step IN 1 .. p_steps LOOP
        v_now := v_now + interval '30 minutes';
        v_roll := random();
        IF v_roll < 0.30 THEN
            PERFORM pg_temp.append_step(v_step, v_now, v_threads);
        ELSIF v_roll < 0.40 THEN
            PERFORM pg_temp.cutover_step(v_step, v_now, v_threads);
        ELSIF v_roll < 0.50 THEN
            SELECT * INTO o FROM oracle_cuts
            WHERE id = (pg_temp.pick(ARRAY(SELECT id FROM oracle_cuts WHERE active), 1))[1];
            IF FOUND THEN
                v_cut := ember.cutover_rollback(o.scope, o.value, 'schedule', v_now);
                UPDATE oracle_cuts SET active = false WHERE id = o.id;
                PERFORM pg_temp.bump('rollback');
                PERFORM pg_temp.bump('reopened', jsonb_array_length(v_cut -> 'reopened_facts'));
            END IF;
        ELSIF v_roll < 0.65 THEN
            PERFORM pg_temp.steward_wake(v_step, v_now);
        ELSIF v_roll < 0.80 THEN
            PERFORM pg_temp.shadow_pass(v_threads, v_now);
        ELSIF v_roll < 0.93 THEN
            PERFORM pg_temp.consolidate(v_now);
        ELSIF v_roll < 0.98 THEN
            v_msg := (pg_temp.pick(ARRAY(SELECT m.id FROM ember.messages AS m
                                         WHERE m.thread_id = ANY(v_threads) AND m.erased_by IS NULL), 1))[1];
            IF v_msg IS NOT NULL THEN
                PERFORM ember.forget_messages('default', ARRAY[v_msg], 'schedule', v_now);
                PERFORM pg_temp.bump('forget');
            END IF;
        ELSIF NOT pg_temp.is_sealed('d') AND v_step > p_steps / 3 THEN
            -- A thread is sealed once, a third of the way in: its cut-over, if any, stays until rolled back.
            PERFORM ember.seal_thread('default', 'd');
            INSERT INTO sealed VALUES ('d', v_now);
            PERFORM pg_temp.bump('seal');
        END IF;
        PERFORM pg_temp.check_state(v_step);
    END LOOP;
END;
$$;

SELECT pg_temp.run_schedule(:seed, :steps);

SELECT diag(format('seed %s, %s steps: %s', :'seed', :'steps',
                   (SELECT string_agg(what || ' ' || n, ', ' ORDER BY what) FROM counts)));
SELECT is((SELECT string_agg(step || ': ' || what, '; ' ORDER BY step) FROM (
               SELECT * FROM violations ORDER BY step LIMIT 5) AS v), NULL,
          format('across %s random steps, invariants I1 to I6 held after every step', :'steps'));
SELECT ok((SELECT bool_and(n > 0) FROM counts WHERE what NOT IN ('reopened')),
          'the schedule exercised every kind of step');
SELECT ok(EXISTS (SELECT 1 FROM ember.cutover_promotions WHERE outcome = 'promoted')
          AND EXISTS (SELECT 1 FROM ember.consolidation_actions WHERE status = 'applied' AND action = 'merge')
          AND EXISTS (SELECT 1 FROM ember.consolidation_actions WHERE status = 'refused'),
          'promotions, applied merges and refused actions all happened');
SELECT ok(EXISTS (SELECT 1 FROM ember.fact_history WHERE change = 'reopened'),
          'and facts were reopened');
SELECT is((SELECT count(*)::int FROM (SELECT message_id FROM digests GROUP BY message_id HAVING count(*) > 1) AS d), 0,
          'no row was digested by the steward twice');

-- Everything rolled back, the steward catches up.
SELECT ember.cutover_rollback(o.scope, o.value, 'schedule', '2031-01-01 10:00+00') FROM oracle_cuts AS o WHERE o.active;
UPDATE oracle_cuts SET active = false;
SELECT pg_temp.steward_wake(0, '2031-01-01 11:00+00'::timestamptz + n * interval '1 hour') FROM generate_series(1, 40) AS n;
SELECT pg_temp.check_state(-1);
SELECT is((SELECT count(*)::int FROM violations), 0, 'the invariants held through the rollback of everything');
SELECT is((SELECT count(*)::int FROM ember.facts AS f
           WHERE f.status IN ('active', 'superseded', 'merged') AND f.cutover_id IS NOT NULL
               AND NOT EXISTS (SELECT 1 FROM ember.fact_confirmations AS k WHERE k.fact_id = f.id)), 0,
          'no promoted fact holds after every cut-over is rolled back');
SELECT is((SELECT count(*)::int FROM ember.facts AS f
           WHERE f.status IN ('active', 'superseded', 'merged')
               AND EXISTS (SELECT 1 FROM ember.facts AS s WHERE s.merged_into = f.id AND s.cutover_id IS NOT NULL)), 0,
          'nor any merge of one');
SELECT is((SELECT count(*)::int FROM ember.messages
           WHERE thread_id IN ('a', 'b', 'c') AND episode_id IS NULL), 0,
          'the steward digests every row of the open threads: nothing was skipped');
SELECT is((SELECT count(*)::int FROM digests),
          (SELECT count(*)::int FROM ember.messages AS m WHERE m.thread_id IN ('a', 'b', 'c')
               OR (m.thread_id = 'd' AND m.episode_id IS NOT NULL)),
          'and each exactly once');

SELECT * FROM finish();
ROLLBACK;
