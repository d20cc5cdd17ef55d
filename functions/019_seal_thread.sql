-- Sealing a thread from the host: open to isolated, never back (EM015 is the table's rule,
-- 023_table_rules.sql). The seal's consequences (the running shadow run asked to cancel, offers
-- withdrawn, the prefix dropped, the steward's in-flight run told) come from the threads
-- trigger, so this function and a direct UPDATE by the owner behave the same; the function is
-- what ember_host may call, since the host role holds no table privileges.
--
-- Main and the steward's record are refused: both gather content from every other thread, and
-- sealing them would silently take every thread's memory out of the pipelines.
CREATE OR REPLACE FUNCTION ember.seal_thread(p_tenant text, p_thread text)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, ember, pg_temp
AS $$
DECLARE
    t ember.threads;
BEGIN
    t := ember.lock_thread(p_tenant, p_thread);
    IF t.kind IN ('main', 'steward') THEN
        RAISE EXCEPTION 'thread "%" is %: it cannot be sealed', p_thread, t.kind
            USING ERRCODE = 'EM011', HINT = 'seal side and task threads';
    END IF;
    IF t.seal_tier = 'isolated' THEN
        RETURN false;
    END IF;
    UPDATE ember.threads SET seal_tier = 'isolated' WHERE tenant_id = p_tenant AND id = p_thread;
    RETURN true;
END;
$$;
