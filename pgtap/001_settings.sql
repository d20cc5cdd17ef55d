BEGIN;
SELECT plan(22);

-- Settings through a function: typed, bounded, with their defaults.
SELECT is((SELECT count(*)::int FROM ember.settings_list() WHERE value_type IS NULL OR default_value IS NULL), 0,
    'every setting Ember ships has a type and a default');
SELECT is(ember.set_setting('idle_before_digest', '5 minutes'),
    '{"key": "idle_before_digest", "previous": "20 minutes", "value": "5 minutes", "default": "20 minutes"}'::jsonb,
    'set_setting changes a setting and says what it was and what the default is');
SELECT is(ember.setting_interval('idle_before_digest'), interval '5 minutes', 'and the readers see the new value');
SELECT is(ember.set_setting('idle_before_digest', '"30 seconds"') ->> 'value', '30 seconds',
    'a value given as a JSON string is taken as its content');
SELECT is(ember.set_setting('cold_page_tokens', ' 4000 ') -> 'value', '4000'::jsonb,
    'an integer setting stores a JSON number');
SELECT is(ember.set_setting('hot_cache_min_read_share', '0.75') -> 'value', '0.75'::jsonb,
    'a number setting takes a fraction');
SELECT throws_ok($$SELECT ember.set_setting('idle_before_digest', '20 minuets')$$, 'EM092',
    'setting "idle_before_digest": "20 minuets" is not an interval', 'a value that is not an interval is refused by name');
SELECT throws_ok($$SELECT ember.set_setting('idle_before_digest', '40 days')$$, 'EM092',
    'setting "idle_before_digest": "40 days" is out of range (from 0 seconds to 30 days)', 'an interval out of range is refused');
SELECT throws_ok($$SELECT ember.set_setting('tick_interval', '0 seconds')$$, 'EM092', NULL,
    'a tick interval of zero is refused');
SELECT throws_ok($$SELECT ember.set_setting('failure_backoff_after', '2.5')$$, 'EM092',
    'setting "failure_backoff_after": "2.5" is not a whole number', 'a fraction for an integer setting is refused');
SELECT throws_ok($$SELECT ember.set_setting('failure_backoff_after', '0')$$, 'EM092',
    'setting "failure_backoff_after": 0 is out of range (from 1 to 1000)', 'an integer out of range is refused');
SELECT throws_ok($$SELECT ember.set_setting('hot_cache_min_read_share', '1.5')$$, 'EM092', NULL,
    'a share above 1 is refused');
SELECT throws_ok($$SELECT ember.set_setting('cold_page_tokens', '')$$, 'EM092', NULL, 'an empty value is refused');
SELECT throws_ok($$SELECT ember.set_setting('cold_page_tokens', NULL)$$, 'EM092', NULL, 'a NULL value is refused');
SELECT throws_ok($$SELECT ember.set_setting('no_such_setting', '1')$$, 'EM014', NULL, 'an unknown setting is a named error');
SELECT is(ember.setting('failure_backoff_after'), '3'::jsonb, 'refused changes leave the value as it was');
SELECT throws_ok($$UPDATE ember.settings SET value = '"soon"' WHERE key = 'failure_backoff'$$, 'EM092', NULL,
    'a direct UPDATE is held to the same rule');
SELECT throws_ok($$UPDATE ember.settings SET value = '12' WHERE key = 'tick_interval'$$, 'EM092', NULL,
    'and to the JSON type of the setting');

-- The one-time set-up.
SELECT results_eq(
    $$SELECT step, changed FROM ember.setup('default', '{"health": "medical matters"}', 'main', 'claude-sonnet-4-6')$$,
    $$VALUES ('tenant', false), ('category', true), ('main', true), ('steward', true), ('shadow', true)$$,
    'setup finds the tenant, defines the categories, creates main and the steward''s thread, and activates shadow');
SELECT is((SELECT model FROM ember.threads WHERE id = 'memory-steward'), 'claude-sonnet-4-6',
    'main first, so the steward''s thread copies main''s model pin');
SELECT results_eq(
    $$SELECT step, changed FROM ember.setup('default', '["health"]', 'main', 'claude-sonnet-4-6')$$,
    $$VALUES ('tenant', false), ('category', false), ('main', false), ('steward', false), ('shadow', false)$$,
    'a second setup changes nothing and says so');
SELECT throws_ok($$SELECT * FROM ember.setup('default', '"health"')$$, 'EM012', NULL, 'categories that are neither an object nor an array are refused');

SELECT * FROM finish();
ROLLBACK;
