BEGIN;
SELECT plan(38);

-- The catalog: roles, pinned paths, nothing for PUBLIC.
SELECT has_role('ember_host', 'ember_host exists');
SELECT has_role('ember_worker', 'ember_worker exists');
SELECT is((SELECT count(*)::int FROM pg_roles WHERE rolname IN ('ember_host', 'ember_worker') AND rolcanlogin),
          0, 'neither role can log in: a DBA grants them to login roles');

CREATE TEMP VIEW own_functions AS
SELECT p.oid, p.oid::regprocedure AS fn, p.proconfig, p.proacl, p.prosecdef
FROM pg_proc AS p
WHERE p.pronamespace = 'ember'::regnamespace AND p.prokind IN ('f', 'p')
    AND NOT EXISTS (SELECT 1 FROM pg_depend AS d
                    WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e');

-- pg_catalog, ember, pg_temp, with pgvector's schema before pg_temp when it lives elsewhere.
SELECT coalesce((SELECT format('pg_catalog, ember, %I, pg_temp', n.nspname)
                 FROM pg_extension AS e INNER JOIN pg_namespace AS n ON e.extnamespace = n.oid
                 WHERE e.extname = 'vector' AND n.nspname NOT IN ('pg_catalog', 'ember')),
                'pg_catalog, ember, pg_temp') AS pinned \gset
SELECT is((SELECT array_agg(fn::text ORDER BY fn::text) FROM own_functions
           WHERE proconfig IS NULL OR NOT 'search_path=' || :'pinned' = ANY(proconfig)),
          NULL, 'every function in ember pins search_path to ' || :'pinned');
SELECT is((SELECT array_agg(fn::text ORDER BY fn::text) FROM own_functions
           WHERE proacl IS NULL OR EXISTS (SELECT 1 FROM aclexplode(proacl) AS a WHERE a.grantee = 0)),
          NULL, 'no function in ember is executable by PUBLIC');
SELECT is((SELECT array_agg(c.relname::text ORDER BY c.relname) FROM pg_class AS c
           WHERE c.relnamespace = 'ember'::regnamespace AND c.relkind IN ('r', 'v', 'm', 'p', 'S', 'f')
               AND EXISTS (SELECT 1 FROM aclexplode(c.relacl) AS a
                           WHERE a.grantee IN (0, 'ember_host'::regrole, 'ember_worker'::regrole))),
          NULL, 'no table, view or sequence in ember grants anything to PUBLIC, ember_host or ember_worker');
SELECT ok(NOT has_schema_privilege('public', 'ember', 'USAGE'), 'PUBLIC may not even look up names in ember');
SELECT is((SELECT array_agg(f.fn::text ORDER BY f.fn::text) FROM own_functions AS f
           WHERE NOT f.prosecdef
               AND (has_function_privilege('ember_host', f.oid, 'EXECUTE')
                    OR has_function_privilege('ember_worker', f.oid, 'EXECUTE'))),
          NULL, 'every function a role may call runs as its owner (SECURITY DEFINER): the roles own no table rights');

-- Fixtures, as the owner.
SELECT ember.define_category('health');
UPDATE ember.models SET tags = '{health}' WHERE id = 'claude-opus-4-8';
SELECT ember.create_thread('default', 'main', 'main', NULL, NULL, 'open', 'claude-haiku-4-5');
SELECT ember.create_thread('default', 'doc', 'side', 'Doctor', 'health', 'open', 'claude-opus-4-8');
SELECT ember.append_message('default', 'doc', 'user', 'knee: day 1', 'human');

-- ember_host: the host API, and nothing past it.
SET ROLE ember_host;
SELECT lives_ok($$SELECT ember.create_thread('default', 'chat', 'side', 'Chat')$$, 'the host creates a thread');
SELECT lives_ok($$SELECT ember.append_message('default', 'chat', 'user', 'hello', 'human')$$, 'the host appends a message');
SELECT lives_ok($$SELECT ember.note_prefix('default', 'chat', '{"model": "m"}', '{"id": "r"}')$$, 'the host records a prefix');
SELECT lives_ok($$SELECT ember.turn_started('default', 'chat')$$, 'the host reports a turn');
SELECT is((SELECT content FROM ember.read_thread('default', 'human', 'chat')), 'hello', 'the host reads through read_thread');
SELECT is(ember.route_model('frontier', '{health}'), 'claude-opus-4-8', 'the host routes a call');
SELECT throws_ok($$INSERT INTO ember.messages (thread_id, generation_id, role, content)
                   SELECT 'chat', id, 'user', 'x' FROM ember.generations LIMIT 1$$,
                 '42501', NULL, 'the host cannot insert a message row directly');
SELECT throws_ok($$SELECT count(*) FROM ember.messages$$, '42501', NULL, 'the host cannot read the messages table');
SELECT throws_ok($$UPDATE ember.threads SET seal_tier = 'open'$$, '42501', NULL, 'the host cannot update threads');
SELECT throws_ok($$SELECT count(*) FROM ember.shadow_prefixes$$, '42501', NULL, 'the host cannot read stored prefixes');
SELECT throws_ok($$SELECT ember.tick()$$, '42501', NULL, 'the host cannot run the tick');
SELECT throws_ok($$SELECT ember.claim_shadow_run('w', '5 minutes')$$, '42501', NULL, 'the host cannot claim worker runs');
SELECT throws_ok($$SELECT ember.shadow_withdraw('default', 'chat')$$, '42501', NULL, 'the host cannot call an internal helper');
RESET ROLE;

-- ember_worker: the tick, claims and submits; no host writes, no tables.
SET ROLE ember_worker;
SELECT lives_ok($$SELECT ember.tick()$$, 'the worker runs the tick');
SELECT lives_ok($$SELECT ember.claim_shadow_run('w1', '5 minutes')$$, 'the worker claims');
SELECT throws_ok($$SELECT ember.submit_shadow_run('default', -1, gen_random_uuid(), '{}')$$, 'EM040', NULL,
                 'the worker reaches submit_shadow_run (and its checks)');
SELECT throws_ok($$SELECT ember.append_message('default', 'chat', 'user', 'spoofed', 'human')$$, '42501', NULL,
                 'the worker cannot append messages');
SELECT throws_ok($$SELECT ember.create_thread('default', 'w-thread', 'side')$$, '42501', NULL, 'the worker cannot create threads');
SELECT throws_ok($$SELECT ember.note_prefix('default', 'chat', '{}', '{}')$$, '42501', NULL, 'the worker cannot record prefixes');
SELECT throws_ok($$SELECT count(*) FROM ember.shadow_runs$$, '42501', NULL, 'the worker cannot read the runs table');
SELECT throws_ok($$DELETE FROM ember.shadow_proposals$$, '42501', NULL, 'the worker cannot delete proposals');
RESET ROLE;

-- Planted objects. A role with a schema of its own on its path (here granted CREATE on the
-- database to make one) plants exact-type overloads of built-ins Ember calls (a better match
-- than pg_catalog's polymorphic ones) and temporary tables named like Ember's, puts both first
-- on its path, and calls the same functions again. The plants record any call they get.
-- pgvector's schema is on the pinned path, so no Ember role may create objects there.
SELECT ok(NOT has_schema_privilege('ember_host', e.extnamespace, 'CREATE')
          AND NOT has_schema_privilege('ember_worker', e.extnamespace, 'CREATE'),
          'neither role may create objects in pgvector''s schema, which Ember''s functions search')
FROM pg_extension AS e WHERE e.extname = 'vector';
CREATE TEMP TABLE before_plant AS
SELECT 'read' AS what, array_agg(content ORDER BY seq)::text AS result FROM ember.read_thread('default', 'human', 'doc')
UNION ALL SELECT 'route', ember.route_model('frontier', '{health}')
UNION ALL SELECT 'labels', ember.thread_call_labels('doc')::text
UNION ALL SELECT 'flow', coalesce(ember.check_carrier_flow('default', 'chat', 'doc')::text, 'ok');
GRANT SELECT ON before_plant TO ember_host;
CREATE TEMP TABLE planted_calls (fn text, ran_as text);
GRANT INSERT, SELECT ON planted_calls TO ember_host;
SELECT format('GRANT CREATE ON DATABASE %I TO ember_host', current_database()) AS grant_db \gset
:grant_db;
SET ROLE ember_host;
CREATE SCHEMA planted;
RESET ROLE;

SET ROLE ember_host;
CREATE FUNCTION planted.cardinality(p text[]) RETURNS integer LANGUAGE plpgsql AS $$
BEGIN INSERT INTO planted_calls VALUES ('cardinality', current_user); RETURN 999; END; $$;
CREATE FUNCTION planted.unnest(p text[]) RETURNS SETOF text LANGUAGE plpgsql AS $$
BEGIN INSERT INTO planted_calls VALUES ('unnest', current_user); RETURN NEXT 'planted'; END; $$;
CREATE FUNCTION planted.array_length(p text[], d integer) RETURNS integer LANGUAGE plpgsql AS $$
BEGIN INSERT INTO planted_calls VALUES ('array_length', current_user); RETURN 999; END; $$;
CREATE TEMP TABLE threads (id text, category text);
CREATE TEMP TABLE settings (key text, value jsonb);
INSERT INTO pg_temp.settings VALUES ('idle_before_digest', '"1 second"');
SET search_path = pg_temp, planted, public, ember;
SELECT lives_ok($$CREATE TEMP TABLE after_plant AS
    SELECT 'read' AS what, array_agg(content ORDER BY seq)::text AS result FROM ember.read_thread('default', 'human', 'doc')
    UNION ALL SELECT 'route', ember.route_model('frontier', '{health}')
    UNION ALL SELECT 'labels', ember.thread_call_labels('doc')::text
    UNION ALL SELECT 'flow', coalesce(ember.check_carrier_flow('default', 'chat', 'doc')::text, 'ok')$$,
    'Ember''s functions run with the planted objects first on the caller''s path');
SELECT lives_ok($$SELECT ember.append_message('default', 'chat', 'user', 'after the plant', 'human')$$,
                'and a write through the host API still works');
RESET search_path;
RESET ROLE;

SELECT results_eq($$SELECT what, result FROM after_plant ORDER BY what$$,
                  $$SELECT what, result FROM before_plant ORDER BY what$$,
                  'reads, routing, labels and flow checks compute exactly what they did before the plant');
SELECT is((SELECT count(*)::int FROM planted_calls), 0, 'no planted function ever ran, as the caller or as the owner');
SELECT is((SELECT array_agg(content ORDER BY seq) FROM ember.messages WHERE thread_id = 'chat'),
          ARRAY['hello', 'after the plant'], 'the write stored exactly what was sent');

-- The start-up check every command makes reads the schema state through a function, which each
-- role may call though it reads no table.
SET LOCAL ROLE ember_analyst;
SELECT ok((SELECT count(*) FROM ember.schema_state() WHERE kind = 'migration') > 0,
          'ember_analyst reads which migrations the database runs');
SELECT throws_ok('SELECT name FROM ember.schema_migrations', '42501', NULL, 'but not the table');
RESET ROLE;
SELECT ok(has_function_privilege('ember_worker', 'ember.schema_state()', 'EXECUTE')
          AND has_function_privilege('ember_host', 'ember.schema_state()', 'EXECUTE'),
          'so do the host and the worker');

SELECT * FROM finish();
ROLLBACK;
