-- Every table's triggers in schema ember, in the order PostgreSQL fires them: the triggers of
-- one table, timing (BEFORE / AFTER), event and level (row / statement) fire in the order of
-- their names (byte order, as the catalog's name type compares). They are written in several
-- functions files, so their order is a property of the names alone, and it is intended: e.g.
-- a_shadow_proposal_bounds (056) cuts a proposal's text before anything else sees it, and
-- facts_a_clean_text (054) cleans a fact's text before the other BEFORE triggers of facts. Byte
-- order is not always what a name suggests: shadow_proposal_guard fires before
-- shadow_proposals_a_clean_text ("_" sorts before "s"), which holds only because the guard reads
-- no text. A trigger added, renamed or dropped changes a row below and fails this test: check
-- what the new order means, then write it here. docs/sql-api.md ("Triggers and their order")
-- points here.
--
-- Where each trigger is written:
--   001_settings: settings_valid
--   006_tenants: tenants_hold_one
--   010_predicates: threads_kind_fixed
--   020_labels: generation_sources_no_truncate, generation_sources_no_update_delete,
--       generations_no_truncate, generations_rules, messages_record_source, messages_stamp_labels,
--       threads_category_fixed
--   021_routing: models_tags_known
--   022_flow: messages_carrier_flow
--   023_table_rules: messages_immutable, messages_no_truncate, messages_tool_name_safe,
--       threads_model_routed
--   025_visibility: threads_reserved_ids, threads_seal_only_tightens
--   031_proposal_guard: shadow_proposal_guard
--   041_shadow_offers: generation_progress_unpark_offer, generation_progress_unpark_offer_new,
--       generations_unpark_offer, models_unpark_offers, settings_unpark_offers,
--       shadow_prefixes_unpark_offer, shadow_runs_unpark_offer, shadow_signals_note_offer,
--       shadow_thread_state_unpark_offer, threads_unpark_offer
--   044_shadow_cancel: shadow_cancel_on_seal, shadow_cancel_on_thread_end,
--       shadow_cancel_on_user_message
--   049_model_registry: judge_runs_price_tiers, shadow_runs_path_reason, shadow_runs_price_tiers,
--       steward_runs_price_tiers
--   049_shadow_hot_cache: shadow_runs_prefix_facts
--   054_fact_text: facts_a_clean_text, shadow_proposals_a_clean_text
--   056_output_bounds: a_shadow_proposal_bounds
--   058_fact_evidence_guard: fact_evidence_not_isolated
--   059_steward_seal: threads_steward_seal_cancel, threads_steward_seal_redact
--   080_write_state: generations_note_change, generations_note_ended, messages_note_digested,
--       messages_note_progress, shadow_cursors_note_progress, shadow_runs_note_failures,
--       shadow_runs_note_failures_new, shadow_runs_note_progress, threads_note_steward_reads
--   085_fact_history: fact_evidence_not_forgotten, fact_history_append_only,
--       fact_history_no_truncate, fact_history_on_evidence, fact_history_on_fact, fact_text_fixed
--   094_eval_record: eval_calls_price_tiers
--   098_cutover_promote: cutover_promote_on_insert
--   099_fact_valid_time: fact_reopen_closed, fact_valid_from_evidence
--   991_input_guards: categories_key_length, messages_arrival_check, messages_arrival_guard,
--       models_key_length, shadow_runs_key_length, threads_key_length
BEGIN;
SELECT plan(3);

CREATE FUNCTION pg_temp.firing_order(p_table text DEFAULT NULL)
RETURNS TABLE (table_name text, timing text, event text, level text, triggers text[])
LANGUAGE sql
AS $$
    SELECT c.relname::text,
        CASE WHEN t.tgtype & 2 <> 0 THEN 'BEFORE' WHEN t.tgtype & 64 <> 0 THEN 'INSTEAD OF' ELSE 'AFTER' END,
        e.event,
        CASE WHEN t.tgtype & 1 <> 0 THEN 'ROW' ELSE 'STATEMENT' END,
        array_agg(t.tgname::text ORDER BY t.tgname COLLATE "C")
    FROM pg_trigger AS t
    JOIN pg_class AS c ON c.oid = t.tgrelid
    JOIN pg_namespace AS n ON n.oid = c.relnamespace
    CROSS JOIN LATERAL (VALUES (4, 'INSERT'), (16, 'UPDATE'), (8, 'DELETE'), (32, 'TRUNCATE')) AS e (bit, event)
    WHERE n.nspname = 'ember' AND NOT t.tgisinternal AND t.tgtype & e.bit <> 0
        AND (p_table IS NULL OR c.relname = p_table)
    GROUP BY 1, 2, 3, 4
$$;

CREATE TEMP TABLE intended (table_name text, timing text, event text, level text, triggers text[]);
INSERT INTO intended VALUES
    ('categories', 'BEFORE', 'INSERT', 'ROW', ARRAY['categories_key_length']),
    ('categories', 'BEFORE', 'UPDATE', 'ROW', ARRAY['categories_key_length']),
    ('eval_calls', 'BEFORE', 'INSERT', 'ROW', ARRAY['eval_calls_price_tiers']),
    ('fact_evidence', 'BEFORE', 'INSERT', 'ROW', ARRAY['fact_evidence_not_forgotten', 'fact_evidence_not_isolated']),
    ('fact_evidence', 'BEFORE', 'UPDATE', 'ROW', ARRAY['fact_evidence_not_forgotten', 'fact_evidence_not_isolated']),
    ('fact_evidence', 'AFTER', 'DELETE', 'STATEMENT', ARRAY['fact_history_on_evidence']),
    ('fact_evidence', 'AFTER', 'INSERT', 'STATEMENT', ARRAY['fact_valid_from_evidence']),
    ('fact_history', 'BEFORE', 'DELETE', 'ROW', ARRAY['fact_history_append_only']),
    ('fact_history', 'BEFORE', 'UPDATE', 'ROW', ARRAY['fact_history_append_only']),
    ('fact_history', 'BEFORE', 'TRUNCATE', 'STATEMENT', ARRAY['fact_history_no_truncate']),
    ('facts', 'BEFORE', 'INSERT', 'ROW', ARRAY['facts_a_clean_text']),
    ('facts', 'BEFORE', 'UPDATE', 'ROW', ARRAY['fact_text_fixed']),
    ('facts', 'AFTER', 'INSERT', 'ROW', ARRAY['fact_history_on_fact']),
    -- The change is recorded before the facts it closed are reopened.
    ('facts', 'AFTER', 'UPDATE', 'ROW', ARRAY['fact_history_on_fact', 'fact_reopen_closed']),
    ('generation_progress', 'AFTER', 'INSERT', 'ROW', ARRAY['generation_progress_unpark_offer_new']),
    ('generation_progress', 'AFTER', 'UPDATE', 'ROW', ARRAY['generation_progress_unpark_offer']),
    ('generation_sources', 'BEFORE', 'DELETE', 'ROW', ARRAY['generation_sources_no_update_delete']),
    ('generation_sources', 'BEFORE', 'UPDATE', 'ROW', ARRAY['generation_sources_no_update_delete']),
    ('generation_sources', 'BEFORE', 'TRUNCATE', 'STATEMENT', ARRAY['generation_sources_no_truncate']),
    ('generations', 'BEFORE', 'DELETE', 'ROW', ARRAY['generations_rules']),
    ('generations', 'BEFORE', 'INSERT', 'ROW', ARRAY['generations_rules']),
    ('generations', 'BEFORE', 'UPDATE', 'ROW', ARRAY['generations_rules']),
    ('generations', 'BEFORE', 'TRUNCATE', 'STATEMENT', ARRAY['generations_no_truncate']),
    ('generations', 'AFTER', 'UPDATE', 'ROW', ARRAY['generations_note_ended', 'generations_unpark_offer']),
    ('generations', 'AFTER', 'INSERT', 'STATEMENT', ARRAY['generations_note_change']),
    ('judge_runs', 'BEFORE', 'INSERT', 'ROW', ARRAY['judge_runs_price_tiers']),
    ('messages', 'BEFORE', 'DELETE', 'ROW', ARRAY['messages_immutable']),
    ('messages', 'BEFORE', 'INSERT', 'ROW', ARRAY['messages_arrival_guard', 'messages_carrier_flow', 'messages_stamp_labels', 'messages_tool_name_safe']),
    ('messages', 'BEFORE', 'UPDATE', 'ROW', ARRAY['messages_immutable']),
    ('messages', 'BEFORE', 'INSERT', 'STATEMENT', ARRAY['messages_arrival_check']),
    ('messages', 'BEFORE', 'TRUNCATE', 'STATEMENT', ARRAY['messages_no_truncate']),
    ('messages', 'AFTER', 'INSERT', 'ROW', ARRAY['messages_record_source']),
    ('messages', 'AFTER', 'INSERT', 'STATEMENT', ARRAY['messages_note_progress', 'shadow_cancel_on_user_message']),
    ('messages', 'AFTER', 'UPDATE', 'STATEMENT', ARRAY['messages_note_digested']),
    ('models', 'BEFORE', 'INSERT', 'ROW', ARRAY['models_key_length', 'models_tags_known']),
    ('models', 'BEFORE', 'UPDATE', 'ROW', ARRAY['models_key_length', 'models_tags_known']),
    ('models', 'AFTER', 'DELETE', 'STATEMENT', ARRAY['models_unpark_offers']),
    ('models', 'AFTER', 'INSERT', 'STATEMENT', ARRAY['models_unpark_offers']),
    ('models', 'AFTER', 'UPDATE', 'STATEMENT', ARRAY['models_unpark_offers']),
    ('settings', 'BEFORE', 'INSERT', 'ROW', ARRAY['settings_valid']),
    ('settings', 'BEFORE', 'UPDATE', 'ROW', ARRAY['settings_valid']),
    ('settings', 'AFTER', 'DELETE', 'STATEMENT', ARRAY['settings_unpark_offers']),
    ('settings', 'AFTER', 'INSERT', 'STATEMENT', ARRAY['settings_unpark_offers']),
    ('settings', 'AFTER', 'UPDATE', 'STATEMENT', ARRAY['settings_unpark_offers']),
    ('shadow_cursors', 'AFTER', 'INSERT', 'STATEMENT', ARRAY['shadow_cursors_note_progress']),
    ('shadow_prefixes', 'AFTER', 'INSERT', 'ROW', ARRAY['shadow_prefixes_unpark_offer']),
    ('shadow_prefixes', 'AFTER', 'UPDATE', 'ROW', ARRAY['shadow_prefixes_unpark_offer']),
    ('shadow_proposals', 'BEFORE', 'INSERT', 'ROW', ARRAY['a_shadow_proposal_bounds', 'shadow_proposal_guard', 'shadow_proposals_a_clean_text']),
    ('shadow_proposals', 'BEFORE', 'UPDATE', 'ROW', ARRAY['shadow_proposal_guard']),
    ('shadow_proposals', 'AFTER', 'INSERT', 'ROW', ARRAY['cutover_promote_on_insert']),
    ('shadow_runs', 'BEFORE', 'INSERT', 'ROW', ARRAY['shadow_runs_key_length', 'shadow_runs_path_reason', 'shadow_runs_prefix_facts', 'shadow_runs_price_tiers']),
    ('shadow_runs', 'BEFORE', 'UPDATE', 'ROW', ARRAY['shadow_runs_key_length']),
    ('shadow_runs', 'AFTER', 'INSERT', 'ROW', ARRAY['shadow_runs_note_failures_new', 'shadow_runs_note_progress']),
    ('shadow_runs', 'AFTER', 'UPDATE', 'ROW', ARRAY['shadow_runs_note_failures', 'shadow_runs_note_progress', 'shadow_runs_unpark_offer']),
    ('shadow_signals', 'AFTER', 'DELETE', 'ROW', ARRAY['shadow_signals_note_offer']),
    ('shadow_signals', 'AFTER', 'INSERT', 'ROW', ARRAY['shadow_signals_note_offer']),
    ('shadow_signals', 'AFTER', 'UPDATE', 'ROW', ARRAY['shadow_signals_note_offer']),
    ('shadow_thread_state', 'AFTER', 'UPDATE', 'ROW', ARRAY['shadow_thread_state_unpark_offer']),
    ('steward_runs', 'BEFORE', 'INSERT', 'ROW', ARRAY['steward_runs_price_tiers']),
    ('tenants', 'BEFORE', 'INSERT', 'ROW', ARRAY['tenants_hold_one']),
    ('threads', 'BEFORE', 'INSERT', 'ROW', ARRAY['threads_key_length', 'threads_reserved_ids']),
    ('threads', 'BEFORE', 'UPDATE', 'ROW', ARRAY['threads_category_fixed', 'threads_key_length', 'threads_kind_fixed', 'threads_model_routed', 'threads_reserved_ids', 'threads_seal_only_tightens']),
    ('threads', 'AFTER', 'UPDATE', 'ROW', ARRAY['shadow_cancel_on_seal', 'shadow_cancel_on_thread_end', 'threads_note_steward_reads', 'threads_steward_seal_cancel', 'threads_steward_seal_redact', 'threads_unpark_offer']);

SELECT results_eq(
    $$SELECT * FROM pg_temp.firing_order('messages') ORDER BY 1, 2, 3, 4$$,
    $$SELECT * FROM intended WHERE table_name = 'messages' ORDER BY 1, 2, 3, 4$$,
    'messages: its triggers fire in the intended order'
);
SELECT results_eq(
    $$SELECT * FROM pg_temp.firing_order('threads') ORDER BY 1, 2, 3, 4$$,
    $$SELECT * FROM intended WHERE table_name = 'threads' ORDER BY 1, 2, 3, 4$$,
    'threads: its triggers fire in the intended order'
);
SELECT results_eq(
    $$SELECT * FROM pg_temp.firing_order() ORDER BY 1, 2, 3, 4$$,
    $$SELECT * FROM intended ORDER BY 1, 2, 3, 4$$,
    'every table of schema ember: its triggers fire in the intended order, and no trigger is unlisted'
);

SELECT * FROM finish();
ROLLBACK;
