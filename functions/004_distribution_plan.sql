-- The distribution plan (issue 31): how a deployment that outgrows one server spreads Ember over
-- a Citus cluster. This file is the one place the plan's lists live: pgtap/099_distribution_lint.sql
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
    ('forgettings', 'reference', NULL,
     'one row per forget command (rare); messages and proposals point to it'),
    ('facts', 'reference', NULL,
     'production memory crosses threads by design; written at the steward''s rate, searched from any node'),
    ('fact_evidence', 'reference', NULL, 'a fact''s pointers, written with the fact'),
    ('fact_history', 'reference', NULL, 'each change of a fact, written with the change'),
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
    ('shadow_prefixes', 'distributed', 'thread_id', 'a thread''s last request, written per host call'),
    ('shadow_runs', 'distributed', 'thread_id', 'one row per shadow run of a thread'),
    ('shadow_proposals', 'distributed', 'thread_id', 'a run''s proposals, about its own thread'),
    ('steward_runs', 'distributed', 'thread_id',
     'the steward''s runs, all in its thread memory-steward: one shard, beside its messages'),
    ('thread_events', 'distributed', 'thread_id', 'events queued for the receiving thread'),
    ('main_actions', 'distributed', 'thread_id', 'main''s messages to a side chat, kept on the side chat'),
    ('schema_migrations', 'local', NULL, 'what ember migrate applied: the coordinator''s bookkeeping'),
    ('schema_functions', 'local', NULL, 'the checksum of functions/: the coordinator''s bookkeeping'),
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
     'multi: reads the backlog across threads (partial index messages_undigested per shard), '
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
-- Function signatures are printed schema-qualified.
SET search_path = pg_catalog, pg_temp
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
                                f.oid::regprocedure::text, h.thread_argument, 'ember.threads')
        FROM ember.distribution_hot_path() WITH ORDINALITY AS h (function_name, part, thread_argument, shard, ord)
        INNER JOIN pg_catalog.pg_proc AS f
            ON f.proname = h.function_name AND f.pronamespace = 'ember'::regnamespace
        WHERE h.shard = 'single'
    ) AS s
    ORDER BY s.step, s.n, s.c
$$;

COMMENT ON FUNCTION ember.distribution_commands() IS
'The one-time Citus commands of the distribution plan, in the order an operator runs them.';
