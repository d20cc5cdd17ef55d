-- pgvector moves out of `public` into `ember` when nothing else in the database uses it.
-- Every Ember function pins search_path to pg_catalog, ember, pg_temp (functions/998); a schema
-- on that path that other roles can create objects in would let them plant a type-exact
-- overload that beats a built-in inside Ember's functions. Keeping `public` off the path is the
-- only way that holds on servers where `public` is still writable (before PostgreSQL 15, or
-- where a DBA granted CREATE). When another schema's objects already use `vector`, moving the
-- extension would change them under their owners, so it stays put and functions/998 adds its
-- schema to the pinned path (docs/operations.md says what that asks of the DBA).
DO $$
BEGIN
    IF EXISTS (
        SELECT 1 FROM pg_extension AS e
        WHERE e.extname = 'vector' AND e.extnamespace = 'public'::regnamespace
            -- Only the extension's owner (or a superuser) may move it; a migrating role that
            -- is neither leaves it in place.
            AND pg_has_role(current_user, e.extowner, 'USAGE')
    ) AND NOT EXISTS (
        SELECT 1
        FROM pg_attribute AS a
        INNER JOIN pg_class AS c ON a.attrelid = c.oid
        INNER JOIN pg_type AS t ON a.atttypid = t.oid
        WHERE t.typname IN ('vector', 'halfvec', 'sparsevec')
            AND t.typnamespace = 'public'::regnamespace
            AND c.relnamespace <> 'ember'::regnamespace
            AND NOT a.attisdropped
    ) THEN
        ALTER EXTENSION vector SET SCHEMA ember;
    END IF;
END;
$$;
