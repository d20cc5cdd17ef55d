BEGIN;
SELECT plan(60);

-- Fixtures: a conversation written through the host API (what an import writes), steward facts,
-- a shadow run and proposals inserted as their writers would store them (the proposal guard still
-- checks each valid row), and steward runs with price snapshots.

SELECT lives_ok(
    $$SELECT ember.eval_begin('locomo', 'small.json', repeat('a', 64), NULL, NULL, 3, NULL,
                              '2030-01-01 09:00+00')$$,
    'a run begins in a fresh database'
);
SELECT throws_ok(
    $$SELECT ember.eval_begin('locomo', 'small.json', repeat('a', 64))$$,
    'EM110', NULL, 'a second run in the same database is refused: an eval runs in a fresh database'
);

CREATE TEMP TABLE ids (name text PRIMARY KEY, id bigint);
GRANT SELECT ON ids TO PUBLIC;
CREATE FUNCTION pg_temp.id(p_name text) RETURNS bigint LANGUAGE sql AS $$
    SELECT id FROM ids WHERE name = p_name
$$;
INSERT INTO ids SELECT 'run', max(id) FROM ember.eval_runs;

SELECT results_eq(
    $$SELECT answer_model, judge_model, top_k FROM ember.eval_runs$$,
    $$VALUES ('claude-haiku-4-5'::text, 'claude-sonnet-4-5'::text, 3)$$,
    'without models named, the first light model answers and the first standard model judges'
);
SELECT ok(
    EXISTS (SELECT 1 FROM ember.threads WHERE id = 'main')
    AND EXISTS (SELECT 1 FROM ember.threads WHERE id = 'memory-steward')
    AND EXISTS (SELECT 1 FROM ember.shadow_activation),
    'eval_begin creates main and the steward''s thread and activates shadow before any import'
);

SELECT ember.create_thread('default', 'eval-0001', 'side', 'LoCoMo conv-a', NULL, 'open', NULL, '2023-05-08 13:56+00');
INSERT INTO ids VALUES
('m1', ember.append_message('default', 'eval-0001', 'user', 'Ada: I love pottery.', 'human', p_now => '2023-05-08 13:56+00')),
('m2', ember.append_message('default', 'eval-0001', 'assistant', 'Bruno: Nice.', p_now => '2023-05-08 13:56:01+00'));
SELECT ember.start_generation('default', 'eval-0001', '2023-06-27 10:37+00');
INSERT INTO ids VALUES
('m3', ember.append_message('default', 'eval-0001', 'user', 'Ada: I decided to adopt a dog.', 'human',
                            p_now => '2023-06-27 10:37+00'));
SELECT ember.create_thread('default', 'eval-0002', 'side', 'LoCoMo conv-b', NULL, 'open', NULL, '2023-04-03 08:00+00');

SELECT is(
    ember.eval_add_conversation(
        pg_temp.id('run'), 'conv-a', 'eval-0001',
        '[{"ordinal": 1, "source": "session_1", "date": "1:56 pm on 8 May, 2023"},
          {"ordinal": 2, "source": "session_2", "date": "10:37 am on 27 June, 2023"}]',
        '[{"generation": 1, "position": 1, "source": "D1:1"}, {"generation": 1, "position": 2, "source": "D1:2"},
          {"generation": 2, "position": 1, "source": "D2:1", "has_answer": true}]'
    ),
    '{"ordinal": 1, "sessions": 2, "turns": 3}'::jsonb,
    'a conversation records where each session and turn landed'
);
SELECT results_eq(
    $$SELECT t.message_id, t.source_id, t.has_answer FROM ember.eval_turns AS t ORDER BY t.message_id$$,
    $$VALUES (pg_temp.id('m1'), 'D1:1'::text, false), (pg_temp.id('m2'), 'D1:2', false),
             (pg_temp.id('m3'), 'D2:1', true)$$,
    'the n-th turn of session g is the n-th row of generation g'
);
SELECT throws_ok(
    $$SELECT ember.eval_add_conversation(pg_temp.id('run'), 'conv-b', 'eval-0002',
        '[{"ordinal": 1, "source": "session_1", "date": "x"}]',
        '[{"generation": 1, "position": 1, "source": "D1:1"}]')$$,
    'EM114', NULL, 'a turn that names no imported row is refused'
);
SELECT throws_ok(
    $$SELECT ember.eval_add_conversation(pg_temp.id('run'), 'conv-main', 'main', '[]', '[]')$$,
    'EM114', NULL, 'main is no conversation thread'
);

SELECT is(
    ember.eval_add_questions(pg_temp.id('run'), '[
        {"question_id": "conv-a/0", "conversation": "conv-a", "category": "4 single-hop",
         "question": "What does Ada love?", "gold": "pottery", "evidence": ["D1:1"]},
        {"question_id": "conv-a/1", "conversation": "conv-a", "category": "2 temporal",
         "question": "When did Ada decide to adopt a dog?", "gold": "27 June 2023"},
        {"question_id": "conv-a/2", "conversation": "conv-a", "category": "4 single-hop",
         "question": "What is Ada allergic to?", "gold": "cats", "excluded": true},
        {"question_id": "conv-a/3", "conversation": "conv-a", "category": "5 adversarial",
         "question": "What does Bruno love?", "gold": "Not mentioned in the conversation."}
    ]'),
    4, 'questions are recorded, the excluded one with them'
);
SELECT throws_ok(
    $$SELECT ember.eval_add_questions(pg_temp.id('run'),
        '[{"question_id": "conv-a/9", "conversation": "conv-a", "category": "1", "question": "?"}]')$$,
    'EM112', 'eval_add_questions: questions[0]: no gold answer', 'a question without a gold answer is refused'
);
SELECT throws_ok(
    $$SELECT ember.eval_add_questions(pg_temp.id('run'),
        '[{"question_id": "x/0", "conversation": "nowhere", "category": "1", "question": "?", "gold": "g"}]')$$,
    'EM112', NULL, 'a question of a conversation the run does not hold is refused'
);

-- The steward's facts of the conversation, and a fact of no conversation (another thread).
INSERT INTO ember.facts (text, evidence_kind, source_threads, created_at)
VALUES ('Ada likes pottery', 'user-stated', '{eval-0001}', '2030-01-01 10:00+00');
INSERT INTO ids SELECT 'f1', currval(pg_get_serial_sequence('ember.facts', 'id'));
INSERT INTO ember.fact_evidence (fact_id, ordinal, message_id) VALUES (pg_temp.id('f1'), 1, pg_temp.id('m1'));
INSERT INTO ember.facts (text, evidence_kind, source_threads, created_at)
VALUES ('Ada adopted a dog', 'user-stated', '{eval-0001}', '2030-01-01 10:00+00');
INSERT INTO ids SELECT 'f2', currval(pg_get_serial_sequence('ember.facts', 'id'));
INSERT INTO ember.fact_evidence (fact_id, ordinal, message_id) VALUES (pg_temp.id('f2'), 1, pg_temp.id('m3'));

-- A finished shadow run of the thread and its proposals: two with the same text, one rejected.
INSERT INTO ember.shadow_runs (
    thread_id, generation_id, path, model, status, from_seq, through_seq,
    input_tokens, cache_read_tokens, cache_write_5m_tokens, cache_write_1h_tokens, output_tokens,
    price_as_of, price_input, price_output, price_cache_write_5m, price_cache_write_1h, price_cache_read,
    started_at, finished_at, latency_ms, worker, lease_token, lease_expires_at
)
SELECT 'eval-0001', ember.current_generation('default', 'eval-0001'), 'cold', m.id, 'completed', 0, 0,
       1000000, 2000000, 1000000, 0, 100000,
       m.price_as_of, m.price_input, m.price_output, m.price_cache_write_5m, m.price_cache_write_1h, m.price_cache_read,
       '2030-01-01 10:00+00', '2030-01-01 10:00:01+00', 1000, 'w', gen_random_uuid(), '2030-01-01 10:05+00'
FROM ember.models AS m WHERE m.id = 'claude-haiku-4-5';
INSERT INTO ids SELECT 'r', max(id) FROM ember.shadow_runs;
CREATE FUNCTION pg_temp.proposal(p_text text, p_message bigint, p_error text DEFAULT NULL)
RETURNS bigint LANGUAGE sql AS $$
    INSERT INTO ember.shadow_proposals (
        run_id, thread_id, generation_id, ordinal, text, evidence_kind, evidence, categories, validation_error,
        created_at
    )
    SELECT r.id, r.thread_id, r.generation_id,
           (SELECT count(*) + 1 FROM ember.shadow_proposals AS p WHERE p.run_id = r.id),
           p_text, 'user-stated', jsonb_build_array(jsonb_build_object('message_id', p_message)), '{}', p_error,
           '2030-01-01 10:00:01+00'
    FROM ember.shadow_runs AS r WHERE r.id = pg_temp.id('r')
    RETURNING id
$$;
INSERT INTO ids VALUES
('p1', pg_temp.proposal('Ada loves pottery.', pg_temp.id('m1'))),
('p2', pg_temp.proposal('Ada loves pottery', pg_temp.id('m1'))),
('p3', pg_temp.proposal('Ada decided to adopt a dog', pg_temp.id('m3'))),
('p4', pg_temp.proposal('made up', pg_temp.id('m2'), 'evidence refused'));

-- The cut-over, inside a savepoint that is rolled back as ember eval rolls it back.
SAVEPOINT cut;
SELECT is(
    ember.eval_cut_over(pg_temp.id('run'), 'eval-0001', '2030-01-01 11:00+00'),
    '{"retired": 2, "promoted": 2, "refused": 0, "duplicates": 1}'::jsonb,
    'cut over: the steward''s facts are set aside, valid proposals become facts, a repeated text once'
);
SELECT results_eq(
    $$SELECT f.text, f.run_id IS NULL, f.source_threads, (SELECT count(*) FROM ember.fact_evidence AS e WHERE e.fact_id = f.id)
      FROM ember.facts AS f WHERE f.status = 'active' ORDER BY f.id$$,
    $$VALUES ('Ada loves pottery.'::text, true, '{eval-0001}'::text[], 1::bigint),
             ('Ada decided to adopt a dog', true, '{eval-0001}', 1)$$,
    'the promoted facts carry the proposals'' text and evidence, their sources, and no steward run'
);
SELECT results_eq(
    $$SELECT proposal_id FROM ember.eval_promotions ORDER BY proposal_id$$,
    $$VALUES (pg_temp.id('p1')), (pg_temp.id('p3'))$$,
    'each promoted fact stands for its proposal; the rejected one is not promoted'
);
SELECT is(
    (SELECT retired_reason FROM ember.facts WHERE id = pg_temp.id('f1')),
    'ember eval: shadow cut over for this conversation', 'a set-aside fact says why'
);
SELECT throws_ok(
    $$SELECT ember.eval_cut_over(pg_temp.id('run'), 'eval-0001')$$,
    'EM111', NULL, 'a second cut-over in the same transaction is refused'
);
SELECT throws_ok(
    $$SELECT ember.eval_close_conversation(pg_temp.id('run'), 'eval-0001')$$,
    'EM111', NULL, 'a conversation cannot be closed while shadow is cut over'
);
SELECT results_eq(
    $$SELECT s.rank, s.fact_id, s.proposal_id, s.stated_at, s.evidence -> 0 ->> 'source'
      FROM ember.eval_shown(pg_temp.id('run'), 'shadow',
           ARRAY(SELECT fact_id FROM ember.eval_promotions ORDER BY proposal_id DESC)) AS s$$,
    $$VALUES (1, NULL::bigint, pg_temp.id('p3'), '2023-06-27 10:37+00'::timestamptz, 'D2:1'::text),
             (2, NULL, pg_temp.id('p1'), '2023-05-08 13:56+00', 'D1:1')$$,
    'shown shadow memory names the proposals, in search order, with when and where each was said'
);
SELECT throws_ok(
    format('SELECT * FROM ember.eval_shown(%s, %L, ARRAY[%s])', pg_temp.id('run'), 'steward',
           (SELECT min(fact_id) FROM ember.eval_promotions)),
    'EM112', NULL, 'a promoted fact is not the steward''s memory'
);
SELECT ok(
    (SELECT count(*) FROM ember.search_memory('default', 'eval-0001', 'pottery') AS s
     WHERE s.fact_id IN (SELECT fact_id FROM ember.eval_promotions)) = 1
    AND NOT EXISTS (SELECT 1 FROM ember.search_memory('default', 'eval-0001', 'pottery') AS s WHERE s.fact_id = pg_temp.id('f1')),
    'search_memory finds shadow''s memory while it is cut over, and not the steward''s'
);
ROLLBACK TO SAVEPOINT cut;

SELECT ok(
    NOT EXISTS (SELECT 1 FROM ember.eval_promotions)
    AND (SELECT count(*) FROM ember.facts WHERE status = 'active') = 2
    AND NOT EXISTS (SELECT 1 FROM ember.facts WHERE run_id IS NULL AND text = 'Ada decided to adopt a dog'),
    'rolled back, the cut-over leaves no fact from a proposal and the steward''s facts active'
);
SELECT results_eq(
    format('SELECT rank, fact_id, proposal_id FROM ember.eval_shown(%s, %L, ARRAY[%s, %s])',
           pg_temp.id('run'), 'steward', pg_temp.id('f2'), pg_temp.id('f1')),
    format('VALUES (1, %s::bigint, NULL::bigint), (2, %s, NULL)', pg_temp.id('f2'), pg_temp.id('f1')),
    'shown steward memory names its facts, in search order'
);
SELECT throws_ok(
    format('SELECT * FROM ember.eval_shown(%s, %L, ARRAY[%s])', pg_temp.id('run'), 'shadow', pg_temp.id('f1')),
    'EM112', NULL, 'a steward fact is not shadow''s memory'
);

-- Calls: the price snapshot is copied when the call is recorded.
CREATE FUNCTION pg_temp.call(p_question text, p_pipeline text, p_purpose text, p_model text, p_usage jsonb)
RETURNS bigint LANGUAGE sql AS $$
    SELECT ember.eval_record_call(pg_temp.id('run'), jsonb_build_object(
        'question_id', p_question, 'pipeline', p_pipeline, 'purpose', p_purpose, 'model', p_model,
        'status', 'completed', 'simulated', true, 'usage', p_usage,
        'started_at', '2030-01-01 12:00+00', 'finished_at', '2030-01-01 12:00:01+00', 'latency_ms', 1000))
$$;
SELECT pg_temp.call('conv-a/0', 'steward', 'answer', 'claude-haiku-4-5', '{"input_tokens": 1000000}');
SELECT pg_temp.call('conv-a/0', 'steward', 'judge', 'claude-sonnet-4-5', '{"output_tokens": 1000000}');
SELECT pg_temp.call('conv-a/0', 'shadow', 'answer', 'claude-haiku-4-5', '{"input_tokens": 500000}');
SELECT results_eq(
    $$SELECT price_input, price_output FROM ember.eval_calls ORDER BY id LIMIT 2$$,
    $$VALUES (1::numeric, 5::numeric), (3, 15)$$,
    'a call keeps its model''s list prices'
);
SAVEPOINT tiered;
SELECT pg_temp.call('conv-a/0', 'shadow', 'judge', 'claude-haiku-5-5', '{"input_tokens": 200000}');
SELECT is(
    (SELECT ember.eval_call_usd(c) FROM ember.eval_calls AS c WHERE c.model = 'claude-haiku-5-5'),
    0.1::numeric, 'a call copies its model''s length tiers: 200,000 prompt tokens at the tier''s $0.50, not $0.10'
);
ROLLBACK TO SAVEPOINT tiered;
SELECT throws_ok(
    format($$SELECT ember.eval_record_call(%s, '{"question_id": "conv-a/0", "pipeline": "steward",
        "purpose": "answer", "model": "claude-haiku-4-5", "status": "failed", "simulated": false,
        "started_at": "2030-01-01 12:00+00", "finished_at": "2030-01-01 12:00+00"}')$$, pg_temp.id('run')),
    'EM112', NULL, 'a failed call without its error is refused'
);
SELECT throws_ok(
    $$SELECT pg_temp.call('conv-a/0', 'steward', 'answer', 'gpt-none', '{}')$$,
    'EM113', NULL, 'a call of a model the registry does not hold is refused'
);
SELECT throws_ok(
    $$SELECT pg_temp.call('conv-a/0', 'both', 'answer', 'claude-haiku-4-5', '{}')$$,
    'EM112', NULL, 'a call of no pipeline is refused'
);

-- Answers.
CREATE FUNCTION pg_temp.answer(p_answer jsonb) RETURNS void LANGUAGE sql AS $$
    SELECT ember.eval_record_answer(pg_temp.id('run'), p_answer || '{"context_tokens": 40, "search_ms": 2.5}')
$$;
SELECT lives_ok(
    format($$SELECT pg_temp.answer('{"question_id": "conv-a/0", "pipeline": "steward", "status": "judged",
        "answer": "pottery", "verdict": "correct", "reason": "matches",
        "shown": [{"rank": 1, "fact_id": %s, "score": 0.03}, {"rank": 2, "fact_id": %s}], "cited": [1]}')$$,
        pg_temp.id('f1'), pg_temp.id('f2')),
    'a judged answer is stored with what it was shown'
);
SELECT pg_temp.answer(format('{"question_id": "conv-a/0", "pipeline": "shadow", "status": "judged",
    "answer": "a dog", "verdict": "wrong", "reason": "the gold answer is pottery",
    "shown": [{"rank": 1, "proposal_id": %s}], "cited": [1]}', pg_temp.id('p3'))::jsonb);
SELECT pg_temp.answer('{"question_id": "conv-a/1", "pipeline": "steward", "status": "failed",
    "error": "model call failed: APIConnectionError"}');
SELECT pg_temp.answer('{"question_id": "conv-a/1", "pipeline": "shadow", "status": "judged",
    "answer": "27 June 2023", "verdict": "correct", "reason": "same date"}');
SELECT pg_temp.answer('{"question_id": "conv-a/3", "pipeline": "steward", "status": "judged",
    "answer": "pottery", "verdict": "wrong", "reason": "not mentioned"}');
SELECT pg_temp.answer('{"question_id": "conv-a/3", "pipeline": "shadow", "status": "judged",
    "answer": "pottery", "verdict": "wrong", "reason": "not mentioned"}');
SELECT is(
    (SELECT array_agg(rank ORDER BY rank) FILTER (WHERE cited) FROM ember.eval_context WHERE pipeline = 'steward'),
    '{1}'::integer[], 'the facts the answer cited are marked'
);
SELECT throws_ok(
    $$SELECT pg_temp.answer('{"question_id": "conv-a/2", "pipeline": "steward", "status": "judged",
        "answer": "x", "verdict": "wrong", "reason": "r"}')$$,
    'EM112', NULL, 'an excluded question is never answered'
);
SELECT throws_ok(
    $$SELECT pg_temp.answer('{"question_id": "conv-a/0", "pipeline": "steward", "status": "judged",
        "answer": "x", "verdict": "wrong", "reason": "r"}')$$,
    'EM112', NULL, 'an answer is final: a second one for the same question and pipeline is refused'
);
SELECT throws_ok(
    $$SELECT pg_temp.answer('{"question_id": "conv-a/0", "pipeline": "steward", "status": "judged",
        "answer": "x", "verdict": "maybe", "reason": "r"}')$$,
    'EM112', NULL, 'a verdict is correct or wrong'
);
SELECT throws_ok(
    format($$SELECT ember.eval_record_answer(%s, '{"question_id": "conv-a/2", "pipeline": "shadow",
        "status": "judged", "answer": "x", "verdict": "wrong", "reason": "r", "context_tokens": 0,
        "search_ms": 1, "shown": [{"rank": 1, "proposal_id": %s}]}')$$, pg_temp.id('run'), pg_temp.id('p4')),
    'EM112', NULL, 'shown shadow memory is never a rejected proposal (nor an excluded question)'
);

-- Extraction runs in the eval's window: a steward run priced at $1, the shadow run above ($2.95).
INSERT INTO ember.steward_runs (
    generation_id, read_message_ids, read_generations, read_tokens, model, status, input_tokens, output_tokens,
    price_as_of, price_input, price_output, price_cache_write_5m, price_cache_write_1h, price_cache_read,
    started_at, finished_at, latency_ms, worker, lease_token, lease_expires_at
) VALUES (
    ember.current_generation('default', 'memory-steward'), '{}', '{}', 0, 'claude-haiku-4-5', 'completed', 1000000, 0,
    '2026-11-30', 1, 5, 1.25, 2, 0.1, '2030-01-01 10:00+00', '2030-01-01 10:01+00', 60000, 'w',
    gen_random_uuid(), '2030-01-01 10:10+00'
);

SELECT results_eq(
    $$SELECT pipeline, questions, correct, wrong, failed, round(accuracy::numeric, 4)
      FROM ember.eval_summary(pg_temp.id('run'))$$,
    $$VALUES ('steward'::text, 3::bigint, 1::bigint, 1::bigint, 1::bigint, 0.3333),
             ('shadow', 3, 1, 2, 0, 0.3333)$$,
    'accuracy counts the asked questions; a failed answer is not correct and is counted apart'
);
SELECT results_eq(
    $$SELECT pipeline, extraction_usd, answer_usd, judge_usd, usd_per_correct FROM ember.eval_summary(pg_temp.id('run'))$$,
    $$VALUES ('steward'::text, 1.000000::numeric, 1.0::numeric, 15.0::numeric, 2.000000::numeric),
             ('shadow', 2.950000, 0.5, 0, 3.450000)$$,
    'extraction from comparison_cost, answering and judging from the calls; per correct answer = (extraction + answering) / correct'
);
SELECT results_eq(
    $$SELECT pipeline, context_tokens_mean, search_p50_ms FROM ember.eval_summary(pg_temp.id('run'))$$,
    $$VALUES ('steward'::text, 40::double precision, 2.5::double precision), ('shadow', 40, 2.5)$$,
    'context tokens and search latency per question, per pipeline'
);
SAVEPOINT unpriced;
UPDATE ember.steward_runs SET price_input = NULL;
SELECT results_eq(
    $$SELECT extraction_usd, usd_per_correct FROM ember.eval_summary(pg_temp.id('run')) WHERE pipeline = 'steward'$$,
    $$VALUES (NULL::numeric, NULL::numeric)$$,
    'a run without a price makes extraction and cost per correct answer unknown, never smaller'
);
ROLLBACK TO SAVEPOINT unpriced;

SELECT results_eq(
    $$SELECT pipeline, category, questions, correct, failed FROM ember.eval_categories(pg_temp.id('run'))$$,
    $$VALUES ('steward'::text, '2 temporal'::text, 1::bigint, 0::bigint, 1::bigint),
             ('steward', '4 single-hop', 1, 1, 0), ('steward', '5 adversarial', 1, 0, 0),
             ('shadow', '2 temporal', 1, 1, 0), ('shadow', '4 single-hop', 1, 0, 0),
             ('shadow', '5 adversarial', 1, 0, 0)$$,
    'every category is counted per pipeline; the excluded question counts in none'
);
SELECT results_eq(
    $$SELECT question_id, steward ->> 'verdict', shadow ->> 'verdict', steward ->> 'status'
      FROM ember.eval_disagreements(pg_temp.id('run'))$$,
    $$VALUES ('conv-a/0'::text, 'correct'::text, 'wrong'::text, 'judged'::text),
             ('conv-a/1', NULL, 'correct', 'failed')$$,
    'a disagreement is one pipeline correct and the other not; both wrong is none'
);
SELECT results_eq(
    $$SELECT e ->> 'text', (e ->> 'cited')::boolean, e -> 'evidence' -> 0 ->> 'source'
      FROM ember.eval_disagreements(pg_temp.id('run')) AS d, jsonb_array_elements(d.steward -> 'shown') AS e
      WHERE d.question_id = 'conv-a/0'$$,
    $$VALUES ('Ada likes pottery'::text, true, 'D1:1'::text), ('Ada adopted a dog', false, 'D2:1')$$,
    'a disagreement shows the facts each answer was shown, which it cited, and their evidence'
);
SELECT is(
    (SELECT d.shadow -> 'shown' -> 0 ->> 'text' FROM ember.eval_disagreements(pg_temp.id('run')) AS d
     WHERE d.question_id = 'conv-a/0'),
    'Ada decided to adopt a dog', 'shadow''s shown memory is read from its proposals'
);
SELECT results_eq(
    $$SELECT questions, excluded, calls, simulated_calls FROM ember.eval_runs_list()$$,
    $$VALUES (4::bigint, 1::bigint, 3::bigint, 3::bigint)$$,
    'the run says how many questions were excluded and how many calls the simulator answered'
);
SELECT is(
    (SELECT count(*) FROM ember.eval_question_results(pg_temp.id('run')) WHERE excluded), 1::bigint,
    'the excluded question is listed as excluded'
);

-- The analyst reads the report, not the tables.
SET LOCAL ROLE ember_analyst;
SELECT is((SELECT count(*) FROM ember.eval_summary(pg_temp.id('run'))), 2::bigint, 'ember_analyst reads the summary');
SELECT is((SELECT count(*) FROM ember.eval_disagreements(pg_temp.id('run'))), 2::bigint,
          'ember_analyst reads the disagreements');
SELECT throws_ok('SELECT answer FROM ember.eval_answers', '42501', NULL, 'ember_analyst cannot read the raw answers');
SELECT throws_ok($$SELECT ember.eval_close_conversation(1, 'eval-0001')$$, '42501', NULL,
                 'ember_analyst cannot change a run');
RESET ROLE;

-- A closed conversation starts the next one from an empty memory.
SELECT is(ember.eval_close_conversation(pg_temp.id('run'), 'eval-0001', '2030-01-01 13:00+00'), 2,
          'closing a conversation retires its facts');
SELECT is((SELECT count(*) FROM ember.facts WHERE status = 'active'), 0::bigint, 'no active fact is left');
SELECT is((SELECT status FROM ember.eval_conversations WHERE conversation = 'conv-a'), 'answered',
          'the conversation is answered');

-- The estimate, priced in SQL.
SELECT results_eq(
    $$SELECT role, model, estimated_usd FROM ember.eval_estimate('[
        {"role": "steward", "model": null, "calls": 4, "input_tokens": 1000000, "output_tokens": 0},
        {"role": "shadow", "model": null, "calls": 1, "input_tokens": 0, "output_tokens": 1000000},
        {"role": "answer", "model": null, "calls": 2, "input_tokens": 2000000, "output_tokens": 0},
        {"role": "judge", "model": "claude-opus-4-1", "calls": 2, "input_tokens": 0, "output_tokens": 1000000}]')$$,
    $$VALUES ('steward'::text, 'claude-haiku-4-5'::text, 1.000000::numeric), ('shadow', 'claude-haiku-4-5', 5.000000),
             ('answer', 'claude-haiku-4-5', 2.000000), ('judge', 'claude-opus-4-1', 75.000000)$$,
    'the estimate routes each role as the run would and prices every token at list price'
);
SELECT is(
    (SELECT estimated_usd FROM ember.eval_estimate('[
        {"role": "answer", "model": "claude-haiku-5-5", "calls": 2, "input_tokens": 120000, "output_tokens": 0}]')),
    0.012000::numeric,
    'the estimate prices each call by its own length: two prompts of 60,000 tokens stay below a 100,000-token tier'
);
SELECT throws_ok(
    $$SELECT * FROM ember.eval_estimate('[{"role": "answer", "model": "nope", "calls": 1, "input_tokens": 1, "output_tokens": 1}]')$$,
    'EM113', NULL, 'an estimate for a model the registry does not hold is refused'
);
SELECT throws_ok(
    $$SELECT * FROM ember.eval_estimate('[{"role": "answer", "calls": -1, "input_tokens": 1, "output_tokens": 1}]')$$,
    'EM112', NULL, 'an estimate with a negative count is refused'
);

-- The end of a run.
SELECT lives_ok(format('SELECT ember.eval_finish(%s, NULL, %L)', pg_temp.id('run'), '2030-01-02 00:00+00'),
                'a run finishes');
SELECT is((SELECT status FROM ember.eval_runs), 'completed', 'the run is completed');
SELECT throws_ok(
    $$SELECT pg_temp.call('conv-a/0', 'shadow', 'judge', 'claude-sonnet-4-5', '{}')$$,
    'EM111', NULL, 'a finished run takes no more calls'
);
SELECT throws_ok(
    $$SELECT ember.eval_cut_over(999, 'eval-0001')$$, 'EM111', NULL, 'an unknown run is refused'
);
SELECT throws_ok(
    $$SELECT ember.eval_begin('squad', 'x', repeat('b', 64))$$, 'EM110', NULL,
    'a database that held a run never takes another, whatever the arguments'
);

SELECT * FROM finish();
ROLLBACK;
