-- A host set up in one call, a worker that says why it is idle, settings changed through a
-- function, and the hot path's cache check (issue 22). The rules are in functions/001_settings.sql,
-- functions/049_shadow_hot_cache.sql, functions/090_setup.sql and functions/095_work_status.sql.

-- What each setting may hold, so ember.set_setting() refuses a bad value by name instead of an
-- UPDATE storing '20 minuets' for tick() to trip over later. value_type is interval, integer,
-- number or text; min_value and max_value bound it (in the type's own spelling, NULL for none);
-- default_value is what Ember ships, so an operator can see what was changed. A setting added
-- later without a type keeps the JSON type of its value (functions/001_settings.sql).
ALTER TABLE ember.settings
ADD COLUMN value_type text CHECK (value_type IN ('interval', 'integer', 'number', 'text')),
ADD COLUMN min_value text,
ADD COLUMN max_value text,
ADD COLUMN default_value jsonb;

UPDATE ember.settings AS s
SET
    value_type = v.value_type,
    min_value = v.min_value,
    max_value = v.max_value,
    default_value = v.default_value::jsonb
FROM (
    VALUES
    ('idle_before_digest', 'interval', '0 seconds', '30 days', '"20 minutes"'),
    ('tick_interval', 'interval', '1 second', '1 hour', '"1 minute"'),
    ('cold_page_tokens', 'integer', '128', '1000000', '12000'),
    ('failure_backoff_after', 'integer', '1', '1000', '3'),
    ('failure_backoff', 'interval', '0 seconds', '30 days', '"6 hours"'),
    ('steward_wake_generations', 'integer', '1', '1000', '4'),
    ('steward_wake_tokens', 'integer', '1', '10000000', '80000'),
    ('render_text_chars', 'integer', '100', '1000000', '2000'),
    ('render_tool_chars', 'integer', '100', '1000000', '600'),
    ('steward_max_rounds', 'integer', '1', '1000', '12'),
    ('steward_search_limit', 'integer', '1', '100', '10'),
    ('embedding_model', 'text', NULL, NULL, '"all-MiniLM-L6-v2"'),
    ('inspect_reply_chars', 'integer', '1', '1000000', '1500'),
    ('inspect_tool_calls', 'integer', '1', '1000', '12'),
    ('inspect_result_chars', 'integer', '1', '1000000', '200'),
    ('inspect_paths', 'integer', '1', '10000', '50'),
    ('max_key_chars', 'integer', '16', '1024', '128'),
    ('max_message_bytes', 'integer', '1', '1073741823', '1048576')
) AS v (key, value_type, min_value, max_value, default_value)
WHERE s.key = v.key;

INSERT INTO ember.settings (key, value, description, value_type, min_value, max_value, default_value)
VALUES
(
    'hot_cache_min_read_share', '0.9',
    'a completed hot run that read less than this share of the old prefix from the prompt cache '
    || 'is counted as a cache shortfall (metric and ember status)',
    'number', '0', '1', '0.9'
),
(
    'status_window', '"24 hours"',
    'how far back ember status looks at finished runs (hot-cache shortfalls, workers that claimed)',
    'interval', '1 minute', '30 days', '"24 hours"'
);

-- What the hot path needs to judge its own cache read afterwards, copied from the prefix when a
-- hot run is claimed (the prefix itself is replaced by the thread's next turn): the old request's
-- whole input as the host's own call reported it, whether that request carried a cache
-- breakpoint on its last message, and when it started (the cache lifetime runs from there).
ALTER TABLE ember.shadow_runs
ADD COLUMN prefix_input_tokens bigint CHECK (prefix_input_tokens >= 0),
ADD COLUMN prefix_cache_marked boolean,
ADD COLUMN prefix_requested_at timestamptz;
