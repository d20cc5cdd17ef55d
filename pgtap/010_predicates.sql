BEGIN;
SELECT plan(12);

SELECT ember.define_category('health');
SELECT ember.create_thread('default', 'main', 'main');
SELECT ember.create_thread('default', 's1', 'side', 'Topic', 'health');
SELECT ember.create_thread('default', 'vault', 'side', 'Private', NULL, 'isolated');
SELECT ember.ensure_steward_thread('default');

SELECT ok(ember.is_steward_thread('memory-steward'), 'the steward thread is the steward');
SELECT ok(NOT ember.is_steward_thread('main'), 'main is not the steward');
SELECT ok(NOT ember.is_steward_thread('nope'), 'an unknown thread is not the steward');
SELECT ok(ember.is_label_carrier('main'), 'main carries labels');
SELECT ok(ember.is_label_carrier('memory-steward'), 'the steward carries labels');
SELECT ok(NOT ember.is_label_carrier('s1'), 'a side thread does not carry labels');
SELECT ok(ember.is_isolated('vault'), 'a sealed thread is isolated');
SELECT ok(NOT ember.is_isolated('s1'), 'an open thread is not isolated');
SELECT ok(NOT ember.is_isolated('memory-steward'), 'the steward thread is open');
SELECT ok(NOT ember.is_isolated('nope'), 'an unknown thread is not isolated');

SELECT throws_ok($$UPDATE ember.threads SET kind = 'side' WHERE id = 'main'$$, 'EM002',
                 'thread "main": kind "main" cannot be changed (to "side")',
                 'a thread''s kind never changes, so main never stops carrying labels');
SELECT ok(ember.is_label_carrier('main'), 'main still carries labels');

SELECT * FROM finish();
ROLLBACK;
