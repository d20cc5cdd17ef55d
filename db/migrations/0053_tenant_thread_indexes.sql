-- Thread ids are unique within a tenant, not across tenants (migration 0051): every tenant has a
-- `main` and a `memory-steward`, and two people may both have a `trip`. An index led by a thread
-- column therefore gathers the same-named threads of every tenant under one key, and a lookup of
-- one tenant's `main` would walk every tenant's. Migration 0051 put tenant_id first in the
-- primary and unique keys; this does the same for the other indexes led by a thread column, so
-- each lookup by (tenant, thread) is one index descent however many tenants there are.
DO $migration$
DECLARE
    c record;
BEGIN
    FOR c IN
        SELECT
            i.indexrelid::regclass AS index_name,
            pg_get_indexdef(i.indexrelid) AS def
        FROM pg_index AS i
        INNER JOIN pg_class AS t ON t.oid = i.indrelid
        INNER JOIN pg_attribute AS a ON a.attrelid = t.oid AND a.attnum = i.indkey[0]
        WHERE t.relnamespace = 'ember'::regnamespace
            AND NOT i.indisunique
            AND a.attname IN ('thread_id', 'source_thread', 'from_thread')
            AND EXISTS (
                SELECT 1 FROM pg_attribute AS ta
                WHERE ta.attrelid = t.oid AND ta.attname = 'tenant_id' AND NOT ta.attisdropped
            )
        ORDER BY 1
    LOOP
        EXECUTE format('DROP INDEX %s', c.index_name);
        EXECUTE regexp_replace(c.def, ' USING btree \(', ' USING btree (tenant_id, ');
    END LOOP;
END;
$migration$;

-- The steward's work is found per tenant (functions/050_steward_claim.sql): the generations with
-- undigested rows it reads, by tenant, so one tenant's check is one probe of each.
DROP INDEX ember.generation_progress_steward_ended;
DROP INDEX ember.generation_progress_steward_idle;
CREATE INDEX generation_progress_steward_ended ON ember.generation_progress (tenant_id, generation_id)
WHERE undigested > 0 AND steward_reads AND ended;
CREATE INDEX generation_progress_steward_idle ON ember.generation_progress (tenant_id, last_message_at)
WHERE undigested > 0 AND steward_reads;
