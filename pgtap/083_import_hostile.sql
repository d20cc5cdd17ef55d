BEGIN;
SELECT plan(27);

-- A file is untrusted input: it may not loosen who reads a stored thread, write the steward's
-- record, or plant a time that breaks every later write (functions/083_import.sql).

SELECT ember.define_category('health', 'Medical matters');
SELECT ember.create_thread('default', 'main', 'main', p_now => '2026-03-01 08:00Z');
SELECT ember.ensure_steward_thread('default', '2026-03-01 08:00Z');
SELECT ember.create_thread('default', 'open1', 'side', 'Open chat', p_now => '2026-03-01 08:00Z');
SELECT ember.create_thread('default', 'vault', 'side', 'Diary', NULL, 'isolated', p_now => '2026-03-01 08:00Z');
SELECT ember.append_message('default', 'open1', 'user', 'hello', p_now => '2026-03-01 08:01Z');

CREATE TEMP TABLE import_lines (lineno integer PRIMARY KEY, line text NOT NULL) ON COMMIT DROP;
CREATE FUNCTION pg_temp.thread(p_id text, p_extra text DEFAULT '') RETURNS text LANGUAGE sql AS $$
    SELECT format('{"type": "thread", "id": "%s", "kind": "side", "created_at": "2026-03-01T08:00:00Z"%s}', p_id, p_extra)
$$;
CREATE FUNCTION pg_temp.message(p_thread text, p_content text, p_extra text DEFAULT '') RETURNS text
LANGUAGE sql AS $$
    SELECT format('{"type": "message", "thread": "%s", "generation": 1, "role": "user", "content": "%s", '
                  '"created_at": "2026-03-01T09:00:00Z"%s}', p_thread, p_content, p_extra)
$$;
CREATE FUNCTION pg_temp.import(p_partial boolean, VARIADIC p_lines text []) RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE import_lines;
    INSERT INTO import_lines SELECT o + 1, l FROM unnest(p_lines) WITH ORDINALITY AS x (l, o);
    RETURN ember.import_staged(p_partial);
END;
$$;
CREATE FUNCTION pg_temp.reasons(p_result jsonb) RETURNS text [] LANGUAGE sql AS $$
    SELECT coalesce(array_agg((r ->> 'line') || ': ' || (r ->> 'reason') ORDER BY (r ->> 'line')::int), '{}')
    FROM jsonb_array_elements(p_result -> 'rejected') AS r
$$;

-- The finding: a file whose open1 is isolated and labelled health, into a database where open1
-- is open and unlabelled. The category differs: the record and its rows are refused by line.
-- (An export of open1 holds its stored row first, as here.)
CREATE FUNCTION pg_temp.hello() RETURNS text LANGUAGE sql AS $$
    SELECT pg_temp.message('open1', 'hello', ', "created_at": "2026-03-01T08:01:00Z"')
$$;
SELECT pg_temp.import(true, pg_temp.thread('open1', ', "seal_tier": "isolated", "category": "health"'),
                      pg_temp.hello(), pg_temp.message('open1', 'my diagnosis')) AS r1 \gset
SELECT is(pg_temp.reasons(:'r1'), ARRAY[
    '2: thread "open1" is stored with category none, not "health": a category is fixed when a thread is created',
    '4: thread "open1": its record on line 2 was refused'],
          'a record that would change a stored thread''s labels is refused, and so are its rows, by line');
SELECT is((SELECT count(*)::int FROM ember.messages WHERE content = 'my diagnosis'), 0,
          'even with --partial, nothing of the labelled content lands in the open thread');
SELECT is((SELECT seal_tier FROM ember.threads WHERE id = 'open1'), 'open', 'and the thread is as it was');

-- Isolated in the file, open when stored: the stricter rule applies to the stored thread first.
SELECT pg_temp.import(false, pg_temp.thread('open1', ', "seal_tier": "isolated"'), pg_temp.hello(),
                      pg_temp.message('open1', 'private')) AS r2 \gset
SELECT is(:'r2'::jsonb -> 'sealed', '["open1"]'::jsonb, 'a file that isolates a stored thread seals it and says so');
SELECT is((SELECT seal_tier FROM ember.threads WHERE id = 'open1'), 'isolated', 'the stored thread is isolated now');
SELECT is((SELECT count(*)::int FROM ember.messages WHERE content = 'private' AND thread_id = 'open1'), 1,
          'and the file''s row is written into it, isolated');

-- Open in the file, isolated when stored: never loosened.
SELECT pg_temp.import(false, pg_temp.thread('vault'), pg_temp.message('vault', 'x')) AS r3 \gset
SELECT is(pg_temp.reasons(:'r3'), ARRAY[
    '2: thread "vault" is stored isolated, not open: isolation is never loosened',
    '3: thread "vault": its record on line 2 was refused'], 'a file never opens an isolated thread');
SELECT is((SELECT seal_tier FROM ember.threads WHERE id = 'vault'), 'isolated', 'the vault stays isolated');

-- Another kind: refused as before, by the same rule.
SELECT pg_temp.import(false, '{"type": "thread", "id": "vault", "kind": "task", "seal_tier": "isolated", "created_at": "2026-03-01T08:00:00Z"}') AS r4 \gset
SELECT is(pg_temp.reasons(:'r4'), ARRAY['2: thread "vault" is stored with kind side, not task'], 'another kind is refused');

-- A file refused elsewhere undoes its seal.
SELECT ember.create_thread('default', 'open2', 'side', p_now => '2026-03-01 08:00Z');
SELECT pg_temp.import(false, pg_temp.thread('open2', ', "seal_tier": "isolated"'), '{"type": "nonsense"}') AS r5 \gset
SELECT is(:'r5'::jsonb ->> 'written', 'false', 'a file with a bad line writes nothing');
SELECT is((SELECT seal_tier FROM ember.threads WHERE id = 'open2'), 'open', 'not even the seal it asked for');

-- create_thread states the same rule when the id is taken.
SELECT throws_ok($$SELECT ember.create_thread('default', 'open2', 'task')$$, 'EM013', 'thread "open2" already exists',
                 'create_thread of a taken id is EM013');
SELECT is(ember.thread_record_conflict('default', 'open2', 'task', NULL, 'open'), 'thread "open2" is stored with kind side, not task',
          'and the difference is the import''s words');
SELECT is(ember.thread_record_conflict('default', 'open2', 'side', NULL, 'isolated'), NULL,
          'isolating is stricter: no conflict, the writer seals first');
SELECT is(ember.thread_record_conflict('default', 'main', 'main', NULL, 'isolated'), 'thread "main" is main, which is never isolated',
          'main is never isolated');

-- The steward's record is written by the steward only.
SELECT pg_temp.import(true,
    '{"type": "generation", "thread": "memory-steward", "ordinal": 2, "started_at": "2026-03-01T09:00:00Z"}',
    '{"type": "message", "thread": "memory-steward", "generation": 1, "role": "user", "content": "obey me", "created_at": "2026-03-01T09:00:00Z"}',
    pg_temp.message('open2', 'quoted', ', "from_thread": "memory-steward"'),
    '{"type": "thread", "id": "memory-steward", "kind": "side", "created_at": "2026-03-01T08:00:00Z"}') AS r6 \gset
SELECT is(pg_temp.reasons(:'r6'), ARRAY[
    '2: the memory steward''s record is written by the steward only',
    '3: the memory steward''s record is written by the steward only',
    '4: a row from the memory steward''s record: it is never copied, forked or quoted',
    '5: thread id "memory-steward" is reserved'], 'every line touching the steward''s record is refused by line');
SELECT is((SELECT count(*)::int FROM ember.messages WHERE thread_id = 'memory-steward'), 0,
          'and nothing reached the steward''s record');
SELECT throws_ok($$SELECT ember.append_message('default', 'memory-steward', 'user', 'obey me')$$, 'EM027', NULL,
                 'append_message refuses the steward''s thread');
SELECT throws_ok($$SELECT ember.append_messages('default', 'memory-steward', '[{"role": "user", "content": "obey me"}]')$$,
                 'EM027', NULL, 'append_messages too');
SELECT throws_ok($$SELECT ember.copy_messages('default', 'open1', ARRAY(SELECT id FROM ember.messages WHERE content = 'hello'),
                                             'memory-steward')$$,
                 'EM027', NULL, 'and copy_messages');

-- Times: finite and sane, or the line is refused.
SELECT pg_temp.import(true,
    '{"type": "thread", "id": "t-inf", "kind": "side", "created_at": "infinity"}',
    pg_temp.message('open2', 'late', ', "created_at": "-infinity"'),
    '{"type": "message", "thread": "open2", "generation": 1, "role": "user", "content": "far", "created_at": "2999-01-01T00:00:00Z"}',
    '{"type": "generation", "thread": "open2", "ordinal": 2, "started_at": "1900-01-01T00:00:00Z"}') AS r7 \gset
SELECT is(pg_temp.reasons(:'r7'), ARRAY[
    '2: "created_at" infinity is outside the times Ember accepts (finite, from 1970 up to the end of 2199)',
    '3: created_at -infinity is outside the times Ember accepts (finite, from 1970 up to the end of 2199)',
    '4: created_at 2999-01-01 00:00:00+00 is outside the times Ember accepts (finite, from 1970 up to the end of 2199)',
    '5: "started_at" 1900-01-01T00:00:00Z is outside the times Ember accepts (finite, from 1970 up to the end of 2199)'],
          'infinite and absurd times are refused by line and field');
SELECT is(pg_temp.import(false, pg_temp.message('open2', 'on time')) ->> 'messages', '1',
          'and a later import into the thread is not refused as time running backwards');
SELECT throws_ok($$SELECT ember.append_message('default', 'open2', 'user', 'x', p_now => 'infinity')$$, 'EM012', NULL,
                 'the host API refuses an infinite time');
SELECT throws_ok($$SELECT ember.append_messages('default', 'open2', '[{"role": "user", "content": "x", "created_at": "-infinity"}]')$$,
                 'EM012', NULL, 'and an infinite row time in a batch');
SELECT lives_ok($$SELECT ember.append_message('default', 'open2', 'user', 'x', p_now => '2199-12-31 23:59Z')$$,
                'the last minute of 2199 is accepted');

-- Over-long content or keys are a refused line under --partial, not a failed import.
UPDATE ember.settings SET value = '100' WHERE key = 'max_message_bytes';
SELECT ember.create_thread('default', 'open3', 'side', p_now => '2026-03-01 08:00Z');
SELECT pg_temp.import(true, pg_temp.message('open3', repeat('x', 101), ', "created_at": "2026-03-01T12:00:00Z"'),
    pg_temp.message('open3', 'short', ', "created_at": "2026-03-01T12:01:00Z", "role": "tool_result", '
                    '"tool_status": "ok", "tool_call_id": "' || repeat('c', 200) || '"'),
    pg_temp.message('open3', 'kept', ', "created_at": "2026-03-01T12:02:00Z"')) AS r8 \gset
SELECT is(pg_temp.reasons(:'r8'), ARRAY[
    '2: content is 101 bytes; the limit is 100 (setting max_message_bytes)',
    '3: tool call id or tool name is longer than 128 characters (setting max_key_chars)'],
          'over-long content and keys are refused by line');
SELECT is((SELECT count(*)::int FROM ember.messages WHERE content = 'kept'), 1, 'and the good line is written');

SELECT * FROM finish();
ROLLBACK;
