-- Bounds on what a model's answer may make the database do (functions/056_output_bounds.sql and
-- the steward's tools enforce them): a tool call or proposal over a bound is answered with an
-- error result or kept as a rejected proposal, never a failed step or a raw database error. One
-- answer with thousands of calls, or one fact of megabytes, would otherwise hold the steward's
-- lock for minutes and break every later search that returns it.
INSERT INTO ember.settings (key, value, description, value_type, min_value, max_value, default_value)
VALUES
(
    'steward_max_tool_calls', '100',
    'tool calls of one steward response that are applied; the rest are answered with an error',
    'integer', '1', '10000', '100'
),
(
    'shadow_max_proposals', '100',
    'proposals of one shadow run stored as candidates; the rest are kept rejected',
    'integer', '1', '10000', '100'
),
(
    'max_fact_chars', '2000',
    'longest fact or proposal text, in characters; a longer one is refused or kept rejected',
    'integer', '50', '1000000', '2000'
),
(
    'max_query_chars', '1000',
    'longest search_memory query, in characters; a longer one is an error result',
    'integer', '10', '1000000', '1000'
),
(
    'search_result_chars', '500',
    'characters of each fact''s text a steward search result shows; the rest is cut with a marker',
    'integer', '50', '1000000', '500'
)
ON CONFLICT (key) DO NOTHING;
