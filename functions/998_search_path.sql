-- Every function and procedure in schema ember runs with a pinned search_path, whoever calls it.
-- A generic pass rather than a SET clause in each definition: it covers functions added by any
-- file, including ones written after this one, and a definition that forgets the clause cannot
-- slip through (pgtap/990_roles.sql checks that none is left unpinned). CREATE OR REPLACE resets
-- a function's settings, so the pass runs after every other file, on every migrate.
--
-- pg_temp is named last so temporary objects are never found first (left out, PostgreSQL would
-- search it first for tables). Functions that belong to an extension installed in ember are the
-- extension's, not ours, and are left as their script made them. pgvector's schema (usually
-- public, where the DBA created it and where the host's and worker's own SQL finds `vector`)
-- joins the path after ember so `vector` and its operators resolve; docs/operations.md asks that
-- no untrusted role may create objects there (PostgreSQL 15 and later grant CREATE on public to
-- no one but its owner), and pgtap/990_roles.sql checks that neither Ember role can.
DO $$
DECLARE
    v_path text := 'pg_catalog, ember, pg_temp';
    v_vector name;
    v_fn regprocedure;
BEGIN
    SELECT n.nspname INTO v_vector
    FROM pg_extension AS e
    INNER JOIN pg_namespace AS n ON e.extnamespace = n.oid
    WHERE e.extname = 'vector';
    IF v_vector IS NOT NULL AND v_vector NOT IN ('pg_catalog', 'ember') THEN
        v_path := format('pg_catalog, ember, %I, pg_temp', v_vector);
    END IF;
    FOR v_fn IN
        SELECT p.oid::regprocedure
        FROM pg_proc AS p
        WHERE p.pronamespace = 'ember'::regnamespace
            AND p.prokind IN ('f', 'p')
            AND NOT EXISTS (
                SELECT 1 FROM pg_depend AS d
                WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
            )
            AND NOT coalesce('search_path=' || v_path = ANY(p.proconfig), false)
    LOOP
        EXECUTE format('ALTER ROUTINE %s SET search_path = %s', v_fn, v_path);
    END LOOP;
END;
$$;
