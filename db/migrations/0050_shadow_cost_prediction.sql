-- What a shadow run was predicted to cost before its call, on either path (functions/048_shadow_cost.sql,
-- ember.shadow_cost_prediction): so an analyst sees where the hot/cold fork pays and where it does
-- not, beside what each run did cost. USD at the registry's list prices of the claim, input only
-- (output is what the model chooses to write). predicted_hot_usd is NULL for a run with no prefix
-- to replay; predicted_cold_usd is NULL when no light model may read the generation. Both are NULL
-- for runs claimed before this column.
ALTER TABLE ember.shadow_runs
ADD COLUMN predicted_hot_usd numeric CHECK (predicted_hot_usd >= 0),
ADD COLUMN predicted_cold_usd numeric CHECK (predicted_cold_usd >= 0),
ADD COLUMN cost_prediction jsonb CHECK (jsonb_typeof(cost_prediction) = 'object');

INSERT INTO ember.settings (key, value, description, value_type, min_value, max_value, default_value)
VALUES
(
    'shadow_question_tokens', '380',
    'estimated tokens the shadow question adds to a hot tail beyond its rows (prompts/shadow_question.md): '
    || 'the cost prediction''s fixed part of a hot run',
    'integer', '0', '100000', '380'
),
(
    'cold_request_tokens', '1150',
    'estimated tokens each cold page request carries beyond its rows (prompts/cold_reader.md and the '
    || 'tool schema): the cost prediction''s fixed part per cold page',
    'integer', '0', '100000', '1150'
),
(
    'hot_max_cost_ratio', '0',
    'send a thread cold when its hot run is predicted to cost more than this many times its cold run '
    || '(input at list price); 0 is off, and the comparison stays the seed''s: hot whenever the cache is warm',
    'number', '0', '1000', '0'
);
