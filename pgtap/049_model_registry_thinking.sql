BEGIN;
SELECT plan(5);

SELECT col_not_null('ember', 'models', 'thinking_before_system',
                    'every model says whether it renders thinking before the system prompt');
SELECT col_not_null('ember', 'models', 'adaptive_thinking_only',
                    'every model says whether it refuses a fixed thinking budget');
SELECT set_eq(
    $$SELECT id FROM ember.models WHERE adaptive_thinking_only$$,
    ARRAY['claude-opus-4-7', 'claude-opus-4-8', 'claude-sonnet-5-5', 'claude-opus-5-5',
          'claude-fable-5-1', 'claude-mythos-5-1'],
    'Opus 4.7 and later, and the 5.5 and 5.1 models but Haiku, take only adaptive thinking'
);
SELECT set_eq(
    $$SELECT id FROM ember.models WHERE thinking_before_system$$,
    ARRAY['claude-opus-4-7', 'claude-opus-4-8'],
    'the models documented to render thinking first are Opus 4.7 and 4.8'
);
SELECT throws_ok(
    $$UPDATE ember.models SET thinking_before_system = NULL WHERE id = 'claude-opus-4-8'$$,
    '23502', NULL, 'an unknown thinking order is refused, never assumed'
);

SELECT * FROM finish();
ROLLBACK;
