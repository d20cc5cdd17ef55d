BEGIN;
SELECT plan(27);

SELECT ember.define_category('health');
SELECT ember.define_category('finance');
SELECT ember.create_thread('default', 'doc', 'side', 'Doctor', 'health');

-- The seed's case: the light tier lists an untagged model first, a tagged one later.
INSERT INTO ember.models (
    id, position, tier, tags, min_cacheable_tokens, thinking_retention, price_as_of,
    price_input, price_output, price_cache_write_5m, price_cache_write_1h, price_cache_read
) VALUES
('light-plain', 1, 'light', '{}', 2048, 'last-turn', '2026-11-30', 1, 5, 1.25, 2, 0.10),
('light-health', 15, 'light', '{health}', 2048, 'last-turn', '2026-11-30', 1, 5, 1.25, 2, 0.10),
('light-health-too', 16, 'light', '{health}', 2048, 'last-turn', '2026-11-30', 1, 5, 1.25, 2, 0.10);

SELECT is(ember.route_model('light', '{}'), 'light-plain',
          'unlabelled work takes the first model of the tier in registry order');
SELECT throws_ok($$SELECT ember.route_model('light', NULL)$$, 'EM012', NULL,
                 'NULL categories are refused, never routed as unlabelled');
SELECT is(ember.route_model('light', ember.thread_call_labels('doc')), 'light-health',
          'a category thread routes past the untagged model listed first to the tagged one');
SELECT is(ember.route_model('light', '{health,health}'), 'light-health',
          'of two tagged models the first in registry order wins');

-- None fits: the work waits and says why; never a downgrade.
SELECT throws_ok($$SELECT ember.route_model('light', '{finance}')$$, 'EM022',
                 'category_model: no light model is tagged for {finance}',
                 'no model of the tier tagged for the category is a category_model error naming tier and category');
SELECT throws_ok($$SELECT ember.route_model('frontier', '{health}')$$, 'EM022',
                 'category_model: no frontier model is tagged for {health}',
                 'a tagged light model is never used for a frontier call');
UPDATE ember.models SET tags = '{finance}' WHERE id = 'claude-haiku-4-5';
SELECT throws_ok($$SELECT ember.route_model('light', '{health,finance}')$$, 'EM022',
                 'category_model: no single light model is tagged for all of {finance,health}',
                 'models that each cover part of the labels do not add up to one that covers all');
UPDATE ember.models SET tags = '{finance,health}' WHERE id = 'light-health-too';
SELECT is(ember.route_model('light', '{health,finance}'), 'light-health-too',
          'a model tagged for every category is chosen even when listed later');

-- Bad input.
SELECT throws_ok($$SELECT ember.route_model('medium', '{}')$$, 'EM023', 'unknown model tier "medium"',
                 'an unknown tier is a named error');
SELECT throws_ok($$SELECT ember.route_model(NULL, '{}')$$, 'EM023', NULL, 'a missing tier is a named error');
SELECT throws_ok($$SELECT ember.route_model('light', '{astrology}')$$, 'EM010',
                 'routing a light call: unknown categories {astrology}', 'an unknown category is a named error');

-- Operators tag models by UPDATE; tags must name known categories.
SELECT throws_ok($$UPDATE ember.models SET tags = '{astrology}' WHERE id = 'light-plain'$$, 'EM010',
                 'model "light-plain": unknown categories in tags: {astrology}',
                 'tagging a model with an unknown category is refused');
SELECT throws_ok($$UPDATE ember.models SET tags = ARRAY[NULL::text] WHERE id = 'light-plain'$$, 'EM010', NULL,
                 'a null tag is refused');
SELECT throws_ok($$INSERT INTO ember.models (id, position, tier, tags, min_cacheable_tokens,
                    thinking_retention, price_as_of, price_input, price_output, price_cache_write_5m,
                    price_cache_write_1h, price_cache_read)
                   VALUES ('x', 99, 'light', '{astrology}', 1, 'all', '2026-11-30', 0, 0, 0, 0, 0)$$,
                 'EM010', NULL, 'a new model with an unknown tag is refused');
SELECT is((SELECT tags FROM ember.models WHERE id = 'light-plain'), '{}'::text[],
          'a refused tagging changes nothing');
UPDATE ember.models SET tags = '{health,finance,health}' WHERE id = 'light-plain';
SELECT is((SELECT tags FROM ember.models WHERE id = 'light-plain'), '{finance,health}'::text[],
          'tags are kept sorted and de-duplicated');
SELECT is(ember.route_model('light', '{health}'), 'light-plain', 'a newly tagged model routes at once');

-- A pin never downgrades either: a thread's model must be tagged for what the thread carries.
SELECT ember.create_thread('default', 'main', 'main', NULL, NULL, 'open', 'light-health');
SELECT ember.append_message('default', 'main', 'event', 'doc: knee surgery', NULL, NULL, NULL, NULL, NULL, 'doc');
SELECT throws_ok($$SELECT ember.set_thread_model('default', 'main', 'claude-haiku-4-5')$$, 'EM022', NULL,
                 'a labelled main is not switched to a model untagged for its labels');
SELECT throws_ok($$SELECT ember.set_thread_model('default', 'main', NULL)$$, 'EM022', NULL,
                 'nor unpinned, since no pin proves no tags');
SELECT is((SELECT model FROM ember.threads WHERE id = 'main'), 'light-health', 'the refused switch changes nothing');
SELECT throws_ok($$SELECT ember.set_thread_model('default', 'doc', 'claude-haiku-4-5')$$, 'EM022', NULL,
                 'a category thread is not pinned to a model untagged for its category');
SELECT lives_ok($$SELECT ember.set_thread_model('default', 'main', 'light-health-too')$$,
                'switching to another tagged model is fine');
SELECT ember.start_generation('default', 'main');
SELECT lives_ok($$SELECT ember.set_thread_model('default', 'main', 'claude-haiku-4-5')$$,
                'and a fresh generation, carrying nothing, may take any model');

-- Nor does untagging a model downgrade the threads pinned to it, or a shadow run planned on it.
SELECT ember.create_thread('default', 'clinic', 'side', 'Clinic', 'health', 'open', 'light-health-too');
SELECT throws_ok($$UPDATE ember.models SET tags = '{}' WHERE id = 'light-health-too'$$, 'EM022', NULL,
                 'a tag a pinned thread carries is not removed from its model');
SELECT is((SELECT tags FROM ember.models WHERE id = 'light-health-too'), '{finance,health}'::text[], 'and stays');
INSERT INTO ember.shadow_runs (thread_id, generation_id, path, model, from_seq, through_seq, started_at, worker,
                               lease_token, lease_expires_at)
VALUES ('doc', ember.latest_generation('default', 'doc'), 'cold', 'light-health', 0, 0, now(), 'w', gen_random_uuid(),
        now() + interval '5 minutes');
SELECT throws_ok($$UPDATE ember.models SET tags = '{finance}' WHERE id = 'light-health'$$, 'EM022', NULL,
                 'nor a tag a running shadow run''s generation carries');
SELECT lives_ok($$UPDATE ember.models SET tags = '{health,finance}' WHERE id = 'light-health'$$,
                'adding a tag is always fine');

SELECT * FROM finish();
ROLLBACK;
