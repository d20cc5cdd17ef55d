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

-- A tenant named by a caller: NULL, a malformed name and an unknown one are refused by name
-- (EM151), before anything is written. The hot path (append_message) does not ask: its thread
-- lookup by (tenant, thread) finds nothing for an unknown tenant and says so (EM001).
CREATE OR REPLACE FUNCTION ember.require_tenant(p_tenant text)
RETURNS text
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    IF p_tenant IS NULL OR NOT EXISTS (SELECT 1 FROM ember.tenants AS t WHERE t.id = p_tenant) THEN
        RAISE EXCEPTION 'unknown tenant %', coalesce(to_json(p_tenant)::text, 'NULL')
            USING ERRCODE = 'EM151', HINT = 'create it first with ember.create_tenant()';
    END IF;
    RETURN p_tenant;
END;
$$;

-- A tenant, idempotently; what it did, as setup() says it: created, or already there. The name
-- rule is the table's (tenants_id_shape): a letter or digit, then up to 127 of A-Za-z0-9._:@-.
CREATE OR REPLACE FUNCTION ember.create_tenant(p_tenant text, p_now timestamptz DEFAULT clock_timestamp())
RETURNS TABLE (tenant text, changed boolean, detail text)
LANGUAGE plpgsql
AS $$
BEGIN
    PERFORM ember.require_now(p_now);
    IF p_tenant IS NULL OR p_tenant !~ '^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$' THEN
        RAISE EXCEPTION 'tenant name % is not an identifier', coalesce(to_json(p_tenant)::text, 'NULL')
            USING ERRCODE = 'EM151',
                  HINT = 'a letter or digit, then up to 127 letters, digits, ".", "_", ":", "@" or "-"';
    END IF;
    tenant := p_tenant;
    INSERT INTO ember.tenants (id, created_at) VALUES (p_tenant, p_now) ON CONFLICT (id) DO NOTHING;
    changed := FOUND;
    detail := CASE WHEN changed THEN format('tenant "%s" created', p_tenant)
        ELSE format('tenant "%s" exists', p_tenant) END;
    RETURN NEXT;
END;
$$;

-- The one tenant the guard above allows. The functions that do not take the tenant yet pass it
-- to those that do, so every call of this marks a caller still to be given the tenant.
CREATE OR REPLACE FUNCTION ember.sole_tenant()
RETURNS text
LANGUAGE sql STABLE
AS $$
    SELECT t.id FROM ember.tenants AS t ORDER BY t.id LIMIT 1
$$;

-- The functions that took a thread before they took the tenant: their old forms are dropped
-- here, before the files that define the new ones, so no call can reach a form that does not
-- name the tenant. A name leaves this list only when no database can hold its old form. A
-- function that views call is not dropped (the views would go with it) but given a one-tenant
-- form instead, like ember.is_isolated(thread) (010_predicates.sql).
DO $$
DECLARE
    v_fn regprocedure;
BEGIN
    FOR v_fn IN
        SELECT p.oid::regprocedure
        FROM pg_proc AS p
        WHERE p.pronamespace = 'ember'::regnamespace
            AND p.proname = ANY (ARRAY[
                'lock_thread', 'thread_record_conflict', 'create_thread', 'open_generation',
                'current_generation', 'start_generation', 'append_message', 'append_messages',
                'set_thread_status', 'note_prefix', 'turn_started', 'turn_ended', 'waiting_for_user',
                'task_ended', 'ensure_steward_thread', 'append_steward_record', 'set_thread_model',
                'seal_thread', 'shadow_memory_changed', 'shadow_wake_if_ready',
                'setup', 'latest_generation', 'message_source_threads', 'check_carrier_flow',
                'carrier_flow_error', 'copy_messages', 'check_viewer', 'thread_hidden_reason',
                'thread_visible', 'list_threads', 'read_thread', 'search_memory', 'visible_fact',
                'explain_fact_as', 'recent_facts', 'forget_fact',
                'forget_messages', 'forget_thread', 'shadow_backoff_until', 'shadow_thread_readiness',
                'shadow_offer_refresh', 'shadow_offer_unpark', 'shadow_cancel_running', 'shadow_withdraw',
                'shadow_lease_run', 'submit_shadow_run', 'extend_shadow_lease', 'release_shadow_run',
                'shadow_run_cancel_requested', 'hot_cache_shortfall', 'forget_apply', 'forget_facts',
                'forget_proposals', 'forget_stop_work', 'shadow_cost_prediction', 'steward_model',
                'steward_backlog_generations', 'steward_owns_undigested', 'steward_pages',
                'steward_abandon_expired', 'extend_steward_lease', 'steward_run_for_write',
                'steward_add_usage', 'steward_step', 'steward_end_failed',
                'fail_steward_run', 'release_steward_run', 'steward_evidence_error',
                'steward_active_facts', 'steward_insert_fact', 'steward_write_fact',
                'steward_merge_facts', 'steward_retire_fact', 'steward_search_tool', 'steward_finish',
                'steward_apply_tool', 'steward_run_cancel_requested', 'fact_confirmed'
            ])
            AND coalesce(p.proargnames[1], '') <> 'p_tenant'
        UNION ALL
        -- The worker's calls that span tenants keep their arguments and gain a tenant column.
        SELECT p.oid::regprocedure
        FROM pg_proc AS p
        WHERE p.pronamespace = 'ember'::regnamespace
            AND p.proname = ANY (ARRAY['shadow_ready', 'shadow_tick_candidates'])
            AND NOT 'tenant_id' = ANY (coalesce(p.proargnames, '{}'))
    LOOP
        EXECUTE format('DROP ROUTINE %s', v_fn);
    END LOOP;
END;
$$;
