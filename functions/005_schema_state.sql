-- Which migrations and which function files this database runs, for the start-up check every
-- command makes before it reads or writes (ember migrate --status, and ember compare, explain,
-- import, export, worker through ember/commands/base.py). The roles read no table, so a check
-- reading ember.schema_migrations directly refused ember_analyst (and any role but the owner)
-- before the command itself could run; this function shows them names and digests only.
-- kind is 'migration' (name, sha256 of the file applied) or 'functions' (the digest of the
-- whole functions/ set last applied; name NULL).
CREATE OR REPLACE FUNCTION ember.schema_state()
RETURNS TABLE (kind text, name text, sha256 text)
LANGUAGE sql STABLE
AS $$
    SELECT 'migration'::text, m.name, m.sha256 FROM ember.schema_migrations AS m
    UNION ALL
    SELECT 'functions', NULL, f.sha256 FROM ember.schema_functions AS f
$$;

-- A function whose result changed cannot be replaced in place (CREATE OR REPLACE keeps the old
-- result type), so it is dropped, with whatever stands on it (a comparison view of the same name),
-- when its current result lacks p_expect (a column and its type, or a row type's name, as
-- pg_get_function_result prints them); its file then creates it anew and grants it again. Once the
-- definitions agree this does nothing, so a migrate that changes nothing drops nothing. Comparing
-- whole result texts instead would drop on any cosmetic difference of the catalog's spelling.
CREATE OR REPLACE FUNCTION ember.drop_if_result_changed(p_signature text, p_expect text)
RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
    v_fn regprocedure := to_regprocedure(p_signature);
BEGIN
    IF v_fn IS NOT NULL AND strpos(pg_get_function_result(v_fn), p_expect) = 0 THEN
        EXECUTE format('DROP FUNCTION %s CASCADE', v_fn);
    END IF;
END;
$$;

-- Its name until the comparison stopped being its only user.
DROP FUNCTION IF EXISTS ember.comparison_drop_if_changed(text, text);
