BEGIN;
SELECT plan(47);

SELECT ember.define_category('health');
UPDATE ember.models SET tags = '{health}' WHERE id = 'claude-opus-4-8';
SELECT ember.create_thread('default', 'main', 'main', NULL, NULL, 'open', 'claude-haiku-4-5');
SELECT ember.create_thread('default', 'doc', 'side', 'Doctor', 'health');
SELECT ember.create_thread('default', 'plain', 'side', 'Plain', NULL, 'open', 'claude-sonnet-4-5');
SELECT ember.create_thread('default', 's', 'side');
SELECT ember.create_thread('default', 'gone', 'side');
SELECT ember.create_thread('default', 'vault', 'side', 'Private', NULL, 'isolated');
SELECT ember.set_thread_status('default', 'gone', 'archived');
-- main carries health from here on: rows from it into plain break the flow rule.
SELECT ember.append_message('default', 'main', 'event', 'doc: booked', NULL, NULL, NULL, NULL, NULL, 'doc');

-- One case, as append_message's arguments; run through either path, it returns the SQLSTATE and
-- message it was refused with, or 'ok'. The bulk path sends a valid row first, so a refused case
-- is rows[1].
CREATE TABLE pg_temp.cases (
    name text, thread text, role text, content text, author text, tool_status text,
    from_thread text, code text
);
INSERT INTO pg_temp.cases VALUES
('an unknown role', 's', 'robot', 'x', NULL, NULL, NULL, 'EM003'),
('a null role', 's', NULL, 'x', NULL, NULL, NULL, 'EM003'),
('an unknown author', 's', 'user', 'x', 'alien', NULL, NULL, 'EM004'),
('a human assistant row', 's', 'assistant', 'x', 'human', NULL, NULL, 'EM004'),
('a tool status on a user row', 's', 'user', 'x', NULL, 'ok', NULL, 'EM008'),
('a tool result without status', 's', 'tool_result', 'x', NULL, NULL, NULL, 'EM008'),
('a tool result with an unknown status', 's', 'tool_result', 'x', NULL, 'maybe', NULL, 'EM008'),
('null content', 's', 'user', NULL, NULL, NULL, NULL, 'EM012'),
('an unknown from_thread', 's', 'event', 'x', NULL, NULL, 'ghost', 'EM001'),
('an unknown thread', 'nope', 'user', 'x', NULL, NULL, NULL, 'EM001'),
('an archived thread', 'gone', 'user', 'x', NULL, NULL, NULL, 'EM007'),
('a row from an isolated thread into an open one', 's', 'event', 'x', NULL, NULL, 'vault', 'EM028'),
('a row from a labelled main into an untagged thread', 'plain', 'event', 'x', 'main', NULL, 'main', 'EM024');

CREATE FUNCTION pg_temp.single(c pg_temp.cases) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    PERFORM ember.append_message('default', c.thread, c.role, c.content, c.author, NULL, NULL, NULL, c.tool_status, c.from_thread);
    RAISE EXCEPTION 'accepted' USING ERRCODE = 'EMOK0';
EXCEPTION WHEN OTHERS THEN
    RETURN CASE WHEN SQLSTATE = 'EMOK0' THEN 'ok' ELSE SQLSTATE END;
END;
$$;

CREATE FUNCTION pg_temp.bulk(c pg_temp.cases, OUT code text, OUT msg text) LANGUAGE plpgsql AS $$
BEGIN
    PERFORM ember.append_messages('default', c.thread, json_build_array(
        json_build_object('role', 'assistant', 'content', 'fine'),
        json_strip_nulls(json_build_object(
            'role', c.role, 'content', c.content, 'author', c.author,
            'tool_status', c.tool_status, 'from_thread', c.from_thread
        ))
    ));
    RAISE EXCEPTION 'accepted' USING ERRCODE = 'EMOK0';
EXCEPTION WHEN OTHERS THEN
    code := CASE WHEN SQLSTATE = 'EMOK0' THEN 'ok' ELSE SQLSTATE END;
    msg := SQLERRM;
END;
$$;

SELECT is(pg_temp.single(c), c.code, 'append_message refuses ' || c.name || ' with ' || c.code)
FROM pg_temp.cases AS c ORDER BY c.name;
SELECT is((pg_temp.bulk(c)).code, c.code, 'append_messages refuses ' || c.name || ' with ' || c.code)
FROM pg_temp.cases AS c ORDER BY c.name;
SELECT ok(bool_and((pg_temp.bulk(c)).msg LIKE '%rows[1]%'), 'a refused row is named by its index')
FROM pg_temp.cases AS c WHERE c.code NOT IN ('EM001', 'EM007') OR c.from_thread = 'ghost';
SELECT is((SELECT count(*)::int FROM ember.messages WHERE content IN ('x', 'fine')), 0,
          'a refused call writes nothing, not even its valid rows');

SELECT throws_ok($$SELECT ember.append_messages('default', 's', '{"role": "user"}')$$, 'EM055',
                 'thread "s": rows must be a JSON array of objects, got object', 'rows must be an array');
SELECT throws_ok($$SELECT ember.append_messages('default', 's', '[{"role": "user", "content": "a"}, 3]')$$, 'EM055',
                 'thread "s": rows[1]: is number, not an object', 'every row must be an object');
SELECT throws_ok($$SELECT ember.append_messages('default', 's', '[{"role": "user", "contnet": "a"}]')$$, 'EM055',
                 'thread "s": rows[0]: unknown key "contnet"', 'a misspelt key is refused, not dropped');
SELECT throws_ok($$SELECT ember.append_messages('default', 's', '[{"role": "user", "content": 5}]')$$, 'EM055', NULL,
                 'a field of the wrong JSON type is refused');
SELECT throws_ok($$SELECT ember.append_messages('default', 's', '[{"role": "user", "content": "a", "created_at": "soon"}]')$$,
                 'EM055', 'thread "s": rows[0]: created_at "soon" is not a timestamp', 'a bad time is refused by row');
SELECT is(ember.append_messages('default', 's', '[]'), '{}'::bigint[], 'an empty list appends nothing');

-- What is written: the same rows as append_message writes.
SELECT ember.append_message('default', 'doc', 'user', 'one by one');
SELECT ember.append_message('default', 'doc', 'assistant', 'reply', NULL, '[{"type": "text",  "text": "reply"}]');
SELECT ember.append_messages('default', 'doc', '[
    {"role": "user", "content": "in bulk"},
    {"role": "assistant", "content": "reply", "blocks": [{"type": "text",  "text": "reply"}]},
    {"role": "tool_result", "content": "200", "tool_call_id": "c1", "tool_name": "get", "tool_status": "ok",
     "created_at": "2030-01-01T10:00:00Z"}
]') AS ids \gset
SELECT results_eq(
    $$SELECT role, author, blocks::text, categories FROM ember.messages WHERE thread_id = 'doc' AND content <> '200'
      ORDER BY seq LIMIT 2$$,
    $$SELECT role, author, blocks::text, categories FROM ember.messages WHERE thread_id = 'doc' AND content <> '200'
      ORDER BY seq OFFSET 2$$,
    'bulk rows get the same authors, byte-exact blocks and stamped labels as single appends'
);
SELECT is((SELECT categories FROM ember.messages WHERE content = 'in bulk'), '{health}'::text[],
          'a category thread''s bulk rows carry its label');
SELECT is((SELECT array_agg(id ORDER BY seq) FROM ember.messages WHERE thread_id = 'doc' AND seq > (
              SELECT seq FROM ember.messages WHERE content = 'one by one') + 1),
          :'ids'::bigint[], 'ids come back in the order of the rows, which is seq order');
SELECT is((SELECT max(seq) - min(seq) FROM ember.messages WHERE id = ANY(:'ids'::bigint[])), 2::bigint,
          'a bulk call''s rows are contiguous in seq');
SELECT is((SELECT created_at FROM ember.messages WHERE content = '200'), '2030-01-01T10:00:00Z'::timestamptz,
          'a row''s created_at is its own time');
SELECT is((SELECT tool_call_id || '/' || tool_name FROM ember.messages WHERE content = '200'), 'c1/get',
          'tool call fields are kept');

-- Into a carrier: a row from another thread adds its labels to the rows after it in the same call.
SELECT ember.start_generation('default', 'main');
SELECT ember.append_messages('default', 'main', '[
    {"role": "user", "content": "before"},
    {"role": "event", "content": "doc: results", "from_thread": "doc"},
    {"role": "assistant", "content": "after"}
]');
SELECT results_eq(
    $$SELECT content, categories FROM ember.messages WHERE content IN ('before', 'doc: results', 'after') ORDER BY seq$$,
    $$VALUES ('before', '{}'::text[]), ('doc: results', '{health}'::text[]), ('after', '{health}'::text[])$$,
    'into a carrier, each row is stamped with what the rows before it brought, as with single appends'
);
SELECT ok(EXISTS (SELECT 1 FROM ember.generation_sources WHERE thread_id = 'main' AND source_thread = 'doc'
                  AND generation_id = ember.latest_generation('default', 'main')),
          'and the source is recorded for the generation');

-- A human row cancels shadow work, as append_message's does; other rows do not.
SELECT ember.shadow_activate();
SELECT ember.append_message('default', 's', 'assistant', 'done');
SELECT ember.shadow_memory_changed('default', 's', 'task-ended');
SELECT (ember.claim_shadow_run('w1', '10 minutes') ->> 'run_id')::bigint AS run_s \gset
SELECT ember.note_prefix('default', 's', '{"model": "claude-sonnet-4-6"}', '{}');
SELECT ember.shadow_memory_changed('default', 's', 'thread-active');
SELECT ember.append_messages('default', 's', '[{"role": "assistant", "content": "more"}, {"role": "user", "content": "brief", "author": "main"}]');
SELECT is((SELECT cancel_requested FROM ember.shadow_runs WHERE id = :run_s), false,
          'bulk rows that are not the human speaking cancel nothing');
SELECT ember.append_messages('default', 's', '[{"role": "assistant", "content": "more"}, {"role": "user", "content": "stop"}]');
SELECT is((SELECT cancel_requested FROM ember.shadow_runs WHERE id = :run_s), true,
          'a human row in a bulk call asks the running run to cancel');
SELECT is((SELECT count(*)::int FROM ember.shadow_signals WHERE thread_id = 's'), 0, 'withdraws the offers');
SELECT is((SELECT count(*)::int FROM ember.shadow_prefixes WHERE thread_id = 's'), 0, 'and drops the prefix');

-- The write-path state follows a bulk call.
SELECT is((SELECT last_seq FROM ember.generation_progress WHERE generation_id = ember.latest_generation('default', 's')),
          (SELECT max(seq) FROM ember.messages WHERE thread_id = 's'), 'the generation''s last seq follows the call');

SELECT * FROM finish();
ROLLBACK;
