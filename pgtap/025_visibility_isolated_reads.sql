BEGIN;
SELECT plan(9);

-- Every function a host, viewer or analyst may call is walked from the catalog and called with
-- arguments made from its parameters' names and types (the viewer an automated one, main); none
-- may return the text of a fact
-- derived from a thread sealed since, or the rows of that thread. A function added later is
-- walked without being listed here.

SELECT ember.create_thread('default', 'main', 'main', p_now => '2026-03-01 08:00Z');
SELECT ember.ensure_steward_thread('default', '2026-03-01 08:00Z');
SELECT ember.create_thread('default', 'diary', 'side', 'Diary', p_now => '2026-03-01 08:00Z');
SELECT ember.append_message('default', 'diary', 'user', 'Sealmarker: I am seeing a therapist.', p_now => '2026-03-01 09:00Z') AS m_secret \gset
SELECT ember.create_thread('default', 'plain', 'side', 'Plain', p_now => '2026-03-01 08:00Z');
SELECT ember.append_message('default', 'plain', 'user', 'I like green tea.', p_now => '2026-03-01 09:00Z') AS m_tea \gset

-- source_threads as the steward's write_fact records them: the threads the evidence came from.
INSERT INTO ember.facts (text, evidence_kind, source_threads, created_at, updated_at)
VALUES ('Sealmarker: the user sees a therapist.', 'user-stated', '{diary}', '2026-03-01 10:00Z', '2026-03-01 10:00Z')
RETURNING id AS f_secret \gset
INSERT INTO ember.fact_evidence (fact_id, ordinal, message_id) VALUES (:f_secret, 1, :m_secret);
INSERT INTO ember.facts (text, evidence_kind, source_threads, created_at, updated_at)
VALUES ('The user likes green tea.', 'user-stated', '{plain}', '2026-03-01 10:00Z', '2026-03-01 10:00Z')
RETURNING id AS f_tea \gset
INSERT INTO ember.fact_evidence (fact_id, ordinal, message_id) VALUES (:f_tea, 1, :m_tea);

SELECT is((SELECT count(*)::int FROM ember.facts_as_of('2026-03-02', 'recorded') WHERE text LIKE 'Sealmarker%'), 1,
          'before the seal, the fact is in the recorded history');
SELECT ember.seal_thread('default', 'diary');

SELECT is((SELECT array_agg(text) FROM ember.facts_as_of('2026-03-02', 'recorded')), ARRAY['The user likes green tea.'],
          'facts_as_of (recorded) leaves out a fact derived from a thread sealed since');
SELECT is((SELECT array_agg(text) FROM ember.facts_as_of('2026-03-01 09:30Z', 'valid')), ARRAY['The user likes green tea.'],
          'and so does facts_as_of (valid)');
SELECT throws_ok(format('SELECT ember.explain_fact(%s)', :f_secret), 'EM095', NULL,
                 'explain_fact refuses it by name');
SELECT lives_ok(format('SELECT ember.explain_fact(%s)', :f_tea), 'and explains the others');

-- The walk. One call per function, with its side effects undone (the subtransaction is rolled
-- back on purpose once the answer is read). 'leaks' when the answer holds the marker.
CREATE FUNCTION pg_temp.argument(p_name text, p_type regtype, p_fact bigint) RETURNS text LANGUAGE sql AS $$
    SELECT CASE
        -- An automated reader (main); the person reads their own isolated thread, but no model does.
        WHEN p_name IN ('p_viewer') THEN quote_literal('main')
        WHEN p_name = 'p_tenant' THEN quote_literal('default')
        WHEN p_name IN ('p_thread', 'p_from', 'p_to', 'p_id') AND p_type = 'text'::regtype THEN quote_literal('diary')
        WHEN p_name IN ('p_query', 'p_text') THEN quote_literal('Sealmarker therapist')
        WHEN p_name = 'p_axis' THEN quote_literal('recorded')
        WHEN p_type IN ('bigint'::regtype, 'integer'::regtype) AND p_name ~ '(fact|^p_id$)' THEN p_fact::text
        WHEN p_type IN ('integer'::regtype, 'bigint'::regtype) THEN '100'
        WHEN p_type = 'bigint[]'::regtype THEN format('ARRAY[%s]::bigint[]', p_fact)
        WHEN p_type = 'timestamptz'::regtype AND p_name = 'p_since' THEN quote_literal('2026-01-01') || '::timestamptz'
        WHEN p_type = 'timestamptz'::regtype AND p_name = 'p_now' THEN 'clock_timestamp()'
        WHEN p_type = 'timestamptz'::regtype THEN quote_literal('2026-03-02') || '::timestamptz'
        WHEN p_type = 'boolean'::regtype THEN 'true'
        WHEN p_type IN ('json'::regtype, 'jsonb'::regtype) THEN quote_literal('{}') || '::' || p_type::text
        WHEN p_type = 'text[]'::regtype THEN quote_literal('{}') || '::text[]'
        WHEN p_type = 'uuid'::regtype THEN format('ember.latest_generation(%L, %L)', 'default', 'diary')
        WHEN p_type = 'uuid[]'::regtype THEN format('ARRAY[ember.latest_generation(%L, %L)]', 'default', 'diary')
        WHEN p_type = 'text'::regtype THEN quote_literal('diary')
        ELSE 'NULL::' || p_type::text
    END
$$;
CREATE FUNCTION pg_temp.walk(p_fact bigint, p_marker text)
RETURNS TABLE (fn text, outcome text) LANGUAGE plpgsql AS $$
DECLARE
    r record;
    v_args text;
    v_out text;
BEGIN
    FOR r IN
        SELECT p.oid, p.oid::regprocedure::text AS sig, p.proname,
            coalesce(p.proargnames, ARRAY[]::text[]) AS names, ARRAY(SELECT unnest(p.proargtypes)) AS types,
            p.pronargs, p.pronargdefaults
        FROM pg_proc AS p
        WHERE p.pronamespace = 'ember'::regnamespace AND p.prokind = 'f'
          AND EXISTS (
              SELECT 1 FROM pg_roles AS g
              WHERE g.rolname IN ('ember_host', 'ember_viewer', 'ember_analyst')
                AND has_function_privilege(g.oid, p.oid, 'EXECUTE'))
        ORDER BY 2
    LOOP
        -- Named arguments for every input parameter (in parameters come first in proargnames).
        SELECT string_agg(format('%s => %s', r.names[i], pg_temp.argument(r.names[i], r.types[i], p_fact)), ', ' ORDER BY i)
        INTO v_args
        FROM generate_series(1, r.pronargs) AS i;
        fn := r.sig;
        BEGIN
            EXECUTE format('SELECT string_agg(x::text, E''\n'') FROM ember.%I(%s) AS x', r.proname, coalesce(v_args, ''))
            INTO v_out;
            outcome := CASE WHEN strpos(coalesce(v_out, ''), p_marker) > 0 THEN 'leaks' ELSE 'holds' END;
            RAISE EXCEPTION USING ERRCODE = 'P0001', MESSAGE = 'undo ' || outcome;
        EXCEPTION WHEN OTHERS THEN
            outcome := CASE WHEN SQLERRM LIKE 'undo %' THEN substr(SQLERRM, 6) ELSE 'refused ' || SQLSTATE END;
        END;
        RETURN NEXT;
    END LOOP;
END;
$$;

CREATE TEMP TABLE walked AS SELECT * FROM pg_temp.walk(:f_secret, 'Sealmarker');
SELECT cmp_ok((SELECT count(*)::int FROM walked), '>=', 60, 'every function granted to a reading role is walked');
SELECT cmp_ok((SELECT count(*)::int FROM walked WHERE outcome = 'holds'), '>=', 40,
              'most of them answer the generated call (a refusal is no leak either)');
SELECT is(ARRAY(SELECT fn FROM walked WHERE outcome = 'leaks' ORDER BY fn), '{}'::text[],
          'none returns the sealed thread''s fact or rows');

-- The walk finds a new function that leaks, without being told of it.
CREATE FUNCTION ember.leaky_recent_facts(p_limit integer DEFAULT 10) RETURNS SETOF text
LANGUAGE sql STABLE AS $$ SELECT text FROM ember.facts ORDER BY id LIMIT p_limit $$;
GRANT EXECUTE ON FUNCTION ember.leaky_recent_facts(integer) TO ember_host;
SELECT is(ARRAY(SELECT fn FROM pg_temp.walk(:f_secret, 'Sealmarker') WHERE outcome = 'leaks'),
          ARRAY['ember.leaky_recent_facts(integer)'], 'a granted function that returns the fact is found');
SELECT diag(format('%s functions walked: %s answered, %s refused the generated call', count(*),
                   count(*) FILTER (WHERE outcome = 'holds'), count(*) FILTER (WHERE outcome LIKE 'refused%')))
FROM walked;

SELECT * FROM finish();
ROLLBACK;
