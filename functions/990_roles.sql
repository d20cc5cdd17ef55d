-- The roles a DBA grants to login roles (docs/operations.md): ember_host for the agent runtime,
-- ember_worker for the sidecar worker. NOLOGIN: they carry privileges, never a password.
-- ember_analyst (read-only comparison views) is created with its grants in the comparison files.
-- Roles are cluster-wide, so two databases migrating at once can race to create one; the loser's
-- duplicate is harmless and swallowed. A migrating role without CREATEROLE gets a message saying
-- which role a DBA must create, rather than a bare permission error.
DO $$
DECLARE
    v_role text;
BEGIN
    FOREACH v_role IN ARRAY ARRAY['ember_host', 'ember_worker'] LOOP
        CONTINUE WHEN EXISTS (SELECT 1 FROM pg_roles WHERE rolname = v_role);
        BEGIN
            EXECUTE format('CREATE ROLE %I NOLOGIN', v_role);
        EXCEPTION
            WHEN duplicate_object OR unique_violation THEN
                NULL;
            WHEN insufficient_privilege THEN
                RAISE EXCEPTION 'role % does not exist and this migrating role cannot create it', v_role
                    USING HINT = format('as a DBA: CREATE ROLE %I NOLOGIN; then migrate again', v_role);
        END;
    END LOOP;
END;
$$;
