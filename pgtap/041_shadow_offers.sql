BEGIN;
SELECT plan(8);

-- The claim's maintained state (shadow_offers, its parks, generation_progress's failure and
-- undigested counts) against a from-scratch recomputation, after a random mix of appends, human
-- rows (cancels), tags added and removed, failures, seals, turns, claims and submits.
SELECT ember.define_category('health');
SELECT ember.create_thread('default', 'main', 'main');
SELECT ember.ensure_steward_thread('default');
SELECT ember.shadow_activate('2026-03-01 11:00+00');
SELECT ember.create_thread('default', 't' || i, CASE WHEN i % 4 = 0 THEN 'task' ELSE 'side' END, NULL,
                           CASE WHEN i % 3 = 0 THEN 'health' END, 'open', NULL, '2026-03-01 11:00+00')
FROM generate_series(1, 12) AS i;

CREATE FUNCTION pg_temp.at(p_minutes numeric) RETURNS timestamptz
LANGUAGE sql AS $$ SELECT '2026-03-01 12:00+00'::timestamptz + p_minutes * interval '1 minute' $$;

CREATE FUNCTION pg_temp.mix(p_steps integer) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_minute numeric := 0;
    v_thread text;
    v_action integer;
    v_plan jsonb;
    v_done integer := 0;
BEGIN
    PERFORM setseed(0.33);
    FOR i IN 1..p_steps LOOP
        v_minute := v_minute + 1 + floor(random() * 30);
        v_thread := 't' || (1 + floor(random() * 12))::int;
        v_action := floor(random() * 11)::int;
        BEGIN
            CASE v_action
                WHEN 0, 1 THEN
                    PERFORM ember.append_message('default', v_thread, 'assistant', 'noted ' || i, NULL, NULL, NULL, NULL,
                                                 NULL, NULL, pg_temp.at(v_minute));
                WHEN 2 THEN
                    PERFORM ember.append_message('default', v_thread, 'user', 'I said ' || i, 'human', NULL, NULL, NULL,
                                                 NULL, NULL, pg_temp.at(v_minute));
                WHEN 3 THEN
                    PERFORM ember.task_ended('default', v_thread, pg_temp.at(v_minute));
                WHEN 4 THEN
                    PERFORM ember.turn_started('default', v_thread, pg_temp.at(v_minute));
                WHEN 5 THEN
                    PERFORM ember.turn_ended('default', v_thread, random() < 0.5, pg_temp.at(v_minute));
                WHEN 6 THEN
                    UPDATE ember.models SET tags = CASE WHEN tags = '{}' THEN '{health}'::text[] ELSE '{}' END
                    WHERE id = 'claude-haiku-4-5';
                WHEN 7 THEN
                    IF random() < 0.15 THEN
                        UPDATE ember.threads SET seal_tier = 'isolated' WHERE id = v_thread;
                    ELSE
                        PERFORM ember.start_generation('default', v_thread, pg_temp.at(v_minute));
                    END IF;
                ELSE
                    -- A claim, then a submit: failed, completed, or released (abandoned).
                    v_plan := ember.claim_shadow_run('w', '5 minutes', pg_temp.at(v_minute));
                    IF v_plan IS NOT NULL THEN
                        v_done := v_done + 1;
                        IF random() < 0.2 THEN
                            PERFORM ember.release_shadow_run('default', (v_plan ->> 'run_id')::bigint,
                                                             (v_plan ->> 'lease_token')::uuid, pg_temp.at(v_minute + 1));
                        ELSE
                            PERFORM ember.submit_shadow_run('default', (v_plan ->> 'run_id')::bigint,
                                (v_plan ->> 'lease_token')::uuid, CASE WHEN random() < 0.6
                                    THEN '{"status": "failed", "error": "model output was not a tool call"}'::jsonb
                                    ELSE '{"status": "completed", "error": null}'::jsonb END || jsonb_build_object(
                                    'usage', jsonb_build_object('input_tokens', 1, 'cache_read_input_tokens', 0,
                                        'cache_creation_5m_input_tokens', 0, 'cache_creation_1h_input_tokens', 0,
                                        'output_tokens', 1),
                                    'latency_ms', 5, 'finished_at', pg_temp.at(v_minute + 1), 'proposals', '[]'::jsonb));
                        END IF;
                    END IF;
            END CASE;
        EXCEPTION WHEN SQLSTATE 'EM022' OR SQLSTATE 'EM001' OR SQLSTATE 'EM013' THEN
            -- A refused step (a tag still relied on, a write to a sealed thread) changes nothing.
            NULL;
        END;
        IF i % 10 = 0 THEN
            PERFORM ember.tick(pg_temp.at(v_minute));
        END IF;
    END LOOP;
    RETURN v_done;
END;
$$;

SELECT cmp_ok(pg_temp.mix(400), '>', 20, 'the mix claims and submits runs along the way');
SELECT set_eq(
    $$SELECT thread_id, signalled_at FROM ember.shadow_offers$$,
    $$SELECT thread_id, min(created_at) FROM ember.shadow_signals WHERE NOT deferred GROUP BY thread_id$$,
    'an offer row stands for exactly the threads with a standing signal, with the earliest one''s time'
);
SELECT is_empty(
    $$SELECT r.thread_id FROM ember.shadow_ready(pg_temp.at(100000)) AS r
      INNER JOIN ember.shadow_offers AS o ON o.thread_id = r.thread_id
      WHERE r.model IS NOT NULL AND o.parked_until > pg_temp.at(100000)
          AND o.parked_epoch = (SELECT epoch FROM ember.shadow_park_epoch)$$,
    'no claimable thread is parked: a park never hides ready work'
);
SELECT set_eq(
    $$SELECT generation_id, failures, last_failed_at FROM ember.generation_progress WHERE failures > 0$$,
    $$SELECT r.generation_id, count(*)::int, max(r.finished_at) FROM ember.shadow_runs AS r
      WHERE (r.status = 'failed' OR (r.status = 'abandoned' AND r.error = 'lease expired'))
        AND r.id > coalesce((SELECT max(c.id) FROM ember.shadow_runs AS c
                                                     WHERE c.generation_id = r.generation_id AND c.status = 'completed'), 0)
      GROUP BY r.generation_id$$,
    'the failure counts kept for backoff equal a recount of the runs'
);
SELECT set_eq(
    $$SELECT generation_id, undigested FROM ember.generation_progress WHERE undigested > 0 AND steward_reads$$,
    $$SELECT m.generation_id, count(*)::int FROM ember.messages AS m
      INNER JOIN ember.threads AS t ON t.id = m.thread_id
      WHERE m.episode_id IS NULL AND t.kind <> 'steward' AND t.seal_tier <> 'isolated'
      GROUP BY m.generation_id$$,
    'the undigested counts equal a recount of the rows'
);
SELECT cmp_ok((SELECT count(DISTINCT parked_reason)::int FROM ember.shadow_offers), '>=', 2,
              'the mix leaves offers parked for more than one reason (the checks above are not vacuous)');
-- Run down what is still ready: each claim takes the first thread shadow_ready() lists.
CREATE FUNCTION pg_temp.claims_follow_ready() RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    v_first text;
    v_plan jsonb;
BEGIN
    LOOP
        SELECT thread_id INTO v_first FROM ember.shadow_ready(pg_temp.at(100000)) WHERE model IS NOT NULL LIMIT 1;
        v_plan := ember.claim_shadow_run('w', '5 minutes', pg_temp.at(100000));
        IF v_plan IS NULL OR v_first IS NULL THEN
            RETURN v_plan IS NULL AND v_first IS NULL;
        END IF;
        IF v_plan ->> 'thread_id' <> v_first THEN
            RAISE NOTICE 'claimed % where shadow_ready lists % first', v_plan ->> 'thread_id', v_first;
            RETURN false;
        END IF;
    END LOOP;
END;
$$;
SELECT ok(pg_temp.claims_follow_ready(), 'claims take ready threads in shadow_ready() order until none is left');
SELECT is((SELECT count(*)::int FROM ember.shadow_ready(pg_temp.at(100000)) WHERE model IS NOT NULL), 0,
          'and then nothing claimable is left behind');

SELECT * FROM finish();
ROLLBACK;
