BEGIN;
SELECT plan(8);

-- What a bulk write costs per row (issue 21, B1 and B7): the write path's rules run once per
-- statement or once per generation, not once per row, for rows of the writing thread's own.
-- Counted with the server's own function statistics for this transaction
-- (pg_stat_xact_user_functions; track_functions needs a superuser, as the test database has).
SET LOCAL track_functions = 'all';
SET LOCAL client_min_messages = warning;

CREATE FUNCTION pg_temp.calls(p_name text) RETURNS bigint LANGUAGE sql AS $$
    SELECT coalesce(sum(calls), 0)::bigint FROM pg_stat_xact_user_functions
    WHERE schemaname = 'ember' AND funcname = p_name
$$;

SELECT ember.create_thread('default', 'bulk', 'side');
CREATE TEMP TABLE before AS
SELECT f.name, pg_temp.calls(f.name) AS n
FROM unnest(ARRAY['messages_stamp_labels', 'messages_arrival_guard', 'setting_int',
    'shadow_cancel_on_user_message', 'shadow_withdraw']) AS f (name);
CREATE FUNCTION pg_temp.since(p_name text) RETURNS bigint LANGUAGE sql AS $$
    SELECT pg_temp.calls(p_name) - (SELECT b.n FROM before AS b WHERE b.name = p_name)
$$;

SELECT is(cardinality(ember.append_messages('default', 'bulk', (
    SELECT json_agg(json_build_object('role', CASE WHEN i % 2 = 0 THEN 'user' ELSE 'assistant' END,
        'content', 'row ' || i))
    FROM generate_series(1, 1000) AS i))), 1000, 'a bulk append of 1,000 rows, half of them human');
SELECT is(pg_temp.since('messages_stamp_labels'), 0::bigint,
          'its labels are stamped once for the generation, not by a trigger call per row');
SELECT is(pg_temp.since('messages_arrival_guard'), 0::bigint,
          'no row within the limits calls the arrival guard');
SELECT cmp_ok(pg_temp.since('setting_int'), '<=', 4::bigint,
              'the limits are read once for the statement, not three times per row');
SELECT is(pg_temp.since('shadow_withdraw'), 1::bigint,
          'the thread''s shadow work is withdrawn once, however many human rows the statement wrote');
SELECT is((SELECT count(DISTINCT categories) FROM ember.messages WHERE thread_id = 'bulk'), 1::bigint,
          'every row carries its generation''s labels');

-- The import: every line parsed by one cast, no exception block per line or per timestamp.
CREATE TEMP TABLE import_lines (lineno integer PRIMARY KEY, line text NOT NULL) ON COMMIT DROP;
INSERT INTO import_lines
SELECT 2, '{"type": "thread", "id": "imported", "kind": "side", "created_at": "2026-01-01T00:00:00Z"}'
UNION ALL
SELECT i + 2, json_build_object('type', 'message', 'thread', 'imported', 'generation', 1,
    'role', 'assistant', 'content', 'line ' || i,
    'created_at', '2026-01-01T00:00:00Z'::timestamptz + i * interval '1 second')::text
FROM generate_series(1, 500) AS i;
CREATE TEMP TABLE before_import AS
SELECT f.name, pg_temp.calls(f.name) AS n
FROM unnest(ARRAY['text_to_jsonb_or_null', 'text_is_timestamptz', 'messages_stamp_labels']) AS f (name);
SELECT is(ember.import_staged() ->> 'messages', '500', 'an import of 500 messages');
SELECT cmp_ok((SELECT sum(pg_temp.calls(b.name) - b.n) FROM before_import AS b), '<=', 1::numeric,
          'parses its lines and times set-based and stamps labels once per generation (only the '
          'thread line is read field by field)');

SELECT * FROM finish();
ROLLBACK;
