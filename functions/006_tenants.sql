-- Tenants (db/migrations/0051_tenants.sql, docs/tenants.md). Until every function that reads or
-- writes one person's data takes the tenant as its first argument, a database holds one tenant:
-- the functions find rows by thread id, fact id or run id alone, and those are unique per tenant
-- only. A second tenant is refused here, at the one door to the table, rather than let two
-- people's threads of the same name be read as one.
CREATE OR REPLACE FUNCTION ember.tenants_hold_one()
RETURNS trigger
LANGUAGE plpgsql
AS $$
DECLARE
    v_other text;
BEGIN
    -- Two inserts that each see no other tenant would both pass without the lock.
    LOCK TABLE ember.tenants IN SHARE ROW EXCLUSIVE MODE;
    SELECT t.id INTO v_other FROM ember.tenants AS t WHERE t.id <> NEW.id LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'tenant % refused: this database serves tenant % alone', NEW.id, v_other
            USING ERRCODE = 'EM150',
                  HINT = 'the functions do not take a tenant yet; one database per tenant until they do';
    END IF;
    RETURN NEW;
END;
$$;

COMMENT ON FUNCTION ember.tenants_hold_one() IS
'Refuses a second tenant (EM150) while the functions find rows without naming the tenant.';

CREATE OR REPLACE TRIGGER tenants_hold_one BEFORE INSERT ON ember.tenants
FOR EACH ROW EXECUTE FUNCTION ember.tenants_hold_one();
