BEGIN;
SELECT plan(21);

SELECT has_schema('ember');
SELECT has_table('ember', 'schema_migrations', 'migrations are recorded');
SELECT has_table('ember', t, format('table ember.%s exists', t))
FROM unnest(ARRAY['settings', 'categories', 'models', 'threads', 'generations', 'messages',
                  'facts', 'fact_evidence']) AS t;
SELECT col_type_is('ember', 'messages', 'blocks', 'json', 'raw blocks are json, byte for byte');
SELECT col_not_null('ember', 'messages', 'seq', 'every row has a global seq');
SELECT fk_ok(
    'ember', 'messages', ARRAY['tenant_id', 'generation_id', 'thread_id'],
    'ember', 'generations', ARRAY['tenant_id', 'id', 'thread_id']
);
SELECT fk_ok('ember', 'threads', 'model', 'ember', 'models', 'id');
SELECT has_extension('vector', 'pgvector is present');

SELECT ok(
    (SELECT count(*) FROM ember.models WHERE tier = 'light') >= 1
    AND (SELECT count(*) FROM ember.models WHERE tier = 'frontier') >= 1,
    'the registry is seeded with light and frontier models'
);
SELECT is(
    (SELECT count(*)::int FROM ember.models
     WHERE price_cache_write_5m <> price_input * 1.25
        OR price_cache_write_1h <> price_input * 2
        OR price_cache_read <> price_input * CASE
            WHEN id IN ('claude-opus-5-5', 'claude-sonnet-5-5') THEN 0.05
            WHEN id IN ('claude-fable-5-1', 'claude-mythos-5-1') THEN 0.025
            ELSE 0.1 END),
    0,
    'seeded cache writes are 1.25x / 2x input; reads 0.1x, 0.05x on Opus and Sonnet 5.5, 0.025x on Fable and Mythos 5.1'
);
SELECT is(ember.setting_interval('idle_before_digest'), '20 minutes'::interval, 'idle constant');
SELECT is(ember.setting_int('cold_page_tokens'), 12000, 'cold page constant');
SELECT throws_ok($$SELECT ember.setting('nope')$$, 'EM014', NULL, 'an unknown setting is a named error');
SELECT is(ember.setting_int('failure_backoff_after'), 3, 'backoff threshold');

SELECT * FROM finish();
ROLLBACK;
