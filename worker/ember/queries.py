"""Every SQL statement the Python side runs, in one reviewable place.

The rules live in SQL functions (functions/*.sql); these statements only call them, or manage
the migration bookkeeping that has to exist before any function does.
"""

from __future__ import annotations

from typing import LiteralString

# hashtext('ember.migrate'): a fixed key shared by every migrating process.
MIGRATE_LOCK: LiteralString = "SELECT pg_advisory_lock(hashtext('ember.migrate'))"
MIGRATE_UNLOCK: LiteralString = "SELECT pg_advisory_unlock(hashtext('ember.migrate'))"

MIGRATE_BOOTSTRAP: LiteralString = """
CREATE SCHEMA IF NOT EXISTS ember;
CREATE TABLE IF NOT EXISTS ember.schema_migrations (
    name text PRIMARY KEY,
    sha256 text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
"""

APPLIED_MIGRATIONS: LiteralString = "SELECT name, sha256 FROM ember.schema_migrations"

RECORD_MIGRATION: LiteralString = (
    "INSERT INTO ember.schema_migrations (name, sha256) VALUES (%s, %s)"
)

DATABASE_EXISTS: LiteralString = "SELECT 1 FROM pg_database WHERE datname = %s"

# --- control plane (functions/070_identity.sql, 071_events.sql, 072_side_chat.sql) ---

TURN_IDENTITY: LiteralString = "SELECT ember.turn_identity(%s, %s::jsonb)"

IDENTITY_FILES: LiteralString = "SELECT ember.thread_identity_files(%s)"

THREAD_TOOLS: LiteralString = "SELECT name, availability, file_tool FROM ember.thread_tools(%s)"

TOOL_REGISTRY: LiteralString = """
SELECT name, kinds, availability, file_tool, offered_isolated, description
FROM ember.tool_registry()
"""

REGISTER_TOOL: LiteralString = "SELECT ember.register_tool(%s, %s, %s, %s, %s, %s)"

SIDE_CHAT_MESSAGE: LiteralString = "SELECT ember.side_chat_message(%s, %s, %s, %s)"

SIDE_CHAT_INSPECT: LiteralString = "SELECT ember.side_chat_inspect(%s)"

REPORT_PROGRESS: LiteralString = "SELECT ember.report_progress(%s, %s, %s)"

QUEUE_EVENT: LiteralString = "SELECT ember.queue_event(%s, %s, %s, %s, %s)"

DELIVERABLE_EVENTS: LiteralString = """
SELECT event_id, message_id, source, kind, from_thread, author, content, created_at
FROM ember.deliverable_events(%s, %s)
"""

PROGRESS_BOARD: LiteralString = """
SELECT thread_id, title, kind, status, running, event_id, report, reported_at, delivered
FROM ember.progress_board()
"""

# --- comparison ---

# The semantic judge's groups: candidates, grouping, skip reasons, routing, shortlist and the
# message text are all decided in SQL (ember.semantic_groups); the worker only calls and submits.
SEMANTIC_GROUPS: LiteralString = (
    "SELECT categories, model, skipped, proposals, facts, content"
    " FROM ember.semantic_groups(%s, %s, %s)"
)
SUBMIT_JUDGE_RUN: LiteralString = "SELECT ember.submit_judge_run(%s)"

# The report: the analyst's views, windowed. Each returns rows as dicts.
COMPARISON_SUMMARY: LiteralString = "SELECT * FROM ember.comparison_summary(%s, %s)"
COMPARISON_COST: LiteralString = "SELECT * FROM ember.comparison_cost(%s, %s)"
COMPARISON_LATENCY: LiteralString = "SELECT * FROM ember.comparison_latency(%s, %s)"
COMPARISON_EVIDENCE_QUALITY: LiteralString = """
SELECT source, evidence_kind, coalesce(problem, 'ok') AS problem, count(*) AS pointers
FROM ember.comparison_evidence_quality(%s, %s)
GROUP BY 1, 2, 3
ORDER BY 1, 2, 3
"""
COMPARISON_DAILY: LiteralString = "SELECT * FROM ember.comparison_daily(%s, %s)"
COMPARISON_CONTEXT: LiteralString = "SELECT * FROM ember.comparison_context(%s, %s)"
COMPARISON_BY_PATH: LiteralString = "SELECT * FROM ember.comparison_by_path(%s, %s)"
COMPARISON_BY_THREAD: LiteralString = "SELECT * FROM ember.comparison_by_thread(%s, %s)"
# Every item of the window with its statuses (functions/064_comparison_items.sql); the report
# chooses which to show per section.
COMPARISON_ITEMS: LiteralString = "SELECT * FROM ember.comparison_items(%s, %s)"
COMPARISON_RUN_LIST: LiteralString = "SELECT * FROM ember.comparison_run_list(%s, %s)"
# The evidence of the items the report shows, rendered bounded, never a row of an isolated thread.
COMPARISON_ITEM_EVIDENCE: LiteralString = """
SELECT item, item_id, ordinal, message_id, generation_id, target_found, isolated, thread_id, seq,
       role, author, at, forgotten, excerpt, unread_reason, malformed
FROM ember.comparison_item_evidence(%s, %s, %s::bigint[], %s::bigint[])
"""

# --- worker (issue 9) ---
# The loop's own statements; every rule they rely on is in functions/04x_shadow_*.sql.

# A session-level lock: the worker holding it is the fleet's ticker until its connection ends.
TICKER_TRY_LOCK: LiteralString = "SELECT pg_try_advisory_lock(hashtext('ember.worker.ticker'))"
TICK: LiteralString = "SELECT ember.tick()"
TICK_INTERVAL: LiteralString = (
    "SELECT extract(epoch FROM ember.setting_interval('tick_interval'))::float8"
)
LISTEN_WAKE: LiteralString = "LISTEN ember_wake"
LISTEN_CANCEL: LiteralString = "LISTEN ember_cancel"
KEEPALIVE: LiteralString = "SELECT 1"

CLAIM_SHADOW: LiteralString = "SELECT ember.claim_shadow_run(%s, %s)"
SUBMIT_SHADOW: LiteralString = "SELECT ember.submit_shadow_run(%s, %s, %s)"
EXTEND_SHADOW_LEASE: LiteralString = "SELECT ember.extend_shadow_lease(%s, %s, %s)"
RELEASE_SHADOW: LiteralString = "SELECT ember.release_shadow_run(%s, %s)"
SHADOW_CANCEL_REQUESTED: LiteralString = "SELECT ember.shadow_run_cancel_requested(%s)"
# NULL unless the completed hot run read too little of its prefix from the cache (issue 22).
HOT_CACHE_SHORTFALL: LiteralString = "SELECT ember.hot_cache_shortfall(%s)"
# Through a granted function: ember_worker may read no table (functions/097_worker_reads.sql).
MODEL_THINKING_RETENTION: LiteralString = "SELECT ember.model_thinking_retention(%s)"

# --- host API (issue 9: ember.host) ---
HOST_CREATE_THREAD: LiteralString = "SELECT ember.create_thread(%s, %s, %s, %s, %s, %s)"
HOST_START_GENERATION: LiteralString = "SELECT ember.start_generation(%s)"
HOST_APPEND_MESSAGE: LiteralString = (
    "SELECT ember.append_message(%s, %s, %s, %s, %s::json, %s, %s, %s, %s)"
)
HOST_NOTE_PREFIX: LiteralString = "SELECT ember.note_prefix(%s, %s, %s, %s)"
HOST_TURN_STARTED: LiteralString = "SELECT ember.turn_started(%s)"
HOST_TURN_ENDED: LiteralString = "SELECT ember.turn_ended(%s, %s)"
HOST_WAITING_FOR_USER: LiteralString = "SELECT ember.waiting_for_user(%s)"
HOST_TASK_ENDED: LiteralString = "SELECT ember.task_ended(%s)"
HOST_SET_THREAD_STATUS: LiteralString = "SELECT ember.set_thread_status(%s, %s)"
HOST_SEAL_THREAD: LiteralString = "SELECT ember.seal_thread(%s)"
HOST_SETUP: LiteralString = "SELECT step, changed, detail FROM ember.setup(%s::jsonb, %s, %s, %s)"
HOST_CALL_MODEL: LiteralString = "SELECT ember.thread_call_model(%s)"

# --- operators' commands: ember init, status, settings, forget, search (ember/commands/) ---
TAG_MODEL: LiteralString = "SELECT ember.tag_model(%s, %s)"
WORK_STATUS: LiteralString = (
    "SELECT pipeline, state, reason, items, oldest, since, until, detail FROM ember.work_status()"
)
SETTINGS_LIST: LiteralString = (
    "SELECT key, value, default_value, value_type, min_value, max_value, description"
    " FROM ember.settings_list()"
)
SET_SETTING: LiteralString = "SELECT ember.set_setting(%s, %s)"
# ember forget and ember search use FORGET_THREAD, FORGET_MESSAGES and SEARCH_MEMORY above.

# --- steward (issue 10) ---
# The memory steward's statements; the rules are in functions/05x_steward_*.sql.
# Asked only when steward_has_work() says there is some: an index probe, where the claim itself
# locks the steward's row (a write) even when it then finds nothing.
CLAIM_STEWARD: LiteralString = (
    "SELECT ember.claim_steward_run(%s, %s) WHERE ember.steward_has_work()"
)
# True once a thread the run read is sealed (functions/059_steward_seal.sql).
STEWARD_CANCEL_REQUESTED: LiteralString = "SELECT ember.steward_run_cancel_requested(%s)"
STEWARD_STEP: LiteralString = (
    "SELECT ember.steward_step(%(run)s, %(token)s, %(response)s, %(embeddings)s, %(latency_ms)s, "
    "p_rejections => %(rejections)s, p_prompt_sha256 => %(prompt_sha256)s)"
)
# The worker gives up on a run; the digest of the steward prompt it was sent with, if any.
FAIL_STEWARD: LiteralString = (
    "SELECT ember.fail_steward_run(%(run)s, %(token)s, %(error)s, "
    "p_prompt_sha256 => %(prompt_sha256)s)"
)
EXTEND_STEWARD_LEASE: LiteralString = "SELECT ember.extend_steward_lease(%s, %s, %s)"
RELEASE_STEWARD: LiteralString = "SELECT ember.release_steward_run(%s, %s)"
FACTS_TO_EMBED: LiteralString = "SELECT fact_id, text FROM ember.facts_to_embed(%s)"
SET_FACT_EMBEDDING: LiteralString = "SELECT ember.set_fact_embedding(%s, %s::vector, %s)"
SEARCH_MEMORY: LiteralString = (
    "SELECT fact_id, text, evidence_kind, categories, score FROM "
    "ember.search_memory(%s, %s, %s::vector, %s)"
)

# --- import and export (issue 13) ---

IMPORT_STAGE: LiteralString = (
    "CREATE TEMP TABLE import_lines (lineno integer PRIMARY KEY, line text NOT NULL) ON COMMIT DROP"
)
IMPORT_COPY: LiteralString = "COPY import_lines (lineno, line) FROM STDIN"
IMPORT_APPLY: LiteralString = "SELECT ember.import_staged(%s, %s)"
IMPORT_KNOWN: LiteralString = "SELECT ember.import_known(%s)"
# The tables an import writes to, analyzed after it commits.
IMPORT_ANALYZE: LiteralString = (
    "ANALYZE ember.threads, ember.generations, ember.messages, ember.generation_progress"
)
EXPORT_RECORDS: LiteralString = "SELECT record FROM ember.export_records()"

# --- operations: migration status and the worker's start-up check ---
# to_regclass, so a status or dry run against an empty database reads "nothing applied" and
# creates nothing.
MIGRATIONS_TABLE_EXISTS: LiteralString = (
    "SELECT to_regclass('ember.schema_migrations') IS NOT NULL, "
    "to_regclass('ember.schema_functions') IS NOT NULL, "
    "to_regprocedure('ember.schema_state()') IS NOT NULL"
)

# The same through functions/005_schema_state.sql, for roles that may read no table.
SCHEMA_STATE: LiteralString = "SELECT kind, name, sha256 FROM ember.schema_state()"

APPLIED_FUNCTIONS: LiteralString = "SELECT sha256 FROM ember.schema_functions"

# Only a change of the digest touches the row, so a migrate that changes nothing writes nothing.
RECORD_FUNCTIONS: LiteralString = """
INSERT INTO ember.schema_functions (sha256) VALUES (%s)
ON CONFLICT (singleton) DO UPDATE SET sha256 = excluded.sha256, applied_at = clock_timestamp()
WHERE ember.schema_functions.sha256 <> excluded.sha256
"""

# --- forgetting and fact history (functions/085_fact_history.sql .. 089_export_facts.sql) ---

EXPLAIN_FACT: LiteralString = "SELECT ember.explain_fact(%s)"
# The analyst's explain (functions/088_explain_analyst.sql): evidence bounded, nothing of an
# isolated thread; the only explain ember_analyst may run.
EXPLAIN_FACT_ANALYST: LiteralString = "SELECT ember.comparison_explain_fact(%s)"
EXPLAIN_PROPOSAL_ANALYST: LiteralString = "SELECT ember.comparison_explain_proposal(%s)"
# Which explain this connection may run: the host's (explain_fact) when it may, else the analyst's.
CAN_EXPLAIN: LiteralString = """
SELECT has_function_privilege('ember.explain_fact(bigint)', 'EXECUTE'),
       has_function_privilege('ember.comparison_explain_fact(bigint)', 'EXECUTE')
"""

EXPORT_FACT_RECORDS: LiteralString = "SELECT record FROM ember.export_fact_records()"

FORGET_MESSAGES: LiteralString = "SELECT ember.forget_messages(%s, %s)"

FORGET_THREAD: LiteralString = "SELECT ember.forget_thread(%s, %s)"

# --- consolidation (issue 25) ---
# The third pipeline: one claim, one forced tool call, one submit (functions/100_consolidation.sql).
CLAIM_CONSOLIDATION: LiteralString = "SELECT ember.claim_consolidation_run(%s, %s)"
SUBMIT_CONSOLIDATION: LiteralString = "SELECT ember.submit_consolidation_run(%s, %s, %s)"
EXTEND_CONSOLIDATION_LEASE: LiteralString = "SELECT ember.extend_consolidation_lease(%s, %s, %s)"
RELEASE_CONSOLIDATION: LiteralString = "SELECT ember.release_consolidation_run(%s, %s)"

# --- cut-over (issue 25) ---
# `ember cutover`: the dry run reads cutover_plan; the real call is cut_over or cutover_rollback,
# whose answer carries the same plan fields.
CUTOVER_PLAN: LiteralString = "SELECT ember.cutover_plan(%s, %s, %s)"
CUT_OVER: LiteralString = "SELECT ember.cut_over(%s, %s, %s, %s)"
CUTOVER_ROLLBACK: LiteralString = "SELECT ember.cutover_rollback(%s, %s, %s)"

# --- demo (issue 16) ---
# `ember demo` plays its corpus through the host API with the injected clock's time (the last
# parameter of each call), then watches the worker through read-only counts.

DEMO_CREATE_THREAD: LiteralString = "SELECT ember.create_thread(%s, %s, %s, %s, %s, %s, %s)"
DEMO_ENSURE_STEWARD: LiteralString = "SELECT ember.ensure_steward_thread(%s)"
DEMO_START_GENERATION: LiteralString = "SELECT ember.start_generation(%s, %s)"
DEMO_APPEND_MESSAGE: LiteralString = (
    "SELECT ember.append_message(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
)
DEMO_NOTE_PREFIX: LiteralString = "SELECT ember.note_prefix(%s, %s, %s, %s, %s)"
DEMO_TURN_STARTED: LiteralString = "SELECT ember.turn_started(%s, %s)"
DEMO_TURN_ENDED: LiteralString = "SELECT ember.turn_ended(%s, true, %s)"
DEMO_WAITING_FOR_USER: LiteralString = "SELECT ember.waiting_for_user(%s, %s)"
DEMO_TASK_ENDED: LiteralString = "SELECT ember.task_ended(%s, %s)"
DEMO_THREAD_ENDED: LiteralString = "SELECT ember.set_thread_status(%s, 'ended', %s)"
DEMO_REPORT_PROGRESS: LiteralString = "SELECT ember.report_progress(%s, %s, %s, %s)"
DEMO_MAIN_EVENTS: LiteralString = "SELECT content FROM ember.deliverable_events('main', false, %s)"
DEMO_TICK_AT: LiteralString = "SELECT ember.tick(%s)"
DEMO_TICK: LiteralString = "SELECT ember.tick()"
DEMO_DEFINE_CATEGORY: LiteralString = "SELECT ember.define_category(%s, %s)"
DEMO_ACTIVATE_SHADOW: LiteralString = "SELECT ember.shadow_activate(%s)"
# The operator's step: a model may read a category once it is tagged for it.
DEMO_TAG_MODEL: LiteralString = """
UPDATE ember.models SET tags = array_append(tags, %(category)s)
WHERE id = %(model)s AND NOT (%(category)s = ANY (tags))
"""
DEMO_TAGGED_MODELS: LiteralString = "SELECT id FROM ember.models WHERE %s = ANY (tags)"
# The demo's cut-over of one thread (issue 25): the dry run's numbers, then the cut-over itself.
DEMO_CUTOVER_PLAN: LiteralString = "SELECT ember.cutover_plan('thread', %s)"
DEMO_CUT_OVER: LiteralString = "SELECT ember.cut_over('thread', %s, 'ember demo', %s)"
# The demo consolidates whenever its facts change, not every six hours.
DEMO_CONSOLIDATE_OFTEN: LiteralString = (
    "SELECT ember.set_setting('consolidation_interval', '0 seconds')"
)
# Consolidation has caught up: no group is due and no run is out.
DEMO_CONSOLIDATION_SETTLED: LiteralString = """
SELECT NOT EXISTS (SELECT 1 FROM ember.consolidation_groups() WHERE due)
    AND NOT EXISTS (SELECT 1 FROM ember.consolidation_runs WHERE status = 'running')
"""
# What the cut-over did: promotions by outcome, and the supersedes consolidation applied.
DEMO_PROMOTIONS: LiteralString = """
SELECT CASE WHEN outcome = 'refused' AND reason LIKE '%%the steward reads%%' THEN 'before the point'
            ELSE outcome END, count(*)
FROM ember.cutover_promotions WHERE thread_id = %s GROUP BY 1
"""
DEMO_SUPERSEDES: LiteralString = """
SELECT o.text, n.text, n.cutover_id IS NOT NULL, a.reason
FROM ember.consolidation_actions AS a
INNER JOIN ember.facts AS o ON o.id = a.fact_ids[1]
INNER JOIN ember.facts AS n ON n.id = a.fact_ids[2]
WHERE a.action = 'supersede' AND a.status = 'applied'
ORDER BY a.id
"""
DEMO_WAITING: LiteralString = (
    "SELECT thread_id, waiting_for FROM ember.shadow_ready() WHERE model IS NULL"
)
DEMO_RUN_IN_STATUS: LiteralString = (
    "SELECT count(*) > 0 FROM ember.shadow_runs WHERE thread_id = %s AND status = %s"
)
DEMO_COUNTS: LiteralString = """
SELECT
    (SELECT count(*) FROM ember.shadow_runs WHERE path = 'hot'),
    (SELECT count(*) FROM ember.shadow_runs WHERE path = 'cold'),
    (SELECT count(*) FROM ember.shadow_runs WHERE status = 'cancelled'),
    (SELECT count(*) FROM ember.shadow_runs WHERE status = 'running')
    + (SELECT count(*) FROM ember.steward_runs WHERE status = 'running'),
    (SELECT count(*) FROM ember.steward_runs),
    (SELECT count(*) FROM ember.facts WHERE status = 'active'),
    (SELECT count(*) FROM ember.shadow_proposals WHERE validation_error IS NULL),
    (SELECT count(*) FROM ember.shadow_proposals WHERE validation_error IS NOT NULL)
"""
# No work left, by ember.work_status() (the function behind `ember status`): nothing running or
# with a lapsed lease, nothing ready (a thread waiting for a tagged model is not ready), no
# generation the steward may read, no thread tick has not offered yet.
DEMO_PENDING: LiteralString = """
SELECT
    coalesce(sum(items) FILTER (WHERE state = 'running' OR reason = 'lease-expired'), 0),
    coalesce(sum(items) FILTER (WHERE pipeline = 'shadow' AND state = 'ready'), 0),
    coalesce(sum(items) FILTER (WHERE pipeline = 'steward' AND state = 'ready'), 0),
    coalesce(sum(items) FILTER (
        WHERE pipeline = 'shadow' AND reason IN ('tick-due', 'idle-not-reached')), 0)
FROM ember.work_status()
"""
DEMO_RUNS_BY_PATH: LiteralString = (
    "SELECT path || ' ' || status, count(*) FROM ember.shadow_runs GROUP BY 1"
)
DEMO_HOT_RUNS: LiteralString = """
SELECT thread_id, cache_read_tokens, started_at FROM ember.shadow_runs
WHERE path = 'hot' AND status = 'completed' ORDER BY id
"""
DEMO_FIGURES: LiteralString = """
SELECT
    (SELECT count(*) FROM ember.facts WHERE status = 'active'),
    (SELECT count(DISTINCT e.fact_id) FROM ember.fact_evidence AS e
     INNER JOIN ember.facts AS f ON e.fact_id = f.id WHERE f.status = 'active'),
    (SELECT count(*) FROM ember.steward_runs WHERE status = 'completed'),
    (SELECT count(*) FROM ember.shadow_proposals WHERE validation_error IS NULL),
    (SELECT count(*) FROM ember.shadow_proposals AS p
     INNER JOIN ember.shadow_runs AS r ON p.run_id = r.id WHERE r.status = 'cancelled'),
    (SELECT count(*) FROM ember.facts WHERE status = 'active' AND embedding IS NOT NULL)
"""

# --- memory served as one viewer (ember.memory: ember.host's tools and ember mcp) ---
# functions/053_steward_search.sql and 055_memory_serving.sql decide what the viewer may read.

MEMORY_CHECK_VIEWER: LiteralString = "SELECT count(*) FROM ember.recent_facts(%s, 1)"
MEMORY_SEARCH: LiteralString = (
    "SELECT fact_id, text, evidence_kind, categories, created_at"
    " FROM ember.search_memory(%s, %s, %s::vector, %s)"
)
MEMORY_RECENT: LiteralString = (
    "SELECT fact_id, text, evidence_kind, categories, created_at FROM ember.recent_facts(%s, %s)"
)
MEMORY_EXPLAIN: LiteralString = "SELECT ember.explain_fact_as(%s, %s)"
MEMORY_FORGET: LiteralString = "SELECT ember.forget_fact(%s, %s, %s)"

# --- the model registry (functions/049_model_registry.sql) ---

LOAD_MODELS: LiteralString = "SELECT ember.load_models(%s::jsonb)"

LIST_MODELS: LiteralString = """
SELECT model, tier, cache_ttl::text, min_cacheable_tokens, observed_min_cacheable_tokens,
       hot_min_tokens, thinking_retention, preserved_thinking, price_as_of::text,
       price_input, price_output, price_cache_write_5m, price_cache_write_1h, price_cache_read,
       length_tiers, source
FROM ember.model_registry
ORDER BY position
"""

COMPARISON_CACHE_MISSES: LiteralString = "SELECT * FROM ember.comparison_cache_misses(%s, %s)"
# The consolidation job's review queue, waiting and decided items (not windowed: a queue).
COMPARISON_REVIEW_QUEUE: LiteralString = "SELECT * FROM ember.comparison_review_queue()"

# Which life of the server a connection talks to: the postmaster's start changes on a restart,
# the shared statistics' reset time on a crash recovery (which discards them).
SERVER_GENERATION: LiteralString = """
SELECT pg_postmaster_start_time(), (SELECT stats_reset FROM pg_stat_archiver)
"""

# --- ember eval (issue 28): functions/093_eval.sql and 094_eval_report.sql ---

EVAL_BEGIN: LiteralString = "SELECT ember.eval_begin(%s, %s, %s, %s, %s, %s, %s)"
EVAL_RUN: LiteralString = """
SELECT run_id, benchmark, source, source_sha256, answer_model, judge_model, top_k, question_limit,
       status, error, started_at, finished_at, conversations, questions, excluded, calls,
       simulated_calls
FROM ember.eval_runs_list() WHERE run_id = %s
"""
EVAL_LATEST_RUN: LiteralString = "SELECT max(run_id) AS run_id FROM ember.eval_runs_list()"
EVAL_ADD_CONVERSATION: LiteralString = (
    "SELECT ember.eval_add_conversation(%s, %s, %s, %s::jsonb, %s::jsonb)"
)
EVAL_ADD_QUESTIONS: LiteralString = "SELECT ember.eval_add_questions(%s, %s::jsonb)"
EVAL_TICK: LiteralString = "SELECT ember.tick()"
EVAL_CUT_OVER: LiteralString = "SELECT ember.eval_cut_over(%s, %s)"
EVAL_CLOSE_CONVERSATION: LiteralString = "SELECT ember.eval_close_conversation(%s, %s)"
EVAL_SEARCH: LiteralString = (
    "SELECT fact_id, score FROM ember.search_memory(%s, %s, %s::vector, %s)"
)
EVAL_SHOWN: LiteralString = """
SELECT rank, fact_id, proposal_id, text, stated_at FROM ember.eval_shown(%s, %s, %s)
"""
EVAL_RECORD_CALL: LiteralString = "SELECT ember.eval_record_call(%s, %s::jsonb)"
EVAL_RECORD_ANSWER: LiteralString = "SELECT ember.eval_record_answer(%s, %s::jsonb)"
EVAL_FINISH: LiteralString = "SELECT ember.eval_finish(%s, %s)"
EVAL_ESTIMATE: LiteralString = """
SELECT role, model, calls, input_tokens, output_tokens, estimated_usd
FROM ember.eval_estimate(%s::jsonb)
"""
EVAL_SUMMARY: LiteralString = "SELECT * FROM ember.eval_summary(%s)"
EVAL_CATEGORIES: LiteralString = "SELECT * FROM ember.eval_categories(%s)"
EVAL_DISAGREEMENTS: LiteralString = "SELECT * FROM ember.eval_disagreements(%s)"
EVAL_QUESTION_RESULTS: LiteralString = "SELECT * FROM ember.eval_question_results(%s)"
EVAL_EXTRACTION_COST: LiteralString = """
SELECT c.* FROM ember.eval_runs_list() AS r,
LATERAL ember.comparison_cost(r.started_at, r.finished_at) AS c
WHERE r.run_id = %s AND c.pipeline <> 'semantic judge'
"""
# Whether a database ember eval is about to recreate holds anything but a previous eval: tables
# outside schema ember, or Ember memory that no eval run wrote.
EVAL_TARGET_FOREIGN_TABLES: LiteralString = """
SELECT count(*) FROM pg_catalog.pg_class AS c
INNER JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p') AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'ember')
  AND n.nspname NOT LIKE 'pg\\_%'
"""
EVAL_TARGET_HAS_EMBER: LiteralString = (
    "SELECT to_regclass('ember.threads') IS NOT NULL, to_regclass('ember.eval_runs') IS NOT NULL"
)
EVAL_TARGET_MEMORY: LiteralString = (
    "SELECT EXISTS (SELECT 1 FROM ember.threads), EXISTS (SELECT 1 FROM ember.facts)"
)
EVAL_TARGET_RUNS: LiteralString = "SELECT EXISTS (SELECT 1 FROM ember.eval_runs)"

# The distribution plan (functions/004_distribution_plan.sql), rendered into docs/operations.md.
DISTRIBUTION_PLAN: LiteralString = (
    "SELECT table_name, role, distribution_column, why FROM ember.distribution_plan()"
)
DISTRIBUTION_HOT_PATH: LiteralString = (
    "SELECT function_name, part, thread_argument, shard FROM ember.distribution_hot_path()"
)
DISTRIBUTION_EXCEPTIONS: LiteralString = (
    "SELECT table_name, constraint_name, what_holds_it FROM ember.distribution_exceptions()"
)
DISTRIBUTION_COMMANDS: LiteralString = "SELECT * FROM ember.distribution_commands()"
