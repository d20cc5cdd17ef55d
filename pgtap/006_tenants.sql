BEGIN;
SELECT plan(12);

-- Tenants (db/migrations/0051_tenants.sql, functions/006_tenants.sql): every row of one person's
-- data names its tenant, a tenant id has a checked shape, and while not every function takes
-- the tenant a database holds one (the host's thread writes do: pgtap/006_tenants_host.sql).

SELECT is(
    (SELECT count(*) FROM ember.tenants), 1::bigint,
    'a migrated database holds one tenant'
);
SELECT is(
    ARRAY(
        SELECT p.table_name FROM ember.distribution_plan() AS p
        WHERE p.role = 'distributed' AND p.table_name <> 'tenants'
          AND NOT EXISTS (
              SELECT 1 FROM pg_attribute AS a
              WHERE a.attrelid = to_regclass('ember.' || p.table_name) AND a.attname = 'tenant_id'
                AND a.attnotnull AND NOT a.attisdropped
          )
    ),
    '{}'::text [],
    'every table of one person''s data has a NOT NULL tenant_id'
);

SELECT ember.create_thread('default', 'trip', 'side', 'a trip');
SELECT is(
    (SELECT tenant_id FROM ember.threads WHERE id = 'trip'),
    (SELECT id FROM ember.tenants),
    'a thread created for the tenant belongs to it'
);
CREATE TEMP TABLE appended AS SELECT ember.append_message('default', 'trip', 'user', 'hello') AS id;
SELECT is(
    (SELECT m.tenant_id FROM ember.messages AS m INNER JOIN appended AS a ON a.id = m.id),
    (SELECT id FROM ember.tenants),
    'a message appended for the tenant belongs to it'
);

SELECT throws_ok(
    $$INSERT INTO ember.tenants (id) VALUES ('acme')$$,
    'EM150', NULL,
    'a second tenant is refused while not every function takes the tenant'
);
SELECT throws_ok(
    $$UPDATE ember.tenants SET id = 'acme'$$,
    '23503', NULL,
    'renaming the tenant under its rows is refused by their foreign keys'
);
SELECT throws_ok(
    $$DELETE FROM ember.tenants$$,
    '23503', NULL,
    'the tenant cannot be deleted under its rows'
);
SELECT throws_like(
    $$INSERT INTO ember.threads (tenant_id, id, kind, model) VALUES ('nobody', 'x', 'side', 'claude-sonnet-4-6')$$,
    '%threads_tenant_fkey%',
    'a row naming a tenant that does not exist is refused'
);

-- The keys are per tenant. With the one-tenant guard lifted for this transaction, a second
-- tenant's rows are written directly, as the functions will write them once they take the tenant.
ALTER TABLE ember.tenants DISABLE TRIGGER tenants_hold_one;
INSERT INTO ember.tenants (id) VALUES ('b');
SELECT lives_ok(
    $$INSERT INTO ember.threads (tenant_id, id, kind, model, created_at, status_changed_at)
      SELECT 'b', 'trip', 'side', model, created_at, status_changed_at FROM ember.threads
      WHERE id = 'trip'$$,
    'two tenants may both have a thread trip'
);
SELECT lives_ok(
    $$INSERT INTO ember.threads (tenant_id, id, kind, model, created_at, status_changed_at)
      SELECT 'b', 'main', 'main', model, created_at, status_changed_at FROM ember.threads
      WHERE id = 'trip' AND tenant_id = 'b'$$,
    'each tenant has its own main'
);
SELECT throws_like(
    $$INSERT INTO ember.shadow_cursors (
          tenant_id, thread_id, generation_id, baseline_seq, initialization, created_at
      )
      SELECT 'b', 'trip', g.id, 0, 'enabled', now() FROM ember.generations AS g
      WHERE g.thread_id = 'trip' AND g.tenant_id <> 'b'$$,
    '%shadow_cursors_generation_id_fkey%',
    'a row of one tenant cannot point to a generation of another'
);
-- A function that takes the tenant tells two tenants' trip apart.
SELECT ember.start_generation('default', 'trip');
SELECT results_eq(
    $$SELECT tenant_id, count(*)::int FROM ember.generations WHERE id IS NOT NULL AND thread_id = 'trip'
      GROUP BY tenant_id ORDER BY tenant_id$$,
    $$VALUES ('default', 2)$$,
    'with two tenants, start_generation for one of them opens a generation of its trip only'
);

SELECT * FROM finish();
ROLLBACK;
