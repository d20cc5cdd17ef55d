-- The model registry as data an operator updates (`ember models load`), with the rules the
-- provider's documentation states per model, and the columns that let a run be priced by the
-- length tier its request fell in and keep the cache diagnostics the API returned.
--
-- Unknown is a value here: a minimum cacheable length, a TTL or a price the documentation does
-- not state is NULL, never a guess. The hot path treats unknown cache rules as cold
-- (ember.hot_path_rule) and a run priced with a missing price costs NULL.

ALTER TABLE ember.models
ALTER COLUMN min_cacheable_tokens DROP NOT NULL,
ALTER COLUMN cache_ttl DROP NOT NULL,
ALTER COLUMN cache_ttl SET DEFAULT NULL,
ALTER COLUMN price_input DROP NOT NULL,
ALTER COLUMN price_output DROP NOT NULL,
ALTER COLUMN price_cache_write_5m DROP NOT NULL,
ALTER COLUMN price_cache_write_1h DROP NOT NULL,
ALTER COLUMN price_cache_read DROP NOT NULL,
ADD COLUMN observed_min_cacheable_tokens integer CHECK (observed_min_cacheable_tokens > 0),
ADD COLUMN preserved_thinking boolean NOT NULL DEFAULT FALSE,
ADD COLUMN reads_thinking_from text[] NOT NULL DEFAULT '{}',
ADD COLUMN source text;

COMMENT ON COLUMN ember.models.min_cacheable_tokens IS
'The documented minimum cacheable prefix length; NULL when the documentation states none.';
COMMENT ON COLUMN ember.models.observed_min_cacheable_tokens IS
'A minimum users observe the API to apply; the hot path uses the larger of the two.';
COMMENT ON COLUMN ember.models.preserved_thinking IS
'Thinking blocks are bound to the model and to the exact prefix that produced them.';
COMMENT ON COLUMN ember.models.reads_thinking_from IS
'Other models whose thinking blocks this model reads (its own always); others are dropped.';
COMMENT ON COLUMN ember.models.source IS 'The documentation pages the row was taken from.';

-- Length tiers: a request whose prompt (input + cache reads + cache writes) is longer than
-- above_tokens pays the tier's prices on every token of that request, output included (the
-- pricing page's prompt-length pricing). A model without tiers pays its base prices.
CREATE TABLE ember.model_price_tiers (
    model text NOT NULL REFERENCES ember.models (id) ON UPDATE CASCADE ON DELETE CASCADE,
    above_tokens integer NOT NULL CHECK (above_tokens > 0),
    price_input numeric(12, 4) CHECK (price_input >= 0),
    price_output numeric(12, 4) CHECK (price_output >= 0),
    price_cache_write_5m numeric(12, 4) CHECK (price_cache_write_5m >= 0),
    price_cache_write_1h numeric(12, 4) CHECK (price_cache_write_1h >= 0),
    price_cache_read numeric(12, 4) CHECK (price_cache_read >= 0),
    PRIMARY KEY (model, above_tokens)
);

-- A run copies its model's tiers with the rest of the snapshot (a trigger in
-- functions/049_model_registry.sql), the cache diagnostics the API returned, and, for a run
-- that went cold, why the hot path was not taken.
ALTER TABLE ember.shadow_runs
ADD COLUMN price_tiers jsonb,
ADD COLUMN cache_diagnostics jsonb,
ADD COLUMN path_reason text;

ALTER TABLE ember.steward_runs
ADD COLUMN price_tiers jsonb;

ALTER TABLE ember.judge_runs
ADD COLUMN price_tiers jsonb;

-- The registry, corrected and extended from Anthropic's documentation as read on 2026-12-01:
--   https://platform.claude.com/docs/en/about-claude/pricing (model pricing, prompt-length pricing)
--   https://platform.claude.com/docs/en/build-with-claude/prompt-caching (minimums, TTLs)
--   https://platform.claude.com/docs/en/build-with-claude/preserved-thinking and its
--   /prefix-checks page (which models bind thinking blocks; which models read whose blocks)
--   https://platform.claude.com/docs/en/models/overview and each model's overview page (ids)
-- Claude Sonnet 4.6 is documented at 1,024 and observed at 2,048
-- (https://github.com/anthropics/anthropic-sdk-python/issues/1194). No minimum cacheable
-- length is stated for the 5.x models below, so theirs is NULL until an operator records one.
UPDATE ember.models SET
    cache_ttl = '5 minutes',
    source = 'https://platform.claude.com/docs/en/about-claude/pricing; '
    || 'https://platform.claude.com/docs/en/build-with-claude/prompt-caching';

UPDATE ember.models SET observed_min_cacheable_tokens = 2048
WHERE id = 'claude-sonnet-4-6';

INSERT INTO ember.models (
    id, position, tier, min_cacheable_tokens, cache_ttl, thinking_retention, price_as_of,
    price_input, price_output, price_cache_write_5m, price_cache_write_1h, price_cache_read,
    thinking_before_system, adaptive_thinking_only, preserved_thinking, reads_thinking_from, source
) VALUES
(
    'claude-haiku-5-5', 90, 'light', NULL, '5 minutes', 'all', '2026-12-01',
    0.10, 0.50, 0.125, 0.20, 0.01, FALSE, FALSE, TRUE, '{}',
    'https://platform.claude.com/docs/en/models/haiku-5-5/overview'
),
(
    'claude-sonnet-5-5', 100, 'standard', NULL, '5 minutes', 'all', '2026-12-01',
    2, 10, 2.50, 4, 0.10, FALSE, TRUE, TRUE, '{}',
    'https://platform.claude.com/docs/en/about-claude/pricing'
),
(
    'claude-opus-5-5', 110, 'frontier', NULL, '5 minutes', 'all', '2026-12-01',
    4, 20, 5, 8, 0.20, FALSE, TRUE, TRUE, '{}',
    'https://platform.claude.com/docs/en/models/opus-5-5/overview'
),
(
    'claude-fable-5-1', 120, 'frontier', NULL, '5 minutes', 'all', '2026-12-01',
    10, 50, 12.50, 20, 0.25, FALSE, TRUE, TRUE, '{claude-opus-5,claude-opus-5-5}',
    'https://platform.claude.com/docs/en/about-claude/pricing; '
    || 'https://platform.claude.com/docs/en/build-with-claude/preserved-thinking'
),
(
    'claude-mythos-5-1', 130, 'frontier', NULL, '5 minutes', 'all', '2026-12-01',
    10, 50, 12.50, 20, 0.25, FALSE, TRUE, TRUE, '{}',
    'https://platform.claude.com/docs/en/about-claude/pricing'
);

-- Claude Haiku 5.5: prompts over 100,000 tokens pay $0.50 / $2.50, writes $0.625 / $1.00 and
-- reads $0.05 per million tokens, on every token of the request.
INSERT INTO ember.model_price_tiers (
    model, above_tokens, price_input, price_output, price_cache_write_5m, price_cache_write_1h,
    price_cache_read
) VALUES ('claude-haiku-5-5', 100000, 0.50, 2.50, 0.625, 1.00, 0.05);
