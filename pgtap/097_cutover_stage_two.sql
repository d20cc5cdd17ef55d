BEGIN;
SELECT plan(43);

-- Stage two where its parts meet: cut-over, rollback, consolidation, validity and sealing, each
-- case one that broke before (docs/cutover.md, docs/consolidation.md). Time: day 1 the steward's
-- facts (thread a), the cut-over of thread b at 20:00; day 2 shadow's rows in b, promoted; day 3
-- consolidation; day 4 the rollback.

CREATE FUNCTION pg_temp.fact(p_text text, p_at timestamptz, p_cutover bigint, VARIADIC p_ids bigint [])
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    v_id bigint;
BEGIN
    -- A promoted fact (p_cutover set) names a proposal and a shadow run, as promotion writes it.
    INSERT INTO ember.facts (text, evidence_kind, source_threads, created_at, updated_at,
                             cutover_id, shadow_proposal_id, shadow_run_id)
    VALUES (p_text, 'user-stated',
            ARRAY(SELECT DISTINCT m.thread_id FROM ember.messages AS m WHERE m.id = ANY(p_ids)), p_at, p_at,
            p_cutover, CASE WHEN p_cutover IS NOT NULL THEN 1 END, CASE WHEN p_cutover IS NOT NULL THEN 1 END)
    RETURNING id INTO v_id;
    INSERT INTO ember.fact_evidence (fact_id, ordinal, message_id)
    SELECT v_id, o, i FROM unnest(p_ids) WITH ORDINALITY AS x (i, o);
    RETURN v_id;
END;
$$;

CREATE FUNCTION pg_temp.act(p_action text, p_ids bigint [], p_reason text, p_text text DEFAULT NULL)
RETURNS jsonb LANGUAGE sql AS $$
    SELECT jsonb_strip_nulls(jsonb_build_object('action', p_action, 'fact_ids', to_jsonb(p_ids), 'reason', p_reason,
                                                'confidence', 0.95, 'text', p_text))
$$;

CREATE FUNCTION pg_temp.outcome(p_actions jsonb, p_finished text DEFAULT '2030-07-03 10:01+00')
RETURNS jsonb LANGUAGE sql AS $$
    SELECT jsonb_build_object('status', 'completed', 'usage', jsonb_build_object('input_tokens', 300),
                              'latency_ms', 700, 'finished_at', p_finished, 'actions', p_actions)
$$;

CREATE FUNCTION pg_temp.submit(p_run bigint, p_outcome jsonb) RETURNS jsonb LANGUAGE sql AS $$
    SELECT ember.submit_consolidation_run(p_run, (SELECT lease_token FROM ember.consolidation_runs WHERE id = p_run),
                                          p_outcome)
$$;

CREATE FUNCTION pg_temp.error_of(p_sql text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE p_sql;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END;
$$;

UPDATE ember.models SET tags = '{}' WHERE tier = 'light';
SELECT ember.shadow_activate('2030-07-01 07:00+00');
SELECT ember.create_thread('default', 'a', 'side', 'A', NULL, 'open', NULL, '2030-07-01 08:00+00');
SELECT ember.create_thread('default', 'b', 'side', 'B', NULL, 'open', NULL, '2030-07-01 08:00+00');
SELECT ember.create_thread('default', 's4', 'side', 'S4', NULL, 'open', NULL, '2030-07-01 08:00+00');
SELECT ember.append_message('default', 'a', 'user', 'I live in Berlin.', p_now => '2030-07-01 09:00+00') AS m_berlin \gset
SELECT ember.append_message('default', 'a', 'user', 'I prefer tea.', p_now => '2030-07-01 10:00+00') AS m_tea \gset
SELECT ember.append_message('default', 's4', 'user', 'I like chess.', p_now => '2030-07-01 11:00+00') AS m_chess \gset
SELECT pg_temp.fact('The user lives in Berlin.', '2030-07-01 12:00+00', NULL, :m_berlin) AS f_berlin \gset
SELECT pg_temp.fact('The user prefers tea.', '2030-07-01 12:00+00', NULL, :m_tea) AS f_tea \gset

-- ---------------------------------------------------------------------------------------------
-- Recorded time is bounded, and who is recorded by the database.
SELECT throws_ok($$SELECT ember.cut_over('thread', 'b', 'somebody-else', NULL, '-infinity')$$, 'EM012',
                 NULL, 'an infinite cut-over time is refused');
SELECT throws_ok($$SELECT ember.cut_over('thread', 'b', 'somebody-else', NULL, '1999-01-01 00:00+00')$$, 'EM120',
                 NULL, 'a cut-over from 1999, before the rows it follows, is refused');
SELECT ember.cut_over('thread', 'b', 'ops', 'trial', '2030-07-01 20:00+00') ->> 'cutover_id' AS cut_b \gset
SELECT is((SELECT (created_by, recorded_by = session_user, recorded_at = now())::text FROM ember.cutovers
           WHERE id = :cut_b), ('ops', true, true)::text,
          'the operator''s name is kept beside the login role and clock the database saw');
SELECT ember.cut_over('thread', 's4', 'ops', NULL, '2030-07-01 20:00+00') ->> 'cutover_id' AS cut_s4 \gset

SELECT ember.append_message('default', 'b', 'user', 'I moved to Lisbon.', p_now => '2030-07-02 09:00+00') AS m_lisbon \gset
SELECT ember.append_message('default', 'b', 'user', 'I really prefer tea.', p_now => '2030-07-02 10:00+00') AS m_tea_b \gset
SELECT pg_temp.fact('The user lives in Lisbon.', '2030-07-02 12:00+00', :cut_b, :m_lisbon) AS f_lisbon \gset
SELECT pg_temp.fact('User prefers tea.', '2030-07-02 12:00+00', :cut_b, :m_tea_b) AS f_tea_b \gset

-- ---------------------------------------------------------------------------------------------
-- Work is asked of the pipeline that owns it.
SELECT ember.ensure_steward_thread('default', '2030-07-01 07:30+00');
UPDATE ember.messages SET episode_id = gen_random_uuid() WHERE thread_id IN ('a', 's4');
SELECT ember.start_generation('default', 'b', '2030-07-02 11:00+00');
SELECT is(ember.steward_has_work('2030-07-03 09:00+00'), false,
          'rows above a cut-over point are shadow''s: they do not wake the steward');
SELECT ember.append_message('default', 'a', 'user', 'I am back.', p_now => '2030-07-02 11:30+00');
SELECT ember.start_generation('default', 'a', '2030-07-02 11:40+00');
SELECT is(ember.steward_has_work('2030-07-03 09:00+00'), true, 'a row the steward owns still does');
SELECT is((SELECT (state, reason, items, oldest)::text FROM ember.work_status('2030-07-03 09:00+00')
           WHERE pipeline = 'cutover' AND oldest = 'thread:b'), ('active', 'shadow-owns', 2, 'thread:b')::text,
          'work_status says shadow owns the cut-over scope''s pending rows');
SELECT matches((SELECT detail FROM ember.work_status('2030-07-03 09:00+00')
                WHERE pipeline = 'cutover' AND oldest = 'thread:b'),
               'the steward still digests 0 at or below it', 'and how many the steward still digests');
UPDATE ember.messages SET episode_id = gen_random_uuid() WHERE thread_id = 'a' AND episode_id IS NULL;

-- ---------------------------------------------------------------------------------------------
-- Consolidation's envelope: every field named, never a raw cast or constraint error.
SELECT ember.claim_consolidation_run('w', '10 minutes', '2030-07-03 10:00+00') ->> 'run_id' AS r1 \gset
SELECT matches(pg_temp.error_of(format('SELECT pg_temp.submit(%s, %L)', :r1,
                                       pg_temp.outcome('[]', 'yesterday-ish'))),
               '^EM130: .*finished_at must be a timestamp', 'a finished_at that is no time is EM130, named');
SELECT matches(pg_temp.error_of(format('SELECT pg_temp.submit(%s, %L)', :r1, pg_temp.outcome('[]', '-infinity'))),
               '^EM130: .*finished_at', 'so is -infinity');
SELECT matches(pg_temp.error_of(format('SELECT pg_temp.submit(%s, %L)', :r1,
                                       pg_temp.outcome('[]') || '{"latency_ms": -1}')),
               '^EM130: .*latency_ms must be a non-negative integer', 'a negative latency is EM130, named');
SELECT matches(pg_temp.error_of(format('SELECT pg_temp.submit(%s, %L)', :r1,
                                       pg_temp.outcome('[]') || '{"latency_ms": 1.5}')),
               '^EM130: .*latency_ms', 'as is a fraction');
SELECT matches(pg_temp.error_of(format('SELECT pg_temp.submit(%s, %L)', :r1,
                                       pg_temp.outcome('[]') || '{"usage": {"input_tokens": "many"}}')),
               '^EM130: .*usage.input_tokens', 'and a usage that is no count');

-- One run: a supersede and a merge, each taking in a promoted fact; one merge text over the bound.
SELECT pg_temp.submit(:r1, pg_temp.outcome(jsonb_build_array(
    pg_temp.act('supersede', ARRAY[:f_berlin, :f_lisbon]::bigint[], 'the user moved'),
    pg_temp.act('merge', ARRAY[:f_tea, :f_tea_b]::bigint[], 'the same preference, said twice', repeat('tea ', 900)),
    pg_temp.act('merge', ARRAY[:f_tea, :f_tea_b]::bigint[], 'the same preference, said twice', 'The user prefers tea.')
))) AS res1 \gset
SELECT is((:'res1'::jsonb - 'run_id'), '{"status": "completed", "applied": 2, "refused": 1, "flagged": 0}'::jsonb,
          'an over-long merge text is one refused action; the run completes and its siblings apply');
SELECT matches((SELECT error FROM ember.consolidation_actions WHERE run_id = :r1 AND ordinal = 2),
               '^text is 3600 characters; a fact holds at most 2000', 'refused with its reason');
SELECT ok((SELECT length(text) < 2100 FROM ember.consolidation_actions WHERE run_id = :r1 AND ordinal = 2),
          'and kept shortened');
SELECT result_fact AS f_merged FROM ember.consolidation_actions WHERE run_id = :r1 AND ordinal = 3 \gset
SELECT is((SELECT status FROM ember.facts WHERE id = :f_berlin), 'superseded', 'Berlin is superseded by Lisbon');

-- ---------------------------------------------------------------------------------------------
-- Rollback is an exact inverse.
SELECT is(ember.cutover_plan('thread', 'b', TRUE, '2030-07-04 09:00+00') -> 'facts_to_retire',
          jsonb_build_array(:f_lisbon, :f_tea_b, :f_merged), 'the dry run names the promoted facts and the merge');
SELECT is(ember.cutover_plan('thread', 'b', TRUE, '2030-07-04 09:00+00') -> 'facts_to_reopen',
          jsonb_build_array(:f_berlin, :f_tea), 'and the facts it reopens');
SELECT is(ember.explain_fact(:f_merged) -> 'rollback_would_retire', jsonb_build_object('cutover', :cut_b, 'via', :f_tea_b),
          'explain_fact says, by the same rule, that a rollback would take the merge back, and through which fact');
SELECT is(ember.explain_fact(:f_tea) -> 'rollback_would_retire', 'null'::jsonb, 'and not the steward''s own fact');
SELECT throws_ok($$SELECT ember.cutover_rollback('thread', 'b', 'ops', '2030-07-01 19:00+00')$$, 'EM120', NULL,
                 'a rollback from before its cut-over is refused');
SELECT ember.cutover_rollback('thread', 'b', 'ops', '2030-07-04 09:00+00') AS rb \gset
SELECT is((SELECT array_agg(id ORDER BY id) FROM ember.facts WHERE status = 'active'),
          ARRAY[:f_berlin, :f_tea]::bigint[], 'after the rollback, memory holds what the steward alone wrote');
SELECT is((SELECT (valid_until, superseded_by)::text FROM ember.facts WHERE id = :f_berlin),
          (NULL::timestamptz, NULL::bigint)::text, 'Berlin is open again, with its validity before the supersede');
SELECT is((SELECT (status, merged_into)::text FROM ember.facts WHERE id = :f_tea), ('active', NULL::bigint)::text,
          'the steward''s tea fact is out of the merge');
SELECT is((SELECT (status, retired_reason)::text FROM ember.facts WHERE id = :f_merged),
          ('retired', format('cut-over %s rolled back: merged from a fact it promoted', :cut_b))::text,
          'the merge that stood on the promoted fact is retired, saying why');
SELECT is((SELECT array_agg(fact_id ORDER BY fact_id) FROM ember.fact_history WHERE change = 'reopened'),
          ARRAY[:f_berlin, :f_tea]::bigint[], 'each reopening is a history row');
SELECT is((SELECT cutover_id FROM ember.fact_history WHERE change = 'reopened' AND fact_id = :f_berlin),
          :cut_b::bigint, 'naming the cut-over');
SELECT is((:'rb'::jsonb -> 'reopened_facts'), jsonb_build_array(:f_berlin, :f_tea), 'the rollback lists them');
SELECT is((SELECT (rolled_back_by, rollback_recorded_by = session_user)::text FROM ember.cutovers WHERE id = :cut_b),
          ('ops', true)::text, 'and its audit trail is the database''s');

-- A sealed cut-over thread can be rolled back.
SELECT pg_temp.fact('The user likes chess.', '2030-07-02 12:00+00', :cut_s4, :m_chess) AS f_chess \gset
SELECT ember.seal_thread('default', 's4');
SELECT lives_ok($$SELECT ember.cutover_rollback('thread', 's4', 'ops', '2030-07-04 10:00+00')$$,
                'a thread sealed since its cut-over is rolled back all the same');
SELECT is((SELECT status FROM ember.facts WHERE id = :f_chess), 'retired', 'its promoted fact retired');
SELECT lives_ok($$SELECT ember.cut_over('all', NULL, 'ops', NULL, '2030-07-04 11:00+00')$$,
                'and an all scope is no longer refused for ever');

-- ---------------------------------------------------------------------------------------------
-- Chains repaired, validity consistent.
SELECT pg_temp.fact('The user lives in Porto.', '2030-07-02 12:00+00', NULL, :m_lisbon) AS f_porto \gset
UPDATE ember.facts SET status = 'superseded', superseded_by = :f_porto, valid_until = '2030-07-02 09:00+00',
    updated_at = '2030-07-04 12:00+00'
WHERE id = :f_berlin;
SELECT throws_ok(format('SELECT ember.set_fact_validity(%s, NULL, %L, %L)', :f_berlin, '2030-07-02 10:00+00', 'later'),
                 'EM124', NULL, 'a superseded fact may not end after its successor starts');
SELECT throws_ok(format('SELECT ember.set_fact_validity(%s, %L, NULL, %L)', :f_porto, 'infinity', 'never'),
                 'EM124', NULL, 'an infinite start is refused');
SELECT throws_ok(format('SELECT ember.set_fact_validity(%s, %L, NULL, %L)', :f_porto, '2030-06-01 00:00+00', 'x'),
                 'EM124', NULL, 'a fact may not start before a fact it superseded did');
UPDATE ember.facts SET status = 'retired', retired_reason = 'wrong', updated_at = '2030-07-04 13:00+00'
WHERE id = :f_porto;
SELECT is((SELECT (status, valid_until)::text FROM ember.facts WHERE id = :f_berlin),
          ('active', NULL::timestamptz)::text, 'when the fact that superseded another is retired, it reopens');
SELECT is((SELECT detail FROM ember.fact_history WHERE fact_id = :f_berlin ORDER BY id DESC LIMIT 1),
          format('fact %s, which superseded it, was retired', :f_porto), 'saying why');

-- ---------------------------------------------------------------------------------------------
-- Sealing stops consolidation; the review queue follows the isolation rule.
SELECT ember.create_thread('default', 'c', 'side', 'C', NULL, 'open', NULL, '2030-07-05 08:00+00');
SELECT ember.append_message('default', 'c', 'user', 'I like jazz.', p_now => '2030-07-05 09:00+00') AS m_jazz \gset
SELECT ember.append_message('default', 'c', 'user', 'I hate jazz.', p_now => '2030-07-05 10:00+00') AS m_nojazz \gset
SELECT pg_temp.fact('The user likes jazz.', '2030-07-05 12:00+00', NULL, :m_jazz) AS f_jazz \gset
SELECT pg_temp.fact('The user hates jazz.', '2030-07-05 12:00+00', NULL, :m_nojazz) AS f_nojazz \gset
SELECT ember.claim_consolidation_run('w', '10 minutes', '2030-07-06 10:00+00') ->> 'run_id' AS r2 \gset
SELECT ember.seal_thread('default', 'c');
SELECT pg_temp.submit(:r2, pg_temp.outcome(jsonb_build_array(
    pg_temp.act('supersede', ARRAY[:f_jazz, :f_nojazz]::bigint[], 'changed their mind'),
    jsonb_build_object('action', 'flag', 'fact_ids', jsonb_build_array(:f_jazz, :f_nojazz), 'reason', 'which?',
                       'confidence', 0.4)
), '2030-07-06 10:01+00')) AS res2 \gset
SELECT is((:'res2'::jsonb ->> 'refused')::int, 1, 'an action on facts of a thread sealed since the claim is refused');
SELECT matches((SELECT error FROM ember.consolidation_actions WHERE run_id = :r2 AND ordinal = 1),
               'sealed since the claim', 'with the reason');
SELECT is((SELECT status FROM ember.facts WHERE id = :f_jazz), 'active', 'and changes nothing');
SELECT is((SELECT count(*)::int FROM ember.review_queue WHERE :f_jazz = ANY(SELECT (x ->> 'id')::bigint
                                                                            FROM jsonb_array_elements(facts) AS x)),
          0, 'the review queue shows no item naming a fact of a sealed thread');
SELECT throws_ok(format('SELECT ember.review_consolidation_action(%s, %L, %L)',
                        (SELECT id FROM ember.consolidation_actions WHERE run_id = :r2 AND ordinal = 2), 'accept', 'ana'),
                 'EM136', NULL, 'and deciding such an item is refused');

-- ---------------------------------------------------------------------------------------------
-- A lease is judged on the database's clock, whatever finished_at says.
-- The runs above were claimed in simulated 2030; moved to the past, they leave the groups due now.
UPDATE ember.consolidation_runs SET status = 'abandoned' WHERE status = 'running';
UPDATE ember.consolidation_runs SET started_at = '2020-01-01', finished_at = '2020-01-01';
SELECT ember.append_message('default', 'a', 'user', 'I prefer green tea.') AS m_green \gset
SELECT pg_temp.fact('The user prefers green tea.', clock_timestamp(), NULL, :m_green);
SELECT ember.claim_consolidation_run('w', '1 second') ->> 'run_id' AS r3 \gset
SELECT pg_sleep(1.2);
SELECT (started_at + interval '0.5 second')::text AS r3_backdated FROM ember.consolidation_runs WHERE id = :r3 \gset
SELECT throws_ok(format('SELECT pg_temp.submit(%s, %L)', :r3, pg_temp.outcome('[]', :'r3_backdated')),
                 'EM133', NULL, 'a back-dated finished_at does not pass a lapsed lease');

SELECT * FROM finish();
ROLLBACK;
