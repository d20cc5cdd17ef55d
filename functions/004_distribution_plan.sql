-- The distribution plan (issue 31): how a deployment that outgrows one server spreads Ember over
-- a Citus cluster. This file is the one place the plan's lists live: pgtap/004_distribution_plan.sql
-- checks the catalog against them, and docs/operations.md's plan block is rendered from them
-- (`python -m ember.distribution --write`; tests/test_distribution_doc.py fails when the two
-- differ). A table, or a hot-path function, added by a later change is added here.
--
-- A function in functions/ rather than a table filled by a migration, so that adding a row is an
-- edit of this file, re-applied by every migrate, with no migration number to take.

-- Each table of schema ember and its role (docs/tenants.md, docs/citus.md):
--   distributed  sharded by distribution_column: tenants by id, and every table of one person's
--                data by tenant_id, co-located with tenants, so one person's rows of every such
--                table live on one shard and a call that names the tenant runs on one node;
--   reference    small global data, copied to every node (writes are two-phase on all nodes);
--   local        stays on the coordinator only: bookkeeping.
-- Rows are in the order the operator converts them: referenced tables before the tables
-- that point to them.
CREATE OR REPLACE FUNCTION ember.distribution_plan()
RETURNS TABLE (table_name text, role text, distribution_column text, why text)
LANGUAGE sql IMMUTABLE
AS $$
    VALUES
    ('settings', 'reference', NULL, 'a few rows of constants, read by every function'),
    ('categories', 'reference', NULL,
     'a few rows: a label means the same for every person, as the model tags that admit it do'),
    ('models', 'reference', NULL, 'the model registry; threads and runs point to it'),
    ('model_price_tiers', 'reference', NULL, 'a few rows per model'),
    ('tools', 'reference', NULL, 'the tool list, a few rows'),
    ('identity_documents', 'reference', NULL, 'identity prompt files, a few rows'),
    ('identity_versions', 'reference', NULL, 'versions of the identity files, edited by hand'),
    ('shadow_activation', 'reference', NULL, 'one row: the activation watermark'),
    ('shadow_park_epoch', 'reference', NULL,
     'one row: moved by every change of models or settings, read by each claim'),
    ('tenants', 'distributed', 'id', 'the anchor of the co-location group: one row per person'),
    ('threads', 'distributed', 'tenant_id', 'a person''s threads, their main and steward among them'),
    ('forgettings', 'distributed', 'tenant_id', 'one row per forget command of a person'),
    ('cutovers', 'distributed', 'tenant_id', 'each cut-over of a scope of a person''s memory'),
    ('consolidation_runs', 'distributed', 'tenant_id', 'consolidation reads one person''s facts'),
    ('facts', 'distributed', 'tenant_id',
     'a person''s memory: grows with every person, so it is sharded with them, never copied'),
    ('consolidation_actions', 'distributed', 'tenant_id', 'each action of a consolidation run'),
    ('fact_evidence', 'distributed', 'tenant_id', 'a fact''s pointers, written with the fact'),
    ('fact_history', 'distributed', 'tenant_id', 'each change of a fact, written with the change'),
    ('fact_confirmations', 'distributed', 'tenant_id', 'the steward''s confirmations of promoted facts'),
    ('generations', 'distributed', 'tenant_id', 'one row per context lifetime of a thread'),
    ('messages', 'distributed', 'tenant_id', 'the traffic itself'),
    ('generation_sources', 'distributed', 'tenant_id', 'what a generation received, kept on the receiver'),
    ('generation_progress', 'distributed', 'tenant_id', 'per generation write state, written with each append'),
    ('generation_changes', 'distributed', 'tenant_id', 'threads whose generations changed since the tick'),
    ('identity_segments', 'distributed', 'tenant_id', 'the identity a generation was given'),
    ('shadow_cursors', 'distributed', 'tenant_id', 'shadow''s read position per generation'),
    ('shadow_thread_state', 'distributed', 'tenant_id', 'shadow''s per-thread state'),
    ('shadow_signals', 'distributed', 'tenant_id', 'pending shadow wake-ups of a thread'),
    ('shadow_offers', 'distributed', 'tenant_id',
     'one row per thread with a standing offer, in claim order, with its park'),
    ('shadow_prefixes', 'distributed', 'tenant_id', 'a thread''s last request, written per host call'),
    ('shadow_runs', 'distributed', 'tenant_id', 'one row per shadow run of a thread'),
    ('shadow_proposals', 'distributed', 'tenant_id', 'a run''s proposals, about its own thread'),
    ('cutover_promotions', 'distributed', 'tenant_id', 'what promotion did with each proposal, beside it'),
    ('steward_runs', 'distributed', 'tenant_id', 'a person''s steward runs, beside the backlog they read'),
    ('thread_events', 'distributed', 'tenant_id', 'events queued for the receiving thread'),
    ('main_actions', 'distributed', 'tenant_id', 'main''s messages to a side chat, kept on the side chat'),
    ('judge_runs', 'distributed', 'tenant_id', 'the semantic judge''s runs over a person''s proposals and facts'),
    ('judged_pairs', 'distributed', 'tenant_id', 'the judge''s verdicts, beside the facts they judge'),
    ('import_files', 'distributed', 'tenant_id', 'files ember import took whole into a person, by digest'),
    ('eval_runs', 'distributed', 'tenant_id', 'ember eval, on the threads and facts of the tenant it plays'),
    ('eval_conversations', 'distributed', 'tenant_id', 'ember eval'),
    ('eval_sessions', 'distributed', 'tenant_id', 'ember eval'),
    ('eval_turns', 'distributed', 'tenant_id', 'ember eval'),
    ('eval_questions', 'distributed', 'tenant_id', 'ember eval'),
    ('eval_answers', 'distributed', 'tenant_id', 'ember eval'),
    ('eval_context', 'distributed', 'tenant_id', 'ember eval'),
    ('eval_calls', 'distributed', 'tenant_id', 'ember eval'),
    ('eval_promotions', 'distributed', 'tenant_id', 'ember eval'),
    ('schema_migrations', 'local', NULL, 'what ember migrate applied: the coordinator''s bookkeeping'),
    ('schema_functions', 'local', NULL, 'the checksum of functions/: the coordinator''s bookkeeping'),
    ('fleet_tick', 'local', NULL, 'one row: which worker ticked last; tick runs on the coordinator')
$$;

COMMENT ON FUNCTION ember.distribution_plan() IS
'Each table of schema ember: distributed (by which column, co-located with tenants), reference or local.';

-- The hot path: the host's calls, the claims, the submits and the steward's step. The lint reads
-- each one's source and refuses a JOIN of a distributed table on anything but its distribution
-- column. `shard` says how each runs distributed: `single` when its tenant argument
-- (`tenant_argument`) routes it to one node (create_distributed_function), otherwise why not.
-- None takes the tenant yet: until the API names it (issue 40, item 2), a call is planned across
-- shards and the plan cannot be applied (docs/citus.md).
-- Its routing column was thread_argument while the plan distributed by thread.
DO $$
BEGIN
    IF to_regprocedure('ember.distribution_hot_path()') IS NOT NULL
        AND strpos(pg_get_function_result(to_regprocedure('ember.distribution_hot_path()')), 'tenant_argument') = 0
    THEN
        DROP FUNCTION ember.distribution_hot_path();
    END IF;
END
$$;
-- No key of a distributed table lacks its distribution column now: every one leads with it.
DROP FUNCTION IF EXISTS ember.distribution_exceptions();

CREATE OR REPLACE FUNCTION ember.distribution_hot_path()
RETURNS TABLE (function_name text, part text, tenant_argument text, shard text)
LANGUAGE sql IMMUTABLE
AS $$
    VALUES
    ('create_thread', 'host', NULL, 'multi: takes no tenant argument yet'),
    ('start_generation', 'host', NULL, 'multi: takes no tenant argument yet'),
    ('append_message', 'host', NULL, 'multi: takes no tenant argument yet'),
    ('append_messages', 'host', NULL, 'multi: takes no tenant argument yet'),
    ('note_prefix', 'host', NULL, 'multi: takes no tenant argument yet'),
    ('turn_started', 'host', NULL, 'multi: takes no tenant argument yet'),
    ('turn_ended', 'host', NULL, 'multi: takes no tenant argument yet'),
    ('waiting_for_user', 'host', NULL, 'multi: takes no tenant argument yet'),
    ('task_ended', 'host', NULL, 'multi: takes no tenant argument yet'),
    ('set_thread_status', 'host', NULL, 'multi: takes no tenant argument yet'),
    ('claim_shadow_run', 'claim', NULL,
     'multi: picks the next offer across tenants, then locks one thread''s rows'),
    ('claim_steward_run', 'claim', NULL,
     'multi: asks steward_has_work across tenants, then reads one backlog and writes the run'),
    ('submit_shadow_run', 'submit', NULL,
     'multi then single: the run is found by id alone (one index probe per shard), then every '
     || 'write is the run''s tenant'),
    ('steward_step', 'steward', NULL,
     'multi then single: the run by id alone, then every write is the run''s tenant')
$$;

COMMENT ON FUNCTION ember.distribution_hot_path() IS
'The hot-path functions, their part, their tenant argument and how each runs distributed.';

-- The operator's one-time commands, in order, after `ember migrate` and with the workers added:
-- reference tables, then distributed tables co-located with tenants, then the single-shard
-- functions routed by their tenant argument. identity_documents and identity_versions point to
-- each other, and a table is converted only when what it points to already is, so that one key
-- is dropped first and added back last.
CREATE OR REPLACE FUNCTION ember.distribution_commands()
RETURNS SETOF text
LANGUAGE sql STABLE
AS $$
    SELECT c FROM (
        SELECT 0 AS step, 0 AS n, 'ALTER TABLE ember.identity_documents DROP CONSTRAINT '
               || 'identity_documents_file_last_good_version_fkey;' AS c
        UNION ALL
        SELECT 2, p.ord, CASE p.role
            WHEN 'reference' THEN format('SELECT create_reference_table(%L);', 'ember.' || p.table_name)
            WHEN 'distributed' THEN CASE WHEN p.table_name = 'tenants'
                THEN format('SELECT create_distributed_table(%L, %L);',
                            'ember.' || p.table_name, p.distribution_column)
                ELSE format('SELECT create_distributed_table(%L, %L, colocate_with => %L);',
                            'ember.' || p.table_name, p.distribution_column, 'ember.tenants')
            END
        END
        FROM ember.distribution_plan() WITH ORDINALITY AS p (table_name, role, distribution_column, why, ord)
        WHERE p.role <> 'local'
        UNION ALL
        SELECT 3, 0, 'ALTER TABLE ember.identity_documents ADD FOREIGN KEY (file, last_good_version) '
               || 'REFERENCES ember.identity_versions (file, version);'
        UNION ALL
        SELECT 4, h.ord, format('SELECT create_distributed_function(%L, %L, colocate_with => %L);',
                                format('ember.%s(%s)', f.proname, (
                                    SELECT string_agg(format_type(a.t, NULL), ', ' ORDER BY a.o)
                                    FROM unnest(f.proargtypes::oid []) WITH ORDINALITY AS a (t, o)
                                )), h.tenant_argument, 'ember.tenants')
        FROM ember.distribution_hot_path() WITH ORDINALITY AS h (function_name, part, tenant_argument, shard, ord)
        INNER JOIN pg_catalog.pg_proc AS f
            ON f.proname = h.function_name AND f.pronamespace = 'ember'::regnamespace
        WHERE h.shard = 'single'
    ) AS s
    ORDER BY s.step, s.n, s.c
$$;

COMMENT ON FUNCTION ember.distribution_commands() IS
'The one-time Citus commands of the distribution plan, in the order an operator runs them.';

-- What in the catalog breaks the plan, one row per problem, each naming the table and the
-- constraint, index, column or function: the lint (pgtap/004_distribution_plan.sql) expects none
-- for every rule, and an operator can run it before distributing. The rules are Citus's:
--   1 every table of schema ember is in one of the plan's lists;
--   2 the plan names existing tables, once each, with a NOT NULL distribution column where due;
--   3 a primary or unique key (or unique index) of a distributed table leads with its
--     distribution column (Citus checks uniqueness on one shard only; first, so that a lookup
--     by one person's key reads one person's part of the index);
--   4 a foreign key of a distributed table points to a reference table, or to a distributed one
--     with distribution column matched to distribution column as its first pair (co-located
--     shards), never to a local table;
--   5 a reference or local table never points into a distributed table;
--   6 a sequence-filled column of a distributed table is bigint (Citus gives each node its own
--     range of a bigint sequence; smaller types can be drawn on the coordinator only);
--   7 the hot path's functions exist, and one routed to a single shard has its tenant argument;
--   8 a hot-path function (listed, or a trigger function on a distributed table) joins a
--     distributed table only on its distribution column, read from its source: each
--     `JOIN ember.<table> [AS] <alias> ON|USING ...` of a distributed table must equate
--     <alias>.<column> with something. It does not see joins written as FROM a, b WHERE, EXISTS
--     or IN subqueries, views, dynamic SQL, or the other functions a listed function calls (each
--     is checked only when listed); and it checks that the column is equated, not that the other
--     side is the same tenant's;
--   9 every distributed table but the anchor points to it, so no person's row outlives the
--     person: a foreign key from its distribution column to tenants (id), or one of NOT NULL
--     columns led by the distribution column to a distributed table that points to it.
--
-- Its length: one statement, a UNION ALL with one branch per numbered rule above, read against
-- the list; a function per rule would scatter that list over eight definitions.
CREATE OR REPLACE FUNCTION ember.distribution_violations()
RETURNS TABLE (rule integer, problem text)
LANGUAGE sql STABLE
AS $$
    WITH plan AS (
        SELECT to_regclass('ember.' || quote_ident(p.table_name)) AS rel, p.table_name, p.role,
               p.distribution_column,
               (SELECT a.attnum FROM pg_attribute AS a
                WHERE a.attrelid = to_regclass('ember.' || quote_ident(p.table_name))
                  AND a.attname = p.distribution_column AND NOT a.attisdropped) AS dist_attnum
        FROM ember.distribution_plan() AS p
    ),

    -- The listed functions, and every trigger function on a distributed table: a trigger runs
    -- inside the write that fired it, so the host's appends and the submits run these too.
    hot_functions AS (
        SELECT h.function_name AS label, f.prosrc
        FROM ember.distribution_hot_path() AS h
        INNER JOIN pg_proc AS f ON f.proname = h.function_name AND f.pronamespace = 'ember'::regnamespace
        UNION
        SELECT format('%s (trigger %s on ember.%s)', f.proname, tg.tgname, p.table_name), f.prosrc
        FROM plan AS p
        INNER JOIN pg_trigger AS tg ON tg.tgrelid = p.rel AND NOT tg.tgisinternal
        INNER JOIN pg_proc AS f ON f.oid = tg.tgfoid AND f.pronamespace = 'ember'::regnamespace
        WHERE p.role = 'distributed'
    ),

    -- The distributed tables whose every row points to a tenant, through keys that cannot be
    -- NULL and lead with the distribution column on both sides.
    anchored AS (
        WITH RECURSIVE reach AS (
            SELECT p.rel FROM plan AS p WHERE p.table_name = 'tenants'
            UNION
            SELECT s.rel
            FROM reach AS r
            INNER JOIN pg_constraint AS con ON con.confrelid = r.rel AND con.contype = 'f'
            INNER JOIN plan AS s ON s.rel = con.conrelid AND s.role = 'distributed'
            INNER JOIN plan AS t ON t.rel = con.confrelid
            WHERE con.conkey[1] = s.dist_attnum AND con.confkey[1] = t.dist_attnum
                AND NOT EXISTS (
                    SELECT 1 FROM unnest(con.conkey) AS k (attnum)
                    INNER JOIN pg_attribute AS a ON a.attrelid = s.rel AND a.attnum = k.attnum
                    WHERE NOT a.attnotnull
                )
        )
        SELECT reach.rel FROM reach
    ),

    hot_joins AS (
        SELECT h.label AS function_name, m[1] AS table_name, coalesce(m[2], m[1]) AS alias,
               regexp_replace(m[3], '\m(WHERE|GROUP|ORDER|LIMIT|RETURNING|UNION|HAVING|WINDOW|LEFT|RIGHT'
                                    || '|INNER|CROSS|FULL|FOR|INTO)\M.*$|;.*$', '', 'i') AS cond
        FROM hot_functions AS h
        CROSS JOIN LATERAL regexp_split_to_table(
            regexp_replace(h.prosrc, '--[^\n]*', '', 'g'), '\mJOIN\M', 'i'
        ) WITH ORDINALITY AS j (piece, n)
        CROSS JOIN LATERAL regexp_match(
            j.piece,
            '^\s+ember\.([a-z_][a-z0-9_]*)(?:\s+(?:AS\s+)?(?!ON\M|USING\M)([a-z_][a-z0-9_]*))?\s+((?:ON|USING)\M.*)$',
            'i'
        ) AS m
        WHERE j.n > 1 AND m IS NOT NULL
    )

    SELECT 1, format('table ember.%s is in none of the plan''s lists (ember.distribution_plan())', c.relname)
    FROM pg_class AS c
    WHERE c.relnamespace = 'ember'::regnamespace AND c.relkind IN ('r', 'p')
        AND NOT EXISTS (SELECT 1 FROM plan AS p WHERE p.rel = c.oid)

    UNION ALL
    SELECT 2, format('plan row ember.%s: %s', x.table_name, x.why)
    FROM (
        SELECT p.table_name, CASE
            WHEN p.rel IS NULL THEN 'no such table'
            WHEN p.role NOT IN ('distributed', 'reference', 'local') THEN 'unknown role ' || p.role
            WHEN count(*) OVER (PARTITION BY p.table_name) > 1 THEN 'listed more than once'
            WHEN (p.role = 'distributed') <> (p.distribution_column IS NOT NULL)
                THEN 'a distribution column is given for, and only for, a distributed table'
            WHEN p.role = 'distributed' AND NOT EXISTS (
                SELECT 1 FROM pg_attribute AS a
                WHERE a.attrelid = p.rel AND a.attnum = p.dist_attnum AND a.attnotnull
            ) THEN format('distribution column %s is not a NOT NULL column', p.distribution_column)
        END AS why
        FROM plan AS p
    ) AS x
    WHERE x.why IS NOT NULL

    UNION ALL
    SELECT 3, format('ember.%s: %s %s does not lead with distribution column %s: %s', p.table_name,
                     CASE con.contype WHEN 'p' THEN 'primary key' WHEN 'u' THEN 'unique constraint'
                                      ELSE 'unique index' END,
                     ic.relname, p.distribution_column, pg_get_indexdef(i.indexrelid))
    FROM plan AS p
    INNER JOIN pg_index AS i ON i.indrelid = p.rel AND i.indisunique
    INNER JOIN pg_class AS ic ON ic.oid = i.indexrelid
    LEFT JOIN pg_constraint AS con ON con.conindid = i.indexrelid AND con.conrelid = p.rel
    WHERE p.role = 'distributed' AND i.indkey[0] IS DISTINCT FROM p.dist_attnum

    UNION ALL
    SELECT 4, format('ember.%s: foreign key %s %s: %s', s.table_name, con.conname, CASE
                         WHEN t.role = 'local' THEN format('points to local table ember.%s', t.table_name)
                         ELSE format('does not match %s.%s to %s.%s first', s.table_name, s.distribution_column,
                                     t.table_name, t.distribution_column) END,
                     pg_get_constraintdef(con.oid))
    FROM plan AS s
    INNER JOIN pg_constraint AS con ON con.conrelid = s.rel AND con.contype = 'f'
    INNER JOIN plan AS t ON t.rel = con.confrelid
    WHERE s.role = 'distributed' AND t.role <> 'reference'
        AND (t.role = 'local' OR con.conkey[1] IS DISTINCT FROM s.dist_attnum
             OR con.confkey[1] IS DISTINCT FROM t.dist_attnum)

    UNION ALL
    SELECT 5, format('ember.%s (%s): foreign key %s points into distributed table ember.%s: %s',
                     s.table_name, s.role, con.conname, t.table_name, pg_get_constraintdef(con.oid))
    FROM plan AS s
    INNER JOIN pg_constraint AS con ON con.conrelid = s.rel AND con.contype = 'f'
    INNER JOIN plan AS t ON t.rel = con.confrelid
    WHERE s.role <> 'distributed' AND t.role = 'distributed'

    UNION ALL
    SELECT 6, format('ember.%s: column %s (%s) takes values from a sequence but is not bigint',
                     p.table_name, a.attname, format_type(a.atttypid, a.atttypmod))
    FROM plan AS p
    INNER JOIN pg_attribute AS a ON a.attrelid = p.rel AND a.attnum > 0 AND NOT a.attisdropped
    LEFT JOIN pg_attrdef AS d ON d.adrelid = p.rel AND d.adnum = a.attnum
    WHERE p.role = 'distributed' AND a.atttypid <> 'bigint'::regtype
        AND (a.attidentity <> '' OR pg_get_expr(d.adbin, d.adrelid) LIKE 'nextval(%')

    UNION ALL
    SELECT 7, format('hot-path function ember.%s does not exist', h.function_name)
    FROM ember.distribution_hot_path() AS h
    WHERE NOT EXISTS (
        SELECT 1 FROM pg_proc WHERE proname = h.function_name AND pronamespace = 'ember'::regnamespace
    )
    UNION ALL
    SELECT 7, format('hot-path function ember.%s is routed by %s, which it does not take',
                     h.function_name, coalesce(h.tenant_argument, 'no argument'))
    FROM ember.distribution_hot_path() AS h
    INNER JOIN pg_proc AS f ON f.proname = h.function_name AND f.pronamespace = 'ember'::regnamespace
    WHERE h.shard = 'single'
        AND (h.tenant_argument IS NULL OR NOT h.tenant_argument = ANY (coalesce(f.proargnames, '{}')))

    UNION ALL
    SELECT 8, format('ember.%s: JOIN ember.%s AS %s %s does not join on %s.%s',
                     j.function_name, j.table_name, j.alias, btrim(regexp_replace(j.cond, '\s+', ' ', 'g')),
                     j.alias, p.distribution_column)
    FROM hot_joins AS j
    INNER JOIN plan AS p ON p.table_name = j.table_name AND p.role = 'distributed'
    WHERE NOT (
        j.cond ~* format('\m%s\.%s\M\s*=|=\s*%s\.%s\M', j.alias, p.distribution_column, j.alias, p.distribution_column)
        OR j.cond ~* format('^USING\s*\([^)]*\m%s\M', p.distribution_column)
    )

    UNION ALL
    SELECT 9, format('ember.%s: no foreign key from %s leads to the anchor ember.tenants',
                     s.table_name, s.distribution_column)
    FROM plan AS s
    WHERE s.role = 'distributed' AND s.table_name <> 'tenants' AND s.rel IS NOT NULL
        AND s.rel NOT IN (SELECT a.rel FROM anchored AS a)

    ORDER BY 1, 2
$$;

COMMENT ON FUNCTION ember.distribution_violations() IS
'What in the catalog breaks the distribution plan, by rule, naming table and constraint or function.';

-- How many joins of distributed tables the hot-path check parsed: the lint asserts it reads some.
CREATE OR REPLACE FUNCTION ember.distribution_hot_path_joins()
RETURNS bigint
LANGUAGE sql STABLE
AS $$
    SELECT count(*)
    FROM ember.distribution_hot_path() AS h
    INNER JOIN pg_proc AS f ON f.proname = h.function_name AND f.pronamespace = 'ember'::regnamespace
    CROSS JOIN LATERAL regexp_split_to_table(f.prosrc, '\mJOIN\M', 'i') WITH ORDINALITY AS j (piece, n)
    INNER JOIN ember.distribution_plan() AS p
        ON p.role = 'distributed' AND j.piece ~* ('^\s+ember\.' || p.table_name || '\M')
    WHERE j.n > 1
$$;
