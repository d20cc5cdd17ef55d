BEGIN;
SELECT plan(60);

-- The rows behind every number (issue 24): items and their statuses, shadow's denominator, hot
-- against cold, the runs, the evidence as rows, and the analyst's explain. Threads and messages go
-- through the host API; runs, proposals and facts are inserted as their write paths store them.

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

-- A finished shadow run reading every row of the thread's generation so far.
CREATE FUNCTION pg_temp.run(
    p_thread text, p_path text, p_status text DEFAULT 'completed', p_latency bigint DEFAULT 1000,
    p_output bigint DEFAULT 100000
) RETURNS bigint LANGUAGE sql AS $$
    INSERT INTO ember.shadow_runs (
        thread_id, generation_id, path, model, status, from_seq, through_seq,
        input_tokens, cache_read_tokens, output_tokens,
        price_as_of, price_input, price_output, price_cache_write_5m, price_cache_write_1h, price_cache_read,
        started_at, finished_at, latency_ms, worker, lease_token, lease_expires_at, error
    )
    SELECT p_thread, ember.current_generation('default', p_thread), p_path, m.id, p_status, 0,
           (SELECT max(x.seq) FROM ember.messages AS x WHERE x.thread_id = p_thread),
           1000000, 2000000, p_output,
           m.price_as_of, m.price_input, m.price_output, m.price_cache_write_5m, m.price_cache_write_1h,
           m.price_cache_read,
           '2030-01-01 10:00+00', '2030-01-01 10:00+00'::timestamptz + make_interval(secs => p_latency / 1000.0),
           p_latency, 'w', gen_random_uuid(), '2030-01-01 10:30+00',
           CASE WHEN p_status = 'failed' THEN 'model error' END
    FROM ember.models AS m WHERE m.id = 'claude-haiku-4-5'
    RETURNING id
$$;

CREATE FUNCTION pg_temp.proposal(p_run bigint, p_text text, p_evidence jsonb, p_error text DEFAULT NULL)
RETURNS bigint LANGUAGE sql AS $$
    INSERT INTO ember.shadow_proposals (
        run_id, thread_id, generation_id, ordinal, text, evidence_kind, evidence, categories,
        validation_error, created_at
    )
    SELECT r.id, r.thread_id, r.generation_id,
           (SELECT count(*) + 1 FROM ember.shadow_proposals AS p WHERE p.run_id = r.id),
           p_text, 'user-stated', p_evidence, ember.generation_labels(r.generation_id), p_error,
           '2030-01-01 10:00+00'
    FROM ember.shadow_runs AS r WHERE r.id = p_run
    RETURNING id
$$;

CREATE FUNCTION pg_temp.fact(p_text text, p_messages bigint[]) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    v_id bigint;
BEGIN
    INSERT INTO ember.facts (text, evidence_kind, created_at)
    VALUES (p_text, 'user-stated', '2030-01-01 10:05+00') RETURNING id INTO v_id;
    INSERT INTO ember.fact_evidence (fact_id, ordinal, message_id)
    SELECT v_id, o.n, o.id FROM unnest(p_messages) WITH ORDINALITY AS o (id, n);
    RETURN v_id;
END;
$$;

CREATE TEMP TABLE ids (name text PRIMARY KEY, id bigint);
GRANT SELECT ON ids TO PUBLIC;
CREATE FUNCTION pg_temp.id(p_name text) RETURNS bigint LANGUAGE sql AS $$
    SELECT id FROM ids WHERE name = p_name
$$;
CREATE FUNCTION pg_temp.ev(VARIADIC p_ids bigint[]) RETURNS jsonb LANGUAGE sql AS $$
    SELECT jsonb_agg(jsonb_build_object('message_id', i)) FROM unnest(p_ids) AS i
$$;

-- Before activation: a thread with history shadow will skip, and main.
SELECT ember.create_thread('default', 'main', 'main');
SELECT ember.create_thread('default', 'old', 'side');
INSERT INTO ids VALUES
('m_main', pg_temp.msg('main', 'user', 'Only tell me about failures.')),
('m_old', pg_temp.msg('old', 'user', 'We used MySQL once.'));
SELECT ember.shadow_activate('2030-01-01 09:00+00');

SELECT ember.create_thread('default', 'deploy', 'side');
SELECT ember.create_thread('default', 'hotty', 'side');
SELECT ember.create_thread('default', 'secret', 'side');
INSERT INTO ids VALUES
('m_same', pg_temp.msg('deploy', 'user', 'We deploy on Fridays.')),
('m_near', pg_temp.msg('deploy', 'user', '部署使用独立工作区')),
('m_long', pg_temp.msg('deploy', 'user', 'Remember this: ' || repeat('long words ', 100))),
('m_alone', pg_temp.msg('deploy', 'user', 'The staging database is called ember-stage.')),
('m_solo', pg_temp.msg('deploy', 'user', 'I like green buttons.')),
('m_hot', pg_temp.msg('hotty', 'user', 'Use tabs, not spaces.')),
('m_secret', pg_temp.msg('secret', 'user', 'The launch code is 1234.'));

INSERT INTO ids VALUES
('r_cold', pg_temp.run('deploy', 'cold', p_latency => 1000, p_output => 100000)),
('r_failed', pg_temp.run('deploy', 'cold', 'failed', p_latency => 5000, p_output => 0)),
('r_hot', pg_temp.run('hotty', 'hot', p_latency => 3000, p_output => 1000000));

INSERT INTO ids VALUES
('p_same', pg_temp.proposal(pg_temp.id('r_cold'), 'We deploy on Fridays', pg_temp.ev(pg_temp.id('m_same')))),
('p_near', pg_temp.proposal(pg_temp.id('r_cold'), '部署使用独立工作区。', pg_temp.ev(pg_temp.id('m_near')))),
('p_long', pg_temp.proposal(pg_temp.id('r_cold'), 'Something long', pg_temp.ev(pg_temp.id('m_long')))),
('p_solo', pg_temp.proposal(pg_temp.id('r_cold'), 'Green buttons please', pg_temp.ev(pg_temp.id('m_solo')))),
('p_bad', pg_temp.proposal(pg_temp.id('r_cold'), 'The launch code', 
    jsonb_build_array(jsonb_build_object('message_id', pg_temp.id('m_secret')), '"m:7"'::jsonb),
    'pointer 1 (message ' || pg_temp.id('m_secret') || '): not in thread "deploy" (a shadow proposal may cite only its own thread)')),
('p_hot', pg_temp.proposal(pg_temp.id('r_hot'), 'Tabs over spaces', pg_temp.ev(pg_temp.id('m_hot'))));

INSERT INTO ids VALUES
('f_same', pg_temp.fact('we deploy on fridays', ARRAY[pg_temp.id('m_same')])),
('f_near', pg_temp.fact('部署有独立工作区', ARRAY[pg_temp.id('m_near')])),
('f_alone', pg_temp.fact('Staging is ember-stage', ARRAY[pg_temp.id('m_alone')])),
('f_main', pg_temp.fact('Only failures are reported', ARRAY[pg_temp.id('m_main')])),
('f_both', pg_temp.fact('Fridays, failures only', ARRAY[pg_temp.id('m_main'), pg_temp.id('m_same')])),
('f_old', pg_temp.fact('They used MySQL', ARRAY[pg_temp.id('m_old')])),
('f_secret', pg_temp.fact('A launch code exists', ARRAY[pg_temp.id('m_secret')])),
('f_hot', pg_temp.fact('Tabs, not spaces', ARRAY[pg_temp.id('m_hot')]));
-- Sealed after a fact cited it: no new pointer may name an isolated thread (EM115), so the
-- excluded fact is one that cited the thread while it was open.
UPDATE ember.threads SET seal_tier = 'isolated' WHERE id = 'secret';

-- 1-2: the reasons agree with the rule shadow itself applies.
SELECT is(
    (SELECT count(*) FROM ember.threads AS t
     WHERE ember.shadow_excluded('default', t.id) IS DISTINCT FROM (ember.shadow_unread_thread_reason(t.id) IS NOT NULL)),
    0::bigint, 'every thread shadow excludes has a reason, and only those'
);
SELECT is(ember.shadow_unread_thread_reason('main'), 'main: shadow never reads main', 'main is named as main');

-- 3-9: the denominator.
SELECT results_eq(
    $$SELECT facts, excluded_facts FROM ember.comparison_summary$$,
    $$VALUES (5::bigint, 2::bigint)$$,
    'facts count only what shadow could have read; a fact of main only and one of skipped history are excluded'
);
SELECT results_eq(
    $$SELECT fact_id, thread_id, excluded_reason FROM ember.comparison_excluded_facts ORDER BY fact_id$$,
    $$VALUES (pg_temp.id('f_main'), 'main'::text, 'main: shadow never reads main'::text),
             (pg_temp.id('f_old'), 'old', 'before activation: history shadow skips')$$,
    'the excluded facts are listed apart, each with why shadow could not read it'
);
SELECT is((SELECT count(*) FROM ember.comparison_items WHERE item_id = pg_temp.id('f_both') AND item = 'fact'
             AND excluded_reason IS NULL), 1::bigint,
          'a fact citing main and a thread shadow reads counts, in that thread');
SELECT is((SELECT agreement FROM ember.comparison_items WHERE item_id = pg_temp.id('f_both') AND thread_id = 'main'),
          'excluded', 'its row for main is marked excluded');
SELECT results_eq(
    $$SELECT facts, excluded_facts FROM ember.comparison_by_thread WHERE thread_id = 'main'$$,
    $$VALUES (0::bigint, 2::bigint)$$,
    'per thread, main has no facts in shadow''s denominator and two excluded'
);
SELECT is((SELECT exact_coverage FROM ember.comparison_summary), round(1 / 5.0, 4),
          'exact coverage is over the facts shadow could have read');
SELECT is((SELECT count(*) FROM ember.comparison_items WHERE item_id = pg_temp.id('f_secret') AND item = 'fact'),
          0::bigint, 'a fact of an isolated thread is no item at all');

-- 10-19: each item's status in each coverage.
SELECT results_eq(
    $$SELECT exact, evidence, semantic, agreement, exact_ids, read_by_shadow FROM ember.comparison_items
      WHERE item = 'fact' AND item_id = pg_temp.id('f_same')$$,
    $$VALUES ('exact'::text, 'neighbour'::text, 'not judged'::text, 'exact'::text,
              ARRAY[pg_temp.id('p_same')], ARRAY['cold'])$$,
    'an exact match: exact, also a neighbour, not judged, read by the cold path'
);
SELECT results_eq(
    $$SELECT exact, evidence, agreement, evidence_ids FROM ember.comparison_items
      WHERE item = 'fact' AND item_id = pg_temp.id('f_near')$$,
    $$VALUES ('unmatched'::text, 'neighbour'::text, 'evidence'::text, ARRAY[pg_temp.id('p_near')])$$,
    'the seed''s case: a neighbour by shared evidence, not an exact match'
);
SELECT is((SELECT agreement FROM ember.comparison_items WHERE item = 'fact' AND item_id = pg_temp.id('f_alone')),
          'steward only', 'a fact no proposal matches is steward only');
SELECT is((SELECT agreement FROM ember.comparison_items WHERE item = 'proposal' AND item_id = pg_temp.id('p_solo')),
          'shadow only', 'a proposal matching no fact is shadow only');
SELECT results_eq(
    $$SELECT agreement, exact, rejection_class FROM ember.comparison_items WHERE item = 'proposal' AND item_id = pg_temp.id('p_bad')$$,
    $$VALUES ('rejected'::text, 'not compared'::text, 'not in thread "…" (a shadow proposal may cite only its own thread)'::text)$$,
    'a rejected proposal is not compared, and carries its reason class'
);
SELECT results_eq(
    $$SELECT path, pipeline, run_id FROM ember.comparison_items WHERE item = 'proposal' AND item_id = pg_temp.id('p_hot')$$,
    $$VALUES ('hot'::text, 'shadow'::text, pg_temp.id('r_hot'))$$,
    'a proposal names its path and run'
);
SELECT results_eq(
    $$SELECT steward_only_facts, shadow_only_proposals FROM ember.comparison_summary$$,
    $$SELECT count(DISTINCT item_id) FILTER (WHERE agreement = 'steward only' AND item = 'fact'),
             count(DISTINCT item_id) FILTER (WHERE agreement = 'shadow only')
      FROM ember.comparison_items$$,
    'the summary''s steward-only and shadow-only counts are the items so marked'
);
SELECT results_eq(
    $$SELECT exact_covered_facts, evidence_neighbour_facts, facts, proposals, rejected_proposals FROM ember.comparison_summary$$,
    $$SELECT count(DISTINCT item_id) FILTER (WHERE item = 'fact' AND exact = 'exact'),
             count(DISTINCT item_id) FILTER (WHERE item = 'fact' AND evidence = 'neighbour'),
             count(DISTINCT item_id) FILTER (WHERE item = 'fact' AND excluded_reason IS NULL),
             count(*) FILTER (WHERE item = 'proposal'),
             count(*) FILTER (WHERE item = 'proposal' AND status = 'rejected')
      FROM ember.comparison_items$$,
    'every count of the summary is a count of comparison_items'
);
SELECT results_eq(
    $$SELECT proposal_id, reason_class FROM ember.comparison_rejected$$,
    $$VALUES (pg_temp.id('p_bad'), 'not in thread "…" (a shadow proposal may cite only its own thread)'::text)$$,
    'comparison_rejected lists the rejected proposal with its reason'
);
SELECT is((SELECT semantic_coverage FROM ember.comparison_summary), NULL, 'no judge ran: semantic coverage is not judged');

-- 20-28: evidence as the rows it names.
SELECT results_eq(
    $$SELECT ordinal, target_found, isolated, thread_id, excerpt FROM ember.comparison_item_evidence
      WHERE item = 'proposal' AND item_id = pg_temp.id('p_bad') ORDER BY ordinal$$,
    $$VALUES (1::bigint, true, true, NULL::text, NULL::text), (2, false, false, NULL, NULL)$$,
    'a pointer into an isolated thread is named as isolated and nothing else; a malformed one names nothing'
);
SELECT is((SELECT malformed FROM ember.comparison_item_evidence WHERE item = 'proposal' AND item_id = pg_temp.id('p_bad') AND ordinal = 2),
          '"m:7"', 'the malformed pointer is shown as the JSON it is');
SELECT is((SELECT count(*) FROM ember.comparison_item_evidence WHERE excerpt LIKE '%launch code%'), 0::bigint,
          'no excerpt holds the isolated thread''s content');
SELECT is((SELECT excerpt FROM ember.comparison_item_evidence WHERE item = 'fact' AND item_id = pg_temp.id('f_same')),
          format('m:%s user(human): We deploy on Fridays.', pg_temp.id('m_same')),
          'a fact''s pointer is the row rendered as the models read it');
SELECT ok((SELECT char_length(excerpt) <= 240 AND excerpt LIKE '%[shortened:%'
           FROM ember.comparison_item_evidence WHERE item = 'proposal' AND item_id = pg_temp.id('p_long')),
          'a long row is shortened to the setting analyst_row_chars, with the marker saying so');
UPDATE ember.settings SET value = '120' WHERE key = 'analyst_row_chars';
SELECT ok((SELECT char_length(excerpt) <= 120 FROM ember.comparison_item_evidence WHERE item = 'proposal' AND item_id = pg_temp.id('p_long')),
          'the bound follows the setting');
SELECT is((SELECT unread_reason FROM ember.comparison_item_evidence WHERE item = 'fact' AND item_id = pg_temp.id('f_main')),
          'main: shadow never reads main', 'a fact''s pointer says why shadow never reads it');
SELECT results_eq(
    $$SELECT item, item_id FROM ember.comparison_item_evidence(NULL, NULL, ARRAY[pg_temp.id('f_same')], NULL)$$,
    $$VALUES ('fact'::text, pg_temp.id('f_same'))$$,
    'the evidence of chosen items only'
);
SELECT is((SELECT count(*) FROM ember.comparison_item_evidence(NULL, NULL, ARRAY[pg_temp.id('f_secret')], NULL)),
          0::bigint, 'asking for a fact of an isolated thread by id returns nothing');

-- 29-37: hot against cold, and the runs.
SELECT results_eq(
    $$SELECT path, runs, completed_runs, failed_runs, proposals, valid_proposals, validity_rate FROM ember.comparison_by_path$$,
    $$VALUES ('hot'::text, 1::bigint, 1::bigint, 0::bigint, 1::bigint, 1::bigint, 1.0000::numeric),
             ('cold', 2, 1, 1, 5, 4, 0.8000),
             ('steward', 0, 0, 0, NULL, NULL, NULL)$$,
    'runs and proposals by path, with the validity rate'
);
SELECT results_eq(
    $$SELECT path, facts, exact_covered_facts, exact_coverage FROM ember.comparison_by_path WHERE path <> 'steward'$$,
    $$VALUES ('hot'::text, 1::bigint, 0::bigint, 0.0000::numeric), ('cold', 4, 1, 0.2500)$$,
    'each path''s coverage is of the facts whose rows that path read'
);
SELECT results_eq(
    $$SELECT path, estimated_usd, output_usd, output_share FROM ember.comparison_by_path WHERE path = 'hot'$$,
    -- 1M input at $1, 2M cache read at $0.1, 1M output at $5 (claude-haiku-4-5's snapshot).
    $$VALUES ('hot'::text, 6.2::numeric, 5.0::numeric, round(5 / 6.2, 4))$$,
    'the hot path''s output share of its cost: the column to watch'
);
SELECT is((SELECT messages_digested FROM ember.comparison_by_path WHERE path = 'cold'), 5::bigint,
          'a cold path''s digested messages are the rows its completed runs read');
SELECT is((SELECT usd_per_1000_messages FROM ember.comparison_by_path WHERE path = 'cold'),
          round((1.7 + 1.2) * 1000 / 5, 6),
          'cost per 1,000 digested messages counts every run''s cost, failed ones too');
SELECT is((SELECT usd_per_fact FROM ember.comparison_by_path WHERE path = 'cold'), round((1.7 + 1.2) / 4.0, 6),
          'a shadow path''s cost per fact is per valid proposal');
SELECT results_eq(
    $$SELECT run_id, status, messages_digested, proposals_written, valid_proposals_written
      FROM ember.comparison_run_list WHERE path = 'cold' ORDER BY run_id$$,
    $$VALUES (pg_temp.id('r_cold'), 'completed'::text, 5::bigint, 5::bigint, 4::bigint),
             (pg_temp.id('r_failed'), 'failed', 0, 0, 0)$$,
    'the runs behind the cost: digested rows only for a completed run'
);
SELECT is((SELECT sum(estimated_usd) FROM ember.comparison_run_list WHERE pipeline LIKE 'shadow %'),
          (SELECT shadow_usd FROM ember.comparison_summary), 'the runs add up to the summary''s shadow cost');
SELECT is((SELECT p50_ms FROM ember.comparison_by_path WHERE path = 'cold'), 3000::bigint,
          'latency by path, in whole milliseconds');

-- 38-41: a judge ran.
INSERT INTO ember.judge_runs (
    categories, model, status, proposal_ids, fact_ids, started_at, finished_at, latency_ms
) VALUES ('{}', 'claude-haiku-4-5', 'completed', ARRAY[pg_temp.id('p_near'), pg_temp.id('p_solo')],
          ARRAY[pg_temp.id('f_near'), pg_temp.id('f_alone')], '2030-01-01 11:00+00', '2030-01-01 11:00:01+00', 1000);
INSERT INTO ember.judged_pairs (judge_run_id, proposal_id, fact_id)
SELECT max(id), pg_temp.id('p_near'), pg_temp.id('f_near') FROM ember.judge_runs;
SELECT results_eq(
    $$SELECT item_id, semantic, agreement FROM ember.comparison_items WHERE item = 'fact' AND item_id IN
      (pg_temp.id('f_near'), pg_temp.id('f_alone'), pg_temp.id('f_same')) ORDER BY item_id$$,
    $$VALUES (pg_temp.id('f_same'), 'not judged'::text, 'exact'::text),
             (pg_temp.id('f_near'), 'pair', 'semantic'),
             (pg_temp.id('f_alone'), 'unmatched', 'steward only')$$,
    'semantic status: a pair, judged without a pair, or never shown to a judge'
);
SELECT results_eq(
    $$SELECT semantic_covered_facts, semantic_judged_facts, semantic_coverage, judge_runs FROM ember.comparison_summary$$,
    $$VALUES (1::bigint, 2::bigint, round(1 / 5.0, 4), 1::bigint)$$,
    'once a judge was shown facts, semantic coverage is pairs over all facts shadow could read'
);
SELECT is((SELECT semantic_covered_facts FROM ember.comparison_by_thread WHERE thread_id = 'deploy'), 1::bigint,
          'per thread, the judged pair counts');
SELECT is((SELECT semantic_coverage FROM ember.comparison_by_path WHERE path = 'hot'), NULL,
          'the hot path had nothing judged: not judged');

-- 42-60: ember_analyst.
SET LOCAL ROLE ember_analyst;
SELECT ok((SELECT count(*) FROM ember.comparison_items) > 0 AND (SELECT count(*) FROM ember.comparison_item_evidence) > 0
          AND (SELECT count(*) FROM ember.comparison_excluded_facts) > 0 AND (SELECT count(*) FROM ember.comparison_rejected) > 0
          AND (SELECT count(*) FROM ember.comparison_run_list) > 0 AND (SELECT count(*) FROM ember.comparison_by_path) = 3,
          'ember_analyst reads every new comparison view');
SELECT is((SELECT database_name FROM ember.comparison_context()), current_database()::text,
          'the report''s frame names the database');
SELECT throws_ok(format('SELECT ember.explain_fact(%s)', pg_temp.id('f_same')), '42501', NULL,
                 'the host''s explain stays the host''s');
SELECT is((ember.comparison_explain_fact(pg_temp.id('f_same')) #>> '{fact,text}'), 'we deploy on fridays',
          'ember_analyst explains a fact');
SELECT is((ember.comparison_explain_fact(pg_temp.id('f_same')) #>> '{evidence,0,rendered}'),
          format('m:%s user(human): We deploy on Fridays.', pg_temp.id('m_same')),
          'its evidence is the row as rendered');
SELECT is((ember.comparison_explain_fact(pg_temp.id('f_same')) #>> '{comparison,agreement}'), 'exact',
          'the analyst''s explain says how the fact fares in the comparison');
SELECT is((ember.comparison_explain_fact(pg_temp.id('f_same')) #> '{comparison,threads,0,exact}'),
          jsonb_build_array(pg_temp.id('p_same')), 'and with which proposal it matches exactly');
SELECT is((ember.comparison_explain_fact(pg_temp.id('f_main')) #>> '{comparison,threads,0,excluded_reason}'),
          'main: shadow never reads main', 'an excluded fact''s explain says why');
SELECT is((ember.comparison_explain_fact(pg_temp.id('f_near')) #>> '{comparison,agreement}'), 'semantic',
          'a judged pair makes a semantic agreement');
SELECT throws_ok(format('SELECT ember.comparison_explain_fact(%s)', pg_temp.id('f_secret')), 'EM074', NULL,
                 'a fact citing an isolated thread is refused by name');
SELECT throws_ok('SELECT ember.comparison_explain_fact(987654321)', 'EM095', NULL, 'an unknown fact is named');
SELECT is((ember.comparison_explain_proposal(pg_temp.id('p_bad')) #>> '{proposal,status}'), 'rejected',
          'ember_analyst explains a rejected proposal');
SELECT is((ember.comparison_explain_proposal(pg_temp.id('p_bad')) #> '{evidence,0}'),
          jsonb_build_object('ordinal', 1, 'message_id', pg_temp.id('m_secret'), 'isolated', true),
          'its pointer into an isolated thread is named as isolated and nothing more');
SELECT unalike(ember.comparison_explain_proposal(pg_temp.id('p_bad'))::text, '%launch code is%',
              'nothing of the isolated row is in the proposal''s explain');
SELECT is((ember.comparison_explain_proposal(pg_temp.id('p_near')) #> '{comparison,evidence,0,fact}'),
          to_jsonb(pg_temp.id('f_near')), 'a proposal''s explain names its evidence neighbour');
SELECT is((ember.comparison_explain_proposal(pg_temp.id('p_hot')) #>> '{run,path}'), 'hot',
          'and the path of the run that proposed it');
SELECT throws_ok('SELECT ember.comparison_explain_proposal(987654321)', 'EM095', NULL, 'an unknown proposal is named');
SELECT throws_ok('SELECT content FROM ember.messages', '42501', NULL, 'ember_analyst still reads no raw message');
RESET ROLE;
SELECT is(
    (SELECT count(*) FROM pg_class AS c
     WHERE c.relnamespace = 'ember'::regnamespace AND c.relkind = 'v' AND c.relname LIKE 'comparison\_%'
       AND has_table_privilege('ember_analyst', c.oid, 'SELECT')
       AND obj_description(c.oid, 'pg_class') IS NULL),
    0::bigint, 'every comparison view the analyst reads says what it holds in a COMMENT'
);

SELECT * FROM finish();
ROLLBACK;
