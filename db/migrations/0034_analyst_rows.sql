-- The analyst's view of evidence (issue 24): each pointer of a fact or proposal is shown as the
-- row it names, rendered by ember.render_row and bounded to this many characters, so a person can
-- judge a number's rows without the role reading whole messages.
INSERT INTO ember.settings (key, value, description, value_type, min_value, max_value, default_value)
VALUES (
    'analyst_row_chars', '240',
    'characters of one rendered evidence row in the comparison views and the analyst''s explain '
    || '(at least 100, ember.render_row''s bound)',
    'integer', '100', '100000', '240'
);
