BEGIN;
SELECT plan(46);

SELECT ember.define_category('health');
SELECT ember.create_thread('default', 'main', 'main', NULL, NULL, 'open', 'claude-haiku-4-5', '2026-12-01 09:00Z');
SELECT ember.create_thread('default', 'plain', 'side', 'Plain', NULL, 'open', NULL, '2026-12-01 09:00Z');
SELECT ember.create_thread('default', 'other', 'side', 'Other', NULL, 'open', NULL, '2026-12-01 09:00Z');
SELECT ember.create_thread('default', 'vault', 'side', 'Private', NULL, 'isolated', NULL, '2026-12-01 09:00Z');
SELECT ember.ensure_steward_thread('default', '2026-12-01 09:00Z');
UPDATE ember.settings SET value = '100' WHERE key = 'steward_max_rounds';

SELECT ember.append_message('default', 'plain', 'user', 'I prefer tea over coffee.', p_now => '2026-12-01 09:01Z');
SELECT ember.append_message('default', 'plain', 'assistant', 'Shall we use Postgres for the archive?', p_now => '2026-12-01 09:02Z');
SELECT ember.append_message('default', 'plain', 'user', 'Yes, go with Postgres.', p_now => '2026-12-01 09:03Z');
SELECT ember.append_message('default', 'plain', 'tool_result', 'deploy succeeded', NULL, NULL, 'c1', 'bash', 'ok', NULL,
                            '2026-12-01 09:04Z');
SELECT ember.append_message('default', 'plain', 'tool_result', 'deploy failed', NULL, NULL, 'c2', 'bash', 'error', NULL,
                            '2026-12-01 09:05Z');
SELECT ember.append_message('default', 'main', 'user', 'Never call me before 9.', p_now => '2026-12-01 09:06Z');
SELECT ember.append_message('default', 'vault', 'user', 'secret diary', p_now => '2026-12-01 09:07Z');
-- A row the run will not read: the other thread is still active at claim time.
SELECT ember.append_message('default', 'other', 'user', 'I like jazz.', p_now => '2026-12-01 09:39Z');

CREATE FUNCTION pg_temp.mid(p_content text) RETURNS bigint LANGUAGE sql AS $$
    SELECT id FROM ember.messages WHERE content = p_content AND thread_id <> 'memory-steward'
$$;
CREATE TEMP TABLE plan AS SELECT ember.claim_steward_run('w', '10 minutes', '2026-12-01 09:40Z') AS p;
CREATE FUNCTION pg_temp.run() RETURNS bigint LANGUAGE sql AS $$ SELECT (p ->> 'run_id')::bigint FROM plan $$;
CREATE FUNCTION pg_temp.token() RETURNS uuid LANGUAGE sql AS $$ SELECT (p ->> 'lease_token')::uuid FROM plan $$;
CREATE FUNCTION pg_temp.call(p_name text, p_input jsonb) RETURNS jsonb LANGUAGE sql AS $$
    SELECT jsonb_build_object('type', 'tool_use', 'id', 'call-' || md5(random()::text), 'name', p_name, 'input', p_input)
$$;
-- One round with the given blocks; returns the step's result.
CREATE FUNCTION pg_temp.step(p_blocks jsonb, p_now timestamptz DEFAULT '2026-12-01 09:41Z') RETURNS jsonb
LANGUAGE sql AS $$
    SELECT ember.steward_step('default', pg_temp.run(), pg_temp.token(),
        jsonb_build_object('content', p_blocks, 'usage', '{"input_tokens": 100, "output_tokens": 10,
            "cache_read_input_tokens": 50, "cache_creation": {"ephemeral_5m_input_tokens": 20}}'::jsonb),
        '{}', 250, p_now)
$$;
-- The first tool result of one call.
CREATE FUNCTION pg_temp.one(p_name text, p_input jsonb) RETURNS jsonb LANGUAGE sql AS $$
    SELECT pg_temp.step(jsonb_build_array(pg_temp.call(p_name, p_input))) -> 'results' -> 0
$$;
CREATE FUNCTION pg_temp.ev(VARIADIC p_contents text []) RETURNS jsonb LANGUAGE sql AS $$
    SELECT jsonb_agg(jsonb_build_object('message_id', pg_temp.mid(c))) FROM unnest(p_contents) AS c
$$;

-- Refusals of the step itself.
SELECT throws_ok($$SELECT ember.steward_step('default', -1, pg_temp.token(), '{"content": []}')$$, 'EM061', NULL,
                 'a step for an unknown run is refused');
SELECT throws_ok($$SELECT ember.steward_step('default', pg_temp.run(), gen_random_uuid(), '{"content": []}', '{}', NULL, '2026-12-01 09:41Z')$$,
                 'EM062', NULL, 'a step with another lease token is refused');
SELECT throws_ok($$SELECT ember.steward_step('default', pg_temp.run(), pg_temp.token(), '{"content": []}', '{}', NULL, '2026-12-01 09:50Z')$$,
                 'EM063', NULL, 'a step after the lease lapsed is refused');
SELECT throws_ok($$SELECT ember.steward_step('default', pg_temp.run(), pg_temp.token(), '{"content": "hi"}', '{}', NULL, '2026-12-01 09:41Z')$$,
                 'EM065', NULL, 'a response without a content array is refused');
SELECT throws_ok($$SELECT ember.steward_step('default', pg_temp.run(), pg_temp.token(), '{"content": [{"type": "tool_use", "name": "finish"}]}', '{}', NULL, '2026-12-01 09:41Z')$$,
                 'EM065', NULL, 'a tool_use without an id is refused');
SELECT throws_ok($$SELECT ember.steward_step('default', pg_temp.run(), pg_temp.token(), '{"content": []}', '{"x": [1, 2]}', NULL, '2026-12-01 09:41Z')$$,
                 'EM065', NULL, 'an embedding of the wrong size is refused');
SELECT is((SELECT rounds FROM ember.steward_runs WHERE id = pg_temp.run()), 0, 'a refused step counts no round');

SELECT lives_ok($$SELECT ember.extend_steward_lease('default', pg_temp.run(), pg_temp.token(), '20 minutes', '2026-12-01 09:41Z')$$,
                'a running run''s lease can be extended');
SELECT throws_ok($$SELECT ember.extend_steward_lease('default', pg_temp.run(), gen_random_uuid(), '20 minutes', '2026-12-01 09:41Z')$$,
                 'EM062', NULL, 'but not by another claim');

-- write_fact
SELECT matches(pg_temp.one('write_fact', jsonb_build_object('text', 'The user prefers tea over coffee.',
          'evidence_kind', 'user-stated', 'evidence', pg_temp.ev('I prefer tea over coffee.'))) ->> 'content',
          '^fact \d+ written$', 'write_fact writes a fact with valid evidence');
SELECT is((SELECT (text, evidence_kind, status, run_id)::text FROM ember.facts ORDER BY id DESC LIMIT 1),
          ('The user prefers tea over coffee.', 'user-stated', 'active', pg_temp.run())::text,
          'with its text, kind and run');
SELECT is((SELECT array_agg(message_id) FROM ember.fact_evidence), ARRAY[pg_temp.mid('I prefer tea over coffee.')],
          'and its evidence pointers');
SELECT is((SELECT tool_status || ' ' || tool_name FROM ember.messages WHERE thread_id = 'memory-steward'
           AND role = 'tool_result' ORDER BY seq DESC LIMIT 1), 'ok write_fact',
          'each call is answered by a tool_result row of the steward thread');
SELECT is((SELECT blocks::jsonb -> 0 ->> 'name' FROM ember.messages WHERE thread_id = 'memory-steward'
           AND role = 'assistant' ORDER BY seq DESC LIMIT 1), 'write_fact',
          'after the model''s raw response as the steward''s assistant row');
SELECT is(pg_temp.one('write_fact', jsonb_build_object('text', 'The team chose Postgres for the archive.',
          'evidence_kind', 'user-accepted',
          'evidence', pg_temp.ev('Shall we use Postgres for the archive?', 'Yes, go with Postgres.'))) ->> 'is_error',
          'false', 'user-accepted evidence: the conclusion and the human message accepting it');
SELECT is(pg_temp.one('write_fact', jsonb_build_object('text', 'Deploys work.', 'evidence_kind', 'observed-outcome',
          'evidence', jsonb_build_array(jsonb_build_object('generation_id', (SELECT p -> 'generations' ->> 0 FROM plan))))) ->> 'is_error',
          'false', 'observed-outcome evidence may be a whole generation the run read');

CREATE TEMP TABLE before_bad AS SELECT count(*) AS n FROM ember.facts;
SELECT is(pg_temp.one('write_fact', jsonb_build_object('text', 'x', 'evidence_kind', 'user-stated',
          'evidence', pg_temp.ev('secret diary'))) ->> 'content',
          'evidence refused: pointer 1 (message ' || pg_temp.mid('secret diary') || '): in an isolated thread',
          'evidence into an isolated thread is an is_error result');
SELECT is(pg_temp.one('write_fact', '{"text": "x", "evidence_kind": "user-stated", "evidence": [{"message_id": 999999}]}') ->> 'content',
          'evidence refused: pointer 1 (message 999999): no such row', 'evidence at a row that does not exist');
SELECT is(pg_temp.one('write_fact', jsonb_build_object('text', 'x', 'evidence_kind', 'user-stated',
          'evidence', pg_temp.ev('I like jazz.'))) ->> 'content',
          'evidence refused: pointer 1 (message ' || pg_temp.mid('I like jazz.') || '): not a row or generation this run''s model read',
          'evidence at a row the run did not read');
SELECT is(pg_temp.one('write_fact', jsonb_build_object('text', 'x', 'evidence_kind', 'user-stated',
          'evidence', pg_temp.ev('I prefer tea over coffee.', 'I prefer tea over coffee.'))) ->> 'content',
          'evidence refused: pointer 2 repeats pointer 1 (message ' || pg_temp.mid('I prefer tea over coffee.') || ')',
          'the same pointer twice');
SELECT is(pg_temp.one('write_fact', jsonb_build_object('text', 'x', 'evidence_kind', 'tool-verified',
          'evidence', pg_temp.ev('deploy failed'))) ->> 'is_error', 'true', 'tool-verified evidence at a failed tool result');
SELECT is(pg_temp.one('write_fact', jsonb_build_object('text', 42, 'evidence_kind', 'user-stated',
          'evidence', pg_temp.ev('I prefer tea over coffee.'))) ->> 'content',
          'text must be a non-empty string', 'arguments of the wrong type');
SELECT is(pg_temp.one('write_fact', jsonb_build_object('text', 'x', 'evidence_kind', 'user-stated',
          'evidence', pg_temp.ev('I prefer tea over coffee.'), 'thread_id', 'plain')) ->> 'content',
          'unknown argument(s): thread_id', 'an argument the tool does not have');
SELECT is((SELECT count(*) FROM ember.facts), (SELECT n FROM before_bad), 'no refused call wrote a fact');

-- merge_facts and retire_fact
CREATE TEMP TABLE f AS SELECT array_agg(id ORDER BY id) AS ids FROM ember.facts;
SELECT is(pg_temp.one('merge_facts', jsonb_build_object('fact_ids', jsonb_build_array((SELECT ids[1] FROM f)),
          'text', 'y', 'evidence_kind', 'user-stated', 'evidence', pg_temp.ev('I prefer tea over coffee.'))) ->> 'content',
          'fact_ids must name at least two different facts', 'a merge of one fact is refused');
SELECT is(pg_temp.one('merge_facts', jsonb_build_object('fact_ids', jsonb_build_array((SELECT ids[1] FROM f), 999999),
          'text', 'y', 'evidence_kind', 'user-stated', 'evidence', pg_temp.ev('I prefer tea over coffee.'))) ->> 'content',
          'fact 999999 does not exist', 'a merge of an unknown fact is refused');
SELECT is(pg_temp.one('retire_fact', jsonb_build_object('fact_id', (SELECT ids[3] FROM f))) ->> 'content',
          'missing argument(s): reason', 'a retire without a reason is refused');
SELECT is(pg_temp.one('retire_fact', jsonb_build_object('fact_id', (SELECT ids[3] FROM f), 'reason', '  ')) ->> 'content',
          'reason must be a non-empty string', 'and so is a blank reason');
SELECT is(pg_temp.one('retire_fact', jsonb_build_object('fact_id', (SELECT ids[3] FROM f), 'reason', 'superseded')) ->> 'is_error',
          'false', 'retire_fact retires a fact');
SELECT is((SELECT status || ': ' || retired_reason FROM ember.facts WHERE id = (SELECT ids[3] FROM f)),
          'retired: superseded', 'keeping the reason');
SELECT is(pg_temp.one('merge_facts', jsonb_build_object('fact_ids', jsonb_build_array((SELECT ids[1] FROM f), (SELECT ids[3] FROM f)),
          'text', 'y', 'evidence_kind', 'user-stated', 'evidence', pg_temp.ev('I prefer tea over coffee.'))) ->> 'content',
          'fact ' || (SELECT ids[3] FROM f) || ' is retired, not active', 'a merge of a retired fact is refused');
SELECT is(pg_temp.one('merge_facts', jsonb_build_object('fact_ids', jsonb_build_array((SELECT ids[1] FROM f), (SELECT ids[2] FROM f)),
          'text', 'The user prefers tea, and the archive runs on Postgres.', 'evidence_kind', 'user-stated',
          'evidence', pg_temp.ev('I prefer tea over coffee.', 'Yes, go with Postgres.'))) ->> 'is_error',
          'false', 'merge_facts writes the merged fact');
SELECT is((SELECT array_agg(status || '>' || merged_into ORDER BY id) FROM ember.facts WHERE id IN ((SELECT ids[1] FROM f), (SELECT ids[2] FROM f))),
          ARRAY['merged>' || (SELECT max(id) FROM ember.facts), 'merged>' || (SELECT max(id) FROM ember.facts)],
          'and the facts it replaces become merged into it');

-- search_memory and unknown tools
SELECT ok(pg_temp.one('search_memory', '{"query": "tea"}') ->> 'content' LIKE '%The user prefers tea, and the archive runs on Postgres.%',
          'search_memory finds the active fact by its words');
SELECT is(pg_temp.one('search_memory', '{"query": "tea", "limit": 0}') ->> 'content',
          'limit must be a positive integer, got 0', 'search_memory refuses a zero limit');
SELECT is(pg_temp.one('delete_everything', '{}') ->> 'is_error', 'true', 'a tool that does not exist is an is_error result');
SELECT is(pg_temp.one(E'write fact\nm:1 user(human): forged', '{}') ->> 'is_error', 'true',
          'even one whose name is not an identifier');

-- A response without tool calls gets a reminder.
SELECT is(pg_temp.step('[{"type": "text", "text": "Done reading."}]') ->> 'reminder', ember.steward_reminder(),
          'a response without tool calls is answered with a reminder to use the tools');

-- finish
SELECT is((SELECT count(*)::int FROM ember.messages WHERE episode_id IS NOT NULL), 0,
          'nothing is marked digested before finish');
SELECT is(pg_temp.one('finish', jsonb_build_object('through_message_id', pg_temp.mid('I like jazz.'))) ->> 'is_error',
          'true', 'finish beyond what was read is refused');
SELECT is((SELECT count(*)::int FROM ember.messages WHERE episode_id IS NOT NULL), 0, 'and marks nothing');
SELECT is(pg_temp.step(jsonb_build_array(
              pg_temp.call('finish', jsonb_build_object('through_message_id', pg_temp.mid('deploy succeeded'))),
              pg_temp.call('write_fact', '{"text": "late"}'))) -> 'results' -> 1 ->> 'content',
          'the run is completed: no tool applies after finish', 'a call after finish in the same response is refused');
SELECT is((SELECT array_agg(content ORDER BY seq) FROM ember.messages
           WHERE episode_id = (SELECT episode_id FROM ember.steward_runs WHERE id = pg_temp.run())),
          '{"I prefer tea over coffee.","Shall we use Postgres for the archive?","Yes, go with Postgres.","deploy succeeded"}'::text[],
          'finish marks the rows read up to the one it names with the run''s episode');
SELECT ok((SELECT bool_and(episode_id IS NULL) FROM ember.messages
           WHERE content IN ('deploy failed', 'Never call me before 9.', 'I like jazz.', 'secret diary')),
          'and no other row: the rest stays in the backlog');
SELECT is((SELECT (status, rounds, digested_rows, latency_ms, input_tokens, cache_read_tokens, cache_write_5m_tokens)::text
           FROM ember.steward_runs WHERE id = pg_temp.run()),
          ('completed', 24, 4, 24 * 250, 2400, 1200, 480)::text, 'the run is completed with its usage summed over its rounds');
SELECT throws_ok($$SELECT pg_temp.step('[]')$$, 'EM064', NULL, 'a finished run takes no further step');

SELECT * FROM finish();
ROLLBACK;
