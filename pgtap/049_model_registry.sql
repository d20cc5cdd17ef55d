BEGIN;
SELECT plan(16);

-- The registry as data: load_models adds and re-prices models and refuses a bad entry whole;
-- a run copies its model's length tiers and is priced by the tier its prompt falls in; a cold
-- run records why it was not hot.

SELECT throws_ok(
    $$SELECT ember.load_models('[{"name": "m1", "tier": "light", "price_as_of": "2026-12-01", "colour": "red"}]')$$,
    'EM100', 'load_models: models[0] (m1): unknown key colour', 'an unknown key is refused, naming it');
SELECT throws_ok(
    $$SELECT ember.load_models('[{"name": "m1", "tier": "light", "price_as_of": "2026-12-01",
                                  "prices_per_mtok": {"input": -1}}]')$$,
    'EM100', 'load_models: models[0] (m1): prices_per_mtok.input must be a price of at least 0 or null',
    'a negative price is refused');
SELECT throws_ok(
    $$SELECT ember.load_models('[{"name": "m1", "tier": "light"}]')$$,
    'EM100', 'load_models: models[0] (m1): price_as_of (the date of the price snapshot, YYYY-MM-DD) is required',
    'a snapshot without a date is refused');
SELECT throws_ok(
    $$SELECT ember.load_models('[{"name": "ok", "tier": "light", "price_as_of": "2026-12-01"},
                                 {"name": "m2", "tier": "huge", "price_as_of": "2026-12-01"}]')$$,
    'EM100', 'load_models: models[1] (m2): tier must be light, standard or frontier',
    'the failing entry is named by its index');
SELECT is((SELECT count(*)::int FROM ember.models WHERE id = 'ok'), 0, 'a refused file stores nothing');

SELECT is(ember.load_models($$[{"name": "claude-test-9", "tier": "standard", "price_as_of": "2026-12-01",
    "cache_ttl": "5m", "min_cacheable_tokens": 512, "preserved_thinking": true,
    "prices_per_mtok": {"input": 2, "output": 10, "cache_write_5m": 2.5, "cache_write_1h": 4, "cache_read": 0.1},
    "length_tiers": [{"above_tokens": 1000, "prices_per_mtok": {"input": 4, "output": 20, "cache_write_5m": 5,
                      "cache_write_1h": 8, "cache_read": 0.2}}]}]$$), 1, 'a new model is added');
SELECT is((SELECT (price_cache_read, preserved_thinking, position > 130)::text FROM ember.models WHERE id = 'claude-test-9'),
          '(0.1000,t,t)', 'with its prices and rules, after every seeded model');
SELECT is(ember.load_models($$[{"name": "claude-test-9", "tier": "standard", "price_as_of": "2026-12-02",
    "prices_per_mtok": {"input": 3}}]$$), 1, 'a model is re-priced');
SELECT is((SELECT (price_as_of, price_input, price_output, min_cacheable_tokens)::text FROM ember.models
           WHERE id = 'claude-test-9'), '(2026-12-02,3.0000,,)',
          'the row becomes what the entry says: what it leaves out is unknown');
SELECT is((SELECT count(*)::int FROM ember.model_price_tiers WHERE model = 'claude-test-9'), 0,
          'and its tiers are the entry''s (none)');

-- Cost: the seeded Haiku 5.5 prices prompts over 100,000 tokens at its higher tier.
SELECT is(ember.run_cost_usd(100000, 0, 0, 0, 1000000, 0.10, 0.50, 0.125, 0.20, 0.01,
                             ember.model_price_tiers_json('claude-haiku-5-5')),
          (100000 * 0.10 + 1000000 * 0.50) / 1000000.0, 'a prompt of exactly 100,000 tokens pays the base rate');
SELECT is(ember.run_cost_usd(60000, 40001, 0, 0, 1000000, 0.10, 0.50, 0.125, 0.20, 0.01,
                             ember.model_price_tiers_json('claude-haiku-5-5')),
          (60000 * 0.50 + 40001 * 0.05 + 1000000 * 2.50) / 1000000.0,
          'a longer prompt (cache reads count) pays the higher tier on every token, output included');
SELECT is(ember.run_cost_usd(200000, 0, 0, 0, 0, 0.10, 0.50, 0.125, 0.20, 0.01,
                             '[{"above_tokens": 100000, "price_input": null}]'),
          NULL, 'a tier with a missing price makes the cost unknown');

-- A claimed run copies the tiers and, when cold, the reason.
SELECT ember.create_thread('default', 'main', 'main');
SELECT ember.shadow_activate('2030-01-01 09:00+00');
SELECT ember.create_thread('default', 's1', 'side');
SELECT ember.append_message('default', 's1', 'assistant', 'one', p_now => '2030-01-01 09:58+00');
SELECT ember.note_prefix('default', 's1',
    format('{"model": "claude-opus-5-5", "tools": [{"name": "shadow_memory_propose", "input_schema": {}}], "system": "%s", "messages": []}',
           repeat('s', 9000)),
    '{"content": []}', '2030-01-01 09:58+00');
SELECT ember.shadow_memory_changed('default', 's1', 'task-ended', '2030-01-01 10:00+00');
UPDATE ember.models SET position = 1 WHERE id = 'claude-haiku-5-5';
SELECT (ember.claim_shadow_run('w', '10 minutes', '2030-01-01 10:00+00') ->> 'run_id')::bigint AS r1 \gset
SELECT is((SELECT (path, model)::text FROM ember.shadow_runs WHERE id = :r1), '(cold,claude-haiku-5-5)',
          'a warm, long prefix on a model with unknown cache rules goes cold');
SELECT is((SELECT path_reason FROM ember.shadow_runs WHERE id = :r1),
          'the minimum cacheable length of claude-opus-5-5 is unknown', 'and the run records why');
SELECT is((SELECT price_tiers -> 0 ->> 'price_input' FROM ember.shadow_runs WHERE id = :r1), '0.5000',
          'the run copied its model''s length tiers with its prices');

SELECT * FROM finish();
ROLLBACK;
