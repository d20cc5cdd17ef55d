BEGIN;
SELECT plan(12);

-- ember.hot_path_rule decides, from the model's own registry row, whether a prefix may take the
-- hot path; unknown rules are cold with the reason said.

SELECT is((SELECT eligible FROM ember.hot_path_rule('claude-opus-4-8', 1024, '4 minutes')), true,
          'a prefix at the documented minimum and within the TTL is hot');
SELECT is((SELECT reason FROM ember.hot_path_rule('claude-opus-4-8', 1024, '4 minutes')), NULL,
          'an eligible prefix has no reason');
SELECT is((SELECT eligible FROM ember.hot_path_rule('claude-opus-4-8', 1023, '4 minutes')), false,
          'one token below the minimum is cold');
SELECT matches((SELECT reason FROM ember.hot_path_rule('claude-opus-4-8', 1023, '4 minutes')),
               'below the minimum cacheable length of claude-opus-4-8 \(documented 1024\)',
               'the reason names the minimum it missed');
SELECT is((SELECT eligible FROM ember.hot_path_rule('claude-sonnet-4-6', 1500, '1 minute')), false,
          'Sonnet 4.6 between its documented 1,024 and observed 2,048 is cold: the API does not cache it');
SELECT matches((SELECT reason FROM ember.hot_path_rule('claude-sonnet-4-6', 1500, '1 minute')),
               'documented 1024, observed 2048', 'both minimums are named');
SELECT is((SELECT eligible FROM ember.hot_path_rule('claude-sonnet-4-6', 2048, '1 minute')), true,
          'at the observed minimum it is hot');
SELECT is((SELECT eligible FROM ember.hot_path_rule('claude-opus-4-8', 5000, '5 minutes')), false,
          'a prefix as old as the TTL is cold');
SELECT matches((SELECT reason FROM ember.hot_path_rule('claude-opus-4-8', 5000, '6 minutes')),
               'past the 00:05:00 cache TTL', 'the reason says the TTL passed');
SELECT is((SELECT reason FROM ember.hot_path_rule('claude-opus-5-5', 90000, '1 minute')),
          'the minimum cacheable length of claude-opus-5-5 is unknown',
          'a model whose minimum the documentation does not state is cold, and says so');
UPDATE ember.models SET cache_ttl = NULL WHERE id = 'claude-opus-4-8';
SELECT is((SELECT reason FROM ember.hot_path_rule('claude-opus-4-8', 5000, '1 minute')),
          'the cache TTL of claude-opus-4-8 is unknown', 'an unknown TTL is cold');
SELECT is((SELECT reason FROM ember.hot_path_rule('gpt-0', 5000, '1 minute')),
          'model gpt-0 is not in the registry', 'a model not in the registry is cold');

SELECT * FROM finish();
ROLLBACK;
