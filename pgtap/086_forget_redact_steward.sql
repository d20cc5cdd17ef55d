BEGIN;
SELECT plan(12);

-- The steward's record, as its wakes leave it: a backlog page per wake (one rendered line per
-- row read), the model's turns with write_fact calls, their results, and search results.
CREATE FUNCTION pg_temp.wake(p_read bigint [], p_status text DEFAULT 'completed') RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_gen uuid := ember.start_generation('default', 'memory-steward');
    v_page text;
    v_run bigint;
BEGIN
    SELECT string_agg(ember.render_row(m), E'\n' ORDER BY m.seq) INTO v_page
    FROM ember.messages AS m WHERE m.id = ANY(p_read);
    v_page := coalesce(v_page, '(nothing)');
    PERFORM ember.append_steward_record('default', 'user', 'Backlog to digest.' || E'\n\n' || v_page, 'system',
                                 json_build_array(json_build_object('type', 'text', 'text', 'Backlog to digest.'),
                                                  json_build_object('type', 'text', 'text', v_page)));
    INSERT INTO ember.steward_runs (
        generation_id, model, status, read_message_ids, read_generations, read_tokens, started_at,
        finished_at, worker, lease_token, lease_expires_at
    ) VALUES (
        v_gen, 'claude-haiku-4-5', p_status, p_read,
        ARRAY(SELECT DISTINCT generation_id FROM ember.messages WHERE id = ANY(p_read)), 0, clock_timestamp(),
        CASE WHEN p_status <> 'running' THEN clock_timestamp() END, 'w', gen_random_uuid(),
        clock_timestamp() + interval '10 minutes'
    ) RETURNING id INTO v_run;
    RETURN v_run;
END;
$$;
CREATE FUNCTION pg_temp.fact(p_text text, p_run bigint, p_message bigint) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    v_id bigint;
BEGIN
    INSERT INTO ember.facts (text, evidence_kind, run_id) VALUES (p_text, 'user-stated', p_run) RETURNING id INTO v_id;
    INSERT INTO ember.fact_evidence (fact_id, ordinal, message_id) VALUES (v_id, 1, p_message);
    PERFORM ember.append_steward_record('default', 'assistant', 'Writing it.', 'agent',
        json_build_array(json_build_object('type', 'tool_use', 'id', 'toolu_' || v_id, 'name', 'write_fact',
                                           'input', json_build_object('text', p_text, 'evidence_kind', 'user-stated'))));
    PERFORM ember.append_steward_record('default', 'tool_result', 'fact ' || v_id || ' written', 'system', NULL,
                                 'toolu_' || v_id, 'write_fact', 'ok');
    RETURN v_id;
END;
$$;

SELECT ember.create_thread('default', 'main', 'main');
SELECT ember.ensure_steward_thread('default');
SELECT ember.create_thread('default', 's1', 'side', 'Topic');
SELECT ember.append_message('default', 's1', 'user', 'My PIN is plumvault3131.') AS m_secret \gset
SELECT ember.append_message('default', 's1', 'user', 'I cycle to work.') AS m_other \gset

SELECT pg_temp.wake(ARRAY[:m_secret, :m_other]) AS run1 \gset
SELECT pg_temp.fact('PIN is plumvault3131', :run1, :m_secret) AS f_pin \gset
SELECT pg_temp.fact('Cycles to work', :run1, :m_other) AS f_cycle \gset
-- A later wake searched memory and got both facts back.
SELECT pg_temp.wake(ARRAY[]::bigint []) AS run2 \gset
SELECT ember.append_steward_record('default', 'tool_result',
    format(E'fact %s [user-stated]: PIN is plumvault3131\nfact %s [user-stated]: Cycles to work', :f_pin, :f_cycle),
    'system', NULL, 'toolu_s', 'search_memory', 'ok') AS s_search \gset
-- A wake still running has read the row, and retires a fact: history names it.
SELECT ember.append_message('default', 's1', 'user', 'I also swim.') AS m_swim \gset
SELECT pg_temp.wake(ARRAY[:m_secret, :m_swim], 'running') AS run3 \gset
UPDATE ember.facts SET status = 'retired', retired_reason = 'superseded' WHERE id = :f_cycle;
SELECT is((SELECT run_id FROM ember.fact_history WHERE fact_id = :f_cycle AND change = 'retired'), :run3::bigint,
          'a retirement during a wake is recorded with the running steward run');
UPDATE ember.facts SET status = 'active', retired_reason = NULL WHERE id = :f_cycle;

SELECT is(ember.explain_fact(:f_cycle) -> 'run' ->> 'model', 'claude-haiku-4-5', 'explain_fact names the writing run''s model');

SELECT ember.forget_messages('default', ARRAY[:m_secret], 'asked') AS r \gset

SELECT is((SELECT count(*)::int FROM ember.messages WHERE thread_id = 'memory-steward'
           AND (content LIKE '%plumvault3131%' OR blocks::text LIKE '%plumvault3131%')), 0,
          'nothing in the steward''s record quotes the forgotten row or fact');
SELECT matches((SELECT content FROM ember.messages WHERE thread_id = 'memory-steward' AND role = 'user'
                AND author = 'system' AND generation_id = (SELECT generation_id FROM ember.steward_runs WHERE id = :run1)),
               E'\nm:' || :m_secret || E' \\[forgotten\\]\n', 'the erased row''s line in the page is a tombstone');
SELECT matches((SELECT content FROM ember.messages WHERE thread_id = 'memory-steward' AND role = 'user'
                AND author = 'system' AND generation_id = (SELECT generation_id FROM ember.steward_runs WHERE id = :run1)),
               'I cycle to work\.', 'the other rows of the page are kept');
SELECT ok((SELECT blocks::text FROM ember.messages WHERE thread_id = 'memory-steward' AND role = 'user' AND author = 'system'
           AND generation_id = (SELECT generation_id FROM ember.steward_runs WHERE id = :run1)) LIKE '%I cycle to work%',
          'and so are they in the raw blocks');
SELECT is((SELECT content FROM ember.messages WHERE id = :s_search),
          format(E'fact %s [forgotten]\nfact %s [user-stated]: Cycles to work', :f_pin, :f_cycle),
          'a search result loses the forgotten fact''s line only');
SELECT ok((SELECT blocks::text FROM ember.messages WHERE thread_id = 'memory-steward' AND role = 'assistant'
           AND blocks::text LIKE '%toolu_' || :f_cycle || '%') LIKE '%Cycles to work%',
          'the write_fact call of a kept fact is kept');
SELECT ok((:'r'::jsonb -> 'steward_rows_redacted') @> jsonb_build_array(:s_search), 'the answer lists the redacted rows');
SELECT is(:'r'::jsonb -> 'steward_runs_cancelled', jsonb_build_array(:run3), 'a running wake that read the row is cancelled');
SELECT is((SELECT status FROM ember.steward_runs WHERE id = :run3), 'failed', 'it ends as failed');
SELECT is((SELECT status FROM ember.steward_runs WHERE id = :run1), 'completed', 'finished wakes are left as they were');

SELECT * FROM finish();
ROLLBACK;
