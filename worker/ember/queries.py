"""Every SQL statement the Python side runs, in one reviewable place.

The rules live in SQL functions (functions/*.sql); these statements only call them, or manage
the migration bookkeeping that has to exist before any function does. Each statement says what
it is for in the comment above it and takes named parameters (`%(name)s`), so a call site passes
a dict whose keys are the names the statement reads.

Host calls that take the time (`p_now`) read it from `%(now)s`: the host's clock when it has
one, else NULL, which means the database's own clock (`clock_timestamp()`, as the functions'
default).
"""

from __future__ import annotations

from typing import LiteralString

# --- migrations (ember.migrate) ---

# Serialize migrating processes; hashtext('ember.migrate') is a fixed key they all share.
MIGRATE_LOCK: LiteralString = "SELECT pg_advisory_lock(hashtext('ember.migrate'))"
# Let the next migrating process in.
MIGRATE_UNLOCK: LiteralString = "SELECT pg_advisory_unlock(hashtext('ember.migrate'))"

# The schema and the ledger of applied migrations, before any migration runs.
MIGRATE_BOOTSTRAP: LiteralString = """
CREATE SCHEMA IF NOT EXISTS ember;
CREATE TABLE IF NOT EXISTS ember.schema_migrations (
    name text PRIMARY KEY,
    sha256 text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
"""

# The tenant that the rows of a database from before tenants become
# (db/migrations/0051_tenants.sql), and whether a tenant exists.
SET_MIGRATE_TENANT: LiteralString = "SELECT set_config('ember.migrate_tenant', %(tenant)s, false)"
TENANT_EXISTS: LiteralString = "SELECT 1 FROM ember.tenants WHERE id = %(tenant)s"

# The migrations applied so far, with the digest each had when it ran.
APPLIED_MIGRATIONS: LiteralString = "SELECT name, sha256 FROM ember.schema_migrations"

# One migration has run: its name and digest into the ledger.
RECORD_MIGRATION: LiteralString = (
    "INSERT INTO ember.schema_migrations (name, sha256) VALUES (%(name)s, %(sha256)s)"
)

# Whether a database of this name exists on the server (ember's development setup).
DATABASE_EXISTS: LiteralString = "SELECT 1 FROM pg_database WHERE datname = %(name)s"

# --- control plane (functions/070_identity.sql, 071_events.sql, 072_side_chat.sql) ---

# Record the identity documents the host read for the thread's next turn; answers what to send.
TURN_IDENTITY: LiteralString = (
    "SELECT ember.turn_identity(%(thread)s, %(reads)s::jsonb,"
    " coalesce(%(now)s::timestamptz, clock_timestamp()))"
)

# The identity documents the thread's turns read, for the host to load.
IDENTITY_FILES: LiteralString = "SELECT ember.thread_identity_files(%(thread)s)"

# The tools the thread may offer this turn, each with its availability.
THREAD_TOOLS: LiteralString = (
    "SELECT name, availability, file_tool FROM ember.thread_tools(%(thread)s)"
)

# Every registered tool, for `ember tools` and the host's tool list.
TOOL_REGISTRY: LiteralString = """
SELECT name, kinds, availability, file_tool, offered_isolated, description
FROM ember.tool_registry()
"""

# Register (or update) one of the host's tools and which kinds of thread offer it.
REGISTER_TOOL: LiteralString = (
    "SELECT ember.register_tool(%(name)s, %(kinds)s, %(availability)s, %(description)s,"
    " %(file_tool)s, %(offered_isolated)s)"
)

# Main's side-chat tool call: one message to a side thread with its intent; answers the result.
SIDE_CHAT_MESSAGE: LiteralString = (
    "SELECT ember.side_chat_message(%(tool_call_id)s, %(thread)s, %(intent)s, %(message)s,"
    " coalesce(%(now)s::timestamptz, clock_timestamp()))"
)

# What main sees of a side thread when it inspects it.
SIDE_CHAT_INSPECT: LiteralString = "SELECT ember.side_chat_inspect(%(thread)s)"

# A task thread's report_progress tool call: the report queued for main; answers the result.
REPORT_PROGRESS: LiteralString = (
    "SELECT ember.report_progress(%(tool_call_id)s, %(thread)s, %(report)s,"
    " coalesce(%(now)s::timestamptz, clock_timestamp()))"
)

# Queue an event for a thread (a progress report, a side-chat answer, a notice).
QUEUE_EVENT: LiteralString = (
    "SELECT ember.queue_event(%(thread)s, %(source)s, %(kind)s, %(content)s, %(from_thread)s)"
)

# The events the thread may take in now: at a safe point within a turn, or at a turn boundary.
DELIVERABLE_EVENTS: LiteralString = """
SELECT event_id, message_id, source, kind, from_thread, author, content, created_at
FROM ember.deliverable_events(
    %(thread)s, %(at_safe_point)s, coalesce(%(now)s::timestamptz, clock_timestamp()))
"""

# Main's board: each task and side thread with its latest report and whether it was delivered.
PROGRESS_BOARD: LiteralString = """
SELECT thread_id, title, kind, status, running, event_id, report, reported_at, delivered
FROM ember.progress_board()
"""

# --- comparison ---

# The semantic judge's groups: candidates, grouping, skip reasons, routing, shortlist and the
# message text are all decided in SQL (ember.semantic_groups); the worker only calls and submits.
SEMANTIC_GROUPS: LiteralString = (
    "SELECT categories, model, skipped, proposals, facts, content"
    " FROM ember.semantic_groups(%(since)s, %(until)s, %(k)s)"
)
# One group's judge call and the pairs it found, stored as a judge run.
SUBMIT_JUDGE_RUN: LiteralString = "SELECT ember.submit_judge_run(%(outcome)s)"

# The report: the analyst's views, windowed by %(since)s and %(until)s (NULL: open). Each returns
# rows as dicts.
# The headline figures of both pipelines.
COMPARISON_SUMMARY: LiteralString = "SELECT * FROM ember.comparison_summary(%(since)s, %(until)s)"
# Tokens and dollars per pipeline and path.
COMPARISON_COST: LiteralString = "SELECT * FROM ember.comparison_cost(%(since)s, %(until)s)"
# How long runs took, per pipeline and path.
COMPARISON_LATENCY: LiteralString = "SELECT * FROM ember.comparison_latency(%(since)s, %(until)s)"
# Evidence pointers by source, kind and what is wrong with them ('ok' when nothing).
COMPARISON_EVIDENCE_QUALITY: LiteralString = """
SELECT source, evidence_kind, coalesce(problem, 'ok') AS problem, count(*) AS pointers
FROM ember.comparison_evidence_quality(%(since)s, %(until)s)
GROUP BY 1, 2, 3
ORDER BY 1, 2, 3
"""
# The summary's figures day by day.
COMPARISON_DAILY: LiteralString = "SELECT * FROM ember.comparison_daily(%(since)s, %(until)s)"
# What the window holds: threads, rows, generations read by each side.
COMPARISON_CONTEXT: LiteralString = "SELECT * FROM ember.comparison_context(%(since)s, %(until)s)"
# Shadow's figures per path (hot, cold).
COMPARISON_BY_PATH: LiteralString = "SELECT * FROM ember.comparison_by_path(%(since)s, %(until)s)"
# Both sides' figures per thread.
COMPARISON_BY_THREAD: LiteralString = (
    "SELECT * FROM ember.comparison_by_thread(%(since)s, %(until)s)"
)
# Every item of the window with its statuses (functions/064_comparison_items.sql); the report
# chooses which to show per section.
COMPARISON_ITEMS: LiteralString = "SELECT * FROM ember.comparison_items(%(since)s, %(until)s)"
# Every run of both pipelines in the window.
COMPARISON_RUN_LIST: LiteralString = "SELECT * FROM ember.comparison_run_list(%(since)s, %(until)s)"
# The evidence of the items the report shows, rendered bounded, never a row of an isolated thread.
COMPARISON_ITEM_EVIDENCE: LiteralString = """
SELECT item, item_id, ordinal, message_id, generation_id, target_found, isolated, thread_id, seq,
       role, author, at, forgotten, excerpt, unread_reason, malformed
FROM ember.comparison_item_evidence(
    %(since)s, %(until)s, %(fact_ids)s::bigint[], %(proposal_ids)s::bigint[])
"""

# --- worker (issue 9) ---
# The loop's own statements; every rule they rely on is in functions/04x_shadow_*.sql.

# The fleet's tick: NULL when another worker ticked within half an interval (nothing is held
# between calls, so a worker that stops ticking is replaced at once; functions/046_shadow_tick.sql).
FLEET_TICK: LiteralString = "SELECT ember.fleet_tick(%(worker)s, make_interval(secs => %(every)s))"
# The periodic pass: idle threads offered, expired prefixes dropped, lapsed leases freed.
TICK: LiteralString = "SELECT ember.tick()"
# The same pass at a given time (NULL: now), for a runtime that simulates time: `ember demo`'s
# ticks while it plays its corpus on an injected clock, as the worker would have ticked.
TICK_AT: LiteralString = "SELECT ember.tick(coalesce(%(now)s::timestamptz, clock_timestamp()))"
# How often the ticker runs tick(), in seconds (the tick_interval setting).
TICK_INTERVAL: LiteralString = (
    "SELECT extract(epoch FROM ember.setting_interval('tick_interval'))::float8"
)
# Wake the worker when work is offered.
LISTEN_WAKE: LiteralString = "LISTEN ember_wake"
# Tell the worker when a run it holds is to be cancelled.
LISTEN_CANCEL: LiteralString = "LISTEN ember_cancel"
# Keep the listening connection alive (and notice when it is not).
KEEPALIVE: LiteralString = "SELECT 1"

# Claim the next shadow run for this worker, leased for %(lease)s; NULL when there is none.
CLAIM_SHADOW: LiteralString = "SELECT ember.claim_shadow_run(%(worker)s, %(lease)s)"
# A shadow run's outcome (proposals, usage, or the failure), under its lease.
SUBMIT_SHADOW: LiteralString = (
    "SELECT ember.submit_shadow_run(%(tenant)s, %(run)s, %(lease_token)s, %(outcome)s)"
)
# Keep a shadow run's lease for another %(lease)s.
EXTEND_SHADOW_LEASE: LiteralString = (
    "SELECT ember.extend_shadow_lease(%(tenant)s, %(run)s, %(lease_token)s, %(lease)s)"
)
# Give a shadow run back unfinished (the worker is stopping).
RELEASE_SHADOW: LiteralString = (
    "SELECT ember.release_shadow_run(%(tenant)s, %(run)s, %(lease_token)s)"
)
# Whether the shadow run was cancelled since it was claimed (the user typed in its thread).
SHADOW_CANCEL_REQUESTED: LiteralString = (
    "SELECT ember.shadow_run_cancel_requested(%(tenant)s, %(run)s)"
)
# NULL unless the completed hot run read too little of its prefix from the cache (issue 22).
HOT_CACHE_SHORTFALL: LiteralString = "SELECT ember.hot_cache_shortfall(%(tenant)s, %(run)s)"
# Which thinking blocks the model keeps across turns; through a granted function, since
# ember_worker may read no table (functions/097_worker_reads.sql).
MODEL_THINKING_RETENTION: LiteralString = "SELECT ember.model_thinking_retention(%(model)s)"

# --- host API (issue 9: ember.host) ---
# Each call of ember.host.Host; those that take the time read it from %(now)s (see the top).

# A new thread of a kind, with its title, category, seal tier and model pin.
HOST_CREATE_THREAD: LiteralString = (
    "SELECT ember.create_thread(%(tenant)s, %(thread)s, %(kind)s, %(title)s, %(category)s,"
    " %(seal_tier)s, %(model)s, coalesce(%(now)s::timestamptz, clock_timestamp()))"
)
# The steward's hidden thread, created once main exists (it copies main's model pin).
HOST_ENSURE_STEWARD: LiteralString = (
    "SELECT ember.ensure_steward_thread(%(tenant)s,"
    " coalesce(%(now)s::timestamptz, clock_timestamp()))"
)
# The thread's context was reset: a new generation starts.
HOST_START_GENERATION: LiteralString = (
    "SELECT ember.start_generation(%(tenant)s, %(thread)s,"
    " coalesce(%(now)s::timestamptz, clock_timestamp()))"
)
# One message of the thread's transcript; answers its id.
HOST_APPEND_MESSAGE: LiteralString = """
SELECT ember.append_message(
    %(tenant)s, %(thread)s, %(role)s, %(content)s, %(author)s, %(blocks)s::json,
    %(tool_call_id)s, %(tool_name)s, %(tool_status)s, %(from_thread)s,
    coalesce(%(now)s::timestamptz, clock_timestamp()))
"""
# The exact request and answer of the thread's last model call, for the hot path to replay.
HOST_NOTE_PREFIX: LiteralString = (
    "SELECT ember.note_prefix(%(tenant)s, %(thread)s, %(request)s, %(response)s, %(started_at)s,"
    " coalesce(%(now)s::timestamptz, clock_timestamp()))"
)
# A turn of the thread began: shadow waits for its end.
HOST_TURN_STARTED: LiteralString = (
    "SELECT ember.turn_started(%(tenant)s, %(thread)s,"
    " coalesce(%(now)s::timestamptz, clock_timestamp()))"
)
# A turn ended, well or not; answers what shadow did with the boundary.
HOST_TURN_ENDED: LiteralString = (
    "SELECT ember.turn_ended(%(tenant)s, %(thread)s, %(ok)s,"
    " coalesce(%(now)s::timestamptz, clock_timestamp()))"
)
# The thread waits for its user: a moment shadow may read it.
HOST_WAITING_FOR_USER: LiteralString = (
    "SELECT ember.waiting_for_user(%(tenant)s, %(thread)s,"
    " coalesce(%(now)s::timestamptz, clock_timestamp()))"
)
# The thread's task is done: a moment shadow may read it.
HOST_TASK_ENDED: LiteralString = (
    "SELECT ember.task_ended(%(tenant)s, %(thread)s,"
    " coalesce(%(now)s::timestamptz, clock_timestamp()))"
)
# The thread becomes active, ended or archived.
HOST_SET_THREAD_STATUS: LiteralString = (
    "SELECT ember.set_thread_status(%(tenant)s, %(thread)s, %(status)s,"
    " coalesce(%(now)s::timestamptz, clock_timestamp()))"
)
# Isolate a side or task thread from now on.
HOST_SEAL_THREAD: LiteralString = "SELECT ember.seal_thread(%(tenant)s, %(thread)s)"
# The one-time calls in order (tenant, categories, main, steward, shadow); one row per step.
HOST_SETUP: LiteralString = """
SELECT step, changed, detail
FROM ember.setup(
    %(tenant)s, %(categories)s::jsonb, %(main)s, %(main_model)s, %(activate_shadow)s,
    coalesce(%(now)s::timestamptz, clock_timestamp()))
"""
# The model the thread's next call may go to (its pin, refused when its labels forbid it).
HOST_CALL_MODEL: LiteralString = "SELECT ember.thread_call_model(%(thread)s)"
# A content category, by name with a description (kept when NULL).
HOST_DEFINE_CATEGORY: LiteralString = "SELECT ember.define_category(%(name)s, %(description)s)"
# Shadow memory on: rows from now on are shadow's, older ones stay the steward's.
HOST_ACTIVATE_SHADOW: LiteralString = (
    "SELECT ember.shadow_activate(coalesce(%(now)s::timestamptz, clock_timestamp()))"
)

# --- operators' commands: ember init, status, settings, forget, search (ember/commands/) ---

# The operator's step: a model may read a category once it is tagged for it; false if it was.
TAG_MODEL: LiteralString = "SELECT ember.tag_model(%(model)s, %(category)s)"
# Why nothing is happening, or what is: one row per pipeline, state and reason (`ember status`).
WORK_STATUS: LiteralString = (
    "SELECT pipeline, state, reason, items, oldest, since, until, detail FROM ember.work_status()"
)
# Every setting with its value, default, type and bounds.
SETTINGS_LIST: LiteralString = (
    "SELECT key, value, default_value, value_type, min_value, max_value, description"
    " FROM ember.settings_list()"
)
# Change one setting; answers the previous and the new value.
SET_SETTING: LiteralString = "SELECT ember.set_setting(%(key)s, %(value)s)"
# ember forget and ember search use FORGET_THREAD, FORGET_MESSAGES and SEARCH_MEMORY below.

# --- steward (issue 10) ---
# The memory steward's statements; the rules are in functions/05x_steward_*.sql.
# Claim the steward's next wake, asked only when steward_has_work() says there is some: an index
# probe, where the claim itself locks the steward's row (a write) even when it then finds nothing.
CLAIM_STEWARD: LiteralString = (
    "SELECT ember.claim_steward_run(%(worker)s, %(lease)s) WHERE ember.steward_has_work()"
)
# True once a thread the run read is sealed (functions/059_steward_seal.sql).
STEWARD_CANCEL_REQUESTED: LiteralString = (
    "SELECT ember.steward_run_cancel_requested(%(tenant)s, %(run)s)"
)
# One step of the steward's tool loop: the model's answer in, what to send next out.
STEWARD_STEP: LiteralString = (
    "SELECT ember.steward_step(%(tenant)s, %(run)s, %(token)s, %(response)s, %(embeddings)s, "
    "%(latency_ms)s, "
    "p_rejections => %(rejections)s, p_prompt_sha256 => %(prompt_sha256)s)"
)
# The worker gives up on a run; the digest of the steward prompt it was sent with, if any.
FAIL_STEWARD: LiteralString = (
    "SELECT ember.fail_steward_run(%(tenant)s, %(run)s, %(token)s, %(error)s, "
    "p_prompt_sha256 => %(prompt_sha256)s)"
)
# Keep the steward run's lease for another %(lease)s.
EXTEND_STEWARD_LEASE: LiteralString = (
    "SELECT ember.extend_steward_lease(%(tenant)s, %(run)s, %(lease_token)s, %(lease)s)"
)
# Give the steward run back unfinished (the worker is stopping).
RELEASE_STEWARD: LiteralString = (
    "SELECT ember.release_steward_run(%(tenant)s, %(run)s, %(lease_token)s)"
)
# Up to %(limit)s active facts without an embedding, for the worker's embedder.
FACTS_TO_EMBED: LiteralString = "SELECT fact_id, text FROM ember.facts_to_embed(%(limit)s)"
# One fact's embedding, with the model that made it.
SET_FACT_EMBEDDING: LiteralString = (
    "SELECT ember.set_fact_embedding(%(fact)s, %(embedding)s::vector, %(model)s)"
)
# `ember search`: the facts the viewer may read that match, best first.
SEARCH_MEMORY: LiteralString = (
    "SELECT fact_id, text, evidence_kind, categories, score FROM "
    "ember.search_memory(%(tenant)s, %(viewer)s, %(query)s, %(embedding)s::vector, %(limit)s)"
)

# --- import and export (issue 13) ---

# The largest message content, in bytes: the longest line a file may hold is derived from it.
IMPORT_MESSAGE_LIMIT: LiteralString = "SELECT ember.setting_int('max_message_bytes')"
# The import file's lines are staged here, then applied by one function call.
IMPORT_STAGE: LiteralString = (
    "CREATE TEMP TABLE import_lines (lineno integer PRIMARY KEY, line text NOT NULL) ON COMMIT DROP"
)
# The staged lines, streamed in.
IMPORT_COPY: LiteralString = "COPY import_lines (lineno, line) FROM STDIN"
# Apply the staged lines (all or, when partial, the valid ones); answers what was written.
IMPORT_APPLY: LiteralString = "SELECT ember.import_staged(%(partial)s, %(digest)s)"
# The result of an earlier import of the same file (by its digest), or NULL.
IMPORT_KNOWN: LiteralString = "SELECT ember.import_known(%(digest)s)"
# The tables an import writes to, analyzed after it commits.
IMPORT_ANALYZE: LiteralString = (
    "ANALYZE ember.threads, ember.generations, ember.messages, ember.generation_progress"
)
# `ember export`: every record of the memory, in import-file order.
EXPORT_RECORDS: LiteralString = "SELECT record FROM ember.export_records()"

# --- operations: migration status and the worker's start-up check ---
# Which bookkeeping exists: to_regclass, so a status or dry run against an empty database reads
# "nothing applied" and creates nothing.
MIGRATIONS_TABLE_EXISTS: LiteralString = (
    "SELECT to_regclass('ember.schema_migrations') IS NOT NULL, "
    "to_regclass('ember.schema_functions') IS NOT NULL, "
    "to_regprocedure('ember.schema_state()') IS NOT NULL"
)

# The same through functions/005_schema_state.sql, for roles that may read no table.
SCHEMA_STATE: LiteralString = "SELECT kind, name, sha256 FROM ember.schema_state()"

# The digest of the functions last applied.
APPLIED_FUNCTIONS: LiteralString = "SELECT sha256 FROM ember.schema_functions"

# The functions' digest after applying them. Only a change of the digest touches the row, so a
# migrate that changes nothing writes nothing.
RECORD_FUNCTIONS: LiteralString = """
INSERT INTO ember.schema_functions (sha256) VALUES (%(sha256)s)
ON CONFLICT (singleton) DO UPDATE SET sha256 = excluded.sha256, applied_at = clock_timestamp()
WHERE ember.schema_functions.sha256 <> excluded.sha256
"""

# --- forgetting and fact history (functions/085_fact_history.sql .. 089_export_facts.sql) ---

# `ember explain` as the host: a fact's whole history and evidence.
EXPLAIN_FACT: LiteralString = "SELECT ember.explain_fact(%(id)s)"
# The analyst's explain (functions/088_explain_analyst.sql): evidence bounded, nothing of an
# isolated thread; the only explain ember_analyst may run.
EXPLAIN_FACT_ANALYST: LiteralString = "SELECT ember.comparison_explain_fact(%(id)s)"
# The analyst's explain of a shadow proposal.
EXPLAIN_PROPOSAL_ANALYST: LiteralString = "SELECT ember.comparison_explain_proposal(%(id)s)"
# Which explain this connection may run: the host's (explain_fact) when it may, else the analyst's.
CAN_EXPLAIN: LiteralString = """
SELECT has_function_privilege('ember.explain_fact(bigint)', 'EXECUTE'),
       has_function_privilege('ember.comparison_explain_fact(bigint)', 'EXECUTE')
"""

# `ember export --facts`: every fact with its history.
EXPORT_FACT_RECORDS: LiteralString = "SELECT record FROM ember.export_fact_records()"

# `ember forget --messages`: redact messages and what was derived from them.
FORGET_MESSAGES: LiteralString = "SELECT ember.forget_messages(%(tenant)s, %(ids)s, %(reason)s)"

# `ember forget --thread`: the same for a whole thread.
FORGET_THREAD: LiteralString = "SELECT ember.forget_thread(%(tenant)s, %(thread)s, %(reason)s)"

# --- consolidation (issue 25) ---
# The third pipeline: one claim, one forced tool call, one submit (functions/100_consolidation.sql).
# Claim the next due consolidation group for this worker, leased for %(lease)s.
CLAIM_CONSOLIDATION: LiteralString = "SELECT ember.claim_consolidation_run(%(worker)s, %(lease)s)"
# The consolidation run's decisions (merges, supersedes, flags), under its lease.
SUBMIT_CONSOLIDATION: LiteralString = (
    "SELECT ember.submit_consolidation_run(%(run)s, %(lease_token)s, %(outcome)s)"
)
# Keep the consolidation run's lease for another %(lease)s.
EXTEND_CONSOLIDATION_LEASE: LiteralString = (
    "SELECT ember.extend_consolidation_lease(%(run)s, %(lease_token)s, %(lease)s)"
)
# Give the consolidation run back unfinished (the worker is stopping).
RELEASE_CONSOLIDATION: LiteralString = (
    "SELECT ember.release_consolidation_run(%(run)s, %(lease_token)s)"
)

# --- cut-over (issue 25) ---
# `ember cutover`: the dry run reads cutover_plan; the real call is cut_over or cutover_rollback,
# whose answer carries the same plan fields.
# What cutting the scope over (or rolling it back) would do, changing nothing.
CUTOVER_PLAN: LiteralString = "SELECT ember.cutover_plan(%(scope)s, %(value)s, %(rollback)s)"
# Shadow takes the scope over from the steward; answers the plan and the cut-over's id.
CUT_OVER: LiteralString = "SELECT ember.cut_over(%(scope)s, %(value)s, %(by)s, %(note)s)"
# The steward takes the scope back.
CUTOVER_ROLLBACK: LiteralString = "SELECT ember.cutover_rollback(%(scope)s, %(value)s, %(by)s)"

# --- demo (issue 16) ---
# `ember demo` plays its corpus through ember.host.Host on its injected clock (the statements
# above), then watches the worker through these read-only counts.

# The models tagged for a category.
DEMO_TAGGED_MODELS: LiteralString = "SELECT id FROM ember.models WHERE %(category)s = ANY (tags)"
# Consolidation has caught up: no group is due and no run is out.
DEMO_CONSOLIDATION_SETTLED: LiteralString = """
SELECT NOT EXISTS (SELECT 1 FROM ember.consolidation_groups() WHERE due)
    AND NOT EXISTS (SELECT 1 FROM ember.consolidation_runs WHERE status = 'running')
"""
# What the cut-over did: promotions by outcome, and the supersedes consolidation applied.
DEMO_PROMOTIONS: LiteralString = """
SELECT CASE WHEN outcome = 'refused' AND reason LIKE '%%the steward reads%%' THEN 'before the point'
            ELSE outcome END, count(*)
FROM ember.cutover_promotions WHERE thread_id = %(thread)s GROUP BY 1
"""
# The supersedes consolidation applied: old text, new text, whether the new fact was promoted.
DEMO_SUPERSEDES: LiteralString = """
SELECT o.text, n.text, n.cutover_id IS NOT NULL, a.reason
FROM ember.consolidation_actions AS a
INNER JOIN ember.facts AS o ON o.id = a.fact_ids[1]
INNER JOIN ember.facts AS n ON n.id = a.fact_ids[2]
WHERE a.action = 'supersede' AND a.status = 'applied'
ORDER BY a.id
"""
# The threads shadow cannot offer to any model yet, and why.
DEMO_WAITING: LiteralString = (
    "SELECT thread_id, waiting_for FROM ember.shadow_ready() WHERE model IS NULL"
)
# Whether the thread has a shadow run in the status.
DEMO_RUN_IN_STATUS: LiteralString = (
    "SELECT count(*) > 0 FROM ember.shadow_runs"
    " WHERE thread_id = %(thread)s AND status = %(status)s"
)
# The live figures on the terminal: runs by path and status, facts, proposals.
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
# Shadow runs by path and status, for the summary.
DEMO_RUNS_BY_PATH: LiteralString = (
    "SELECT path || ' ' || status, count(*) FROM ember.shadow_runs GROUP BY 1"
)
# The completed hot runs with what they read from the cache, to measure against the host's call.
DEMO_HOT_RUNS: LiteralString = """
SELECT thread_id, cache_read_tokens, started_at FROM ember.shadow_runs
WHERE path = 'hot' AND status = 'completed' ORDER BY id
"""
# The summary's figures: facts, evidence, steward runs, proposals, embeddings.
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

# Refuses an unknown viewer (EM029) at start-up, not at its first tool call.
MEMORY_CHECK_VIEWER: LiteralString = (
    "SELECT count(*) FROM ember.recent_facts(%(tenant)s, %(viewer)s, 1)"
)
# search_memory for the viewer: the facts it may read that match, best first.
MEMORY_SEARCH: LiteralString = (
    "SELECT fact_id, text, evidence_kind, categories, created_at"
    " FROM ember.search_memory(%(tenant)s, %(viewer)s, %(query)s, %(embedding)s::vector,"
    " %(limit)s)"
)
# The viewer's most recent facts.
MEMORY_RECENT: LiteralString = (
    "SELECT fact_id, text, evidence_kind, categories, created_at"
    " FROM ember.recent_facts(%(tenant)s, %(viewer)s, %(limit)s)"
)
# explain_fact for the viewer: what it may read of a fact's history.
MEMORY_EXPLAIN: LiteralString = "SELECT ember.explain_fact_as(%(tenant)s, %(viewer)s, %(fact)s)"
# forget_fact for the viewer, with a reason.
MEMORY_FORGET: LiteralString = (
    "SELECT ember.forget_fact(%(tenant)s, %(viewer)s, %(fact)s, %(reason)s)"
)

# --- the model registry (functions/049_model_registry.sql) ---

# Load the model registry from its entries (`ember models load`). The one positional statement:
# tests/test_preserved_thinking_paths.py passes its one parameter as a tuple.
LOAD_MODELS: LiteralString = "SELECT ember.load_models(%s::jsonb)"

# The model registry as `ember models` shows it.
LIST_MODELS: LiteralString = """
SELECT model, tier, cache_ttl::text, min_cacheable_tokens, observed_min_cacheable_tokens,
       hot_min_tokens, thinking_retention, preserved_thinking, price_as_of::text,
       price_input, price_output, price_cache_write_5m, price_cache_write_1h, price_cache_read,
       length_tiers, source
FROM ember.model_registry
ORDER BY position
"""

# Hot runs that read too little of their prefix from the cache, with the likely cause.
COMPARISON_CACHE_MISSES: LiteralString = (
    "SELECT * FROM ember.comparison_cache_misses(%(since)s, %(until)s)"
)
# The consolidation job's review queue, waiting and decided items (not windowed: a queue).
COMPARISON_REVIEW_QUEUE: LiteralString = "SELECT * FROM ember.comparison_review_queue()"

# Which life of the server a connection talks to: the postmaster's start changes on a restart,
# the shared statistics' reset time on a crash recovery (which discards them).
SERVER_GENERATION: LiteralString = """
SELECT pg_postmaster_start_time(), (SELECT stats_reset FROM pg_stat_archiver)
"""

# --- ember eval (issue 28): functions/093_eval.sql and 096_eval_report.sql ---

# A new eval run: the benchmark, its file and digest, the models, top k and question limit.
EVAL_BEGIN: LiteralString = """
SELECT ember.eval_begin(
    %(benchmark)s, %(source)s, %(sha256)s, %(answer_model)s, %(judge_model)s, %(top_k)s,
    %(question_limit)s)
"""
# One eval run's row.
EVAL_RUN: LiteralString = """
SELECT run_id, benchmark, source, source_sha256, answer_model, judge_model, top_k, question_limit,
       status, error, started_at, finished_at, conversations, questions, excluded, calls,
       simulated_calls
FROM ember.eval_runs_list() WHERE run_id = %(run)s
"""
# The latest eval run of this database (NULL when none).
EVAL_LATEST_RUN: LiteralString = "SELECT max(run_id) AS run_id FROM ember.eval_runs_list()"
# One benchmark conversation placed in a thread, with its sessions and turns.
EVAL_ADD_CONVERSATION: LiteralString = (
    "SELECT ember.eval_add_conversation(%(run)s, %(conversation)s, %(thread)s,"
    " %(sessions)s::jsonb, %(turns)s::jsonb)"
)
# The conversation's questions (and which are excluded, and why).
EVAL_ADD_QUESTIONS: LiteralString = "SELECT ember.eval_add_questions(%(run)s, %(questions)s::jsonb)"
# The ticker's pass, while the eval waits for both pipelines to finish a conversation.
EVAL_TICK: LiteralString = "SELECT ember.tick()"
# The conversation's thread cut over to shadow: its proposals promoted to facts.
EVAL_CUT_OVER: LiteralString = "SELECT ember.eval_cut_over(%(run)s, %(thread)s)"
# The conversation is done: its thread ended.
EVAL_CLOSE_CONVERSATION: LiteralString = "SELECT ember.eval_close_conversation(%(run)s, %(thread)s)"
# A question's search, as the viewer, with its scores.
EVAL_SEARCH: LiteralString = (
    "SELECT fact_id, score FROM ember.search_memory(ember.sole_tenant(), %(viewer)s, %(query)s,"
    " %(embedding)s::vector, %(limit)s)"
)
# The found facts as the answer model is shown them, per pipeline.
EVAL_SHOWN: LiteralString = """
SELECT rank, fact_id, proposal_id, text, stated_at
FROM ember.eval_shown(%(run)s, %(pipeline)s, %(fact_ids)s)
"""
# One model call of the eval (answer or judge), with its usage.
EVAL_RECORD_CALL: LiteralString = "SELECT ember.eval_record_call(%(run)s, %(call)s::jsonb)"
# One question's answer and verdict.
EVAL_RECORD_ANSWER: LiteralString = "SELECT ember.eval_record_answer(%(run)s, %(answer)s::jsonb)"
# The eval run ended, with its error if it failed.
EVAL_FINISH: LiteralString = "SELECT ember.eval_finish(%(run)s, %(error)s)"
# What a planned eval would cost, per role and model, before any call.
EVAL_ESTIMATE: LiteralString = """
SELECT role, model, calls, input_tokens, output_tokens, estimated_usd
FROM ember.eval_estimate(%(plan)s::jsonb)
"""
# The eval report's sections: the scores per pipeline,
EVAL_SUMMARY: LiteralString = "SELECT * FROM ember.eval_summary(%(run)s)"
# the scores per question category,
EVAL_CATEGORIES: LiteralString = "SELECT * FROM ember.eval_categories(%(run)s)"
# the questions the pipelines answered differently,
EVAL_DISAGREEMENTS: LiteralString = "SELECT * FROM ember.eval_disagreements(%(run)s)"
# every question with both answers,
EVAL_QUESTION_RESULTS: LiteralString = "SELECT * FROM ember.eval_question_results(%(run)s)"
# and what extraction cost during the run (the judge's calls aside).
EVAL_EXTRACTION_COST: LiteralString = """
SELECT c.* FROM ember.eval_runs_list() AS r,
LATERAL ember.comparison_cost(r.started_at, r.finished_at) AS c
WHERE r.run_id = %(run)s AND c.pipeline <> 'semantic judge'
"""
# Whether a database ember eval is about to recreate holds anything but a previous eval: tables
# outside schema ember, or Ember memory that no eval run wrote.
EVAL_TARGET_FOREIGN_TABLES: LiteralString = """
SELECT count(*) FROM pg_catalog.pg_class AS c
INNER JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p') AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'ember')
  AND n.nspname NOT LIKE 'pg\\_%'
"""
# Whether it holds an Ember schema, and one that ember eval wrote.
EVAL_TARGET_HAS_EMBER: LiteralString = (
    "SELECT to_regclass('ember.threads') IS NOT NULL, to_regclass('ember.eval_runs') IS NOT NULL"
)
# Whether it holds threads or facts.
EVAL_TARGET_MEMORY: LiteralString = (
    "SELECT EXISTS (SELECT 1 FROM ember.threads), EXISTS (SELECT 1 FROM ember.facts)"
)
# Whether an eval run wrote them.
EVAL_TARGET_RUNS: LiteralString = "SELECT EXISTS (SELECT 1 FROM ember.eval_runs)"

# The distribution plan (functions/004_distribution_plan.sql), rendered into docs/operations.md:
# each table's role and distribution column,
DISTRIBUTION_PLAN: LiteralString = (
    "SELECT table_name, role, distribution_column, why FROM ember.distribution_plan()"
)
# the hot-path functions and the shard each routes to,
DISTRIBUTION_HOT_PATH: LiteralString = (
    "SELECT function_name, part, tenant_argument, shard FROM ember.distribution_hot_path()"
)
# and the one-time commands, in order.
DISTRIBUTION_COMMANDS: LiteralString = "SELECT * FROM ember.distribution_commands()"


# ember review (functions/102_consolidation_review.sql): each list one jsonb value built in SQL,
# so the table and --json show the same answer.
# What waits, oldest first: the queue's rows as they are.
REVIEW_WAITING: LiteralString = (
    "SELECT coalesce(jsonb_agg(to_jsonb(q) ORDER BY q.created_at, q.action_id), '[]'::jsonb) "
    "FROM ember.review_queue AS q"
)
# What was decided, in the order it was, with who, when, the note and the fact written.
REVIEW_DECIDED: LiteralString = (
    "SELECT coalesce(jsonb_agg(to_jsonb(d) ORDER BY d.reviewed_at, d.action_id), '[]'::jsonb) "
    "FROM ember.review_items AS d WHERE d.review IS NOT NULL"
)
# One decision; who decided is --by, else the role this connection runs as.
REVIEW_DECIDE: LiteralString = (
    "SELECT ember.review_consolidation_action("
    "%(id)s, %(decision)s, coalesce(%(by)s, current_user::text), %(note)s)"
)
# Whether an id names any consolidation action, asked after a refusal to tell an unknown id
# (exit 11) from an item that is not waiting (exit 9): the SQL answers both with EM136.
REVIEW_ACTION_EXISTS: LiteralString = (
    "SELECT EXISTS (SELECT 1 FROM ember.consolidation_actions WHERE id = %(id)s)"
)
