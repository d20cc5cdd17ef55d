BEGIN;
SELECT plan(25);

SELECT ember.define_category('health');
UPDATE ember.models SET tags = '{health}' WHERE id = 'claude-haiku-4-5';
SELECT ember.create_thread('default', 'main', 'main', NULL, NULL, 'open', 'claude-haiku-4-5', '2026-12-01 09:00Z');
SELECT ember.create_thread('default', 'doc', 'side', 'Doctor', 'health', 'open', NULL, '2026-12-01 09:00Z');
SELECT ember.create_thread('default', 'plain', 'side', 'Plain', NULL, 'open', NULL, '2026-12-01 09:00Z');
SELECT ember.create_thread('default', 'reader', 'side', 'Untagged reader', NULL, 'open', 'claude-sonnet-4-5', '2026-12-01 09:00Z');
SELECT ember.create_thread('default', 'nurse', 'side', 'Tagged reader', 'health', 'open', 'claude-haiku-4-5', '2026-12-01 09:00Z');
SELECT ember.ensure_steward_thread('default', '2026-12-01 09:00Z');
SELECT ember.append_message('default', 'doc', 'user', 'I am allergic to penicillin.', p_now => '2026-12-01 09:01Z');
SELECT ember.append_message('default', 'plain', 'user', 'I always fly with Lufthansa.', p_now => '2026-12-01 09:02Z');

CREATE FUNCTION pg_temp.mid(p_content text) RETURNS bigint LANGUAGE sql AS $$
    SELECT id FROM ember.messages WHERE content = p_content AND thread_id <> 'memory-steward'
$$;
-- A unit vector along axis i, and one between axes i and j.
CREATE FUNCTION pg_temp.axis(i int, j int DEFAULT NULL) RETURNS vector LANGUAGE sql AS $$
    SELECT ('[' || string_agg(CASE WHEN k = i THEN '1' WHEN k = j THEN '0.5' ELSE '0' END, ',' ORDER BY k) || ']')::vector
    FROM generate_series(1, 384) AS k
$$;
CREATE FUNCTION pg_temp.call(p_id text, p_name text, p_input jsonb) RETURNS jsonb LANGUAGE sql AS $$
    SELECT jsonb_build_object('type', 'tool_use', 'id', p_id, 'name', p_name, 'input', p_input)
$$;

CREATE TEMP TABLE plan AS SELECT ember.claim_steward_run('w', '10 minutes', '2026-12-01 09:40Z') AS p;
CREATE FUNCTION pg_temp.run() RETURNS bigint LANGUAGE sql AS $$ SELECT (p ->> 'run_id')::bigint FROM plan $$;
CREATE FUNCTION pg_temp.token() RETURNS uuid LANGUAGE sql AS $$ SELECT (p ->> 'lease_token')::uuid FROM plan $$;

-- One step writes two facts, the first with an embedding computed by the worker.
SELECT ember.steward_step('default', pg_temp.run(), pg_temp.token(), jsonb_build_object('content', jsonb_build_array(
    pg_temp.call('a', 'write_fact', jsonb_build_object('text', 'The user is allergic to penicillin.',
        'evidence_kind', 'user-stated', 'evidence', jsonb_build_array(jsonb_build_object('message_id', pg_temp.mid('I am allergic to penicillin.'))))),
    pg_temp.call('b', 'write_fact', jsonb_build_object('text', 'The user flies Lufthansa.',
        'evidence_kind', 'user-stated', 'evidence', jsonb_build_array(jsonb_build_object('message_id', pg_temp.mid('I always fly with Lufthansa.')))))
)), jsonb_build_object('a', (pg_temp.axis(1)::text)::jsonb), NULL, '2026-12-01 09:41Z');

-- Label conservation.
SELECT is((SELECT categories FROM ember.facts WHERE text = 'The user flies Lufthansa.'), '{health}'::text[],
          'a fact carries the labels of everything its run read, not only of its own evidence');
SELECT ok((SELECT bool_and(categories = '{health}') FROM ember.messages
           WHERE thread_id = 'memory-steward' AND generation_id = (SELECT (p ->> 'generation_id')::uuid FROM plan)),
          'and so does every steward row of the run');
SELECT is((SELECT embedding_model FROM ember.facts WHERE text = 'The user is allergic to penicillin.'),
          ember.embedding_model(), 'an embedding handed to the step is stored with the fact');
SELECT is((SELECT array_agg(fact_id) FROM ember.facts_to_embed()),
          ARRAY[(SELECT id FROM ember.facts WHERE text = 'The user flies Lufthansa.')],
          'a fact written without one waits for the worker''s embedder');

-- Search visibility.
SELECT is((SELECT count(*)::int FROM ember.search_memory('default', 'reader', 'penicillin')), 0,
          'search hides a labelled fact from a viewer whose model is not tagged for it');
SELECT is((SELECT count(*)::int FROM ember.search_memory('default', 'reader', NULL, pg_temp.axis(1))), 0,
          'by vector too');
SELECT is((SELECT text FROM ember.search_memory('default', 'nurse', 'penicillin')), 'The user is allergic to penicillin.',
          'a viewer whose model is tagged finds it');
SELECT is((SELECT text FROM ember.search_memory('default', 'human', 'penicillin')), 'The user is allergic to penicillin.',
          'and so does the person');
SELECT is((SELECT text FROM ember.search_memory('default', 'nurse', NULL, pg_temp.axis(1, 2))), 'The user is allergic to penicillin.',
          'a near vector finds the fact with no shared word');
SELECT is((SELECT text FROM ember.search_memory('default', 'nurse', 'Lufthansa flights', pg_temp.axis(1, 2), 2) LIMIT 1),
          (SELECT text FROM ember.search_memory('default', 'nurse', 'Lufthansa flights', pg_temp.axis(1, 2), 2) ORDER BY score DESC, fact_id LIMIT 1),
          'results come ordered by fused score');
SELECT is((SELECT array_agg(text ORDER BY text) FROM ember.search_memory('default', 'nurse', 'Lufthansa', pg_temp.axis(1, 2))),
          '{"The user flies Lufthansa.","The user is allergic to penicillin."}'::text[],
          'vector and text candidates are fused into one list');
SELECT is((SELECT (vector_rank, text_rank)::text FROM ember.search_memory('default', 'nurse', 'penicillin', pg_temp.axis(1))),
          '(1,1)', 'a fact found both ways carries both ranks');

SELECT throws_ok($$SELECT * FROM ember.search_memory('default', 'nobody', 'tea')$$, 'EM029', NULL, 'an unknown viewer is refused');
SELECT throws_ok($$SELECT * FROM ember.search_memory('default', 'human', 'tea', NULL, 0)$$, 'EM068', NULL, 'a zero limit is refused');
SELECT throws_ok($$SELECT * FROM ember.search_memory('default', 'human', ' ', NULL)$$, 'EM068', NULL, 'an empty search is refused');
SELECT throws_ok($$SELECT * FROM ember.search_memory('default', 'human', NULL, '[1,2,3]')$$, 'EM068', NULL,
                 'an embedding of the wrong size is refused');

SELECT throws_ok(format('SELECT ember.set_fact_embedding(%s, %L)', (SELECT id FROM ember.facts WHERE text = 'The user flies Lufthansa.'), '[1,2]'),
                 'EM067', NULL, 'set_fact_embedding refuses a vector of the wrong size');
SELECT lives_ok(format('SELECT ember.set_fact_embedding(%s, %L)', (SELECT id FROM ember.facts WHERE text = 'The user flies Lufthansa.'),
                       pg_temp.axis(3)::text), 'and stores one of the right size');
SELECT throws_ok(format('SELECT ember.set_fact_embedding(%s, %L)', (SELECT id FROM ember.facts WHERE text = 'The user flies Lufthansa.'),
                        pg_temp.axis(3)::text), 'EM067', NULL, 'once');

-- A thread sealed after a fact was written hides that fact from everyone.
UPDATE ember.threads SET seal_tier = 'isolated' WHERE id = 'plain';
SELECT is((SELECT count(*)::int FROM ember.search_memory('default', 'human', 'Lufthansa')), 0,
          'a fact derived from a thread that is now isolated is never returned');

-- The round limit fails the run and marks nothing.
UPDATE ember.settings SET value = '2' WHERE key = 'steward_max_rounds';
SELECT is(ember.steward_step('default', pg_temp.run(), pg_temp.token(), '{"content": [{"type": "text", "text": "thinking"}]}',
                             '{}', NULL, '2026-12-01 09:42Z') ->> 'status',
          'failed', 'a run that reaches steward_max_rounds without finish fails');
SELECT is((SELECT count(*)::int FROM ember.messages WHERE episode_id IS NOT NULL), 0,
          'and nothing it read is marked digested');

UPDATE ember.settings SET value = '12' WHERE key = 'steward_max_rounds';
CREATE TEMP TABLE plan2 AS SELECT ember.claim_steward_run('w', '10 minutes', '2026-12-01 09:43Z') AS p;
SELECT is(ember.steward_step('default', (SELECT (p ->> 'run_id')::bigint FROM plan2), (SELECT (p ->> 'lease_token')::uuid FROM plan2),
              '{"content": [{"type": "tool_use", "id": "r1", "name": "retire_fact", "input": {"fact_id": "1", "reason": "x"}}]}',
              '{}', NULL, '2026-12-01 09:44Z', '{"r1": "fact_id: Input should be a valid integer"}') -> 'results' -> 0 ->> 'content',
          'fact_id: Input should be a valid integer', 'a call the worker''s tool model refused is answered with its reason');
SELECT lives_ok(format('SELECT ember.release_steward_run(''default'', %s, %L, %L)', (SELECT p ->> 'run_id' FROM plan2),
                       (SELECT p ->> 'lease_token' FROM plan2), '2026-12-01 09:45Z'),
                'a worker shutting down releases its run');
SELECT isnt(ember.claim_steward_run('w', '10 minutes', '2026-12-01 09:45Z'), NULL,
            'and the same backlog is claimable at once');

SELECT * FROM finish();
ROLLBACK;
