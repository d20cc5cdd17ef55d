-- Settings for the shared row renderer (functions/035_render.sql): how much of a long row the
-- steward's and shadow's cold readers see before it is shortened with a marker. Kept as settings
-- rather than constants in the renderer so an operator can trade page count against context.

INSERT INTO ember.settings (key, value, description) VALUES
(
    'render_text_chars', '2000',
    'characters of an assistant or event row kept in a rendered row before it is shortened'
),
(
    'render_tool_chars', '600',
    'characters of a tool call input or a tool result kept in a rendered row before it is shortened'
);
