BEGIN;
SELECT plan(63);

-- Fixtures: the steward pipeline does not exist yet, so facts, their evidence and steward runs are
-- inserted directly; threads and messages go through the host API; shadow runs and proposals are
-- inserted as the submit would write them (the proposal guard still checks each valid row).

CREATE FUNCTION pg_temp.msg(p_thread text, p_role text, p_content text, p_status text DEFAULT NULL)
RETURNS bigint LANGUAGE sql AS $$
    SELECT ember.append_message('default', 
        p_thread, p_role, p_content,
        p_author => CASE WHEN p_role = 'user' THEN 'human' END,
        p_tool_call_id => CASE WHEN p_role = 'tool_result' THEN 'call-1' END,
        p_tool_name => CASE WHEN p_role = 'tool_result' THEN 'bash' END,
        p_tool_status => p_status,
        p_now => '2030-01-01 10:00+00'
    )
$$;

-- A finished shadow run of a thread (price snapshot of claude-haiku-4-5 unless p_priced is false).
CREATE FUNCTION pg_temp.shadow_run(
    p_thread text, p_path text DEFAULT 'cold', p_latency bigint DEFAULT 1000, p_priced boolean DEFAULT TRUE,
    p_at timestamptz DEFAULT '2030-01-01 10:00+00'
) RETURNS bigint LANGUAGE sql AS $$
    INSERT INTO ember.shadow_runs (
        thread_id, generation_id, path, model, status, from_seq, through_seq,
        input_tokens, cache_read_tokens, cache_write_5m_tokens, cache_write_1h_tokens, output_tokens,
        price_as_of, price_input, price_output, price_cache_write_5m, price_cache_write_1h, price_cache_read,
        started_at, finished_at, latency_ms, worker, lease_token, lease_expires_at
    )
    SELECT p_thread, ember.current_generation('default', p_thread), p_path, m.id, 'completed', 0, 0,
           1000000, 2000000, 1000000, 0, 100000,
           m.price_as_of, CASE WHEN p_priced THEN m.price_input END, m.price_output, m.price_cache_write_5m,
           m.price_cache_write_1h, m.price_cache_read,
           p_at, p_at + make_interval(secs => p_latency / 1000.0), p_latency, 'w', gen_random_uuid(), p_at
    FROM ember.models AS m WHERE m.id = 'claude-haiku-4-5'
    RETURNING id
$$;

CREATE FUNCTION pg_temp.proposal(
    p_run bigint, p_text text, p_kind text, p_evidence jsonb, p_error text DEFAULT NULL,
    p_at timestamptz DEFAULT '2030-01-01 10:00+00'
) RETURNS bigint LANGUAGE sql AS $$
    INSERT INTO ember.shadow_proposals (
        run_id, thread_id, generation_id, ordinal, text, evidence_kind, evidence, categories,
        validation_error, created_at
    )
    SELECT r.id, r.thread_id, r.generation_id,
           (SELECT count(*) + 1 FROM ember.shadow_proposals AS p WHERE p.run_id = r.id),
           p_text, p_kind, p_evidence, ember.generation_labels(r.generation_id), p_error, p_at
    FROM ember.shadow_runs AS r WHERE r.id = p_run
    RETURNING id
$$;

CREATE FUNCTION pg_temp.fact(
    p_text text, p_kind text, p_messages bigint[], p_categories text[] DEFAULT '{}',
    p_at timestamptz DEFAULT '2030-01-01 10:05+00'
) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    v_id bigint;
BEGIN
    INSERT INTO ember.facts (text, evidence_kind, categories, created_at)
    VALUES (p_text, p_kind, p_categories, p_at) RETURNING id INTO v_id;
    INSERT INTO ember.fact_evidence (fact_id, ordinal, message_id)
    SELECT v_id, o.n, o.id FROM unnest(p_messages) WITH ORDINALITY AS o (id, n);
    RETURN v_id;
END;
$$;

CREATE FUNCTION pg_temp.steward_run(p_latency bigint, p_priced boolean) RETURNS bigint LANGUAGE sql AS $$
    INSERT INTO ember.steward_runs (
        generation_id, read_message_ids, read_generations, read_tokens,
        model, status, input_tokens, output_tokens, price_as_of, price_input, price_output,
        price_cache_write_5m, price_cache_write_1h, price_cache_read, started_at, finished_at, latency_ms,
        worker, lease_token, lease_expires_at
    ) VALUES (
        ember.current_generation('default', ember.ensure_steward_thread('default')), '{}', '{}', 0,
        'claude-haiku-4-5', 'completed', 1000000, 0, '2026-11-30', CASE WHEN p_priced THEN 1 END, 5, 1.25, 2, 0.1,
        '2030-01-01 10:00+00', '2030-01-01 10:01+00', p_latency, 'w', gen_random_uuid(), '2030-01-01 10:10+00'
    ) RETURNING id
$$;

SELECT ember.shadow_activate('2030-01-01 09:00+00');
SELECT ember.create_thread('default', 'deploy', 'side');
SELECT ember.create_thread('default', 'db', 'side');
SELECT ember.create_thread('default', 'secret', 'side');

CREATE TEMP TABLE ids (name text PRIMARY KEY, id bigint);
GRANT SELECT ON ids TO PUBLIC;
INSERT INTO ids VALUES
('m_deploy', pg_temp.msg('deploy', 'user', '部署使用独立工作区')),
('m_tool', pg_temp.msg('deploy', 'tool_result', 'tests passed', 'ok')),
('m_question', pg_temp.msg('deploy', 'user', 'Should we use Postgres?')),
('m_db', pg_temp.msg('db', 'user', 'We use Postgres.')),
('m_secret', pg_temp.msg('secret', 'user', 'The launch code is 1234.'));

INSERT INTO ids VALUES
('r_deploy', pg_temp.shadow_run('deploy', 'cold', 1000)),
('r_deploy_hot', pg_temp.shadow_run('deploy', 'hot', 3000)),
('r_db', pg_temp.shadow_run('db', 'cold', 2000)),
('r_secret', pg_temp.shadow_run('secret', 'cold', 9000));

CREATE FUNCTION pg_temp.id(p_name text) RETURNS bigint LANGUAGE sql AS $$
    SELECT id FROM ids WHERE name = p_name
$$;
CREATE FUNCTION pg_temp.ev(VARIADIC p_ids bigint[]) RETURNS jsonb LANGUAGE sql AS $$
    SELECT jsonb_agg(jsonb_build_object('message_id', i)) FROM unnest(p_ids) AS i
$$;

-- The seed's case: same pointer, different wording.
INSERT INTO ids VALUES
('p_seed', pg_temp.proposal(pg_temp.id('r_deploy'), '部署使用独立工作区。', 'user-stated', pg_temp.ev(pg_temp.id('m_deploy')))),
('f_seed', pg_temp.fact('部署有独立工作区', 'user-stated', ARRAY[pg_temp.id('m_deploy')]));

-- 1-7: the views exist, each with a comment.
SELECT has_view('ember', v, v || ' exists')
FROM unnest(ARRAY['comparison_exact', 'comparison_evidence', 'comparison_semantic', 'comparison_cost',
                  'comparison_latency', 'comparison_evidence_quality', 'comparison_summary']) AS v;
-- 8
SELECT is(
    (SELECT count(*) FROM pg_class AS c
     WHERE c.relnamespace = 'ember'::regnamespace AND c.relname LIKE 'comparison\_%' AND c.relkind = 'v'
       AND c.relname IN ('comparison_exact', 'comparison_evidence', 'comparison_semantic', 'comparison_cost',
                         'comparison_latency', 'comparison_evidence_quality', 'comparison_summary')
       AND obj_description(c.oid, 'pg_class') IS NOT NULL),
    7::bigint, 'every comparison view says what it counts in a COMMENT'
);

-- 9-13: normalization.
SELECT is(ember.normalize_fact_text('ＵＳＥ　Ｐｏｓｔｇｒｅｓ１５！'), 'usepostgres15', 'NFKC folds full-width letters, digits, space and punctuation');
SELECT is(ember.normalize_fact_text('部署使用独立工作区。'), ember.normalize_fact_text('部署使用独立工作区'),
          'CJK punctuation is removed');
SELECT is(ember.normalize_fact_text('「部署」、使用：独立《工作区》…'), '部署使用独立工作区', 'CJK brackets, commas, colons and ellipses are removed');
SELECT is(ember.normalize_fact_text(E'We  use\tPostgres, always.'), 'weusepostgresalways', 'ASCII whitespace and punctuation are removed, case folded');
SELECT isnt(ember.normalize_fact_text('部署使用独立工作区'), ember.normalize_fact_text('部署有独立工作区'), 'a reworded text stays different');

-- 14-18: the seed's case.
SELECT is((SELECT count(*) FROM ember.comparison_exact WHERE thread_id = 'deploy'), 0::bigint,
          'seed case: no exact match between 部署使用独立工作区。 and 部署有独立工作区');
SELECT results_eq(
    $$SELECT proposal_id, fact_id, shared_message_ids, relation FROM ember.comparison_evidence WHERE thread_id = 'deploy'$$,
    $$SELECT pg_temp.id('p_seed'), pg_temp.id('f_seed'), ARRAY[pg_temp.id('m_deploy')], 'neighbour'::text$$,
    'seed case: the shared pointer lists the pair as neighbours'
);
SELECT is((SELECT exact_coverage FROM ember.comparison_summary), 0::numeric, 'seed case: exact coverage 0');
SELECT is((SELECT evidence_coverage FROM ember.comparison_summary), 1::numeric, 'seed case: evidence coverage 1');
SELECT is((SELECT semantic_coverage FROM ember.comparison_summary), NULL::numeric,
          'seed case: shared evidence is not claimed as semantic coverage, and with no judge it is not judged, not 0');

-- A second thread: an exact match through full-width forms, a rejected proposal, and a fact of
-- another thread with the same text (same text, other thread: no match).
INSERT INTO ids VALUES
('p_db', pg_temp.proposal(pg_temp.id('r_db'), 'ＷＥ ＵＳＥ Ｐｏｓｔｇｒｅｓ！', 'user-stated', pg_temp.ev(pg_temp.id('m_db')))),
('p_bad1', pg_temp.proposal(pg_temp.id('r_db'), 'x', 'user-stated', '[{"message_id": 1}]',
                            'pointer 1 (message 1): not in thread "deploy" (a shadow proposal may cite only its own thread)')),
('p_bad2', pg_temp.proposal(pg_temp.id('r_db'), 'y', 'user-stated', '[{"message_id": 2}]',
                            'pointer 1 (message 2): not in thread "secret" (a shadow proposal may cite only its own thread)')),
('p_bad3', pg_temp.proposal(pg_temp.id('r_db'), 'z', 'guess', '[]', 'unknown evidence kind "guess"')),
('f_db', pg_temp.fact('we use postgres', 'user-stated', ARRAY[pg_temp.id('m_db')])),
('f_db_elsewhere', pg_temp.fact('We use Postgres', 'tool-verified', ARRAY[pg_temp.id('m_tool')]));

-- 19-23
SELECT results_eq(
    $$SELECT thread_id, proposal_id, fact_id FROM ember.comparison_exact$$,
    $$VALUES ('db'::text, pg_temp.id('p_db'), pg_temp.id('f_db'))$$,
    'full-width text matches its ASCII form exactly, only within its own thread'
);
SELECT is((SELECT count(*) FROM ember.comparison_evidence WHERE proposal_id IN (pg_temp.id('p_bad1'), pg_temp.id('p_bad2'))),
          0::bigint, 'rejected proposals are never compared');
SELECT results_eq(
    $$SELECT proposals, valid_proposals, rejected_proposals, facts, exact_covered_facts, evidence_neighbour_facts
      FROM ember.comparison_summary$$,
    $$VALUES (5::bigint, 2::bigint, 3::bigint, 3::bigint, 1::bigint, 2::bigint)$$,
    'the summary counts proposals, rejected ones, facts and each coverage separately'
);
SELECT is(
    (SELECT rejected_by_reason FROM ember.comparison_summary),
    '{"not in thread \"…\" (a shadow proposal may cite only its own thread)": 2, "unknown evidence kind \"…\"": 1}'::jsonb,
    'rejected proposals are counted by reason, pointer numbers and thread names left out'
);
SELECT is((SELECT exact_coverage FROM ember.comparison_summary), round(1 / 3.0, 4), 'exact coverage is covered facts / facts');

-- 24-28: evidence quality.
INSERT INTO ids VALUES
('f_question', pg_temp.fact('We use Postgres?', 'user-stated', ARRAY[pg_temp.id('m_question')])),
('f_not_tool', pg_temp.fact('Deploy is isolated', 'tool-verified', ARRAY[pg_temp.id('m_deploy')])),
('f_outcome_early', pg_temp.fact('Tests pass', 'observed-outcome', ARRAY[pg_temp.id('m_tool'), pg_temp.id('m_question')]));
SELECT is((SELECT problem FROM ember.comparison_evidence_quality WHERE item_id = pg_temp.id('f_question') AND source = 'steward'),
          'user-stated: the row is only a question', 'user-stated pointing at a bare question is flagged');
SELECT is((SELECT problem FROM ember.comparison_evidence_quality WHERE item_id = pg_temp.id('f_not_tool') AND source = 'steward'),
          'tool-verified: not an ok tool result', 'tool-verified pointing at a user row is flagged');
SELECT is((SELECT problem FROM ember.comparison_evidence_quality
           WHERE item_id = pg_temp.id('f_outcome_early') AND source = 'steward' AND ordinal = 1),
          'observed-outcome: not the latest row the item cites', 'an outcome cited before the row it follows is flagged');
SELECT is((SELECT problem FROM ember.comparison_evidence_quality WHERE item_id = pg_temp.id('p_seed') AND source = 'shadow'),
          NULL, 'a human statement cited as user-stated passes');
SELECT is((SELECT count(*) FROM ember.comparison_evidence_quality WHERE source = 'shadow'), 2::bigint,
          'one row per pointer of each valid proposal');

-- 29-35: cost and latency.
SELECT is(
    (SELECT estimated_usd FROM ember.comparison_cost WHERE pipeline = 'shadow cold'),
    -- three runs (the secret thread is not sealed yet) of 1M input ($1), 2M read ($0.2),
    -- 1M 5m write ($1.25), 0.1M output ($0.5)
    round(3 * (1 + 0.2 + 1.25 + 0.5), 6),
    'shadow cold USD is priced from each run''s snapshot'
);
SELECT results_eq(
    $$SELECT pipeline, runs, input_tokens, cache_read_tokens, output_tokens FROM ember.comparison_cost ORDER BY 1$$,
    $$VALUES ('shadow cold'::text, 3::bigint, 3000000::bigint, 6000000::bigint, 300000::bigint),
             ('shadow hot', 1, 1000000, 2000000, 100000)$$,
    'cost by pipeline counts runs and tokens by kind'
);
SELECT pg_temp.steward_run(4000, TRUE);
SELECT pg_temp.steward_run(6000, FALSE);
SELECT is((SELECT estimated_usd FROM ember.comparison_cost WHERE pipeline = 'steward'), NULL,
          'a missing price makes the group''s USD NULL, never a smaller total');
SELECT is((SELECT runs_without_price FROM ember.comparison_cost WHERE pipeline = 'steward'), 1::bigint,
          'the group says how many runs lack a price');
SELECT is((SELECT steward_usd FROM ember.comparison_summary), NULL, 'the summary''s steward USD is NULL too');
SELECT results_eq(
    $$SELECT pipeline, p50_ms, p95_ms FROM ember.comparison_latency ORDER BY 1$$,
    $$VALUES ('shadow cold'::text, 2000::bigint, 8300::bigint), ('shadow hot', 3000, 3000), ('steward', 5000, 5900)$$,
    'latency p50 and p95 by pipeline and model, in whole milliseconds'
);
SELECT alike(obj_description('ember.comparison_cost'::regclass, 'pg_class'), '%list-price snapshot, not subscription billing%',
            'the cost comment says list-price snapshot, not subscription billing');

SELECT results_eq(
    $$SELECT thread_id, proposals, rejected_proposals, facts, exact_covered_facts, evidence_neighbour_facts
      FROM ember.comparison_by_thread$$,
    $$VALUES ('db'::text, 4::bigint, 3::bigint, 1::bigint, 1::bigint, 1::bigint),
             ('deploy', 1, 0, 5, 0, 2)$$,
    'per thread: proposals, rejected ones, facts and each coverage, a fact counted in the thread it points into'
);

SELECT results_eq(
    $$SELECT day, facts, exact_coverage FROM ember.comparison_daily$$,
    $$VALUES ('2030-01-01'::date, 6::bigint, round(1 / 6.0, 4))$$,
    'comparison_daily is the summary per UTC day'
);

-- 36-38: windows.
SELECT is((SELECT facts FROM ember.comparison_summary('2030-01-01 10:06+00', '2030-01-02')), 0::bigint,
          'a window with no data is an empty, labelled row, not an error');
SELECT is((SELECT window_since FROM ember.comparison_summary('2030-01-01 10:06+00', '2030-01-02')),
          '2030-01-01 10:06+00'::timestamptz, 'the row names its window');
SELECT throws_ok($$SELECT * FROM ember.comparison_summary('2030-01-02', '2030-01-01')$$, 'EM070', NULL,
                 'a reversed window is refused by name');

-- 39-42: isolated threads. Proposals and a fact exist, then the thread is sealed.
INSERT INTO ids VALUES
('p_secret', pg_temp.proposal(pg_temp.id('r_secret'), 'The launch code is 1234', 'user-stated', pg_temp.ev(pg_temp.id('m_secret')))),
('f_secret', pg_temp.fact('The launch code is 1234.', 'user-stated', ARRAY[pg_temp.id('m_secret')]));
SELECT is((SELECT count(*) FROM ember.comparison_exact WHERE thread_id = 'secret'), 1::bigint,
          'before sealing, the secret thread is compared like any other');
UPDATE ember.threads SET seal_tier = 'isolated' WHERE id = 'secret';
SELECT is(
    (SELECT count(*) FROM ember.comparison_exact WHERE thread_id = 'secret')
    + (SELECT count(*) FROM ember.comparison_evidence WHERE thread_id = 'secret')
    + (SELECT count(*) FROM ember.comparison_evidence_quality WHERE thread_id = 'secret'),
    0::bigint, 'after sealing, no pair or pointer of the isolated thread is shown'
);
SELECT is((SELECT facts FROM ember.comparison_summary), 6::bigint, 'the isolated thread''s fact is not counted');
SELECT is((SELECT count(*) FROM ember.comparison_by_thread WHERE thread_id = 'secret'), 0::bigint,
          'the isolated thread has no row per thread');
SELECT is((SELECT runs FROM ember.comparison_cost WHERE pipeline = 'shadow cold'), 2::bigint,
          'the isolated thread''s run is not in the cost');

-- 43-47: semantic judging's write procedure. A health group routed to a tagged light model.
SELECT ember.define_category('health');
UPDATE ember.models SET tags = '{health}' WHERE id = 'claude-haiku-4-5';
SELECT ember.create_thread('default', 'diet', 'side', p_category => 'health');
INSERT INTO ids VALUES ('m_diet', pg_temp.msg('diet', 'user', 'I stopped eating sugar.'));
INSERT INTO ids VALUES ('r_diet', pg_temp.shadow_run('diet'));
INSERT INTO ids VALUES
('p_diet', pg_temp.proposal(pg_temp.id('r_diet'), 'No sugar', 'user-stated', pg_temp.ev(pg_temp.id('m_diet')))),
('f_diet', pg_temp.fact('The user avoids sugar', 'user-stated', ARRAY[pg_temp.id('m_diet')], '{health}'));

CREATE FUNCTION pg_temp.judge(p_pairs jsonb, p_model text DEFAULT 'claude-haiku-4-5', p_fact bigint DEFAULT NULL)
RETURNS jsonb LANGUAGE sql AS $$
    SELECT jsonb_build_object(
        'categories', '["health"]'::jsonb, 'model', p_model, 'status', 'completed', 'error', NULL,
        'proposal_ids', jsonb_build_array(pg_temp.id('p_diet')),
        'fact_ids', jsonb_build_array(coalesce(p_fact, pg_temp.id('f_diet'))),
        'pairs', p_pairs, 'usage', '{"input_tokens": 1000, "output_tokens": 20}'::jsonb,
        'started_at', '2030-01-01 11:00+00', 'finished_at', '2030-01-01 11:00:02+00', 'latency_ms', 2000
    )
$$;

SELECT is((SELECT ember.submit_judge_run(pg_temp.judge('[[0, 1]]')) ->> 'status'), 'failed',
          'an out-of-range fact index fails the group');
SELECT results_eq(
    $$SELECT status, error, (SELECT count(*) FROM ember.judged_pairs AS p WHERE p.judge_run_id = r.id)
      FROM ember.judge_runs AS r ORDER BY id DESC LIMIT 1$$,
    $$VALUES ('failed'::text, 'pair 0: fact index 1 out of range (1 facts sent)'::text, 0::bigint)$$,
    'the failed group keeps its reason and stores no made-up pair'
);
SELECT is((SELECT ember.submit_judge_run(pg_temp.judge('[[0, 0]]')) ->> 'status'), 'completed', 'an in-range pair is stored');
SELECT results_eq(
    $$SELECT proposal_id, fact_id, judge_model, label FROM ember.comparison_semantic$$,
    $$VALUES (pg_temp.id('p_diet'), pg_temp.id('f_diet'), 'claude-haiku-4-5'::text, 'reviewable pair, not truth'::text)$$,
    'comparison_semantic lists the judged pair with its judging model, as reviewable'
);
SELECT results_eq(
    $$SELECT sum(runs), sum(estimated_usd) FROM ember.comparison_cost WHERE pipeline = 'semantic judge'$$,
    $$VALUES (2::numeric, round(2 * (1000 * 1 + 20 * 5) / 1000000.0, 6))$$,
    'the judge''s cost shows in comparison_cost as its own pipeline'
);

-- 48-50: refusals.
SELECT throws_ok(format('SELECT ember.submit_judge_run(%L)', pg_temp.judge('[[0, 0]]', p_fact => pg_temp.id('f_secret'))),
                 'EM071', NULL, 'a fact of an isolated thread is refused from a judge run');
SELECT throws_ok(format('SELECT ember.submit_judge_run(%L)', pg_temp.judge('[[0, 0]]', 'claude-sonnet-4-5')),
                 'EM073', NULL, 'a model not tagged for the group''s categories is refused');
SELECT throws_ok($$SELECT ember.submit_judge_run('{"status": "done"}')$$, 'EM072', NULL, 'a malformed outcome is refused');

-- 51-60: ember_analyst.
SET LOCAL ROLE ember_analyst;
SELECT is((SELECT count(*) FROM ember.comparison_summary), 1::bigint, 'ember_analyst reads the summary');
SELECT is((SELECT facts FROM ember.comparison_summary('2030-01-01', '2030-01-02')), 7::bigint,
          'ember_analyst asks for a window');
SELECT is(
    (SELECT count(*) FROM ember.comparison_exact WHERE thread_id = 'secret')
    + (SELECT count(*) FROM ember.comparison_evidence_quality WHERE thread_id = 'secret')
    + (SELECT count(*) FROM ember.comparison_exact WHERE fact_text LIKE '%launch code%'),
    0::bigint, 'ember_analyst sees no row of the isolated thread'
);
SELECT ok((SELECT count(*) FROM ember.comparison_exact) > 0 AND (SELECT count(*) FROM ember.comparison_evidence) > 0
          AND (SELECT count(*) FROM ember.comparison_semantic) > 0 AND (SELECT count(*) FROM ember.comparison_cost) > 0
          AND (SELECT count(*) FROM ember.comparison_latency) > 0
          AND (SELECT count(*) FROM ember.comparison_evidence_quality) > 0,
          'ember_analyst reads every comparison view');
SELECT throws_ok('SELECT content FROM ember.messages', '42501', NULL, 'ember_analyst cannot read raw messages');
SELECT throws_ok('SELECT request FROM ember.shadow_prefixes', '42501', NULL, 'ember_analyst cannot read prefixes');
SELECT throws_ok('SELECT text FROM ember.shadow_proposals', '42501', NULL, 'ember_analyst cannot read the raw proposals');
SELECT throws_ok($$INSERT INTO ember.facts (text, evidence_kind) VALUES ('x', 'user-stated')$$, '42501', NULL,
                 'ember_analyst cannot write facts');
SELECT throws_ok(format('SELECT ember.submit_judge_run(%L)', pg_temp.judge('[[0, 0]]')), '42501', NULL,
                 'ember_analyst cannot store judgements');
RESET ROLE;
SELECT is(
    (SELECT array_agg(DISTINCT t.privilege_type::text ORDER BY t.privilege_type::text)
     FROM information_schema.role_table_grants AS t WHERE t.grantee = 'ember_analyst'),
    ARRAY['SELECT'], 'ember_analyst holds no privilege but SELECT'
);

SELECT * FROM finish();
ROLLBACK;
