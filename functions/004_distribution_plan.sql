-- The distribution plan (issue 31): how a deployment that outgrows one server spreads Ember over
-- a Citus cluster. This file is the one place the plan's lists live: pgtap/004_distribution_plan.sql
-- checks the catalog against them, and docs/operations.md's plan block is rendered from them
-- (`python -m ember.distribution --write`; tests/test_distribution_doc.py fails when the two
-- differ). A table, or a hot-path function, added by a later change is added here.
--
-- A function in functions/ rather than a table filled by a migration, so that adding a row is an
-- edit of this file, re-applied by every migrate, with no migration number to take.

-- Each table of schema ember and its role:
--   distributed  sharded by distribution_column, co-located with threads: one thread's rows of
--                every such table live on one shard;
--   reference    small or cross-thread, copied to every node (writes are two-phase on all nodes);
--   local        stays on the coordinator only: bookkeeping, and analyst or eval data.
-- Rows are in the order the operator converts them: referenced tables before the tables
-- that point to them.
CREATE OR REPLACE FUNCTION ember.distribution_plan()
RETURNS TABLE (table_name text, role text, distribution_column text, why text)
LANGUAGE sql IMMUTABLE
AS $$
    VALUES
    ('settings', 'reference', NULL, 'a few rows of constants, read by every function'),
    ('categories', 'reference', NULL, 'a few rows; threads point to them'),
    ('models', 'reference', NULL, 'the model registry; threads and runs point to it'),
    ('model_price_tiers', 'reference', NULL, 'a few rows per model'),
    ('tools', 'reference', NULL, 'the tool list, a few rows'),
    ('identity_documents', 'reference', NULL, 'identity prompt files, a few rows'),
    ('identity_versions', 'reference', NULL, 'versions of the identity files, edited by hand'),
    ('shadow_activation', 'reference', NULL, 'one row: the activation watermark'),
    ('shadow_park_epoch', 'reference', NULL,
     'one row: moved by every change of models or settings, read by each claim'),
    ('forgettings', 'reference', NULL,
     'one row per forget command (rare); messages and proposals point to it'),
    ('facts', 'reference', NULL,
     'production memory crosses threads by design; written at the steward''s rate, searched from any node'),
    ('fact_evidence', 'reference', NULL, 'a fact''s pointers, written with the fact'),
    ('fact_history', 'reference', NULL, 'each change of a fact, written with the change'),
    ('cutovers', 'reference', NULL, 'a few rows: each cut-over of a scope; the backlog and promotion read them'),
    ('fact_confirmations', 'reference', NULL, 'the steward''s confirmations of promoted facts, written with facts'),
    ('consolidation_runs', 'reference', NULL,
     'the consolidation job reads facts across threads, at a low rate; facts point to its runs'),
    ('consolidation_actions', 'reference', NULL, 'each action of a consolidation run, beside the facts it changed'),
    ('threads', 'distributed', 'id', 'the anchor of the co-location group: one row per thread'),
    ('generations', 'distributed', 'thread_id', 'one row per context lifetime of a thread'),
    ('messages', 'distributed', 'thread_id', 'the traffic itself'),
    ('generation_sources', 'distributed', 'thread_id', 'what a generation received, kept on the receiver'),
    ('generation_progress', 'distributed', 'thread_id', 'per generation write state, written with each append'),
    ('generation_changes', 'distributed', 'thread_id', 'threads whose generations changed since the tick'),
    ('identity_segments', 'distributed', 'thread_id', 'the identity a generation was given'),
    ('shadow_cursors', 'distributed', 'thread_id', 'shadow''s read position per generation'),
    ('shadow_thread_state', 'distributed', 'thread_id', 'shadow''s per-thread state'),
    ('shadow_signals', 'distributed', 'thread_id', 'pending shadow wake-ups of a thread'),
    ('shadow_offers', 'distributed', 'thread_id',
     'one row per thread with a standing offer, in claim order, with its park'),
    ('shadow_prefixes', 'distributed', 'thread_id', 'a thread''s last request, written per host call'),
    ('shadow_runs', 'distributed', 'thread_id', 'one row per shadow run of a thread'),
    ('shadow_proposals', 'distributed', 'thread_id', 'a run''s proposals, about its own thread'),
    ('cutover_promotions', 'distributed', 'thread_id', 'what promotion did with each proposal, beside it'),
    ('steward_runs', 'distributed', 'thread_id',
     'the steward''s runs, all in its thread memory-steward: one shard, beside its messages'),
    ('thread_events', 'distributed', 'thread_id', 'events queued for the receiving thread'),
    ('main_actions', 'distributed', 'thread_id', 'main''s messages to a side chat, kept on the side chat'),
    ('schema_migrations', 'local', NULL, 'what ember migrate applied: the coordinator''s bookkeeping'),
    ('schema_functions', 'local', NULL, 'the checksum of functions/: the coordinator''s bookkeeping'),
    ('fleet_tick', 'local', NULL, 'one row: which worker ticked last; tick runs on the coordinator'),
    ('import_files', 'local', NULL, 'files ember import took whole, by digest: the coordinator''s bookkeeping'),
    ('judge_runs', 'local', NULL, 'the semantic judge: analyst work, read through the comparison views'),
    ('judged_pairs', 'local', NULL, 'the judge''s verdicts: analyst work'),
    ('eval_runs', 'local', NULL, 'ember eval runs in a database of its own, never distributed'),
    ('eval_conversations', 'local', NULL, 'ember eval'),
    ('eval_sessions', 'local', NULL, 'ember eval'),
    ('eval_turns', 'local', NULL, 'ember eval'),
    ('eval_questions', 'local', NULL, 'ember eval'),
    ('eval_answers', 'local', NULL, 'ember eval'),
    ('eval_context', 'local', NULL, 'ember eval'),
    ('eval_calls', 'local', NULL, 'ember eval'),
    ('eval_promotions', 'local', NULL, 'ember eval')
$$;

COMMENT ON FUNCTION ember.distribution_plan() IS
'Each table of schema ember: distributed (by which column, co-located with threads), reference or local.';

-- Keys on a distributed table that do not hold its distribution column, kept on one server on
-- purpose: the operator drops each before distributing (ember.distribution_commands() says so),
-- and `what_holds_it` is what keeps the rule then. Every other key the lint finds is an error.
CREATE OR REPLACE FUNCTION ember.distribution_exceptions()
RETURNS TABLE (table_name text, constraint_name text, what_holds_it text)
LANGUAGE sql IMMUTABLE
AS $$
    VALUES
    ('threads', 'threads_one_main_one_steward',
     'create_thread refuses a second main (EM006) and ensure_steward_thread creates the steward '
     || 'once under its lock; two concurrent create_thread calls for two mains are no longer '
     || 'refused by the database, so the operator creates main once, at set-up')
$$;

COMMENT ON FUNCTION ember.distribution_exceptions() IS
'Keys on distributed tables without the distribution column, dropped by the operator before distributing.';

-- The hot path: the host's calls, the claims, the submits and the steward's step. The lint reads
-- each one's source and refuses a JOIN of a distributed table on anything but its distribution
-- column. `shard` says how each runs distributed: `single` when its thread argument
-- (`thread_argument`) routes it to one shard (create_distributed_function), otherwise why not.
CREATE OR REPLACE FUNCTION ember.distribution_hot_path()
RETURNS TABLE (function_name text, part text, thread_argument text, shard text)
LANGUAGE sql IMMUTABLE
AS $$
    VALUES
    ('create_thread', 'host', NULL,
     'multi: the one-main check reads threads by kind across shards; once per thread, at its start'),
    ('start_generation', 'host', 'p_thread', 'single'),
    ('append_message', 'host', 'p_thread', 'single'),
    ('append_messages', 'host', 'p_thread', 'single'),
    ('note_prefix', 'host', 'p_thread', 'single'),
    ('turn_started', 'host', 'p_thread', 'single'),
    ('turn_ended', 'host', 'p_thread', 'single'),
    ('waiting_for_user', 'host', 'p_thread', 'single'),
    ('task_ended', 'host', 'p_thread', 'single'),
    ('set_thread_status', 'host', 'p_thread', 'single'),
    ('claim_shadow_run', 'claim', NULL,
     'multi: picks the next offer across threads (an index scan per shard), then locks one thread''s rows'),
    ('claim_steward_run', 'claim', NULL,
     'multi: asks steward_has_work (two partial indexes of generation_progress per shard), then '
     || 'reads the backlog across threads (partial index messages_undigested per shard) and '
     || 'writes the run on the steward''s shard'),
    ('submit_shadow_run', 'submit', NULL,
     'multi then single: the run is found by id alone (one index probe per shard), then every '
     || 'write is the run''s thread'),
    ('steward_step', 'steward', NULL,
     'multi then single: the run by id alone, then the steward''s shard; facts are reference writes')
$$;

COMMENT ON FUNCTION ember.distribution_hot_path() IS
'The hot-path functions, their part, their thread argument and how each runs distributed.';

-- The operator's one-time commands, in order, after `ember migrate` and with the workers added:
-- reference tables, then distributed tables co-located with threads, then the single-shard
-- functions routed by their thread argument. identity_documents and identity_versions point to
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
        SELECT 1, row_number() OVER (), format('DROP INDEX ember.%I;', e.constraint_name)
        FROM ember.distribution_exceptions() AS e
        UNION ALL
        SELECT 2, p.ord, CASE p.role
            WHEN 'reference' THEN format('SELECT create_reference_table(%L);', 'ember.' || p.table_name)
            WHEN 'distributed' THEN CASE WHEN p.table_name = 'threads'
                THEN format('SELECT create_distributed_table(%L, %L);',
                            'ember.' || p.table_name, p.distribution_column)
                ELSE format('SELECT create_distributed_table(%L, %L, colocate_with => %L);',
                            'ember.' || p.table_name, p.distribution_column, 'ember.threads')
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
                                )), h.thread_argument, 'ember.threads')
        FROM ember.distribution_hot_path() WITH ORDINALITY AS h (function_name, part, thread_argument, shard, ord)
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
--   3 a primary or unique key of a distributed table holds its distribution column (Citus checks
--     uniqueness on one shard only), unless ember.distribution_exceptions() names it;
--   4 a foreign key of a distributed table points to a reference table, or to a distributed one
--     with distribution column matched to distribution column (co-located shards), never to a
--     local table;
--   5 a reference or local table never points into a distributed table;
--   6 a sequence-filled column of a distributed table is bigint (Citus gives each node its own
--     range of a bigint sequence; smaller types can be drawn on the coordinator only);
--   7 the hot path's functions exist;
--   8 a hot-path function (listed, or a trigger function on a distributed table) joins a
--     distributed table only on its distribution column, read from its source: each
--     `JOIN ember.<table> [AS] <alias> ON|USING ...` of a distributed table must equate
--     <alias>.<column> with something. It does not see joins written as FROM a, b WHERE, EXISTS
--     or IN subqueries, views, dynamic SQL, or the other functions a listed function calls (each
--     is checked only when listed); and it checks that the column is equated, not that the other
--     side is the same thread's.
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
    SELECT 3, format('ember.%s: %s %s lacks distribution column %s: %s', p.table_name,
                     CASE con.contype WHEN 'p' THEN 'primary key' WHEN 'u' THEN 'unique constraint'
                                      ELSE 'unique index' END,
                     ic.relname, p.distribution_column, pg_get_indexdef(i.indexrelid))
    FROM plan AS p
    INNER JOIN pg_index AS i ON i.indrelid = p.rel AND i.indisunique
    INNER JOIN pg_class AS ic ON ic.oid = i.indexrelid
    LEFT JOIN pg_constraint AS con ON con.conindid = i.indexrelid AND con.conrelid = p.rel
    WHERE p.role = 'distributed'
        AND NOT p.dist_attnum = ANY(i.indkey::smallint[])
        AND NOT EXISTS (
            SELECT 1 FROM ember.distribution_exceptions() AS e
            WHERE e.table_name = p.table_name AND e.constraint_name = ic.relname
        )

    UNION ALL
    SELECT 4, format('ember.%s: foreign key %s %s: %s', s.table_name, con.conname, CASE
                         WHEN t.role = 'local' THEN format('points to local table ember.%s', t.table_name)
                         ELSE format('does not match %s.%s to %s.%s', s.table_name, s.distribution_column,
                                     t.table_name, t.distribution_column) END,
                     pg_get_constraintdef(con.oid))
    FROM plan AS s
    INNER JOIN pg_constraint AS con ON con.conrelid = s.rel AND con.contype = 'f'
    INNER JOIN plan AS t ON t.rel = con.confrelid
    WHERE s.role = 'distributed' AND t.role <> 'reference'
        AND (t.role = 'local' OR NOT EXISTS (
            SELECT 1 FROM unnest(con.conkey, con.confkey) AS k (src, dst)
            WHERE k.src = s.dist_attnum AND k.dst = t.dist_attnum
        ))

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
    SELECT 8, format('ember.%s: JOIN ember.%s AS %s %s does not join on %s.%s',
                     j.function_name, j.table_name, j.alias, btrim(regexp_replace(j.cond, '\s+', ' ', 'g')),
                     j.alias, p.distribution_column)
    FROM hot_joins AS j
    INNER JOIN plan AS p ON p.table_name = j.table_name AND p.role = 'distributed'
    WHERE NOT (
        j.cond ~* format('\m%s\.%s\M\s*=|=\s*%s\.%s\M', j.alias, p.distribution_column, j.alias, p.distribution_column)
        OR j.cond ~* format('^USING\s*\([^)]*\m%s\M', p.distribution_column)
    )

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
