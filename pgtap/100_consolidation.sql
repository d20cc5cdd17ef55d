BEGIN;
SELECT plan(47);

-- Facts are written by hand with their evidence, as a steward would have, across threads. Time:
-- day 1 Berlin, day 2 Lisbon; the consolidation runs on day 3.

CREATE FUNCTION pg_temp.fact(p_text text, p_kind text, p_at timestamptz, p_labels text [], VARIADIC p_ids bigint [])
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    v_id bigint;
BEGIN
    INSERT INTO ember.facts (text, evidence_kind, categories, source_threads, created_at, updated_at)
    VALUES (p_text, p_kind, p_labels,
            ARRAY(SELECT DISTINCT m.thread_id FROM ember.messages AS m WHERE m.id = ANY(p_ids)), p_at, p_at)
    RETURNING id INTO v_id;
    INSERT INTO ember.fact_evidence (fact_id, ordinal, message_id)
    SELECT v_id, o, i FROM unnest(p_ids) WITH ORDINALITY AS x (i, o);
    RETURN v_id;
END;
$$;

CREATE FUNCTION pg_temp.act(p_action text, p_ids bigint [], p_reason text, p_confidence numeric, p_text text DEFAULT NULL)
RETURNS jsonb LANGUAGE sql AS $$
    SELECT jsonb_strip_nulls(jsonb_build_object('action', p_action, 'fact_ids', to_jsonb(p_ids), 'reason', p_reason,
                                                'confidence', p_confidence, 'text', p_text))
$$;

CREATE FUNCTION pg_temp.submit(p_run bigint, p_actions jsonb) RETURNS jsonb LANGUAGE sql AS $$
    SELECT ember.submit_consolidation_run(p_run, (SELECT lease_token FROM ember.consolidation_runs WHERE id = p_run),
        jsonb_build_object('status', 'completed', 'usage', jsonb_build_object('input_tokens', 300, 'output_tokens', 40),
                           'latency_ms', 700, 'finished_at', '2030-07-03 10:01+00', 'actions', p_actions))
$$;

SELECT ember.define_category('health');
UPDATE ember.models SET tags = '{}' WHERE tier = 'light';
SELECT ember.create_thread('default', 'a', 'side', 'A', NULL, 'open', NULL, '2030-07-01 08:00+00');
SELECT ember.create_thread('default', 'b', 'side', 'B', NULL, 'open', NULL, '2030-07-01 08:00+00');
SELECT ember.create_thread('default', 'doc', 'side', 'Doctor', 'health', 'open', NULL, '2030-07-01 08:00+00');
SELECT ember.create_thread('default', 'notes', 'side', 'Notes', NULL, 'open', NULL, '2030-07-01 08:00+00');

SELECT ember.append_message('default', 'a', 'user', 'I live in Berlin.', p_now => '2030-07-01 09:00+00') AS m_berlin \gset
SELECT ember.append_message('default', 'b', 'user', 'I moved to Lisbon.', p_now => '2030-07-02 09:00+00') AS m_lisbon \gset
SELECT ember.append_message('default', 'a', 'user', 'I prefer tea.', p_now => '2030-07-01 10:00+00') AS m_tea_a \gset
SELECT ember.append_message('default', 'b', 'user', 'I really prefer tea.', p_now => '2030-07-02 10:00+00') AS m_tea_b \gset
SELECT ember.append_message('default', 'a', 'tool_result', 'deploy ok', NULL, NULL, 'c1', 'bash', 'ok', NULL,
                            '2030-07-01 11:00+00') AS m_deploy \gset
SELECT ember.append_message('default', 'a', 'user', 'I like jazz.', p_now => '2030-07-01 12:00+00') AS m_jazz \gset
SELECT ember.append_message('default', 'b', 'user', 'I hate jazz.', p_now => '2030-07-02 12:00+00') AS m_nojazz \gset
SELECT ember.append_message('default', 'a', 'user', 'I run daily.', p_now => '2030-07-01 13:00+00') AS m_run \gset
SELECT ember.append_message('default', 'doc', 'user', 'My knee hurts.', p_now => '2030-07-01 14:00+00') AS m_knee \gset
SELECT ember.append_message('default', 'doc', 'user', 'My knee still hurts.', p_now => '2030-07-02 14:00+00') AS m_knee2 \gset
SELECT ember.append_message('default', 'notes', 'user', 'I like chess.', p_now => '2030-07-01 15:00+00') AS m_chess \gset

SELECT pg_temp.fact('The user lives in Berlin.', 'user-stated', '2030-07-01 12:00+00', '{}', :m_berlin) AS f_berlin \gset
SELECT pg_temp.fact('The user lives in Lisbon.', 'user-stated', '2030-07-02 12:00+00', '{}', :m_lisbon) AS f_lisbon \gset
SELECT pg_temp.fact('The user prefers tea.', 'user-stated', '2030-07-01 12:00+00', '{}', :m_tea_a) AS f_tea1 \gset
SELECT pg_temp.fact('User prefers tea.', 'user-stated', '2030-07-02 12:00+00', '{}', :m_tea_b) AS f_tea2 \gset
SELECT pg_temp.fact('Deploys succeed.', 'tool-verified', '2030-07-01 12:00+00', '{}', :m_deploy) AS f_deploy \gset
SELECT pg_temp.fact('The user likes jazz.', 'user-stated', '2030-07-01 12:30+00', '{}', :m_jazz) AS f_jazz \gset
SELECT pg_temp.fact('The user hates jazz.', 'user-stated', '2030-07-02 12:30+00', '{}', :m_nojazz) AS f_nojazz \gset
SELECT pg_temp.fact('The user runs daily.', 'user-stated', '2030-07-01 13:30+00', '{}', :m_run) AS f_run \gset
SELECT pg_temp.fact('The user''s knee hurts.', 'user-stated', '2030-07-01 15:00+00', '{health}', :m_knee) AS f_knee \gset
SELECT pg_temp.fact('The knee hurts.', 'user-stated', '2030-07-02 15:00+00', '{health}', :m_knee2) AS f_knee2 \gset
SELECT pg_temp.fact('The user likes chess.', 'user-stated', '2030-07-01 16:00+00', '{}', :m_chess) AS f_chess \gset
-- The notes thread is sealed after its fact was written: the fact is isolated-derived.
UPDATE ember.threads SET seal_tier = 'isolated' WHERE id = 'notes';

-- ---------------------------------------------------------------------------------------------
-- Label-safe groups.
SELECT is((SELECT (model IS NULL, due)::text FROM ember.consolidation_groups('2030-07-03 10:00+00') WHERE labels = '{health}'),
          (true, false)::text, 'a group no light model is tagged for has no model and is not due: it waits');
SELECT ember.claim_consolidation_run('w', '10 minutes', '2030-07-03 10:00+00') AS plan1 \gset
SELECT (:'plan1'::jsonb ->> 'run_id')::bigint AS r1 \gset
SELECT is((:'plan1'::jsonb -> 'labels'), '[]'::jsonb, 'the claim takes the group a model may read');
SELECT is((SELECT count(*)::int FROM jsonb_array_elements(:'plan1'::jsonb -> 'facts') AS x
           WHERE (x ->> 'id')::bigint IN (:f_knee, :f_knee2)), 0, 'no labelled fact is in an unlabelled group');
SELECT is((SELECT count(*)::int FROM jsonb_array_elements(:'plan1'::jsonb -> 'facts') AS x
           WHERE (x ->> 'id')::bigint = :f_chess), 0, 'an isolated-derived fact is never in a group');
SELECT ok(:'plan1'::jsonb ->> 'content' LIKE '%"The user lives in Berlin."%', 'fact texts are shown quoted, as content');
SELECT is(ember.claim_consolidation_run('w', '10 minutes', '2030-07-03 10:00+00'), NULL,
          'one consolidation run at a time');

-- ---------------------------------------------------------------------------------------------
-- Refusals of the envelope.
SELECT throws_ok(format('SELECT ember.submit_consolidation_run(%s, gen_random_uuid(), %L)', :r1, '{"status": "completed"}'),
                 'EM132', NULL, 'another lease token is refused');
SELECT throws_ok('SELECT ember.submit_consolidation_run(-1, gen_random_uuid(), ''{}'')', 'EM131', NULL,
                 'an unknown run is refused');
SELECT throws_ok(format('SELECT ember.submit_consolidation_run(%s, %L, %L)', :r1,
                        (SELECT lease_token FROM ember.consolidation_runs WHERE id = :r1), '{"status": "done"}'),
                 'EM130', NULL, 'a malformed outcome is refused');
SELECT throws_ok(format('SELECT ember.submit_consolidation_run(%s, %L, %L)', :r1,
                        (SELECT lease_token FROM ember.consolidation_runs WHERE id = :r1),
                        '{"status": "completed", "finished_at": "2030-07-03 10:30+00"}'),
                 'EM133', NULL, 'an outcome after the lease is refused');

-- ---------------------------------------------------------------------------------------------
-- One submit with every kind of action.
SELECT pg_temp.submit(:r1, jsonb_build_array(
    pg_temp.act('merge', ARRAY[:f_tea1, :f_tea2]::bigint[], 'the same preference, said twice', 0.95, 'The user prefers tea.'),
    pg_temp.act('supersede', ARRAY[:f_berlin, :f_lisbon]::bigint[], 'the user moved', 0.9),
    pg_temp.act('supersede', ARRAY[:f_run, :f_jazz]::bigint[], 'the older one cannot close the newer', 0.9),
    pg_temp.act('retire', ARRAY[:f_deploy]::bigint[], 'looks stale', 0.9),
    pg_temp.act('flag', ARRAY[:f_jazz, :f_nojazz]::bigint[], 'likes and hates jazz', 0.4),
    pg_temp.act('merge', ARRAY[:f_deploy, :f_run]::bigint[], 'mixed kinds', 0.9, 'Deploys and runs.'),
    pg_temp.act('merge', ARRAY[:f_knee, :f_knee2]::bigint[], 'not shown', 0.9, 'Knee.'),
    pg_temp.act('supersede', ARRAY[:f_nojazz, :f_jazz]::bigint[], 'unsure', 0.3)
)) AS res1 \gset
SELECT is((:'res1'::jsonb - 'run_id'), '{"status": "completed", "applied": 2, "refused": 4, "flagged": 2}'::jsonb,
          'submit says what was applied, refused and flagged');

-- merge
SELECT result_fact AS f_merged FROM ember.consolidation_actions WHERE run_id = :r1 AND ordinal = 1 \gset
SELECT is((SELECT array_agg(message_id ORDER BY ordinal) FROM ember.fact_evidence WHERE fact_id = :f_merged),
          ARRAY[:m_tea_a, :m_tea_b]::bigint[], 'a merge keeps the union of the evidence');
SELECT is((SELECT (status, merged_into)::text FROM ember.facts WHERE id = :f_tea1), ('merged', :f_merged)::text,
          'its sources are merged into it');
SELECT is((SELECT source_threads FROM ember.facts WHERE id = :f_merged), '{a,b}'::text[],
          'with the union of their sources');
SELECT is((SELECT valid_from FROM ember.facts WHERE id = :f_merged), '2030-07-01 10:00+00'::timestamptz,
          'valid from its earliest evidence');
SELECT is((SELECT (change, consolidation_run_id, consolidation_action_id IS NOT NULL, detail)::text
           FROM ember.fact_history WHERE fact_id = :f_tea2 AND change = 'merged'),
          ('merged', :r1, true, 'the same preference, said twice')::text,
          'the merge is in each source''s history with the run, the action and the reason');
SELECT is((SELECT consolidation_run_id FROM ember.facts WHERE id = :f_merged), :r1::bigint, 'the new fact names its run');

-- supersede
SELECT is((SELECT (status, superseded_by, valid_until)::text FROM ember.facts WHERE id = :f_berlin),
          ('superseded', :f_lisbon, '2030-07-02 09:00+00'::timestamptz)::text,
          'a supersede closes the older fact at the newer''s start');
SELECT is((SELECT detail FROM ember.fact_history WHERE fact_id = :f_berlin AND change = 'superseded'), 'the user moved',
          'with its reason in history');
SELECT is((SELECT status FROM ember.facts WHERE id = :f_lisbon), 'active', 'the newer fact stays active');
SELECT ok(ember.explain_fact(:f_berlin) -> 'history' @> '[{"change": "superseded"}]'::jsonb,
          'the older fact stays in explain, with the supersede in its history');
SELECT matches((SELECT error FROM ember.consolidation_actions WHERE run_id = :r1 AND ordinal = 3),
               'supersede needs evidence newer than the fact it closes',
               'a supersede by a fact whose evidence is not newer is refused');
SELECT is((SELECT status FROM ember.facts WHERE id = :f_run), 'active', 'and changes nothing');

-- retire, flag, refusals, low confidence
SELECT matches((SELECT error FROM ember.consolidation_actions WHERE run_id = :r1 AND ordinal = 4),
               'still supports it', 'retiring a fact whose evidence still holds is refused');
SELECT is((SELECT status FROM ember.consolidation_actions WHERE run_id = :r1 AND ordinal = 5), 'flagged',
          'a flag is queued for a person');
SELECT matches((SELECT error FROM ember.consolidation_actions WHERE run_id = :r1 AND ordinal = 6),
               'one evidence kind', 'a merge across evidence kinds is refused');
SELECT matches((SELECT error FROM ember.consolidation_actions WHERE run_id = :r1 AND ordinal = 7),
               'not one this run was shown', 'an action on a fact the run was not shown is refused');
SELECT is((SELECT status FROM ember.facts WHERE id = :f_knee), 'active', 'so the labelled facts are untouched');
SELECT is((SELECT status FROM ember.consolidation_actions WHERE run_id = :r1 AND ordinal = 8), 'flagged',
          'an action below the confidence threshold is queued, not applied');
SELECT is((SELECT status FROM ember.facts WHERE id = :f_nojazz), 'active', 'and its fact is untouched');
SELECT is((SELECT (status, input_tokens, output_tokens, latency_ms, actions)::text FROM ember.consolidation_runs WHERE id = :r1),
          ('completed', 300, 40, 700, 8)::text, 'the run records its status, usage, latency and actions');

-- A fact whose evidence was forgotten can be retired.
SELECT ember.forget_messages('default', ARRAY[:m_deploy]::bigint[], 'asked', '2030-07-03 11:00+00') IS NOT NULL AS forgot \gset
SELECT is((SELECT status FROM ember.facts WHERE id = :f_deploy), 'retired',
          '(forgetting a fact''s only evidence retires it already)');

-- ---------------------------------------------------------------------------------------------
-- The review queue.
SELECT is((SELECT array_agg(item ORDER BY action_id) FROM ember.review_queue),
          ARRAY['contradiction', 'low-confidence supersede'], 'the queue holds the flag and the held-back action');
SELECT throws_ok('SELECT ember.review_consolidation_action(-1, ''accept'', ''ana'')', 'EM136', NULL,
                 'an unknown action cannot be reviewed');
SELECT id AS a_flag FROM ember.consolidation_actions WHERE run_id = :r1 AND ordinal = 5 \gset
SELECT id AS a_low FROM ember.consolidation_actions WHERE run_id = :r1 AND ordinal = 8 \gset
SELECT id AS a_applied FROM ember.consolidation_actions WHERE run_id = :r1 AND ordinal = 1 \gset
SELECT throws_ok(format('SELECT ember.review_consolidation_action(%s, %L, %L)', :a_flag, 'maybe', 'ana'), 'EM136', NULL,
                 'a decision is accept or reject');
SELECT throws_ok(format('SELECT ember.review_consolidation_action(%s, %L, %L)', :a_applied, 'reject', 'ana'), 'EM136',
                 NULL, 'an applied action is not waiting for review');
SELECT ember.review_consolidation_action(:a_flag, 'accept', 'ana', 'she changed her mind', '2030-07-04 09:00+00');
SELECT is((SELECT (review, reviewed_by, reviewed_at)::text FROM ember.consolidation_actions WHERE id = :a_flag),
          ('accepted', 'ana', '2030-07-04 09:00+00'::timestamptz)::text, 'a review records the decision, who and when');
SELECT throws_ok(format('SELECT ember.review_consolidation_action(%s, %L, %L)', :a_flag, 'reject', 'bo'), 'EM136', NULL,
                 'an item is decided once');
SELECT throws_ok(format('SELECT ember.review_consolidation_action(%s, %L, %L)', :a_low, 'accept', 'ana'), 'EM135', NULL,
                 'accepting a held-back action runs the same checks, which may refuse it');
SELECT ember.review_consolidation_action(:a_low, 'reject', 'ana', NULL, '2030-07-04 09:05+00');
SELECT is((SELECT count(*)::int FROM ember.review_queue), 0, 'decided items leave the queue');
SELECT is((SELECT array_agg(review || ' by ' || reviewed_by ORDER BY action_id) FROM ember.comparison_review_queue()),
          ARRAY['accepted by ana', 'rejected by ana'], 'the analyst''s queue keeps decided items with who decided');
UPDATE ember.threads SET seal_tier = 'isolated' WHERE id = 'b';
SELECT is((SELECT count(*)::int FROM ember.comparison_review_queue()), 0,
          'an item naming a fact of a thread sealed since never reaches the analyst');

-- Once a model is tagged for health, that group is read too.
UPDATE ember.models SET tags = '{health}' WHERE id = 'claude-haiku-4-5';
SELECT is((SELECT due FROM ember.consolidation_groups('2030-07-04 10:00+00') WHERE labels = '{health}'), true,
          'a labelled group is read once a light model is tagged for all its labels');

SELECT ember.claim_consolidation_run('w', '10 minutes', '2030-07-04 10:00+00') AS plan2 \gset
SELECT (:'plan2'::jsonb ->> 'run_id')::bigint AS r2 \gset
SELECT is((:'plan2'::jsonb -> 'labels'), '["health"]'::jsonb, 'the labelled group goes to the model tagged for it');
SELECT ember.submit_consolidation_run(:r2, (SELECT lease_token FROM ember.consolidation_runs WHERE id = :r2),
    jsonb_build_object('status', 'completed', 'finished_at', '2030-07-04 10:01+00', 'actions', jsonb_build_array(
        pg_temp.act('merge', ARRAY[:f_knee, :f_knee2]::bigint[], 'the same complaint', 0.9, 'The user''s knee hurts.'))));
SELECT is((SELECT (f.categories, f.source_threads)::text FROM ember.facts AS f
           WHERE f.id = (SELECT result_fact FROM ember.consolidation_actions WHERE run_id = :r2)),
          ('{health}'::text[], '{doc}'::text[])::text, 'a merge keeps the labels of what it merged');

-- The worker's role may claim and submit; the host's may not.
SET LOCAL ROLE ember_worker;
SELECT lives_ok($$SELECT ember.claim_consolidation_run('w', '10 minutes', '2030-07-05 10:00+00')$$,
                'the worker role may claim consolidation runs');
RESET ROLE;
SET LOCAL ROLE ember_host;
SELECT throws_ok($$SELECT ember.claim_consolidation_run('w', '10 minutes')$$, '42501', NULL,
                 'the host role may not');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
