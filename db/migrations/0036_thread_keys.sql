-- Keys a deployment distributed by thread_id can keep (issue 31; the plan is ember.distribution_plan
-- in functions/004_distribution_plan.sql, and docs/operations.md "Distribution by thread_id").
--
-- Citus checks a primary or unique key on a distributed table on one shard only, so the key must
-- hold the distribution column; a foreign key between two distributed tables must join them on it;
-- a reference or coordinator-local table may not point into a distributed table. Three changes:
--
-- 1. Keys of the tables the plan distributes gain thread_id, after their old columns, so every
--    lookup by id alone keeps its index (a btree serves a prefix of its columns): a row's id is
--    still unique, since the identity behind it is one bigint sequence.
-- 2. Foreign keys within one thread name thread_id on both sides.
-- 3. Foreign keys that cross threads or point from a table the plan does not distribute into one
--    it does are dropped: each is written by a function that reads the row it names first
--    (docs/operations.md lists which), and no row they name is ever deleted (messages, generations
--    and runs stay; forgetting erases content in place), so they refused nothing those functions
--    would write. judged_pairs lost its cascade from shadow_proposals with its key: forget_* deletes
--    a sealed thread's judged pairs itself now.

-- 3. Cross-thread and cross-role references.
ALTER TABLE ember.messages DROP CONSTRAINT messages_from_thread_fkey;
ALTER TABLE ember.messages DROP CONSTRAINT messages_copied_from_fkey;
ALTER TABLE ember.generation_sources DROP CONSTRAINT generation_sources_source_thread_fkey;
ALTER TABLE ember.generation_sources DROP CONSTRAINT generation_sources_source_generation_fkey;
ALTER TABLE ember.thread_events DROP CONSTRAINT thread_events_from_thread_fkey;
ALTER TABLE ember.main_actions DROP CONSTRAINT main_actions_main_thread_fkey;
ALTER TABLE ember.facts DROP CONSTRAINT facts_run;
ALTER TABLE ember.fact_evidence DROP CONSTRAINT fact_evidence_message_id_fkey;
ALTER TABLE ember.fact_evidence DROP CONSTRAINT fact_evidence_generation_id_fkey;
ALTER TABLE ember.forgettings DROP CONSTRAINT forgettings_thread_id_fkey;
ALTER TABLE ember.judged_pairs DROP CONSTRAINT judged_pairs_proposal_id_fkey;
ALTER TABLE ember.eval_conversations DROP CONSTRAINT eval_conversations_thread_id_fkey;
ALTER TABLE ember.eval_sessions DROP CONSTRAINT eval_sessions_generation_id_fkey;
ALTER TABLE ember.eval_turns DROP CONSTRAINT eval_turns_message_id_fkey;
ALTER TABLE ember.eval_context DROP CONSTRAINT eval_context_proposal_id_fkey;
ALTER TABLE ember.eval_promotions DROP CONSTRAINT eval_promotions_proposal_id_fkey;

-- Same-thread references, dropped here and recreated on thread_id below.
ALTER TABLE ember.messages DROP CONSTRAINT messages_generation_id_fkey;
ALTER TABLE ember.generation_sources DROP CONSTRAINT generation_sources_message_id_fkey;
ALTER TABLE ember.generation_sources DROP CONSTRAINT generation_sources_generation_id_thread_id_fkey;
ALTER TABLE ember.identity_segments DROP CONSTRAINT identity_segments_generation_id_thread_id_fkey;
ALTER TABLE ember.shadow_cursors DROP CONSTRAINT shadow_cursors_generation_id_fkey;
ALTER TABLE ember.shadow_prefixes DROP CONSTRAINT shadow_prefixes_generation_id_fkey;
ALTER TABLE ember.shadow_thread_state DROP CONSTRAINT shadow_thread_state_seen_generation_id_fkey;
ALTER TABLE ember.shadow_runs DROP CONSTRAINT shadow_runs_generation_id_fkey;
ALTER TABLE ember.shadow_proposals DROP CONSTRAINT shadow_proposals_generation_id_fkey;
ALTER TABLE ember.shadow_proposals DROP CONSTRAINT shadow_proposals_run_id_fkey;
ALTER TABLE ember.steward_runs DROP CONSTRAINT steward_runs_generation_id_fkey;
ALTER TABLE ember.generation_progress DROP CONSTRAINT generation_progress_generation_id_fkey;
ALTER TABLE ember.thread_events DROP CONSTRAINT thread_events_message_id_fkey;
ALTER TABLE ember.main_actions DROP CONSTRAINT main_actions_event_id_fkey;

-- 1. Keys with thread_id.
ALTER TABLE ember.generations DROP CONSTRAINT generations_pkey;
ALTER TABLE ember.generations DROP CONSTRAINT generations_id_thread;
ALTER TABLE ember.generations ADD CONSTRAINT generations_pkey PRIMARY KEY (id, thread_id);

ALTER TABLE ember.messages DROP CONSTRAINT messages_pkey;
ALTER TABLE ember.messages ADD CONSTRAINT messages_pkey PRIMARY KEY (id, thread_id);
-- seq stays one global sequence; invariant 8 needs it ordered within a thread only.
ALTER TABLE ember.messages DROP CONSTRAINT messages_seq_key;
ALTER TABLE ember.messages ADD CONSTRAINT messages_seq_key UNIQUE (seq, thread_id);

ALTER TABLE ember.shadow_signals DROP CONSTRAINT shadow_signals_pkey;
ALTER TABLE ember.shadow_signals ADD CONSTRAINT shadow_signals_pkey PRIMARY KEY (id, thread_id);

ALTER TABLE ember.shadow_runs DROP CONSTRAINT shadow_runs_pkey;
ALTER TABLE ember.shadow_runs ADD CONSTRAINT shadow_runs_pkey PRIMARY KEY (id, thread_id);

ALTER TABLE ember.shadow_proposals DROP CONSTRAINT shadow_proposals_pkey;
ALTER TABLE ember.shadow_proposals ADD CONSTRAINT shadow_proposals_pkey PRIMARY KEY (id, thread_id);
ALTER TABLE ember.shadow_proposals DROP CONSTRAINT shadow_proposals_run_id_ordinal_key;
ALTER TABLE ember.shadow_proposals
ADD CONSTRAINT shadow_proposals_run_id_ordinal_key UNIQUE (run_id, ordinal, thread_id);

ALTER TABLE ember.steward_runs DROP CONSTRAINT steward_runs_pkey;
ALTER TABLE ember.steward_runs ADD CONSTRAINT steward_runs_pkey PRIMARY KEY (id, thread_id);
ALTER TABLE ember.steward_runs DROP CONSTRAINT steward_runs_episode_id_key;
ALTER TABLE ember.steward_runs ADD CONSTRAINT steward_runs_episode_id_key UNIQUE (episode_id, thread_id);
-- One running steward run: every run is the steward thread's, so one per thread is the same rule.
ALTER TABLE ember.steward_runs
ADD CONSTRAINT steward_runs_steward_thread CHECK (thread_id = 'memory-steward');
DROP INDEX ember.steward_runs_one_running;
CREATE UNIQUE INDEX steward_runs_one_running ON ember.steward_runs (thread_id) WHERE status = 'running';

ALTER TABLE ember.identity_segments DROP CONSTRAINT identity_segments_pkey;
ALTER TABLE ember.identity_segments
ADD CONSTRAINT identity_segments_pkey PRIMARY KEY (generation_id, ordinal, thread_id);

ALTER TABLE ember.generation_progress DROP CONSTRAINT generation_progress_pkey;
ALTER TABLE ember.generation_progress
ADD CONSTRAINT generation_progress_pkey PRIMARY KEY (generation_id, thread_id);

ALTER TABLE ember.thread_events DROP CONSTRAINT thread_events_pkey;
ALTER TABLE ember.thread_events ADD CONSTRAINT thread_events_pkey PRIMARY KEY (id, thread_id);
ALTER TABLE ember.thread_events DROP CONSTRAINT thread_events_message_id_key;
ALTER TABLE ember.thread_events ADD CONSTRAINT thread_events_message_id_key UNIQUE (message_id, thread_id);
-- A progress report goes to the one main thread, so one event per call per receiving thread is
-- the rule it was; main's messages are keyed by main_actions' tool call id first.
DROP INDEX ember.thread_events_one_per_call;
CREATE UNIQUE INDEX thread_events_one_per_call ON ember.thread_events (from_thread, kind, tool_call_id, thread_id)
WHERE tool_call_id IS NOT NULL;

ALTER TABLE ember.main_actions DROP CONSTRAINT main_actions_pkey;
ALTER TABLE ember.main_actions ADD CONSTRAINT main_actions_pkey PRIMARY KEY (id, thread_id);
ALTER TABLE ember.main_actions DROP CONSTRAINT main_actions_event_id_key;
ALTER TABLE ember.main_actions ADD CONSTRAINT main_actions_event_id_key UNIQUE (event_id, thread_id);
-- side_chat_message looks a call up by its id alone before it writes, so a replay to another
-- thread is still refused (EM083); the key keeps one row per call and thread.
ALTER TABLE ember.main_actions DROP CONSTRAINT main_actions_tool_call_id_key;
ALTER TABLE ember.main_actions ADD CONSTRAINT main_actions_tool_call_id_key UNIQUE (tool_call_id, thread_id);
CREATE INDEX main_actions_tool_call ON ember.main_actions (tool_call_id);

-- 2. Same-thread references on thread_id.
ALTER TABLE ember.messages ADD CONSTRAINT messages_generation_id_fkey
FOREIGN KEY (generation_id, thread_id) REFERENCES ember.generations (id, thread_id);
ALTER TABLE ember.generation_sources ADD CONSTRAINT generation_sources_generation_id_thread_id_fkey
FOREIGN KEY (generation_id, thread_id) REFERENCES ember.generations (id, thread_id);
ALTER TABLE ember.generation_sources ADD CONSTRAINT generation_sources_message_id_fkey
FOREIGN KEY (message_id, thread_id) REFERENCES ember.messages (id, thread_id);
ALTER TABLE ember.identity_segments ADD CONSTRAINT identity_segments_generation_id_thread_id_fkey
FOREIGN KEY (generation_id, thread_id) REFERENCES ember.generations (id, thread_id);
ALTER TABLE ember.shadow_cursors ADD CONSTRAINT shadow_cursors_generation_id_fkey
FOREIGN KEY (generation_id, thread_id) REFERENCES ember.generations (id, thread_id);
ALTER TABLE ember.shadow_prefixes ADD CONSTRAINT shadow_prefixes_generation_id_fkey
FOREIGN KEY (generation_id, thread_id) REFERENCES ember.generations (id, thread_id);
ALTER TABLE ember.shadow_thread_state ADD CONSTRAINT shadow_thread_state_seen_generation_id_fkey
FOREIGN KEY (seen_generation_id, thread_id) REFERENCES ember.generations (id, thread_id);
ALTER TABLE ember.shadow_runs ADD CONSTRAINT shadow_runs_generation_id_fkey
FOREIGN KEY (generation_id, thread_id) REFERENCES ember.generations (id, thread_id);
ALTER TABLE ember.shadow_proposals ADD CONSTRAINT shadow_proposals_generation_id_fkey
FOREIGN KEY (generation_id, thread_id) REFERENCES ember.generations (id, thread_id);
ALTER TABLE ember.shadow_proposals ADD CONSTRAINT shadow_proposals_run_id_fkey
FOREIGN KEY (run_id, thread_id) REFERENCES ember.shadow_runs (id, thread_id);
ALTER TABLE ember.steward_runs ADD CONSTRAINT steward_runs_generation_id_fkey
FOREIGN KEY (generation_id, thread_id) REFERENCES ember.generations (id, thread_id);
ALTER TABLE ember.generation_progress ADD CONSTRAINT generation_progress_generation_id_fkey
FOREIGN KEY (generation_id, thread_id) REFERENCES ember.generations (id, thread_id);
ALTER TABLE ember.thread_events ADD CONSTRAINT thread_events_message_id_fkey
FOREIGN KEY (message_id, thread_id) REFERENCES ember.messages (id, thread_id);
ALTER TABLE ember.main_actions ADD CONSTRAINT main_actions_event_id_fkey
FOREIGN KEY (event_id, thread_id) REFERENCES ember.thread_events (id, thread_id);
