BEGIN;
SELECT plan(18);

-- A model's answer is bounded in what it makes the database do: over a bound, an error result or
-- a rejected proposal, never a failed step or submit.
SELECT ember.create_thread('default', 'main', 'main', NULL, NULL, 'open', 'claude-haiku-4-5', '2026-12-01 09:00Z');
SELECT ember.create_thread('default', 'plain', 'side', 'Plain', NULL, 'open', NULL, '2026-12-01 09:00Z');
SELECT ember.ensure_steward_thread('default', '2026-12-01 09:00Z');
UPDATE ember.settings SET value = '100' WHERE key = 'steward_max_rounds';
SELECT ember.append_message('default', 'plain', 'user', 'I prefer tea over coffee.', p_now => '2026-12-01 09:01Z');

CREATE TEMP TABLE plan AS SELECT ember.claim_steward_run('w', '10 minutes', '2026-12-01 09:40Z') AS p;
CREATE FUNCTION pg_temp.run() RETURNS bigint LANGUAGE sql AS $$ SELECT (p ->> 'run_id')::bigint FROM plan $$;
CREATE FUNCTION pg_temp.token() RETURNS uuid LANGUAGE sql AS $$ SELECT (p ->> 'lease_token')::uuid FROM plan $$;
CREATE FUNCTION pg_temp.tea() RETURNS bigint LANGUAGE sql AS $$
    SELECT id FROM ember.messages WHERE content = 'I prefer tea over coffee.'
$$;
CREATE FUNCTION pg_temp.write(p_text text) RETURNS jsonb LANGUAGE sql AS $$
    SELECT jsonb_build_object('type', 'tool_use', 'id', 'call-' || md5(random()::text), 'name', 'write_fact',
        'input', jsonb_build_object('text', p_text, 'evidence_kind', 'user-stated',
                                    'evidence', jsonb_build_array(jsonb_build_object('message_id', pg_temp.tea()))))
$$;
CREATE FUNCTION pg_temp.step(p_blocks jsonb, p_now timestamptz DEFAULT '2026-12-01 09:41Z') RETURNS jsonb
LANGUAGE sql AS $$
    SELECT ember.steward_step('default', pg_temp.run(), pg_temp.token(),
        jsonb_build_object('content', p_blocks, 'usage', '{"input_tokens": 1, "output_tokens": 1}'::jsonb),
        '{}', 1, p_now)
$$;

-- Tool calls per step.
CREATE TEMP TABLE many AS SELECT pg_temp.step(
    (SELECT jsonb_agg(pg_temp.write(format('The user prefers tea, variant %s.', i))) FROM generate_series(1, 130) AS i)
) AS r;
SELECT is((SELECT jsonb_array_length(r -> 'results') FROM many), 130, 'every one of 130 calls is answered');
SELECT is((SELECT count(*)::int FROM ember.facts WHERE text LIKE 'The user prefers tea, variant %'), 100,
          'the first steward_max_tool_calls (100) are applied');
SELECT is((SELECT count(*)::int FROM many, jsonb_array_elements(r -> 'results') AS x (v)
           WHERE (x.v ->> 'is_error')::boolean AND x.v ->> 'content' LIKE 'not applied:%steward_max_tool_calls%'), 30,
          'the other 30 are error results naming the setting');
SELECT is((SELECT r ->> 'status' FROM many), 'running', 'and the run goes on');

-- Fact text.
SELECT is((pg_temp.step(jsonb_build_array(pg_temp.write(repeat('tea ', 2000)))) #>> '{results,0,is_error}'), 'true',
          'a fact text over max_fact_chars is an error result');
SELECT ok((SELECT content FROM ember.messages WHERE thread_id = 'memory-steward' AND role = 'tool_result'
           ORDER BY id DESC LIMIT 1) LIKE 'text is 7999 characters; at most 2000 are taken (setting max_fact_chars)%',
          'which says how long it was and the bound');
SELECT is((SELECT count(*)::int FROM ember.facts WHERE length(text) > 2000), 0, 'and writes nothing');

-- Search query text: a 2 MB query is an error result, not a failed step.
SELECT is((pg_temp.step(jsonb_build_array(jsonb_build_object('type', 'tool_use', 'id', 'q-big', 'name', 'search_memory',
           'input', jsonb_build_object('query', repeat('tea ', 500000))))) #>> '{results,0,is_error}'), 'true',
          'a 2 MB search query is an error result');

-- Search results are shortened in the tool-result row, whatever an older bound let in.
UPDATE ember.settings SET value = '1000000' WHERE key = 'max_fact_chars';
SELECT is((pg_temp.step(jsonb_build_array(pg_temp.write('Tea: ' || repeat('oolong ', 20000)))) #>> '{results,0,is_error}'),
          'false', 'with a looser bound, a 140 kB fact is written');
UPDATE ember.settings SET value = '2000' WHERE key = 'max_fact_chars';
CREATE TEMP TABLE found AS SELECT pg_temp.step(jsonb_build_array(
    jsonb_build_object('type', 'tool_use', 'id', 'q-tea', 'name', 'search_memory',
                       'input', '{"query": "oolong tea", "limit": 50}'::jsonb),
    jsonb_build_object('type', 'tool_use', 'id', 'q-tea2', 'name', 'search_memory',
                       'input', '{"query": "oolong tea", "limit": 50}'::jsonb))) AS r;
SELECT is((SELECT r #>> '{results,0,is_error}' FROM found), 'false', 'a search that returns it is no error');
SELECT cmp_ok((SELECT max(octet_length(content)) FROM ember.messages WHERE thread_id = 'memory-steward'
               AND tool_call_id IN ('q-tea', 'q-tea2')), '<', 60000,
              'and its tool-result rows hold each fact shortened to search_result_chars');
SELECT ok((SELECT r #>> '{results,0,content}' FROM found) LIKE '%more characters]%',
          'with a marker saying how much was left out');

-- The lease is judged again at the end of the step, on the time the step took.
SELECT throws_ok(format($$SELECT pg_temp.step(jsonb_build_array(pg_temp.write('The user prefers green tea.')), %L)$$,
                        (SELECT lease_expires_at - interval '1 microsecond' FROM ember.steward_runs WHERE id = pg_temp.run())),
                 'EM063', NULL, 'a step that outlives its lease commits nothing');
SELECT is((SELECT count(*)::int FROM ember.facts WHERE text = 'The user prefers green tea.'), 0, 'nothing at all');

-- Shadow: proposals per run and proposal text.
SELECT ember.shadow_activate('2026-12-01 08:00Z');
SELECT ember.append_message('default', 'plain', 'user', 'I drink green tea daily.', p_now => '2026-12-01 10:01Z');
SELECT ember.shadow_memory_changed('default', 'plain', 'task-ended', '2026-12-01 10:02Z');
CREATE TEMP TABLE splan AS SELECT ember.claim_shadow_run('w', '10 minutes', '2026-12-01 10:03Z') AS p;
CREATE TEMP TABLE last_submit AS SELECT ember.submit_shadow_run('default', (SELECT (p ->> 'run_id')::bigint FROM splan), (SELECT (p ->> 'lease_token')::uuid FROM splan),
    jsonb_build_object('status', 'completed', 'error', NULL, 'latency_ms', 1, 'finished_at', '2026-12-01 10:04Z',
        'usage', '{"input_tokens": 1, "cache_read_input_tokens": 0, "cache_creation_5m_input_tokens": 0,
                   "cache_creation_1h_input_tokens": 0, "output_tokens": 1}'::jsonb,
        'proposals', (SELECT jsonb_agg(jsonb_build_object(
            'text', CASE WHEN i = 1 THEN repeat('tea ', 1000000) ELSE format('The user prefers tea (%s).', i) END,
            'evidence_kind', 'user-stated', 'evidence', jsonb_build_array(jsonb_build_object('message_id',
                (SELECT id FROM ember.messages WHERE content = 'I drink green tea daily.')))))
            FROM generate_series(1, 120) AS i))) AS r;
SELECT is((SELECT count(*)::int FROM ember.shadow_proposals WHERE validation_error IS NULL), 99,
          'of 120 proposals, the first shadow_max_proposals (100) but the oversized one are valid');
SELECT results_eq($$SELECT ordinal > 100, validation_error LIKE 'over the limit of 100 proposals per run%',
                           length(text) <= 2100
                    FROM ember.shadow_proposals WHERE validation_error IS NOT NULL AND ordinal > 1 GROUP BY 1, 2, 3$$,
                  $$VALUES (true, true, true)$$, 'the rest are rejected, naming the bound');
SELECT results_eq($$SELECT validation_error LIKE 'text is 4000000 characters; a proposal holds at most 2000%', length(text) < 2100
                    FROM ember.shadow_proposals WHERE ordinal = 1$$,
                  $$VALUES (true, true)$$, 'a 4 MB proposal text is rejected and stored shortened');
SELECT is((SELECT (r ->> 'rejected')::int FROM last_submit), 21, 'and the submit counts them as rejected');
SELECT * FROM finish();
ROLLBACK;
