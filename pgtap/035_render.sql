BEGIN;
SELECT plan(24);

SELECT ember.create_thread('s1', 'side');
SELECT ember.create_thread('t2', 'task');
SELECT ember.create_thread('vault', 'side', NULL, NULL, 'isolated');

-- The token estimate: the simulator's rule, ceil(code points / 4).
SELECT is(ember.estimate_tokens(''), 0, 'the empty string is 0 tokens');
SELECT is(ember.estimate_tokens('abcd'), 1, 'four characters are one token');
SELECT is(ember.estimate_tokens('abcde'), 2, 'a fifth character starts a second token');
SELECT is(ember.estimate_tokens('ééééé'), 2, 'tokens count code points, not bytes');

-- Rows
SELECT ember.append_message('s1', 'user', 'I prefer tea') AS m_user \gset
SELECT ember.append_message(
    's1', 'assistant', 'Checking', NULL,
    '[{"type":"text","text":"Checking"},{"type":"tool_use","id":"c1","name":"get_weather","input":{"city":"Oslo"}}]'
) AS m_call \gset
SELECT ember.append_message('s1', 'tool_result', '404 not found', NULL, NULL, 'c1', 'get_weather', 'error') AS m_tool \gset
SELECT ember.append_message('s1', 'event', 'progress 50%', NULL, NULL, NULL, NULL, NULL, 't2') AS m_event \gset
SELECT ember.append_message('s1', 'assistant', repeat('a', 9800)) AS m_long \gset
SELECT ember.append_message('s1', 'tool_result', repeat('r', 1000), NULL, NULL, 'c2', 'http_get', 'ok') AS m_longtool \gset
SELECT ember.append_message(
    's1', 'assistant', '', NULL,
    format('[{"type":"tool_use","id":"c3","name":"write_file","input":{"body":"%s"}}]', repeat('b', 5000))::json
) AS m_longcall \gset
SELECT ember.append_message('s1', 'user', repeat('u', 5000)) AS m_longuser \gset
SELECT ember.append_message('vault', 'user', 'my secret') AS m_vault \gset

CREATE FUNCTION pg_temp.r(p_id bigint, p_max integer DEFAULT NULL) RETURNS text
LANGUAGE sql AS $$ SELECT ember.render_row(m, p_max) FROM ember.messages AS m WHERE m.id = p_id $$;
-- A page as the reader sends it: its rows joined by newlines.
CREATE FUNCTION pg_temp.page_text(p_page jsonb) RETURNS text
LANGUAGE sql AS $$
    SELECT string_agg(r, E'\n' ORDER BY o) FROM jsonb_array_elements_text(p_page) WITH ORDINALITY AS e (r, o)
$$;

SELECT is(pg_temp.r(:m_user), 'm:' || :m_user || ' user(human): I prefer tea',
          'a user row renders as m:<id> user(human): <content>');
SELECT is(pg_temp.r(:m_call), 'm:' || :m_call || ' assistant(agent): Checking [tool call get_weather {"city":"Oslo"}]',
          'an assistant row shows its tool calls by name and input');
SELECT is(pg_temp.r(:m_tool), 'm:' || :m_tool || ' tool_result get_weather [error]: 404 not found',
          'a tool result shows its tool and status');
SELECT is(pg_temp.r(:m_event), 'm:' || :m_event || ' event(system) from t2: progress 50%',
          'an event shows its source thread');
SELECT is(pg_temp.r(:m_long),
          'm:' || :m_long || ' assistant(agent): ' || repeat('a', 2000) || '… [shortened: 2,000 of 9,800 characters]',
          'long assistant text is shortened with a marker that says how much');
SELECT is(pg_temp.r(:m_longtool),
          'm:' || :m_longtool || ' tool_result http_get [ok]: ' || repeat('r', 600) || '… [shortened: 600 of 1,000 characters]',
          'a long tool result is shortened with a marker');
SELECT ok(pg_temp.r(:m_longcall) LIKE '%[tool call write_file {"body":"bbb%… [shortened: 600 of 5,011 characters]]',
          'a long tool call input is shortened with a marker');
SELECT is(pg_temp.r(:m_longuser), 'm:' || :m_longuser || ' user(human): ' || repeat('u', 5000),
          'the user''s own words are kept whole');
SELECT ok(char_length(pg_temp.r(:m_longuser, 1000)) <= 1000
          AND pg_temp.r(:m_longuser, 1000) LIKE 'm:' || :m_longuser || ' user(human): uuu%… [shortened: % of 5,%]',
          'a row bounded to a length is cut to fit, marker included');
SELECT throws_ok(format('SELECT pg_temp.r(%s)', :m_vault), 'EM031', NULL,
                 'a row of an isolated thread is refused by the renderer');
SELECT throws_ok(format('SELECT pg_temp.r(%s, 50)', :m_user), 'EM034', NULL,
                 'a row bound too small to hold a row is refused');

-- Pages
SELECT is(ember.render_pages('{}'), '[]'::jsonb, 'no rows, no pages');
SELECT ember.create_thread('big', 'side');
CREATE TEMP TABLE big_ids AS
SELECT ember.append_message('big', 'user', 'row ' || i || ' ' || repeat('w', 4000)) AS id FROM generate_series(1, 60) AS i;
CREATE TEMP TABLE big_pages AS
SELECT p.n, p.page, pg_temp.page_text(p.page) AS text
FROM jsonb_array_elements(ember.render_pages(ARRAY(SELECT id FROM ember.messages WHERE thread_id = 'big')))
    WITH ORDINALITY AS p (page, n);

SELECT ok((SELECT bool_and(ember.estimate_tokens(text) <= 12000) FROM big_pages),
          'every page is at most 12,000 estimated tokens (rows joined by newlines)');
SELECT cmp_ok((SELECT count(*)::int FROM big_pages), '>', 1, 'sixty rows of 1,000 tokens need more than one page');
SELECT is(
    ARRAY(SELECT r FROM big_pages, jsonb_array_elements_text(page) WITH ORDINALITY AS e (r, o) ORDER BY n, o),
    ARRAY(SELECT pg_temp.r(id) FROM ember.messages WHERE thread_id = 'big' ORDER BY seq),
    'every row appears once, in seq order');
SELECT ok((SELECT bool_and(char_length(a.text) + 1 + char_length(b.page ->> 0) > 48000)
           FROM big_pages AS a JOIN big_pages AS b ON b.n = a.n + 1),
          'pages are filled: a page ends only where the next row would not fit');

SELECT ember.append_message('big', 'user', repeat('h', 60000)) AS m_huge \gset
SELECT ok(ember.estimate_tokens(ember.render_pages(ARRAY[:m_huge]::bigint[]) -> 0 ->> 0) <= 12000
          AND ember.render_pages(ARRAY[:m_huge]::bigint[]) -> 0 ->> 0 LIKE '%… [shortened: % of 60,0%]',
          'a single row longer than a page is shortened to fit one page');

UPDATE ember.settings SET value = '100' WHERE key = 'cold_page_tokens';
SELECT ok((SELECT bool_and(ember.estimate_tokens(pg_temp.page_text(p)) <= 100)
           AND count(*) = 2
           FROM jsonb_array_elements(ember.render_pages(ARRAY[:m_user, :m_long, :m_tool]::bigint[])) AS p),
          'the page size follows the cold_page_tokens setting');
SELECT throws_ok(format('SELECT ember.render_pages(ARRAY[%s, %s]::bigint[])', :m_user, :m_vault), 'EM031', NULL,
                 'the pager refuses a row of an isolated thread');
SELECT throws_ok(format('SELECT ember.render_pages(ARRAY[%s]::bigint[], 10)', :m_user), 'EM034', NULL,
                 'a page too small for a row is refused');

SELECT * FROM finish();
ROLLBACK;
