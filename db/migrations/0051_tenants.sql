-- Tenants (issue 40): one deployment holds many people apart. A tenant is one person (or one
-- account) of the product that runs Ember; every table that holds one person's data carries
-- tenant_id, first in every primary and unique key and in every foreign key between such tables,
-- so that two people may both have a thread `trip`, and so that a Citus cluster can keep each
-- person's rows together on one node (docs/citus.md). Small global tables (settings, categories,
-- models and their price tiers, tools, identity documents, bookkeeping) stay global
-- (docs/tenants.md says why for each).
--
-- The rows a database already holds become one tenant: `default`, or the name given to
-- `ember migrate --tenant NAME` (read here from the session setting ember.migrate_tenant). The
-- migration runs in one transaction: interrupted, it leaves nothing and runs again from the start.
--
-- Until the functions take the tenant as their first argument, tenant_id is filled by its column
-- default, the one tenant of the upgrade, and the database holds exactly that one tenant
-- (ember.tenants_hold_one(), functions/006_tenants.sql): a function that does not yet name the
-- tenant can then not read or write another person's rows. The change that makes the API take
-- the tenant drops both.

CREATE TABLE ember.tenants (
    id text PRIMARY KEY
    CONSTRAINT tenants_id_shape CHECK (id ~ '^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$'),
    created_at timestamptz NOT NULL DEFAULT now()
);

COMMENT ON TABLE ember.tenants IS
'one row per person (or account) served by this deployment; every table of one person''s data '
'carries tenant_id, first in its keys';

DO $migration$
DECLARE
    v_tenant text := coalesce(nullif(current_setting('ember.migrate_tenant', TRUE), ''), 'default');
    v_tables text[] := ARRAY[
        'threads', 'generations', 'messages', 'generation_sources', 'generation_progress',
        'generation_changes', 'identity_segments', 'shadow_cursors', 'shadow_thread_state',
        'shadow_signals', 'shadow_offers', 'shadow_prefixes', 'shadow_runs', 'shadow_proposals',
        'forgettings', 'cutovers', 'cutover_promotions', 'steward_runs', 'thread_events',
        'main_actions', 'facts', 'fact_evidence', 'fact_history', 'fact_confirmations',
        'consolidation_runs', 'consolidation_actions', 'judge_runs', 'judged_pairs',
        'import_files', 'eval_runs', 'eval_conversations', 'eval_sessions', 'eval_turns',
        'eval_questions', 'eval_answers', 'eval_context', 'eval_calls', 'eval_promotions'
    ];
    v_oids oid[];
    c record;
    v_table text;
    v_fks text[] := '{}';
    v_fk text;
BEGIN
    IF v_tenant !~ '^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$' THEN
        RAISE EXCEPTION 'tenant name % is not a tenant id', quote_literal(v_tenant)
            USING ERRCODE = '22023',
                  HINT = 'a letter or digit, then up to 127 letters, digits or . _ : @ -';
    END IF;
    INSERT INTO ember.tenants (id) VALUES (v_tenant);

    SELECT array_agg(format('ember.%I', t)::regclass::oid) INTO v_oids FROM unnest(v_tables) AS t;

    -- The column, filled for every existing row by the default (no table rewrite).
    FOREACH v_table IN ARRAY v_tables LOOP
        EXECUTE format(
            'ALTER TABLE ember.%I ADD COLUMN tenant_id text NOT NULL DEFAULT %L', v_table, v_tenant
        );
    END LOOP;

    -- Foreign keys between tenant tables go first (they depend on the keys they point to), and
    -- come back with tenant_id leading on both sides, with their actions unchanged.
    FOR c IN
        SELECT con.conname, con.conrelid::regclass AS tbl, pg_get_constraintdef(con.oid) AS def
        FROM pg_constraint AS con
        WHERE con.contype = 'f' AND con.conrelid = ANY (v_oids) AND con.confrelid = ANY (v_oids)
        ORDER BY con.conrelid::regclass::text, con.conname
    LOOP
        EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', c.tbl, c.conname);
        v_fks := v_fks || format(
            'ALTER TABLE %s ADD CONSTRAINT %I %s', c.tbl, c.conname,
            regexp_replace(
                regexp_replace(c.def, '^FOREIGN KEY \(', 'FOREIGN KEY (tenant_id, '),
                ' REFERENCES ([^(]+)\(', ' REFERENCES \1(tenant_id, '
            )
        );
    END LOOP;

    -- Primary and unique keys, tenant_id first.
    FOR c IN
        SELECT con.conname, con.conrelid::regclass AS tbl, pg_get_constraintdef(con.oid) AS def
        FROM pg_constraint AS con
        WHERE con.contype IN ('p', 'u') AND con.conrelid = ANY (v_oids)
        ORDER BY con.conrelid::regclass::text, con.conname
    LOOP
        EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', c.tbl, c.conname);
        EXECUTE format(
            'ALTER TABLE %s ADD CONSTRAINT %I %s', c.tbl, c.conname,
            regexp_replace(c.def, '^(PRIMARY KEY|UNIQUE) \(', '\1 (tenant_id, ')
        );
    END LOOP;

    -- Unique indexes that are not constraints (the partial "one running per thread" kind): one
    -- per tenant.
    FOR c IN
        SELECT ic.relname AS name, pg_get_indexdef(i.indexrelid) AS def
        FROM pg_index AS i
        JOIN pg_class AS ic ON ic.oid = i.indexrelid
        WHERE i.indisunique AND i.indrelid = ANY (v_oids)
          AND NOT EXISTS (SELECT 1 FROM pg_constraint AS k WHERE k.conindid = i.indexrelid)
        ORDER BY ic.relname
    LOOP
        EXECUTE format('DROP INDEX ember.%I', c.name);
        EXECUTE regexp_replace(
            regexp_replace(c.def, ' USING btree \(\(true\)\)', ' USING btree (tenant_id)'),
            ' USING btree \((?!tenant_id\M)', ' USING btree (tenant_id, '
        );
    END LOOP;

    FOREACH v_fk IN ARRAY v_fks LOOP
        EXECUTE v_fk;
    END LOOP;

    -- Every row points to its tenant: directly, or through a foreign key of NOT NULL columns,
    -- led by tenant_id, to another table of one person's data (a message to its thread, which
    -- points to the tenant). A key of its own on every table would cost every insert one more
    -- check for nothing.
    FOR c IN
        SELECT t.oid::regclass AS tbl, t.relname
        FROM pg_class AS t
        WHERE t.oid = ANY (v_oids)
          AND NOT EXISTS (
              SELECT 1 FROM pg_constraint AS con
              WHERE con.conrelid = t.oid AND con.contype = 'f'
                AND con.confrelid = ANY (v_oids) AND con.confrelid <> t.oid
                AND NOT EXISTS (
                    SELECT 1 FROM unnest(con.conkey) AS k (attnum)
                    INNER JOIN pg_attribute AS a ON a.attrelid = t.oid AND a.attnum = k.attnum
                    WHERE NOT a.attnotnull
                )
          )
        ORDER BY t.relname
    LOOP
        EXECUTE format(
            'ALTER TABLE %s ADD CONSTRAINT %I FOREIGN KEY (tenant_id) REFERENCES ember.tenants (id)',
            c.tbl, c.relname || '_tenant_fkey'
        );
    END LOOP;
END
$migration$;
