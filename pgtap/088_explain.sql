BEGIN;
SELECT plan(16);

CREATE FUNCTION pg_temp.fact(p_text text, p_kind text, p_pointers jsonb) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_id bigint;
BEGIN
    INSERT INTO ember.facts (text, evidence_kind, created_at, updated_at)
    VALUES (p_text, p_kind, '2030-01-01 09:00+00', '2030-01-01 09:00+00')
    RETURNING id INTO v_id;
    INSERT INTO ember.fact_evidence (fact_id, ordinal, message_id, generation_id)
    SELECT v_id, o, (x.v ->> 'message_id')::bigint, (x.v ->> 'generation_id')::uuid
    FROM jsonb_array_elements(p_pointers) WITH ORDINALITY AS x (v, o);
    RETURN v_id;
END;
$$;
CREATE FUNCTION pg_temp.msgs(VARIADIC p_ids bigint []) RETURNS jsonb LANGUAGE sql AS $$
    SELECT jsonb_agg(jsonb_build_object('message_id', i) ORDER BY o) FROM unnest(p_ids) WITH ORDINALITY AS x (i, o)
$$;

SELECT ember.create_thread('default', 's1', 'side', 'Topic');
SELECT ember.append_message('default', 's1', 'user', 'I prefer tea.', NULL, NULL, NULL, NULL, NULL, NULL,
                            '2030-01-01 08:00+00') AS m_user \gset
SELECT ember.append_message('default', 's1', 'assistant', 'Let us use Postgres.', NULL, NULL, NULL, NULL, NULL, NULL,
                            '2030-01-01 08:01+00') AS m_concl \gset
SELECT ember.append_message('default', 's1', 'user', 'Yes, go with Postgres.', NULL, NULL, NULL, NULL, NULL, NULL,
                            '2030-01-01 08:02+00') AS m_accept \gset
SELECT ember.append_message('default', 's1', 'tool_result', '12 tests passed', NULL, NULL, 'c1', 'pytest', 'ok', NULL,
                            '2030-01-01 08:03+00') AS m_tool \gset
SELECT id AS g_s1 FROM ember.generations WHERE thread_id = 's1' \gset

SELECT pg_temp.fact('Prefers tea', 'user-stated', pg_temp.msgs(:m_user)) AS f_stated \gset
SELECT pg_temp.fact('Uses Postgres', 'user-accepted', pg_temp.msgs(:m_concl, :m_accept)) AS f_accepted \gset
SELECT pg_temp.fact('The tests pass', 'tool-verified', pg_temp.msgs(:m_tool)) AS f_tool \gset
SELECT pg_temp.fact('The session shipped', 'observed-outcome',
                    jsonb_build_array(jsonb_build_object('generation_id', :'g_s1'))) AS f_outcome \gset

SELECT ember.explain_fact(:f_stated) AS e_stated \gset
SELECT is(:'e_stated'::jsonb -> 'fact' ->> 'text', 'Prefers tea', 'user-stated: the fact');
SELECT is(:'e_stated'::jsonb ->> 'evidence_kind', 'user-stated', 'its evidence kind');
SELECT is(((:'e_stated'::jsonb -> 'evidence' -> 0) - 'at' - 'rendered'),
          jsonb_build_object('ordinal', 1, 'message_id', :m_user, 'thread', 's1', 'role', 'user', 'author', 'human',
                             'seq', (SELECT seq FROM ember.messages WHERE id = :m_user), 'tool_status', NULL,
                             'forgotten', false, 'isolated', false),
          'each pointer names its thread, author and role');
SELECT is((:'e_stated'::jsonb -> 'evidence' -> 0 ->> 'at')::timestamptz, '2030-01-01 08:00+00'::timestamptz,
          'and its time');
SELECT matches(:'e_stated'::jsonb -> 'evidence' -> 0 ->> 'rendered', 'I prefer tea\.',
               'and the row as the models read it');

SELECT ember.explain_fact(:f_accepted) AS e_accepted \gset
SELECT is((:'e_accepted'::jsonb -> 'acceptance' -> 'conclusion' ->> 'message_id')::bigint, :m_concl::bigint,
          'user-accepted: the conclusion');
SELECT is((:'e_accepted'::jsonb -> 'acceptance' -> 'acceptance' ->> 'message_id')::bigint, :m_accept::bigint,
          'and the human message that accepts it');
SELECT is(:'e_stated'::jsonb -> 'acceptance', 'null'::jsonb, 'other kinds have no acceptance');

SELECT ember.explain_fact(:f_tool) AS e_tool \gset
SELECT is(:'e_tool'::jsonb -> 'evidence' -> 0 ->> 'tool_status', 'ok', 'tool-verified: the tool result and its status');
SELECT matches(:'e_tool'::jsonb -> 'evidence' -> 0 ->> 'rendered', 'pytest', 'rendered with its tool name');

SELECT ember.explain_fact(:f_outcome) AS e_outcome \gset
SELECT is(((:'e_outcome'::jsonb -> 'evidence' -> 0) - 'at' - 'ended_at'),
          jsonb_build_object('ordinal', 1, 'generation_id', :'g_s1', 'thread', 's1', 'generation_ordinal', 1,
                             'rows', 4, 'isolated', false),
          'observed-outcome: a generation pointer with its thread and size');

-- Merges and history.
SELECT pg_temp.fact('Prefers tea and Postgres', 'user-stated', pg_temp.msgs(:m_user)) AS f_merge \gset
UPDATE ember.facts SET status = 'merged', merged_into = :f_merge, updated_at = '2030-01-01 10:00+00'
WHERE id = :f_stated;
SELECT ember.explain_fact(:f_merge) AS e_merge \gset
SELECT is((:'e_merge'::jsonb -> 'merged_from' -> 0 ->> 'fact')::bigint, :f_stated::bigint, 'the facts merged into it');
SELECT is((SELECT array_agg(h ->> 'change') FROM jsonb_array_elements(ember.explain_fact(:f_stated) -> 'history') AS h),
          ARRAY['written', 'merged'], 'its history');
SELECT is(:'e_merge'::jsonb -> 'run', 'null'::jsonb, 'no run when the fact names none');

SELECT ember.forget_messages('default', ARRAY[:m_user], 'asked', '2030-01-02 00:00+00') IS NOT NULL AS forgot \gset
SELECT is(ember.explain_fact(:f_merge) -> 'history' -> -1 -> 'forgetting' ->> 'reason', 'asked',
          'a forgotten fact explains why it went');
SELECT throws_ok('SELECT ember.explain_fact(987654321)', 'EM095', 'no such fact: 987654321', 'an unknown fact is named');

SELECT * FROM finish();
ROLLBACK;
