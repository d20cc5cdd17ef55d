BEGIN;
SELECT plan(37);

SELECT ember.define_category('health');

-- create_thread
SELECT is(ember.create_thread('default', 'main', 'main', 'Front desk'), 'main', 'create_thread returns the id');
SELECT is((SELECT count(*)::int FROM ember.generations WHERE thread_id = 'main' AND ended_at IS NULL),
          1, 'a new thread has one open generation');
SELECT throws_ok($$SELECT ember.create_thread('default', 'main2', 'main')$$, 'EM006', NULL,
                 'a second main is refused');
SELECT throws_ok($$SELECT ember.create_thread('default', 'main', 'side')$$, 'EM013', NULL,
                 'a duplicate id is refused');
SELECT throws_ok($$SELECT ember.create_thread('default', 'x', 'chat')$$, 'EM002',
                 'thread "x": unknown kind "chat"', 'an unknown kind is refused by name');
SELECT throws_ok($$SELECT ember.create_thread('default', 'memory-steward', 'steward')$$, 'EM002', NULL,
                 'the steward kind is reserved for ensure_steward_thread');
SELECT throws_ok($$SELECT ember.create_thread('default', 'x', 'side', NULL, 'astrology')$$, 'EM010', NULL,
                 'an unknown category is refused');
SELECT throws_ok($$SELECT ember.create_thread('default', 'x', 'side', NULL, NULL, 'secret')$$, 'EM011', NULL,
                 'an unknown seal tier is refused');
SELECT throws_ok($$SELECT ember.create_thread('default', 'x', 'side', NULL, NULL, 'open', 'gpt-0')$$, 'EM009',
                 NULL, 'an unknown model is refused');
SELECT throws_ok($$SELECT ember.create_thread('default', '', 'side')$$, 'EM012', NULL, 'an empty id is refused');
SELECT is((SELECT count(*)::int FROM ember.threads WHERE id = 'x'), 0,
          'refused creates write nothing');
SELECT lives_ok($$SELECT ember.create_thread('default', 's1', 'side', 'Topic', 'health', 'open', 'claude-haiku-4-5')$$,
                'a side thread with category and model');

-- append_message
SELECT ok(ember.append_message('default', 's1', 'user', 'I prefer tea') > 0, 'append returns the message id');
SELECT is((SELECT author FROM ember.messages WHERE content = 'I prefer tea'), 'human',
          'a user row defaults to author human');
SELECT is((SELECT author FROM ember.messages WHERE thread_id = 's1' AND role = 'user'), 'human', 'author');
SELECT lives_ok($$SELECT ember.append_message('default', 's1', 'assistant', 'Noted', NULL,
                   '[{"type":"text","text":"Noted"}]')$$, 'an assistant row with raw blocks');
SELECT is((SELECT blocks::text FROM ember.messages WHERE content = 'Noted'),
          '[{"type":"text","text":"Noted"}]', 'raw blocks are kept byte for byte');
SELECT lives_ok($$SELECT ember.append_message('default', 's1', 'tool_result', '200 OK', NULL, NULL, 'call_1',
                   'http_get', 'ok')$$, 'a tool result with status ok');
SELECT throws_ok($$SELECT ember.append_message('default', 's1', 'user', 'hi', NULL, NULL, NULL, NULL, 'ok')$$,
                 'EM008', NULL, 'a tool status on a non-tool row is refused');
SELECT throws_ok($$SELECT ember.append_message('default', 's1', 'tool_result', 'x')$$, 'EM008', NULL,
                 'a tool result without a status is refused');
SELECT throws_ok($$SELECT ember.append_message('default', 's1', 'robot', 'x')$$, 'EM003',
                 'thread "s1": unknown role "robot"', 'an unknown role is refused by name');
SELECT throws_ok($$SELECT ember.append_message('default', 's1', 'user', 'x', 'alien')$$, 'EM004', NULL,
                 'an unknown author is refused');
SELECT throws_ok($$SELECT ember.append_message('default', 's1', 'assistant', 'x', 'human')$$, 'EM004', NULL,
                 'only user rows can be human');
SELECT throws_ok($$SELECT ember.append_message('default', 'nope', 'user', 'x')$$, 'EM001',
                 'unknown thread "nope"', 'an unknown thread is refused by name');
SELECT throws_ok($$SELECT ember.append_message('default', 's1', 'event', 'x', NULL, NULL, NULL, NULL, NULL, 'ghost')$$,
                 'EM001', NULL, 'an unknown from_thread is refused');
SELECT is((SELECT count(*)::int FROM ember.messages WHERE content = 'x'), 0,
          'refused appends write nothing');
SELECT ok((SELECT bool_and(a.seq < b.seq) FROM ember.messages AS a JOIN ember.messages AS b
           ON a.thread_id = b.thread_id AND a.id < b.id), 'seq grows with appends');

-- generations
SELECT ember.start_generation('default', 's1');
SELECT is((SELECT count(*)::int FROM ember.generations WHERE thread_id = 's1'), 2,
          'start_generation opens a second generation');
SELECT is((SELECT count(*)::int FROM ember.generations WHERE thread_id = 's1' AND ended_at IS NULL), 1,
          'and ends the first: one open generation per thread');
SELECT ember.append_message('default', 's1', 'user', 'after reset');
SELECT is((SELECT g.ordinal FROM ember.messages AS m JOIN ember.generations AS g ON g.id = m.generation_id
           WHERE m.content = 'after reset'), 2, 'new rows belong to the new generation');
SELECT throws_ok($$SELECT ember.start_generation('default', 'nope')$$, 'EM001', NULL, 'unknown thread');

-- status
SELECT lives_ok($$SELECT ember.set_thread_status('default', 's1', 'archived')$$, 'archive a thread');
SELECT throws_ok($$SELECT ember.append_message('default', 's1', 'user', 'late')$$, 'EM007', NULL,
                 'a message to an archived thread is refused');
SELECT throws_ok($$SELECT ember.start_generation('default', 's1')$$, 'EM007', NULL,
                 'an archived thread takes no new generation');
SELECT throws_ok($$SELECT ember.set_thread_status('default', 's1', 'sleeping')$$, 'EM005', NULL,
                 'an unknown status is refused');
SELECT lives_ok($$SELECT ember.set_thread_status('default', 's1', 'active')$$, 'reactivate');
SELECT ok(ember.append_message('default', 's1', 'user', 'back') > 0, 'an active thread takes messages again');

SELECT * FROM finish();
ROLLBACK;
