BEGIN;
SELECT plan(7);

-- Every text, json, jsonb, array, tsvector and vector column of every table in schema ember,
-- searched for the needles: how many rows hold one, per column. Built from the catalog, so a
-- table or column added later is searched too.
CREATE FUNCTION pg_temp.hits(p_needles text []) RETURNS TABLE (col text, n bigint) LANGUAGE plpgsql AS $$
DECLARE
    c record;
    v_n bigint;
BEGIN
    FOR c IN
        SELECT cl.relname, a.attname
        FROM pg_attribute AS a
        JOIN pg_class AS cl ON cl.oid = a.attrelid
        JOIN pg_type AS t ON t.oid = a.atttypid
        WHERE cl.relnamespace = 'ember'::regnamespace AND cl.relkind IN ('r', 'p', 'm')
            AND a.attnum > 0 AND NOT a.attisdropped
            AND (t.typname IN ('text', 'varchar', 'bpchar', 'json', 'jsonb', 'tsvector', 'vector', 'halfvec', '_text')
                 OR t.typcategory = 'S')
    LOOP
        EXECUTE format('SELECT count(*) FROM ember.%I AS x WHERE EXISTS (
                            SELECT 1 FROM unnest($1) AS n WHERE x.%I::text ILIKE ''%%'' || n || ''%%'')',
                       c.relname, c.attname)
        INTO v_n USING p_needles;
        IF v_n > 0 THEN
            col := c.relname || '.' || c.attname;
            n := v_n;
            RETURN NEXT;
        END IF;
    END LOOP;
END;
$$;
-- A marker vector of the embedding column's size (384 once the steward's migration fixes it).
CREATE FUNCTION pg_temp.vec(p_value numeric) RETURNS vector LANGUAGE sql AS $$
    SELECT array_fill(p_value::real, ARRAY[(
        SELECT CASE WHEN a.atttypmod > 0 THEN a.atttypmod ELSE 3 END
        FROM pg_attribute AS a WHERE a.attrelid = 'ember.facts'::regclass AND a.attname = 'embedding'
    )])::vector
$$;
CREATE FUNCTION pg_temp.fact(p_text text, p_kind text, VARIADIC p_ids bigint []) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_id bigint;
BEGIN
    INSERT INTO ember.facts (text, evidence_kind, embedding) VALUES (p_text, p_kind, pg_temp.vec(0.4242))
    RETURNING id INTO v_id;
    INSERT INTO ember.fact_evidence (fact_id, ordinal, message_id)
    SELECT v_id, o, i FROM unnest(p_ids) WITH ORDINALITY AS x (i, o);
    RETURN v_id;
END;
$$;

SELECT ember.create_thread('default', 'main', 'main');
SELECT ember.create_thread('default', 's1', 'side', 'Topic');
SELECT ember.create_thread('default', 's2', 'side', 'Other');
SELECT ember.ensure_steward_thread('default');

-- The marker appears in the row to forget, in what was derived from it, and in the steward's
-- record of deriving it; the control row in s2 must survive, to show the search finds things.
SELECT ember.append_message('default', 's1', 'user', 'My locker code is zqxmarker4242, remember it.') AS m_secret \gset
SELECT ember.append_message('default', 
    's1', 'assistant', 'Noted zqxmarker4242.', NULL,
    '[{"type":"text","text":"Noted zqxmarker4242."},{"type":"tool_use","id":"toolu_zqxmarker4242","name":"zqxmarker4242_tool","input":{"code":"zqxmarker4242"}}]'
) AS m_echo \gset
SELECT ember.append_message('default', 's1', 'tool_result', 'stored zqxmarker4242', NULL, NULL, 'toolu_zqxmarker4242',
                            'zqxmarker4242_tool', 'ok') AS m_tool \gset
SELECT ember.append_message('default', 's2', 'user', 'Control row: keepmarker77 stays.') AS m_control \gset
SELECT ember.copy_messages('default', 's1', ARRAY[:m_secret], 's2') AS copies \gset
SELECT ember.note_prefix('default', 's1', '{"messages":[{"role":"user","content":"zqxmarker4242"}]}', '{"content":"zqxmarker4242"}')
    IS NULL AS noted \gset

-- Facts derived from it: one written, one written then merged into another, one the steward
-- retired with a reason that quotes it; and an unrelated control fact.
SELECT pg_temp.fact('Locker code is zqxmarker4242', 'user-stated', :m_secret) AS f_code \gset
SELECT pg_temp.fact('User keeps a locker (zqxmarker4242)', 'user-stated', :m_secret) AS f_locker \gset
SELECT pg_temp.fact('Locker zqxmarker4242 at the gym', 'user-stated', :m_secret) AS f_merged \gset
SELECT pg_temp.fact('Old code zqxmarker4242', 'user-stated', :m_secret) AS f_old \gset
SELECT pg_temp.fact('Control fact keepmarker77', 'user-stated', :m_control) AS f_control \gset
UPDATE ember.facts SET embedding = pg_temp.vec(0.7777) WHERE id = :f_control;
UPDATE ember.facts SET status = 'merged', merged_into = :f_merged WHERE id = :f_locker;
UPDATE ember.facts SET status = 'retired', retired_reason = 'superseded: zqxmarker4242 changed' WHERE id = :f_old;

-- The steward's record: its write_fact call (in the raw blocks), a search result quoting the
-- fact, and its reasoning quoting the user.
SELECT ember.append_steward_record('default', 
    'assistant', 'The user said: My locker code is zqxmarker4242, remember it.', NULL,
    json_build_array(json_build_object(
        'type', 'tool_use', 'id', 'toolu_w1', 'name', 'write_fact',
        'input', json_build_object('text', 'Locker code is zqxmarker4242', 'evidence_kind', 'user-stated',
                                   'evidence', json_build_array(json_build_object('message_id', :m_secret)))
    ))
) AS s_call \gset
SELECT ember.append_steward_record('default', 'tool_result', 'fact ' || :f_code || ' written', NULL, NULL,
                            'toolu_w1', 'write_fact', 'ok') AS s_written \gset
SELECT ember.append_steward_record('default', 'tool_result',
                            format('fact %s [user-stated]: Locker zqxmarker4242 at the gym', :f_merged),
                            NULL, NULL, 'toolu_s1', 'search_memory', 'ok') AS s_search \gset
SELECT ember.append_steward_record('default', 'tool_result', 'fact 999 [user-stated]: Control fact keepmarker77',
                            NULL, NULL, 'toolu_s2', 'search_memory', 'ok') AS s_control \gset

-- A shadow proposal that quotes it.
INSERT INTO ember.shadow_runs (
    thread_id, generation_id, path, model, reason, from_seq, through_seq, started_at, worker,
    lease_token, lease_expires_at, status, finished_at
) SELECT 's1', g.id, 'cold', 'claude-haiku-4-5', 'idle-or-ended', 0, 0, '2030-01-01 10:00+00', 'w',
         gen_random_uuid(), '2030-01-01 10:10+00', 'completed', '2030-01-01 10:01+00'
FROM ember.generations AS g WHERE g.thread_id = 's1'
RETURNING id AS run_s1 \gset
INSERT INTO ember.shadow_proposals (run_id, thread_id, generation_id, ordinal, text, evidence_kind, evidence,
                                    embedding, created_at)
SELECT :run_s1, 's1', g.id, 1, 'Locker code zqxmarker4242', 'user-stated',
    jsonb_build_array(jsonb_build_object('message_id', :m_secret)), pg_temp.vec(0.4242), '2030-01-01 10:01+00'
FROM ember.generations AS g WHERE g.thread_id = 's1';

SELECT isnt_empty('SELECT * FROM pg_temp.hits(ARRAY[''zqxmarker4242'', ''0.4242''])',
                  'before forgetting, the search finds the marker');

SELECT ember.forget_messages('default', ARRAY[:m_secret, :m_echo, :m_tool], 'the user asked') AS r \gset

SELECT is_empty('SELECT * FROM pg_temp.hits(ARRAY[''zqxmarker4242'', ''0.4242''])',
                'after forgetting, no text, json, jsonb, array, tsvector or vector column of schema ember holds the '
                'marker: not messages, copies, prefixes, facts, history, proposals, nor the steward''s record');
SELECT ok((SELECT array_agg(col) FROM pg_temp.hits(ARRAY['keepmarker77'])) @> ARRAY['facts.text', 'messages.content'],
          'what did not derive from the forgotten rows survives (the search can find things)');
SELECT is((SELECT count(*)::int FROM ember.messages WHERE id IN (:s_written, :s_control) AND erased_by IS NULL), 2,
          'the steward''s rows that quote nothing forgotten are kept');

-- The structural redactions the steward's record gets, by line.
SELECT is(ember.forget_redact_lines(E'# header\nm:5 user(human): secret\nm:6 user(human): kept\nm:50 x', ARRAY[5, 7]::bigint [],
                                    '^m:(\d+) ', 'm:'),
          E'# header\nm:5 [forgotten]\nm:6 user(human): kept\nm:50 x',
          'a backlog page loses exactly the lines of the erased rows');
SELECT is(ember.forget_redact_lines(E'fact 3 [user-stated]: gone\nfact 4 [user-stated]: kept', ARRAY[3]::bigint [],
                                    '^fact (\d+) \[', 'fact '),
          E'fact 3 [forgotten]\nfact 4 [user-stated]: kept', 'a search result loses exactly the forgotten facts');
SELECT is(ember.forget_redact_blocks('[{"type":"text","text":"m:5 user(human): secret\nm:6 a"},{"type":"image"}]'::json,
                                     ARRAY[5]::bigint [], '^m:(\d+) ', 'm:')::jsonb,
          '[{"type":"text","text":"m:5 [forgotten]\nm:6 a"},{"type":"image"}]'::jsonb,
          'the raw blocks of a page are redacted the same way');

SELECT * FROM finish();
ROLLBACK;
