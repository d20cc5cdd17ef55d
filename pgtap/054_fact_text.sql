-- Facts and proposals hold the text the person meant: the escapes a rendered page shows are
-- undone once, on insert; the steward does not write a fact that an active one already states.
BEGIN;
SELECT plan(11);

SELECT is(ember.clean_fact_text('I like tea.\nAnd coffee.'), 'I like tea. And coffee.',
          'the two characters \n copied from a page become the line break they stood for, folded to a space');
SELECT is(ember.clean_fact_text(E'a\tb\u2028c\r\nd  e'), 'a b c d e', 'tabs, U+2028, CR LF and runs of spaces are one space');
SELECT is(ember.clean_fact_text('x\u2028y\u0085z'), 'x y z', 'escaped separators are undone and folded too');
SELECT is(ember.clean_fact_text('path C:\\temp and \\n literally'), 'path C:\temp and \n literally',
          'a backslash the person typed (shown \\) comes back as one backslash, so \\n stays the two characters');
SELECT is(ember.clean_fact_text('caf\u00e9 \q'), 'caf\u00e9 \q', 'escapes the renderer never writes are left as they are');
SELECT is(ember.clean_fact_text(ember.render_escape(E'one\ntwo\\three\u2028four')), 'one two\three four',
          'cleaning undoes render_escape exactly, then folds the breaks');

SELECT ember.create_thread('default', 'main', 'main', NULL, NULL, 'open', 'claude-haiku-4-5', '2026-12-01 09:00Z');
SELECT ember.create_thread('default', 'plain', 'side', 'Plain', NULL, 'open', NULL, '2026-12-01 09:00Z');
SELECT ember.ensure_steward_thread('default', '2026-12-01 09:00Z');
SELECT ember.append_message('default', 'plain', 'user', E'I prefer tea.\nAnd no calls before nine.', p_now => '2026-12-01 09:01Z');
CREATE TEMP TABLE plan AS SELECT ember.claim_steward_run('w', '10 minutes', '2026-12-01 09:40Z') AS p;
CREATE FUNCTION pg_temp.one(p_name text, p_input jsonb) RETURNS jsonb LANGUAGE sql AS $$
    SELECT ember.steward_step('default', (SELECT (p ->> 'run_id')::bigint FROM plan), (SELECT (p ->> 'lease_token')::uuid FROM plan),
        jsonb_build_object('content', jsonb_build_array(
        jsonb_build_object('type', 'tool_use', 'id', 'call-' || md5(random()::text), 'name', p_name, 'input', p_input))),
        '{}', 10, '2026-12-01 09:41Z') -> 'results' -> 0
$$;
CREATE FUNCTION pg_temp.write(p_text text) RETURNS jsonb LANGUAGE sql AS $$
    SELECT pg_temp.one('write_fact', jsonb_build_object('text', p_text, 'evidence_kind', 'user-stated',
        'evidence', jsonb_build_array(jsonb_build_object('message_id',
            (SELECT id FROM ember.messages WHERE thread_id = 'plain')))))
$$;

SELECT is(pg_temp.write('User preference: I prefer tea.\nAnd no calls before nine.') ->> 'content' LIKE 'fact % written', true,
          'the steward writes a fact copied from the page, escapes and all');
SELECT is((SELECT text FROM ember.facts), 'User preference: I prefer tea. And no calls before nine.', 'it is stored clean');
SELECT matches(pg_temp.write(E'User preference:  I prefer tea.\u2028And no calls before nine!') ->> 'content',
               '^fact \d+ already states this; nothing written$',
               'the same statement again, with other breaks and punctuation, is not written twice');
SELECT is((SELECT count(*)::int FROM ember.facts), 1, 'one fact holds it');
SELECT is(pg_temp.write(E'\\n \t \\u2028') ->> 'is_error', 'true', 'a text of escapes and white space alone is refused');

SELECT * FROM finish();
ROLLBACK;
