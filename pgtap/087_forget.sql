BEGIN;
SELECT plan(42);

-- Facts are written here by direct inserts, as the steward's write_fact does (one fact row, then
-- its pointers): the cascade must hold whatever wrote them.
CREATE FUNCTION pg_temp.fact(p_text text, p_kind text, VARIADIC p_ids bigint []) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_id bigint;
BEGIN
    INSERT INTO ember.facts (text, evidence_kind, created_at, updated_at)
    VALUES (p_text, p_kind, '2030-01-01 09:00+00', '2030-01-01 09:00+00')
    RETURNING id INTO v_id;
    INSERT INTO ember.fact_evidence (fact_id, ordinal, message_id)
    SELECT v_id, o, i FROM unnest(p_ids) WITH ORDINALITY AS x (i, o);
    RETURN v_id;
END;
$$;
CREATE FUNCTION pg_temp.pointers(p_fact bigint) RETURNS bigint [] LANGUAGE sql AS $$
    SELECT coalesce(array_agg(message_id ORDER BY ordinal), '{}') FROM ember.fact_evidence WHERE fact_id = p_fact
$$;

SELECT ember.create_thread('default', 'main', 'main');
SELECT ember.create_thread('default', 's1', 'side', 'Topic');
SELECT ember.create_thread('default', 's2', 'side', 'Other');
SELECT ember.ensure_steward_thread('default');

SELECT ember.append_message('default', 's1', 'user', 'I drink green tea every morning.') AS m_tea \gset
SELECT ember.append_message('default', 's1', 'user', 'Green tea, never coffee.') AS m_tea2 \gset
SELECT ember.append_message('default', 's1', 'assistant', 'Then the database is Postgres.') AS m_concl \gset
SELECT ember.append_message('default', 's1', 'user', 'Yes, Postgres it is.') AS m_accept \gset
SELECT ember.append_message('default', 's1', 'tool_result', 'build passed', NULL, NULL, 'call-1', 'ci_run', 'ok') AS m_tool \gset
SELECT ember.append_message('default', 's2', 'user', 'I live in Lisbon.') AS m_lisbon \gset
SELECT ember.append_message('default', 's2', 'user', 'Lisbon since 2020.') AS m_lisbon2 \gset
SELECT id AS g_s1 FROM ember.generations WHERE thread_id = 's1' \gset
SELECT id AS g_steward FROM ember.generations WHERE thread_id = 'memory-steward' \gset
SELECT ember.note_prefix('default', 's1', '{"req": 1}', '{"resp": 1}') IS NULL AS noted \gset

SELECT pg_temp.fact('Drinks green tea', 'user-stated', :m_tea, :m_tea2) AS f_two \gset
SELECT pg_temp.fact('Drinks tea in the morning', 'user-stated', :m_tea) AS f_one \gset
SELECT pg_temp.fact('Uses Postgres', 'user-accepted', :m_concl, :m_accept) AS f_accepted \gset
SELECT pg_temp.fact('CI passes', 'tool-verified', :m_tool) AS f_tool \gset
SELECT pg_temp.fact('Lives in Lisbon', 'user-stated', :m_lisbon) AS f_lisbon \gset
INSERT INTO ember.fact_evidence (fact_id, ordinal, message_id) VALUES (:f_lisbon, 2, :m_lisbon2);
-- An observed outcome of the whole s1 generation.
INSERT INTO ember.facts (text, evidence_kind) VALUES ('The s1 session went well', 'observed-outcome')
RETURNING id AS f_gen \gset
INSERT INTO ember.fact_evidence (fact_id, ordinal, generation_id) VALUES (:f_gen, 1, :'g_s1');
UPDATE ember.facts SET embedding = array_fill(1::real, ARRAY[coalesce(
    (SELECT nullif(atttypmod, -1) FROM pg_attribute WHERE attrelid = 'ember.facts'::regclass AND attname = 'embedding'), 3
)])::vector
WHERE id IN (:f_one, :f_two);

-- Bad input: named errors, nothing half done.
SELECT throws_ok(format('SELECT ember.forget_messages(''default'', ARRAY[%s], NULL)', :m_tea), 'EM097', NULL,
                 'a NULL reason is refused');
SELECT throws_ok(format('SELECT ember.forget_messages(''default'', ARRAY[%s], %L)', :m_tea, '  '), 'EM097', NULL,
                 'a blank reason is refused');
SELECT throws_ok('SELECT ember.forget_messages(''default'', ARRAY[]::bigint[], ''asked'')', 'EM097', NULL,
                 'an empty id list is refused');
SELECT throws_ok(format('SELECT ember.forget_messages(''default'', ARRAY[%s, 987654321], %L)', :m_tea, 'asked'), 'EM095',
                 'no such message: 987654321', 'an unknown id is refused and named');
SELECT is((SELECT content FROM ember.messages WHERE id = :m_tea), 'I drink green tea every morning.',
          'a refused call erases nothing, not even its valid ids');
SELECT ember.append_steward_record('default', 'assistant', 'noted') AS m_steward \gset
SELECT throws_ok(format('SELECT ember.forget_messages(''default'', ARRAY[%s], %L)', :m_steward, 'asked'), 'EM096', NULL,
                 'the steward''s own rows are refused');
SELECT throws_ok('SELECT ember.forget_thread(''default'', ''memory-steward'', ''asked'')', 'EM096', NULL,
                 'the steward''s thread is refused');
SELECT throws_ok('SELECT ember.forget_thread(''default'', ''nowhere'', ''asked'')', 'EM095', 'no such thread: nowhere',
                 'an unknown thread is refused');
SELECT throws_ok('SELECT ember.forget_thread(''default'', ''s1'', NULL)', 'EM097', NULL,
                 'forget_thread refuses a NULL reason');

-- A running shadow run on s1, to be cancelled by the forget.
INSERT INTO ember.shadow_runs (
    thread_id, generation_id, path, model, reason, from_seq, through_seq, started_at, worker,
    lease_token, lease_expires_at
) VALUES ('s1', :'g_s1', 'cold', 'claude-haiku-4-5', 'idle-or-ended', 0, 0, '2030-01-01 10:00+00', 'w',
          gen_random_uuid(), '2030-01-01 10:10+00')
RETURNING id AS run_s1 \gset

-- One pointer of two forgotten: the fact stays with the other.
SELECT ember.forget_messages('default', ARRAY[:m_tea], 'the user asked', '2030-01-02 00:00+00') AS r1 \gset
SELECT is((SELECT content FROM ember.messages WHERE id = :m_tea), '[forgotten]', 'the row is a tombstone');
SELECT ok((SELECT erased_by IS NOT NULL AND seq > 0 AND thread_id = 's1' FROM ember.messages WHERE id = :m_tea),
          'the row keeps its id, seq and thread and says which forget erased it');
SELECT is((SELECT status FROM ember.facts WHERE id = :f_two), 'active',
          'a fact with two pointers that loses one stays');
SELECT is(pg_temp.pointers(:f_two), ARRAY[:m_tea2]::bigint [], 'its evidence list shrank to the other pointer');
SELECT is((SELECT evidence_removed FROM ember.fact_history WHERE fact_id = :f_two AND change = 'evidence-shrunk'),
          jsonb_build_array(jsonb_build_object('message_id', :m_tea)), 'the shrink is recorded in its history');
SELECT is((SELECT text FROM ember.facts WHERE id = :f_two), 'Drinks green tea', 'the kept fact keeps its text');
SELECT is((SELECT row (status, retired_reason, text, embedding) FROM ember.facts WHERE id = :f_one)::text,
          row ('retired', 'source-forgotten', NULL::text, NULL::vector)::text,
          'a fact with one pointer that loses it is retired, its text and embedding erased');
SELECT is((SELECT status FROM ember.facts WHERE id = :f_gen), 'retired',
          'a generation pointer falls with any erased row of its generation');
SELECT is(:'r1'::jsonb -> 'facts_retired', jsonb_build_array(:f_one, :f_gen), 'the answer lists the retired facts');
SELECT is(:'r1'::jsonb -> 'facts_kept' -> 0 ->> 'fact', :f_two::text, 'and the facts kept with fewer pointers');
SELECT is(:'r1'::jsonb -> 'rows_erased', jsonb_build_array(:m_tea), 'and the rows erased');
SELECT is((SELECT count(*)::int FROM ember.shadow_prefixes WHERE thread_id = 's1'), 0, 'the thread''s prefix is dropped');
SELECT ok((SELECT cancel_requested FROM ember.shadow_runs WHERE id = :run_s1), 'the running shadow run is cancelled');
SELECT is(:'r1'::jsonb -> 'runs_cancelled', jsonb_build_array(:run_s1), 'the answer names the cancelled run');
SELECT is((SELECT status FROM ember.facts WHERE id = :f_lisbon), 'active', 'facts of other threads are untouched');

-- Forgetting it again is a no-op that says so.
SELECT ember.forget_messages('default', ARRAY[:m_tea], 'again') AS r2 \gset
SELECT is(:'r2'::jsonb, jsonb_build_object('noop', true, 'already_forgotten', jsonb_build_array(:m_tea)),
          'forgetting a forgotten row is a no-op that says so');
SELECT is((SELECT count(*)::int FROM ember.forgettings), 1, 'and records no forgetting');

-- user-accepted: forgetting the acceptance leaves a conclusion nobody accepted.
SELECT ember.forget_messages('default', ARRAY[:m_accept], 'asked') AS r3 \gset
SELECT is((SELECT status || '/' || retired_reason FROM ember.facts WHERE id = :f_accepted), 'retired/source-forgotten',
          'a user-accepted fact whose acceptance is forgotten is retired');
SELECT is(pg_temp.pointers(:f_accepted), ARRAY[:m_concl]::bigint [], 'the conclusion pointer is kept in its record');

-- Merges, re-checked transitively: A (one pointer) merged into B, whose only evidence is that
-- same row; B merged into C, which cites a row of s2 only.
SELECT pg_temp.fact('Tea A', 'user-stated', :m_tea2) AS f_a \gset
SELECT pg_temp.fact('Tea B', 'user-stated', :m_tea2) AS f_b \gset
SELECT pg_temp.fact('Tea C', 'user-stated', :m_lisbon2) AS f_c \gset
UPDATE ember.facts SET status = 'merged', merged_into = :f_b WHERE id = :f_a;
UPDATE ember.facts SET status = 'merged', merged_into = :f_c WHERE id = :f_b;
SELECT ember.forget_messages('default', ARRAY[:m_tea2], 'asked') AS r4 \gset
SELECT is((SELECT array_agg(status ORDER BY id) FROM ember.facts WHERE id IN (:f_a, :f_b)), ARRAY['retired', 'retired'],
          'a merged fact and the fact it was merged into both fall with their only source');
SELECT is(:'r4'::jsonb -> 'facts_rechecked', jsonb_build_array(:f_c),
          'the fact B was merged into is re-checked too, transitively');
SELECT is((SELECT status FROM ember.facts WHERE id = :f_c), 'active', 'and stays, justified by its own pointer');
SELECT is(pg_temp.pointers(:f_c), ARRAY[:m_lisbon2]::bigint [], 'with its evidence untouched');
SELECT is((SELECT status FROM ember.facts WHERE id = :f_two), 'retired', 'the two-pointer fact fell with its second');
SELECT is((SELECT detail FROM ember.fact_history WHERE fact_id = :f_a AND change = 'forgotten'),
          'was merged (merged into fact ' || :f_b || ')', 'history keeps where a forgotten fact had been merged');

-- Shadow proposals: one still justified keeps a shrunken list; one that is not loses its text.
INSERT INTO ember.shadow_runs (
    thread_id, generation_id, path, model, reason, from_seq, through_seq, started_at, worker,
    lease_token, lease_expires_at, status, finished_at
) VALUES ('s2', (SELECT id FROM ember.generations WHERE thread_id = 's2'), 'cold', 'claude-haiku-4-5',
          'idle-or-ended', 0, 0, '2030-01-01 10:00+00', 'w', gen_random_uuid(), '2030-01-01 10:10+00',
          'completed', '2030-01-01 10:01+00')
RETURNING id AS run_s2 \gset
INSERT INTO ember.shadow_proposals (run_id, thread_id, generation_id, ordinal, text, evidence_kind, evidence, created_at)
SELECT :run_s2, 's2', g.id, o, t, 'user-stated', e, '2030-01-01 10:01+00'
FROM ember.generations AS g,
    (VALUES (1, 'Lives in Lisbon', jsonb_build_array(jsonb_build_object('message_id', :m_lisbon),
                                                     jsonb_build_object('message_id', :m_lisbon2))),
            (2, 'Moved in 2020', jsonb_build_array(jsonb_build_object('message_id', :m_lisbon2)))) AS v (o, t, e)
WHERE g.thread_id = 's2';
SELECT ember.forget_messages('default', ARRAY[:m_lisbon2], 'asked') AS r5 \gset
SELECT is((SELECT evidence FROM ember.shadow_proposals WHERE run_id = :run_s2 AND ordinal = 1),
          jsonb_build_array(jsonb_build_object('message_id', :m_lisbon)),
          'a proposal still justified keeps its text with a shrunken evidence list');
SELECT is((SELECT row (text, validation_error)::text FROM ember.shadow_proposals WHERE run_id = :run_s2 AND ordinal = 2),
          row (NULL::text, 'source-forgotten')::text, 'a proposal left without evidence loses its text');
SELECT is(jsonb_array_length(:'r5'::jsonb -> 'proposals_erased'), 1, 'the answer counts the erased proposal');

-- forget_thread: every row, and a second call is a no-op.
SELECT ember.forget_thread('default', 's1', 'the whole topic', '2030-01-03 00:00+00') AS r6 \gset
SELECT is((SELECT count(*)::int FROM ember.messages WHERE thread_id = 's1' AND erased_by IS NULL), 0,
          'forget_thread erases every row of the thread');
SELECT is((SELECT count(*)::int FROM ember.messages WHERE thread_id = 's1' AND (blocks IS NOT NULL OR tool_name <> 'forgotten'
           OR tool_call_id <> 'forgotten')), 0, 'blocks, tool names and call ids are gone');
SELECT is(ember.forget_thread('default', 's1', 'again'), jsonb_build_object('noop', true, 'thread', 's1'),
          'forgetting a forgotten thread is a no-op that says so');

-- A thread sealed after shadow proposed about it: the proposal guard refuses any change to a row
-- of an isolated thread, so forgetting removes such proposals whole rather than failing.
SELECT ember.create_thread('default', 's3', 'side', 'Later sealed');
SELECT ember.append_message('default', 's3', 'user', 'I collect stamps.') AS m_stamps \gset
INSERT INTO ember.shadow_runs (
    thread_id, generation_id, path, model, reason, from_seq, through_seq, started_at, worker,
    lease_token, lease_expires_at, status, finished_at
) VALUES ('s3', (SELECT id FROM ember.generations WHERE thread_id = 's3'), 'cold', 'claude-haiku-4-5',
          'idle-or-ended', 0, 0, '2030-01-01 10:00+00', 'w', gen_random_uuid(), '2030-01-01 10:10+00',
          'completed', '2030-01-01 10:01+00')
RETURNING id AS run_s3 \gset
INSERT INTO ember.shadow_proposals (run_id, thread_id, generation_id, ordinal, text, evidence_kind, evidence, created_at)
SELECT :run_s3, 's3', g.id, 1, 'Collects stamps', 'user-stated',
    jsonb_build_array(jsonb_build_object('message_id', :m_stamps)), '2030-01-01 10:01+00'
FROM ember.generations AS g WHERE g.thread_id = 's3';
UPDATE ember.threads SET seal_tier = 'isolated' WHERE id = 's3';
SELECT lives_ok('SELECT ember.forget_thread(''default'', ''s3'', ''asked'')', 'a thread sealed since it was proposed about can be forgotten');
SELECT is((SELECT count(*)::int FROM ember.shadow_proposals WHERE thread_id = 's3'), 0,
          'its proposals are removed whole');

SELECT * FROM finish();
ROLLBACK;
