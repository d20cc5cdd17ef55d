BEGIN;
SELECT plan(17);

-- Each shadow claim predicts the input cost of both paths from the registry's prices and records
-- it on the run (functions/048_shadow_cost.sql, shadow_cost_prediction); hot_max_cost_ratio may
-- send a thread cold when hot is predicted to cost more than that many times cold.

SELECT ember.create_thread('default', 'main', 'main');
SELECT ember.create_thread('default', 'h', 'side');
SELECT ember.create_thread('default', 'c', 'side');
SELECT ember.shadow_activate('2026-03-01 11:00+00');
CREATE FUNCTION pg_temp.at(p_minutes numeric) RETURNS timestamptz
LANGUAGE sql AS $$ SELECT '2026-03-01 12:00+00'::timestamptz + p_minutes * interval '1 minute' $$;

-- A prefix of thread h: a request of 9,000 characters and more, whose input the host's usage
-- reports as 40,000 tokens, and an answer of 200 output tokens.
CREATE FUNCTION pg_temp.prefix(p_said text, p_minutes numeric) RETURNS boolean
LANGUAGE sql AS $$
    SELECT ember.note_prefix('default', 
        'h',
        '{"model":"claude-sonnet-4-6","tools":[{"name":"shadow_memory_propose","input_schema":{"type":"object"}}],'
        || '"system":"' || repeat('s', 9000) || '","messages":[{"role":"user","content":"' || p_said || '"}]}',
        '{"content": [{"type": "text", "text": "ok"}], "id": "msg_' || p_said || '",'
        || ' "usage": {"input_tokens": 100, "cache_read_input_tokens": 39900, "output_tokens": 200}}',
        pg_temp.at(p_minutes)
    )
$$;

-- A hot thread: its recorded request was 40,000 tokens of input (the host's own usage), its
-- answer 200 tokens of output.
SELECT ember.append_message('default', 'h', 'user', repeat('x', 400), p_now => pg_temp.at(0));
SELECT pg_temp.prefix('x', 1);
SELECT ember.shadow_memory_changed('default', 'h', 'waiting-user', pg_temp.at(2));
SELECT ember.claim_shadow_run('w1', '5 minutes', pg_temp.at(3)) AS hot \gset
SELECT is(:'hot'::jsonb ->> 'path', 'hot', 'the warm thread goes hot');

SELECT is((:'hot'::jsonb #>> '{predicted_cost,prefix_tokens}')::bigint, 40000::bigint,
    'the prefix is the host''s whole recorded input, from its usage');
SELECT is((:'hot'::jsonb #>> '{predicted_cost,hot_tail_tokens}')::bigint,
    (SELECT sum(length(e #>> '{}')) / 4 FROM jsonb_array_elements(:'hot'::jsonb -> 'rows') AS e)::bigint
        + 200 + ember.setting_int('shadow_question_tokens'),
    'the hot tail is the key rows as the plan renders them, the recorded answer and the question');
SELECT is((:'hot'::jsonb #>> '{predicted_cost,hot_usd}')::numeric,
    round((40000 * m.price_cache_read
           + (:'hot'::jsonb #>> '{predicted_cost,hot_tail_tokens}')::bigint * m.price_input) / 1000000.0, 8),
    'hot: the prefix at the cache-read price, the tail at the input price')
FROM ember.models AS m WHERE m.id = 'claude-sonnet-4-6';
SELECT is((:'hot'::jsonb #>> '{predicted_cost,cold_model}'), 'claude-haiku-4-5', 'cold is priced on the light model');
SELECT is((:'hot'::jsonb #>> '{predicted_cost,cold_usd}')::numeric,
    round(((400 + 40) / 4 + ember.setting_int('cold_request_tokens')) * m.price_input / 1000000.0, 8),
    'cold on a hot claim: the rows'' content with a header each, and one page''s request')
FROM ember.models AS m WHERE m.id = 'claude-haiku-4-5';
SELECT results_eq(
    format('SELECT predicted_hot_usd, predicted_cold_usd, cost_prediction FROM ember.shadow_runs WHERE id = %s',
           :'hot'::jsonb ->> 'run_id'),
    format('SELECT %L::numeric, %L::numeric, %L::jsonb', :'hot'::jsonb #>> '{predicted_cost,hot_usd}',
           :'hot'::jsonb #>> '{predicted_cost,cold_usd}', :'hot'::jsonb -> 'predicted_cost'),
    'the run records the plan''s prediction');

-- A cold thread (no prefix): no hot prediction; the cold one from the pages rendered.
SELECT ember.append_message('default', 'c', 'user', 'I prefer tea', p_now => pg_temp.at(0));
SELECT ember.shadow_memory_changed('default', 'c', 'task-ended', pg_temp.at(2));
SELECT ember.claim_shadow_run('w1', '5 minutes', pg_temp.at(3)) AS cold \gset
SELECT is(:'cold'::jsonb #>> '{predicted_cost,hot_usd}', NULL, 'no prefix: nothing to predict for hot');
SELECT is((:'cold'::jsonb #>> '{predicted_cost,cold_tokens}')::bigint,
    (SELECT (sum(length(r #>> '{}') + 1) / 4)::bigint FROM jsonb_array_elements(:'cold'::jsonb -> 'pages') AS p,
            jsonb_array_elements(p) AS r) + ember.setting_int('cold_request_tokens'),
    'cold from the pages as rendered, and a request''s fixed part per page');

-- hot_max_cost_ratio: off by default; set, a thread predicted dearer hot than the ratio allows goes cold.
UPDATE ember.shadow_runs SET status = 'completed', finished_at = pg_temp.at(4) WHERE status = 'running';
SELECT ember.append_message('default', 'h', 'user', 'another', p_now => pg_temp.at(5));
SELECT pg_temp.prefix('y', 6);
SELECT ember.shadow_memory_changed('default', 'h', 'waiting-user', pg_temp.at(7));
SELECT throws_ok($$UPDATE ember.settings SET value = '-1' WHERE key = 'hot_max_cost_ratio'$$, NULL, NULL,
    'the ratio is not negative');
UPDATE ember.settings SET value = '1' WHERE key = 'hot_max_cost_ratio';
SELECT ember.claim_shadow_run('w1', '5 minutes', pg_temp.at(8)) AS routed \gset
SELECT is(:'routed'::jsonb ->> 'path', 'cold', 'a thread whose hot run is predicted dearer than cold goes cold');
SELECT ok((:'routed'::jsonb -> 'reasons') ? 'hot-costlier'
          AND (SELECT reason FROM ember.shadow_runs WHERE id = (:'routed'::jsonb ->> 'run_id')::bigint) LIKE '%hot-costlier%',
    'and the plan and the run say why');

-- comparison_cost: what the claims predicted beside what the runs' input cost.
SELECT results_eq(
    $$SELECT predicted_input_usd, predicted_other_path_usd FROM ember.comparison_cost()
      WHERE pipeline = 'shadow hot' AND status = 'completed'$$,
    format('SELECT round(%L::numeric, 6), round(%L::numeric, 6)', :'hot'::jsonb #>> '{predicted_cost,hot_usd}',
           :'hot'::jsonb #>> '{predicted_cost,cold_usd}'),
    'comparison_cost shows the prediction for the path taken and for the other one');
SELECT is((SELECT predicted_other_path_usd FROM ember.comparison_cost()
           WHERE pipeline = 'shadow cold' AND status = 'completed'), NULL,
    'a run with no hot prediction leaves the other path unknown, never a smaller sum');
-- comparison_run_list, one row per run: the same prediction beside each run (the report's runs table).
SELECT results_eq(
    $$SELECT predicted_input_usd, predicted_other_path_usd FROM ember.comparison_run_list
      WHERE path = 'hot' AND status = 'completed'$$,
    format('SELECT round(%L::numeric, 6), round(%L::numeric, 6)', :'hot'::jsonb #>> '{predicted_cost,hot_usd}',
           :'hot'::jsonb #>> '{predicted_cost,cold_usd}'),
    'comparison_run_list shows each hot run''s prediction for its path and for the other one');
SELECT ok((SELECT bool_and(predicted_input_usd IS NULL AND predicted_other_path_usd IS NULL)
           FROM ember.comparison_run_list WHERE path NOT IN ('hot', 'cold')) IS NOT FALSE,
    'the steward and the judge predict nothing');
SELECT is((SELECT input_usd FROM ember.comparison_cost() WHERE pipeline = 'shadow hot' AND status = 'completed'),
    0::numeric, 'beside the input the runs did cost (none recorded here)');

SELECT * FROM finish();
ROLLBACK;
