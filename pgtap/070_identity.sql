BEGIN;
SELECT plan(44);

SELECT ember.create_thread('default', 'main', 'main');
SELECT ember.create_thread('default', 'side-a', 'side', 'Refactor');
SELECT ember.create_thread('default', 'task-a', 'task', 'Benchmark run');
SELECT ember.create_thread('default', 'vault', 'side', 'Private', NULL, 'isolated');
SELECT ember.ensure_steward_thread('default');

CREATE TEMP TABLE surface AS
SELECT t.id AS thread,
    ARRAY(SELECT p ->> 'file' FROM jsonb_array_elements(i -> 'parts') AS p) AS files,
    ARRAY(SELECT tl ->> 'name' FROM jsonb_array_elements(i -> 'tools') AS tl) AS tools,
    ARRAY(SELECT tl ->> 'name' FROM jsonb_array_elements(i -> 'tools') AS tl
          WHERE tl ->> 'availability' = 'resident') AS resident
FROM ember.threads AS t CROSS JOIN LATERAL ember.turn_identity(t.id) AS i;

-- The seed's integration-test table: identity, what each chair has, and what it has not.
SELECT is((SELECT files FROM surface WHERE thread = 'main'), ARRAY['prompts/system.md', 'prompts/main.md'],
          'main: system.md then main.md');
SELECT ok((SELECT tools FROM surface WHERE thread = 'main')
          @> ARRAY['progress_board', 'watch_thread', 'side_chat_message', 'side_chat_inspect'],
          'main: progress_board, watch_thread, side_chat_message, side_chat_inspect');
CREATE TEMP TABLE steward_only AS SELECT ARRAY(SELECT name FROM ember.tools WHERE kinds = '{steward}' ORDER BY position) AS names;
SELECT is((SELECT array_agg(x) FROM surface, unnest(tools) AS x
           WHERE thread = 'main' AND (x IN (SELECT unnest(names) FROM steward_only) OR x = 'report_progress')),
          NULL, 'main: no steward tool and no report_progress');
SELECT is((SELECT files FROM surface WHERE thread = 'memory-steward'), ARRAY['prompts/steward.md'],
          'steward: steward.md only');
SELECT is((SELECT tools FROM surface WHERE thread = 'memory-steward'),
          ARRAY['write_fact', 'merge_facts', 'retire_fact', 'search_memory', 'finish'],
          'steward: its five tools, in the order its model is given them, and nothing else');
SELECT is((SELECT names FROM steward_only), ARRAY['write_fact', 'merge_facts', 'retire_fact', 'finish'],
          'every tool but the shared search_memory is the steward''s alone');
SELECT ok(NOT (SELECT tools FROM surface WHERE thread = 'memory-steward')
          && ARRAY['progress_board', 'side_chat_message', 'side_chat_inspect', 'report_progress'],
          'steward: no progress board, no side_chat tools, no report_progress');
SELECT is((SELECT files FROM surface WHERE thread = 'side-a'), ARRAY['prompts/system.md'],
          'side chat: system.md');
SELECT ok((SELECT resident FROM surface WHERE thread = 'side-a') @> ARRAY['report_progress', 'shadow_memory_propose'],
          'side chat: report_progress and shadow_memory_propose, both resident');
SELECT ok(NOT (SELECT tools FROM surface WHERE thread = 'side-a')
          && ARRAY(SELECT name FROM ember.tools WHERE kinds IN ('{main}', '{steward}')),
          'side chat: neither main''s tools nor the steward''s');
SELECT is((SELECT tools FROM surface WHERE thread = 'task-a'), (SELECT tools FROM surface WHERE thread = 'side-a'),
          'a task thread has the side chat''s surface');
SELECT ok(NOT (SELECT tools FROM surface WHERE thread = 'vault') && ARRAY['report_progress', 'shadow_memory_propose'],
          'an isolated chat is offered neither report_progress nor the shadow tool: neither could reach anyone');
SELECT is((SELECT tools FROM surface WHERE thread = 'main'),
          ARRAY(SELECT name FROM ember.tools WHERE 'main' = ANY(kinds) ORDER BY position),
          'tools come in registry order, so the list is the same bytes every turn');

-- The hot document: built-in until first read, then the last good text.
SELECT is(ember.turn_identity('main') #>> '{parts,1,source}', 'built-in', 'never read: the built-in minimal role');
SELECT is(ember.turn_identity('main') #>> '{parts,1,text}',
          (SELECT builtin FROM ember.identity_documents WHERE file = 'prompts/main.md'),
          'and its text is handed over');
SELECT is(ember.turn_identity('main') #>> '{parts,0,source}', 'host',
          'a document Ember has not seen is the host''s own copy');
SELECT is(ember.turn_identity('main', '{"prompts/main.md": "role v1"}') #>> '{parts,1,source}', 'read',
          'a good read is used as read');
SELECT is(ember.turn_identity('main', '{"prompts/main.md": {"error": "ENOENT: no such file"}}') #>> '{parts,1,text}',
          'role v1', 'a failed read hands back the last good text');
SELECT is(ember.turn_identity('main', '{"prompts/main.md": {"error": "ENOENT: no such file"}}') #>> '{parts,1,source}',
          'last-good', '... and says so');
SELECT is((SELECT last_error FROM ember.identity_documents WHERE file = 'prompts/main.md'), 'ENOENT: no such file',
          'the failure is recorded');
SELECT is(ember.turn_identity('main', '{"prompts/main.md": "  \n"}') #>> '{parts,1,text}', 'role v1',
          'an empty read counts as a failure, never as an empty role');
SELECT is(ember.turn_identity('main') #>> '{parts,1,text}', 'role v1', 'no read passed: the last good text');
SELECT is(ember.turn_identity('side-a', '{"prompts/main.md": {"error": "EACCES"}}') -> 'parts',
          '[{"file": "prompts/system.md", "hot": false, "source": "host", "version": null, "text": null}]'::jsonb,
          'a side chat''s identity does not include main.md');

-- The identity is part of the context-segment key.
CREATE TEMP TABLE main_gen AS SELECT ember.latest_generation('default', 'main') AS g;
SELECT is((SELECT array_agg(ordinal ORDER BY ordinal) FROM ember.identity_segments WHERE generation_id = (SELECT g FROM main_gen)),
          ARRAY[1, 2], 'built-in and v1 each opened a segment; failed reads opened none');
SELECT is(ember.turn_identity('main', '{"prompts/main.md": "role v2"}') -> 'segment',
          '{"ordinal": 3, "opened": true}'::jsonb, 'a changed main.md opens a new segment');
SELECT is(ember.turn_identity('main', '{"prompts/main.md": "role v2"}') -> 'segment',
          '{"ordinal": 3, "opened": false}'::jsonb, 'the same text again stays in the segment');
SELECT is((SELECT s.parts #>> '{1,version}' FROM ember.identity_segments AS s
           WHERE s.generation_id = (SELECT g FROM main_gen) AND s.ordinal = 2),
          ember.text_version('role v1'), 'the frozen segment still names the version it used');
SELECT is((SELECT v.text FROM ember.identity_segments AS s
           JOIN ember.identity_versions AS v ON v.file = 'prompts/main.md' AND v.version = s.parts #>> '{1,version}'
           WHERE s.generation_id = (SELECT g FROM main_gen) AND s.ordinal = 2),
          'role v1', 'and that version''s text is kept');
SELECT is((SELECT s.parts #>> '{1,source}' FROM ember.identity_segments AS s
           WHERE s.generation_id = (SELECT g FROM main_gen) AND s.ordinal = 1),
          'built-in', 'a segment records where its text came from');
SELECT isnt(ember.turn_identity('main') ->> 'identity_version',
            (SELECT identity_version FROM ember.identity_segments WHERE generation_id = (SELECT g FROM main_gen) AND ordinal = 2),
            'identity versions differ with the text');
SELECT ember.start_generation('default', 'main');
SELECT is(ember.turn_identity('main') -> 'segment', '{"ordinal": 1, "opened": true}'::jsonb,
          'a new generation starts its own first segment');
SELECT is(ember.turn_identity('main') #>> '{parts,1,text}', 'role v2', 'with the last good text');
SELECT is(ember.turn_identity('main') ->> 'generation', ember.latest_generation('default', 'main')::text,
          'the identity names the generation it was recorded for');

-- Bad input.
SELECT throws_ok($$SELECT ember.turn_identity('ghost')$$, 'EM001', 'unknown thread "ghost"', 'unknown thread');
SELECT throws_ok($$SELECT ember.turn_identity('main', '["prompts/main.md"]')$$, 'EM085', NULL,
                 'reads must be an object');
SELECT throws_ok($$SELECT ember.turn_identity('main', '{"prompts/persona.md": "x"}')$$, 'EM085',
                 'unknown identity document "prompts/persona.md"', 'an unknown document is named');
SELECT throws_ok($$SELECT ember.turn_identity('main', '{"prompts/main.md": 42}')$$, 'EM085', NULL,
                 'a read is text or {"error": ...}');
SELECT throws_ok($$SELECT ember.turn_identity('main', '{"prompts/main.md": {"error": "x", "text": "y"}}')$$, 'EM085', NULL,
                 'a failure carries only its error');

-- The registry is extended by the host.
SELECT ember.register_tool('apply_patch', '{side,task,main}', 'per-turn', 'apply a unified diff', TRUE);
SELECT is((SELECT kinds FROM ember.tools WHERE name = 'apply_patch'), '{main,side,task}'::text[],
          'a host tool is registered with its kinds');
SELECT ok((SELECT file_tool FROM ember.tools WHERE name = 'apply_patch'), 'and may be a file tool');
SELECT is((SELECT tools[array_upper(tools, 1)] FROM (SELECT ARRAY(
              SELECT tl ->> 'name' FROM jsonb_array_elements(ember.turn_identity('side-a') -> 'tools') AS tl) AS tools) AS x),
          'apply_patch', 'a new tool comes after the existing ones, leaving their order alone');
SELECT throws_ok($$SELECT ember.register_tool('Bad Name', '{side}', 'per-turn', 'x')$$, 'EM088', NULL, 'tool names are identifiers');
SELECT throws_ok($$SELECT ember.register_tool('x', '{front}', 'per-turn', 'x')$$, 'EM088', NULL, 'kinds are thread kinds');
SELECT throws_ok($$SELECT ember.register_tool('x', '{side}', 'sometimes', 'x')$$, 'EM088', NULL,
                 'availability is resident or per-turn');

SELECT * FROM finish();
ROLLBACK;
