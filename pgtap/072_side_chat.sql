BEGIN;
SELECT plan(54);

SELECT ember.define_category('health');
UPDATE ember.models SET tags = '{health}' WHERE id = 'claude-opus-4-8';
SELECT ember.create_thread('default', 'main', 'main', NULL, NULL, 'open', 'claude-haiku-4-5');
SELECT ember.create_thread('default', 'plain', 'side', 'Plain', NULL, 'open', 'claude-sonnet-4-5');
SELECT ember.create_thread('default', 'tagged', 'side', 'Tagged', NULL, 'open', 'claude-opus-4-8');
SELECT ember.create_thread('default', 'doc', 'side', 'Doctor', 'health');
SELECT ember.create_thread('default', 'build', 'task', 'Build');
SELECT ember.create_thread('default', 'quiet', 'side', 'Quiet');
SELECT ember.create_thread('default', 'vault', 'side', 'Private', NULL, 'isolated');
SELECT ember.ensure_steward_thread('default');

-- Sent while main carries no labels; inspected below.
SELECT ember.side_chat_message('call-8', 'build', 'nudge', 'Skip the docs for now.');

-- side_chat_message: a main_actions row, an event shown as from Main, the tool result.
SELECT ember.turn_started('default', 'plain');
CREATE TEMP TABLE sent AS
SELECT ember.side_chat_message('call-1', 'plain', 'nudge', 'Please finish the migration first.') AS result;
SELECT is((SELECT result FROM sent),
          'Sent a nudge to side chat "plain" (call call-1). It is running: it takes this in at its next '
          || 'safe point, as from Main, not from the user. Message: "Please finish the migration first."',
          'the tool result says what was sent, to whom, and when it arrives');
SELECT is((SELECT result FROM ember.main_actions WHERE tool_call_id = 'call-1'), (SELECT result FROM sent),
          'main_actions records the same text');
SELECT is((SELECT intent || ' ' || thread_id || ' from ' || main_thread FROM ember.main_actions WHERE tool_call_id = 'call-1'),
          'nudge plain from main', 'with its intent, target and sender');
SELECT is((SELECT m.author || ' ' || m.role || ' from ' || m.from_thread
           FROM ember.thread_events AS e JOIN ember.messages AS m ON m.id = e.message_id WHERE e.tool_call_id = 'call-1'),
          'main event from main', 'the target gets an event row authored by main');
SELECT ok((SELECT m.content FROM ember.thread_events AS e JOIN ember.messages AS m ON m.id = e.message_id
           WHERE e.tool_call_id = 'call-1') ~ '^Message from Main \(nudge\): Please finish the migration first\.',
          'shown as a message from Main');

-- Replay by tool call id.
SELECT is(ember.side_chat_message('call-1', 'plain', 'nudge', 'Please finish the migration first.'),
          (SELECT result FROM sent), 'a replayed call returns the same result');
SELECT is((SELECT count(*)::int FROM ember.main_actions WHERE tool_call_id = 'call-1'), 1, 'one action');
SELECT is((SELECT count(*)::int FROM ember.thread_events WHERE tool_call_id = 'call-1'), 1, 'one event');
SELECT is((SELECT count(*)::int FROM ember.messages WHERE thread_id = 'plain'), 1, 'one row in the chat');
SELECT throws_ok($$SELECT ember.side_chat_message('call-1', 'plain', 'stop', 'Stop.')$$, 'EM083', NULL,
                 'the same call id with other arguments is refused');

-- Stop.
SELECT throws_ok($$SELECT ember.side_chat_message('call-2', 'tagged', 'stop', 'Stop.')$$, 'EM082',
                 'side_chat_message: "tagged" is not running: there is nothing to stop',
                 'a stop to a chat that is not running is refused');
SELECT lives_ok($$SELECT ember.side_chat_message('call-3', 'plain', 'stop', 'Stop: wrong file.')$$,
                'a stop to a running chat is sent');
SELECT ember.turn_ended('default', 'plain', TRUE);
SELECT is(ember.side_chat_message('call-3', 'plain', 'stop', 'Stop: wrong file.'),
          (SELECT result FROM ember.main_actions WHERE tool_call_id = 'call-3'),
          'a replayed stop returns its result even after the turn ended');
SELECT lives_ok($$SELECT ember.side_chat_message('call-4', 'tagged', 'correct', 'Use the v2 API.')$$,
                'an idle chat may be nudged or corrected: it reads the message on its next turn');

-- Bad input.
SELECT throws_ok($$SELECT ember.side_chat_message('call-5', 'plain', 'cancel', 'x')$$, 'EM080',
                 'side_chat_message: unknown intent "cancel"', 'unknown intent');
SELECT throws_ok($$SELECT ember.side_chat_message('call-5', 'ghost', 'nudge', 'x')$$, 'EM028',
                 'side_chat_message: no side chat "ghost" is visible to main', 'unknown thread');
SELECT throws_ok($$SELECT ember.side_chat_message('call-5', 'memory-steward', 'nudge', 'x')$$, 'EM027',
                 'side_chat_message: ' || ember.hidden_reason_unchecked('main', 'memory-steward'),
                 'the steward is not a side chat, with the honest reason read_thread gives');
SELECT throws_ok($$SELECT ember.side_chat_message('call-5', 'main', 'nudge', 'x')$$, 'EM081', NULL,
                 'main does not message itself');
SELECT throws_ok($$SELECT ember.side_chat_message('call-5', 'vault', 'nudge', 'x')$$, 'EM028',
                 'side_chat_message: no side chat "vault" is visible to main',
                 'an isolated chat is not steered, and the refusal does not tell main it exists');
SELECT throws_ok($$SELECT ember.side_chat_message('call-5', 'plain', 'nudge', ' ')$$, 'EM012', NULL, 'an empty message');
SELECT throws_ok($$SELECT ember.side_chat_message(NULL, 'plain', 'nudge', 'x')$$, 'EM012', NULL, 'no tool call id');

-- Flow: once main carries health, its messages go only to chats whose model is tagged for it.
SELECT ember.append_message('default', 'main', 'event', 'doc: blood test booked', NULL, NULL, NULL, NULL, NULL, 'doc');
SELECT throws_ok($$SELECT ember.side_chat_message('call-6', 'plain', 'correct', 'The test is on Monday.')$$, 'EM024',
                 'carrier_label_flow: "main" carries {health}, but the model of "plain" (claude-sonnet-4-5) is not tagged for {health}',
                 'a labelled main cannot message an untagged side chat');
SELECT is((SELECT count(*)::int FROM ember.main_actions WHERE tool_call_id = 'call-6'), 0, 'no action is recorded');
SELECT is((SELECT count(*)::int FROM ember.messages WHERE content LIKE '%The test is on Monday%'), 0, 'and nothing is written');
SELECT lives_ok($$SELECT ember.side_chat_message('call-7', 'tagged', 'correct', 'The test is on Monday.')$$,
                'a chat whose model is tagged receives it');
SELECT is((SELECT m.categories FROM ember.thread_events AS e JOIN ember.messages AS m ON m.id = e.message_id
           WHERE e.tool_call_id = 'call-7'), '{health}'::text[], 'and the row carries main''s labels');

-- side_chat_inspect: a small scene. 14 tool calls with blocks (13 answered, the 13th with an
-- error, the 14th still open), one call known only by its result, then a long reply.
SELECT ember.turn_started('default', 'build');
DO $$
BEGIN
    FOR i IN 1..14 LOOP
        PERFORM ember.append_message('default', 'build', 'assistant', '', NULL, json_build_array(
            json_build_object('type', 'tool_use', 'id', 'call-' || i,
                              'name', CASE WHEN i % 2 = 0 THEN 'edit_file' ELSE 'write_file' END,
                              'input', json_build_object('path', 'src/f' || ((i - 1) % 10 + 1) || '.py'))));
        IF i <= 13 THEN
            PERFORM ember.append_message('default', 'build', 'tool_result', CASE WHEN i = 13 THEN 'permission denied' ELSE 'written' END,
                NULL, NULL, 'call-' || i, 'write_file', CASE WHEN i = 13 THEN 'error' ELSE 'ok' END);
        END IF;
    END LOOP;
END;
$$;
SELECT ember.append_message('default', 'build', 'tool_result', repeat('log line ', 100), NULL, NULL, 'sh-1', 'shell', 'ok');
SELECT ember.append_message('default', 'build', 'assistant', 'short earlier reply');
SELECT ember.append_message('default', 'build', 'assistant', repeat('x', 4000));
SELECT ember.report_progress('p-1', 'build', 'compiling');
SELECT ember.report_progress('p-2', 'build', 'compiled; running tests');

CREATE TEMP TABLE scene AS SELECT ember.side_chat_inspect('build') AS s;
SELECT ok((SELECT (s ->> 'running')::boolean FROM scene), 'the scene says the chat is running');
SELECT is((SELECT char_length(s #>> '{last_reply,text}') FROM scene), 1500, 'the last reply is cut to 1,500 characters');
SELECT ok((SELECT s #>> '{last_reply,text}' FROM scene) LIKE '%[shortened: % of 4,000 characters]',
          'with a marker that says how much was cut');
SELECT is((SELECT (s #>> '{last_reply,chars}')::int FROM scene), 4000, 'and the full length');
SELECT is((SELECT jsonb_array_length(s -> 'tool_calls') FROM scene), 12, 'the last 12 tool calls');
SELECT is(ARRAY(SELECT c ->> 'tool_call_id' FROM scene, jsonb_array_elements(s -> 'tool_calls') AS c),
          ARRAY['call-4', 'call-5', 'call-6', 'call-7', 'call-8', 'call-9', 'call-10', 'call-11', 'call-12',
                'call-13', 'call-14', 'sh-1'],
          'oldest first, the call known only by its result included');
SELECT is(ARRAY(SELECT c ->> 'outcome' FROM scene, jsonb_array_elements(s -> 'tool_calls') AS c
                WHERE c ->> 'tool_call_id' IN ('call-12', 'call-13', 'call-14', 'sh-1')),
          ARRAY['ok', 'error', 'no-result', 'ok'], 'each with its outcome');
SELECT is((SELECT s #>> '{tool_calls,9,result}' FROM scene), 'permission denied', 'an error says why');
SELECT ok((SELECT char_length(s #>> '{tool_calls,11,result}') <= 200 FROM scene), 'a long result is cut');
SELECT is((SELECT s -> 'written_paths' FROM scene),
          '["src/f2.py", "src/f1.py", "src/f10.py", "src/f9.py", "src/f8.py", "src/f7.py", "src/f6.py", "src/f5.py", "src/f4.py", "src/f3.py"]'::jsonb,
          'paths written by file tools, each once, most recent first; a failed or unanswered write is not one');
SELECT is((SELECT s #>> '{progress,text}' FROM scene), 'Progress report from "build" ("Build"): compiled; running tests',
          'the latest progress report');
SELECT is((SELECT (s ->> 'pending_from_main')::int FROM scene), 1, 'main''s message the chat has not taken in yet');
UPDATE ember.settings SET value = '3' WHERE key = 'inspect_paths';
SELECT is((SELECT ember.side_chat_inspect('build') -> 'written_paths'), '["src/f2.py", "src/f1.py", "src/f10.py"]'::jsonb,
          'the path list is bounded too');
SELECT is((SELECT count(*)::int FROM ember.generation_sources WHERE thread_id = 'main' AND source_thread = 'plain'), 0,
          'main has not read the plain chat yet');
SELECT ember.append_message('default', 'plain', 'assistant', 'migrating the users table');
SELECT is(ember.side_chat_inspect('plain') #>> '{last_reply,text}', 'migrating the users table', 'a short reply is whole');
SELECT is((SELECT via FROM ember.generation_sources WHERE thread_id = 'main' AND source_thread = 'plain'), 'read',
          'inspecting is a read: main''s generation records it');
SELECT is(ember.side_chat_inspect('quiet') -> 'last_reply', 'null'::jsonb, 'a chat that never replied has no reply');
SELECT is(ember.side_chat_inspect('quiet') -> 'tool_calls', '[]'::jsonb, 'nor tool calls');
SELECT throws_ok($$SELECT ember.side_chat_inspect('tagged')$$, 'EM028', NULL,
                 'a chat carrying main''s own health labels is hidden from main''s untagged model, like any health chat');

-- Who may be inspected.
SELECT ember.append_message('default', 'tagged', 'assistant', 'Monday noted.');
SELECT ember.start_generation('default', 'tagged');
SELECT throws_ok($$SELECT ember.side_chat_inspect('tagged')$$, 'EM028', NULL,
                 'a fresh generation does not open the older one: its last reply comes from a health generation');
SELECT ember.append_message('default', 'tagged', 'assistant', 'Starting over on the API.');
SELECT is(ember.side_chat_inspect('tagged') #>> '{last_reply,text}', 'Starting over on the API.',
          'once the scene draws only on the clean generation, main may see it');

SELECT throws_ok($$SELECT ember.side_chat_inspect('memory-steward')$$, 'EM027',
                 'side_chat_inspect: ' || ember.hidden_reason_unchecked('main', 'memory-steward'),
                 'inspecting the steward gets the honest read error');
SELECT ok(ember.hidden_reason_unchecked('main', 'memory-steward') LIKE '%not an empty conversation%',
          'which says it is the steward''s record, not an empty conversation');
SELECT throws_ok($$SELECT ember.side_chat_inspect('vault')$$, 'EM028',
                 'side_chat_inspect: no side chat "vault" is visible to main',
                 'an isolated chat is never inspected');
SELECT throws_ok($$SELECT ember.side_chat_inspect('main')$$, 'EM081', NULL, 'main is not a side chat');
SELECT throws_ok($$SELECT ember.side_chat_inspect('ghost')$$, 'EM028',
                 'side_chat_inspect: no side chat "ghost" is visible to main', 'unknown thread: the same refusal');
SELECT throws_ok($$SELECT ember.side_chat_inspect('doc')$$, 'EM028',
                 'side_chat_inspect: no side chat "doc" is visible to main',
                 'a health chat is hidden from main while main''s model is not tagged for health, without naming the label');
UPDATE ember.models SET tags = '{health}' WHERE id = 'claude-haiku-4-5';
SELECT ember.append_message('default', 'doc', 'assistant', 'blood test on Monday');
SELECT is(ember.side_chat_inspect('doc') #>> '{last_reply,text}', 'blood test on Monday',
          'once it is tagged, main may inspect the health chat');

SELECT * FROM finish();
ROLLBACK;
