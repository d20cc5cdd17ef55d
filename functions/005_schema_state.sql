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
