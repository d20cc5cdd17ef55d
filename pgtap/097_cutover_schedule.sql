BEGIN;
SELECT plan(9);

-- A random schedule of appends, cut-overs, rollbacks, steward wakes and shadow passes, checked
-- after every step against an oracle that knows only the rule: a row belongs to shadow when an
-- active cut-over of its scope was made before the row existed. The schedule is seeded, so a
-- failure replays; the seed and the step are in the violation's text.

SELECT ember.define_category('travel');
SELECT ember.create_thread('default', 'main', 'main', NULL, NULL, 'open', 'claude-haiku-4-5', '2030-04-01 08:00+00');
SELECT ember.ensure_steward_thread('default', '2030-04-01 08:00+00');
SELECT ember.create_thread('default', 'a', 'side', 'A', NULL, 'open', NULL, '2030-04-01 08:00+00');
SELECT ember.create_thread('default', 'b', 'side', 'B', 'travel', 'open', NULL, '2030-04-01 08:00+00');
SELECT ember.create_thread('default', 'c', 'task', 'C', NULL, 'open', NULL, '2030-04-01 08:00+00');
UPDATE ember.models SET tags = '{travel}' WHERE id = 'claude-haiku-4-5';
SELECT ember.shadow_activate('2030-04-01 08:30+00');

CREATE TEMP TABLE counts (what text PRIMARY KEY, n integer DEFAULT 0);
INSERT INTO counts (what) VALUES ('append'), ('cut-over'), ('refused-overlap'), ('rollback'), ('steward-wake'),
    ('shadow-run');
\ir lib/stage_two_schedule.psql

-- The checks that hold after every step.
CREATE FUNCTION pg_temp.check_state(p_step integer) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_bad bigint[];
BEGIN
    -- The steward's backlog is exactly the undigested rows the oracle gives the steward.
    v_bad := ARRAY(
        (SELECT m.id FROM ember.messages AS m
         WHERE m.thread_id IN ('a', 'b', 'c') AND m.episode_id IS NULL AND NOT pg_temp.oracle_shadow(m.thread_id, m.seq)
         EXCEPT SELECT b.id FROM ember.backlog AS b WHERE b.thread_id IN ('a', 'b', 'c'))
        UNION ALL
        (SELECT b.id FROM ember.backlog AS b WHERE b.thread_id IN ('a', 'b', 'c')
         EXCEPT SELECT m.id FROM ember.messages AS m
         WHERE m.thread_id IN ('a', 'b', 'c') AND m.episode_id IS NULL AND NOT pg_temp.oracle_shadow(m.thread_id, m.seq))
    );
    IF cardinality(v_bad) > 0 THEN
        PERFORM pg_temp.violation(p_step, format('backlog differs from the oracle on rows %s', v_bad));
    END IF;
    -- No row is held both by the steward's digestion and by an active promoted fact.
    v_bad := ARRAY(
        SELECT e.message_id FROM ember.fact_evidence AS e
        INNER JOIN ember.facts AS f ON f.id = e.fact_id
        INNER JOIN ember.messages AS m ON m.id = e.message_id
        WHERE f.cutover_id IS NOT NULL AND f.status = 'active' AND m.episode_id IS NOT NULL
    );
    IF cardinality(v_bad) > 0 THEN
        PERFORM pg_temp.violation(p_step, format('rows digested by both pipelines: %s', v_bad));
    END IF;
    -- Every active promoted fact cites only rows the oracle gives shadow.
    v_bad := ARRAY(
        SELECT e.message_id FROM ember.fact_evidence AS e
        INNER JOIN ember.facts AS f ON f.id = e.fact_id
        INNER JOIN ember.messages AS m ON m.id = e.message_id
        WHERE f.cutover_id IS NOT NULL AND f.status = 'active' AND NOT pg_temp.oracle_shadow(m.thread_id, m.seq)
    );
    IF cardinality(v_bad) > 0 THEN
        PERFORM pg_temp.violation(p_step, format('promoted facts cite rows that are not shadow''s: %s', v_bad));
    END IF;
END;
$$;

CREATE FUNCTION pg_temp.run_schedule(p_seed double precision, p_steps integer) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := '2030-04-01 09:00+00';
    v_roll double precision;
    v_threads text[] := ARRAY['a', 'b', 'c'];
    o record;
BEGIN
    PERFORM setseed(p_seed);
    FOR v_step IN 1 .. p_steps LOOP
        v_now := v_now + interval '30 minutes';
        v_roll := random();
        IF v_roll < 0.40 THEN
            PERFORM pg_temp.append_step(v_step, v_now, v_threads);
        ELSIF v_roll < 0.55 THEN
            PERFORM pg_temp.cutover_step(v_step, v_now, v_threads);
        ELSIF v_roll < 0.68 THEN
            SELECT * INTO o FROM oracle_cuts WHERE active ORDER BY random() LIMIT 1;
            IF FOUND THEN
                PERFORM ember.cutover_rollback(o.scope, o.value, 'schedule', v_now);
                UPDATE oracle_cuts SET active = false WHERE id = o.id;
                PERFORM pg_temp.bump('rollback');
            END IF;
        ELSIF v_roll < 0.85 THEN
            PERFORM pg_temp.steward_wake(v_step, v_now, false);
        ELSE
            PERFORM pg_temp.shadow_pass(v_threads, v_now);
        END IF;
        PERFORM pg_temp.check_state(v_step);
    END LOOP;
END;
$$;

SELECT pg_temp.run_schedule(0.31, 120);

SELECT is((SELECT string_agg(step || ': ' || what, '; ') FROM violations), NULL,
          'across 120 random steps, the backlog is always the oracle''s, and no row is held by both pipelines');
SELECT ok((SELECT bool_and(n > 0) FROM counts)
          AND EXISTS (SELECT 1 FROM ember.cutover_promotions WHERE outcome = 'promoted'),
          'the schedule exercised appends, cut-overs, overlap refusals, rollbacks, wakes, shadow runs and promotions');
SELECT is((SELECT count(*)::int FROM (SELECT message_id FROM digests GROUP BY message_id HAVING count(*) > 1) AS d), 0,
          'no row was digested by the steward twice');

-- Shadow catches up: every row the oracle gives shadow is covered by an active promoted fact.
-- (Whatever the schedule left, one cut-over is active here and rows arrived after it.)
CREATE FUNCTION pg_temp.ensure_active(p_now timestamptz) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM oracle_cuts WHERE active) THEN
        INSERT INTO oracle_cuts (id, scope, value, from_seq, active)
        VALUES ((ember.cut_over('all', NULL, 'schedule', NULL, p_now) ->> 'cutover_id')::bigint, 'all', NULL,
                (SELECT max(seq) FROM ember.messages), true);
    END IF;
    PERFORM ember.append_message('default', t, 'user', 'late note', p_now => p_now) FROM unnest(ARRAY['a', 'b', 'c']) AS t;
END;
$$;
SELECT pg_temp.ensure_active('2030-05-01 08:00+00');
SELECT pg_temp.shadow_pass(ARRAY['a', 'b', 'c'], '2030-05-01 09:00+00');
SELECT is((SELECT count(*)::int FROM ember.messages AS m
           WHERE m.thread_id IN ('a', 'b', 'c') AND pg_temp.oracle_shadow(m.thread_id, m.seq)
             AND NOT EXISTS (SELECT 1 FROM ember.fact_evidence AS e JOIN ember.facts AS f ON f.id = e.fact_id
                             WHERE e.message_id = m.id AND f.status = 'active' AND f.cutover_id IS NOT NULL)), 0,
          'nothing is skipped on shadow''s side: each of its rows is behind an active promoted fact');
SELECT ok((SELECT count(*) > 0 FROM ember.messages AS m
           WHERE m.thread_id IN ('a', 'b', 'c') AND pg_temp.oracle_shadow(m.thread_id, m.seq)),
          'and shadow holds rows at that point');

-- Everything rolled back, the steward catches up: every row digested once, no promoted fact left.
SELECT ember.cutover_rollback(o.scope, o.value, 'schedule', '2030-05-01 10:00+00') FROM oracle_cuts AS o WHERE o.active;
UPDATE oracle_cuts SET active = false;
SELECT pg_temp.steward_wake(0, '2030-05-01 11:00+00'::timestamptz + n * interval '1 hour', false) FROM generate_series(1, 10) AS n;
SELECT is((SELECT count(*)::int FROM ember.messages WHERE thread_id IN ('a', 'b', 'c') AND episode_id IS NULL), 0,
          'after the last rollback the steward digests every row: nothing was skipped');
SELECT is((SELECT count(*)::int FROM digests), (SELECT count(*)::int FROM ember.messages WHERE thread_id IN ('a', 'b', 'c')),
          'and each exactly once');
SELECT is((SELECT count(*)::int FROM ember.facts WHERE cutover_id IS NOT NULL AND status = 'active'), 0,
          'no promoted fact is left active (the steward confirmed none)');
SELECT is((SELECT count(*)::int FROM violations), 0, 'and the checks held through the catch-up');

SELECT * FROM finish();
ROLLBACK;
