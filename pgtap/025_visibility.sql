BEGIN;
SELECT plan(38);

SELECT ember.define_category('health');
UPDATE ember.models SET tags = '{health}' WHERE id = 'claude-opus-4-8';
SELECT ember.create_thread('default', 'main', 'main', NULL, NULL, 'open', 'claude-haiku-4-5');
SELECT ember.create_thread('default', 'doc', 'side', 'Doctor', 'health', 'open', 'claude-opus-4-8');
SELECT ember.create_thread('default', 'plain', 'side', 'Plain', NULL, 'open', 'claude-sonnet-4-5');
SELECT ember.create_thread('default', 'vault', 'side', 'Private', NULL, 'isolated', 'claude-opus-4-8');
SELECT ember.ensure_steward_thread('default');
SELECT ember.append_message('default', 'main', 'user', 'hello main');
SELECT ember.append_message('default', 'doc', 'user', 'knee: day 1');
SELECT ember.append_message('default', 'doc', 'user', 'knee: day 2');
SELECT ember.append_message('default', 'doc', 'user', 'knee: day 3');
SELECT ember.append_message('default', 'plain', 'user', 'weather chat');
SELECT ember.append_message('default', 'vault', 'user', 'diary');
SELECT ember.append_steward_record('default', 'assistant', 'fact written');

-- Viewers.
SELECT throws_ok($$SELECT ember.thread_hidden_reason('default', 'ghost', 'plain')$$, 'EM029', 'unknown viewer "ghost"',
                 'a viewer that is neither the person nor a thread is a named error');
SELECT throws_ok($$SELECT * FROM ember.read_thread('default', NULL, 'plain')$$, 'EM029', 'unknown viewer NULL',
                 'an unstated viewer is refused, not taken for the person');
SELECT throws_ok($$SELECT * FROM ember.read_thread('default', 'human', 'ghost')$$, 'EM001', NULL,
                 'an unknown thread is a named error');
SELECT throws_ok($$SELECT ember.create_thread('default', 'human', 'side')$$, 'EM016', NULL,
                 'no thread may take the id that names the person');

-- The steward's record: an honest error for everyone.
SELECT throws_ok($$SELECT * FROM ember.read_thread('default', 'plain', 'memory-steward')$$, 'EM027',
                 'read_thread: "memory-steward" is the memory steward''s record: highest classification, not an empty conversation; use search_memory for memories',
                 'an agent reading the steward''s thread is told what it is and where memories are');
SELECT throws_ok($$SELECT * FROM ember.read_thread('default', 'human', 'memory-steward')$$, 'EM027', NULL,
                 'the person gets the same answer');
SELECT throws_ok($$SELECT * FROM ember.read_thread('default', 'memory-steward', 'memory-steward')$$, 'EM027', NULL,
                 'and so does the steward: its record never becomes its own input');

-- Isolated threads: never to an automated viewer.
SELECT throws_ok($$SELECT * FROM ember.read_thread('default', 'doc', 'vault')$$, 'EM028',
                 'read_thread: no thread "vault" is readable by viewer "doc"',
                 'an isolated thread is refused to an automated viewer');
SELECT throws_ok($$SELECT * FROM ember.read_thread('default', 'memory-steward', 'vault')$$, 'EM028', NULL,
                 'even to the steward');
SELECT is((SELECT array_agg(content) FROM ember.read_thread('default', 'human', 'vault')), '{diary}'::text[],
          'the person reads their isolated thread');
SELECT is((SELECT array_agg(content) FROM ember.read_thread('default', 'vault', 'vault')), '{diary}'::text[],
          'an isolated thread''s own agent reads its own conversation');

-- Category threads: only to viewers whose model is tagged.
SELECT throws_ok($$SELECT * FROM ember.read_thread('default', 'plain', 'doc')$$, 'EM028', NULL,
                 'a category thread is hidden from a viewer whose model is not tagged for it');
SELECT is((SELECT array_agg(content ORDER BY seq) FROM ember.read_thread('default', 'vault', 'doc', 2)),
          '{"knee: day 2","knee: day 3"}'::text[],
          'a tagged viewer reads the most recent rows, oldest first, up to the limit');
SELECT throws_ok($$SELECT * FROM ember.read_thread('default', 'human', 'doc', 0)$$, 'EM012', NULL,
                 'a limit below one is refused');

-- Main: hidden from every automated viewer but the steward.
SELECT throws_ok($$SELECT * FROM ember.read_thread('default', 'plain', 'main')$$, 'EM028',
                 'read_thread: no thread "main" is readable by viewer "plain"',
                 'main is hidden from an agent');
SELECT throws_ok($$SELECT * FROM ember.read_thread('default', 'doc', 'main')$$, 'EM028', NULL,
                 'even from one whose model is tagged for everything main carries');
SELECT ok(ember.thread_visible('default', 'memory-steward', 'main'), 'an unlabelled main is visible to the steward');
SELECT ember.append_message('default', 'main', 'event', 'doc: knee better', NULL, NULL, NULL, NULL, NULL, 'doc');
SELECT ok(NOT ember.thread_visible('default', 'memory-steward', 'main'),
          'main is hidden from the steward while its labels exceed the steward model''s tags');
SELECT is(ember.thread_hidden_reason('default', 'memory-steward', 'main'),
          '"main" carries {health}; the model of viewer "memory-steward" is not tagged for {health}',
          'and the reason names what is missing');
SELECT throws_ok($$SELECT * FROM ember.read_thread('default', 'memory-steward', 'main')$$, 'EM028', NULL,
                 'so the steward cannot read it');
UPDATE ember.models SET tags = '{health}' WHERE id = 'claude-haiku-4-5';
SELECT ok(ember.thread_visible('default', 'memory-steward', 'main'), 'main is visible once the steward''s model is tagged');
SELECT is((SELECT array_agg(content ORDER BY seq) FROM ember.read_thread('default', 'memory-steward', 'main')),
          '{"hello main","doc: knee better"}'::text[], 'and the steward reads it');
SELECT is(ember.generation_labels(ember.latest_generation('default', 'memory-steward')), '{health}'::text[],
          'reading main labels the steward''s generation with main''s labels');
SELECT throws_ok($$SELECT * FROM ember.read_thread('default', 'plain', 'main')$$, 'EM028', NULL,
                 'main stays hidden from other agents');

-- A carrier's older generations may be wider than its current one: rows are checked too.
SELECT ember.start_generation('default', 'main');
SELECT ember.append_message('default', 'main', 'user', 'new day');
-- The steward's model may lose the tag only once the steward's context no longer carries it.
SELECT ember.start_generation('default', 'memory-steward');
UPDATE ember.models SET tags = '{}' WHERE id = 'claude-haiku-4-5';
SELECT ok(ember.thread_visible('default', 'memory-steward', 'main'),
          'a fresh generation of main is visible to an untagged steward');
SELECT is((SELECT array_agg(content) FROM ember.read_thread('default', 'memory-steward', 'main', 1)), '{"new day"}'::text[],
          'which reads its unlabelled rows');
SELECT throws_ok($$SELECT * FROM ember.read_thread('default', 'memory-steward', 'main', 2)$$, 'EM028', NULL,
                 'but not the labelled rows of an earlier generation');

-- A carrier that reads records what it read.
UPDATE ember.models SET tags = '{health}' WHERE id = 'claude-haiku-4-5';
SELECT ember.start_generation('default', 'main');
SELECT is(ember.generation_labels(ember.latest_generation('default', 'main')), '{}'::text[], 'main starts a clean generation');
SELECT is((SELECT count(*)::int FROM ember.read_thread('default', 'main', 'doc')), 3, 'main reads a category thread');
SELECT is(ember.generation_labels(ember.latest_generation('default', 'main')), '{health}'::text[],
          'and its generation carries that category from then on');
SELECT is((SELECT count(*)::int FROM ember.generation_sources WHERE thread_id = 'plain'), 0,
          'a thread that is not a carrier records nothing when it reads');

-- Listings: the steward's thread is never listed.
SELECT is((SELECT array_agg(id ORDER BY id) FROM ember.list_threads('default', 'human')),
          '{doc,main,plain,vault}'::text[], 'the person''s listing has every thread but the steward''s');
SELECT is((SELECT array_agg(id ORDER BY id) FROM ember.list_threads('default', 'plain')), '{plain}'::text[],
          'an untagged agent lists neither main, the isolated thread, the category thread nor the steward');
SELECT is((SELECT array_agg(id ORDER BY id) FROM ember.list_threads('default', 'doc')), '{doc,plain}'::text[],
          'a tagged agent lists the category thread');
SELECT is((SELECT array_agg(id ORDER BY id) FROM ember.list_threads('default', 'memory-steward')), '{doc,main,plain}'::text[],
          'the steward lists main when tagged for it, never itself');
SELECT is((SELECT labels FROM ember.list_threads('default', 'human') WHERE id = 'main'), '{health}'::text[],
          'a listing shows the labels a thread carries now');
SELECT throws_ok($$SELECT * FROM ember.list_threads('default', 'ghost')$$, 'EM029', NULL,
                 'a listing for an unknown viewer is a named error');
SELECT ok(NOT EXISTS (SELECT 1 FROM ember.list_threads('default', 'human') WHERE ember.is_steward_thread(id)),
          'no listing returns the steward''s thread');

SELECT * FROM finish();
ROLLBACK;
