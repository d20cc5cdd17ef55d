-- Grants, last of all (docs/operations.md, "Roles and grants").
--
-- Nothing in schema ember is open to PUBLIC (spelled `public` below, as sqlfluff prefers): not the schema, no table, no function. Each role gets
-- EXECUTE on the functions of its job, listed by name below (every overload of a name); adding a
-- function to a role is one line. A listed function is made SECURITY DEFINER here: the roles hold
-- no table privileges, so a function they may call reads and writes as its owner, and its checks
-- are the only door. Internal helpers called from those functions, triggers included, run as the
-- owner already and are granted to no one. The alternative, granting table privileges and keeping
-- functions SECURITY INVOKER, would let a host role write rows past append_message's checks.
--
-- Each migrate converges: EXECUTE is first revoked from PUBLIC, ember_host, ember_worker and
-- ember_analyst on every function, then granted from the lists, so a name removed from a list loses
-- its grant. ember_analyst's SELECT on the comparison views is granted in 069_analyst_role.sql;
-- anything a DBA granted to a login role directly is left alone.

REVOKE ALL ON SCHEMA ember FROM public;
REVOKE ALL ON ALL TABLES IN SCHEMA ember FROM public, ember_host, ember_worker;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA ember FROM public, ember_host, ember_worker;
GRANT USAGE ON SCHEMA ember TO ember_host, ember_worker;

-- Ember's own functions only: pgvector's, should a DBA install it in ember, keep the
-- EXECUTE its script gave them, as they would in any other schema.
DO $$
DECLARE
    v_fn regprocedure;
BEGIN
    FOR v_fn IN
        SELECT p.oid::regprocedure
        FROM pg_proc AS p
        WHERE p.pronamespace = 'ember'::regnamespace
            AND p.prokind IN ('f', 'p')
            AND NOT EXISTS (
                SELECT 1 FROM pg_depend AS d
                WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
            )
    LOOP
        EXECUTE format('REVOKE ALL ON ROUTINE %s FROM PUBLIC, ember_host, ember_worker, ember_analyst', v_fn);
    END LOOP;
END;
$$;

DO $$
DECLARE
    v_grant record;
BEGIN
    FOR v_grant IN
        SELECT g.role_name, g.fn_name, p.oid::regprocedure AS fn
        FROM (
            VALUES
            -- ember_host: the host API (threads, generations, messages, turn state, prefixes) and
            -- reads through the visibility functions.
            ('ember_host', 'define_category'),
            ('ember_host', 'create_thread'),
            ('ember_host', 'start_generation'),
            ('ember_host', 'current_generation'),
            ('ember_host', 'append_message'),
            ('ember_host', 'append_messages'),
            ('ember_host', 'set_thread_status'),
            ('ember_host', 'set_thread_model'),
            ('ember_host', 'ensure_steward_thread'),
            -- ember_host: what README tells the host to call once, and sealing a thread.
            ('ember_host', 'shadow_activate'),
            ('ember_host', 'seal_thread'),
            ('ember_host', 'note_prefix'),
            ('ember_host', 'turn_started'),
            ('ember_host', 'turn_ended'),
            ('ember_host', 'waiting_for_user'),
            ('ember_host', 'task_ended'),
            ('ember_host', 'is_steward_thread'),
            ('ember_host', 'is_label_carrier'),
            ('ember_host', 'is_isolated'),
            ('ember_host', 'generation_labels'),
            ('ember_host', 'thread_call_labels'),
            ('ember_host', 'route_model'),
            ('ember_host', 'check_carrier_flow'),
            ('ember_host', 'copy_messages'),
            ('ember_host', 'report_read_generations'),
            ('ember_host', 'list_threads'),
            ('ember_host', 'read_thread'),
            ('ember_host', 'thread_visible'),
            ('ember_host', 'thread_hidden_reason'),
            -- ember_host: main's control plane (identity, tools, events, side chats).
            ('ember_host', 'turn_identity'),
            ('ember_host', 'identity_files'),
            ('ember_host', 'thread_identity_files'),
            ('ember_host', 'tool_registry'),
            ('ember_host', 'thread_tools'),
            ('ember_host', 'register_tool'),
            ('ember_host', 'queue_event'),
            ('ember_host', 'report_progress'),
            ('ember_host', 'deliverable_events'),
            ('ember_host', 'progress_board'),
            ('ember_host', 'side_chat_message'),
            ('ember_host', 'side_chat_inspect'),
            -- ember_worker: the tick, claims, submits, and what a plan needs to be routed.
            ('ember_worker', 'tick'),
            ('ember_worker', 'fleet_tick'),
            ('ember_worker', 'shadow_ready'),
            ('ember_worker', 'claim_shadow_run'),
            ('ember_worker', 'submit_shadow_run'),
            ('ember_worker', 'generation_labels'),
            ('ember_worker', 'thread_call_labels'),
            ('ember_worker', 'route_model'),
            ('ember_worker', 'setting_interval'),
            ('ember_worker', 'extend_shadow_lease'),
            ('ember_worker', 'release_shadow_run'),
            ('ember_worker', 'shadow_run_cancel_requested'),
            -- ember_worker: the steward's procedures, memory search and embedding updates.
            ('ember_worker', 'claim_steward_run'),
            ('ember_worker', 'steward_has_work'),
            ('ember_worker', 'steward_step'),
            ('ember_worker', 'extend_steward_lease'),
            ('ember_worker', 'release_steward_run'),
            ('ember_worker', 'fail_steward_run'),
            -- ember_worker: the consolidation pipeline (functions/100_consolidation.sql ..)
            ('ember_worker', 'claim_consolidation_run'),
            ('ember_worker', 'submit_consolidation_run'),
            ('ember_worker', 'extend_consolidation_lease'),
            ('ember_worker', 'release_consolidation_run'),
            ('ember_worker', 'steward_run_cancel_requested'),
            ('ember_worker', 'search_memory'),
            ('ember_worker', 'facts_to_embed'),
            ('ember_worker', 'set_fact_embedding'),
            -- ember_worker: semantic judging (ember compare --semantic).
            ('ember_worker', 'semantic_groups'),
            ('ember_worker', 'submit_judge_run'),
            -- ember_host: an agent's own memory search (EM027's hint sends it there).
            ('ember_host', 'search_memory'),
            -- ember_host: forgetting at the user's request, and why and since when a fact is held.
            ('ember_host', 'forget_messages'),
            ('ember_host', 'forget_thread'),
            ('ember_host', 'facts_as_of'),
            ('ember_host', 'explain_fact'),
            -- ember_host: memory served as one viewer (ember.host's tools, ember mcp).
            ('ember_host', 'explain_fact_as'),
            ('ember_host', 'recent_facts'),
            ('ember_host', 'forget_fact'),
            -- ember_host: the one-time set-up, and the model a thread's next call may go to.
            ('ember_host', 'setup'),
            ('ember_host', 'thread_call_model'),
            -- ember_worker: why nothing is happening, and the hot path's cache check.
            ('ember_worker', 'work_status'),
            ('ember_worker', 'hot_cache_shortfall'),
            ('ember_worker', 'model_thinking_retention'),
            -- Every role: which migrations and functions the database runs, for the start-up
            -- check each command makes (names and digests only).
            ('ember_host', 'schema_state'),
            ('ember_worker', 'schema_state'),
            ('ember_analyst', 'schema_state'),
            -- ember_analyst: the comparison's windowed functions (the views of the same names call
            -- them) and the analyst's explain, which renders evidence bounded and never an isolated
            -- thread's row (088_explain_analyst.sql). Not explain_fact: that is the host's, unbounded.
            ('ember_analyst', 'comparison_exact'),
            ('ember_analyst', 'comparison_evidence'),
            ('ember_analyst', 'comparison_semantic'),
            ('ember_analyst', 'comparison_cost'),
            ('ember_analyst', 'comparison_latency'),
            ('ember_analyst', 'comparison_evidence_quality'),
            ('ember_analyst', 'comparison_summary'),
            ('ember_analyst', 'comparison_daily'),
            ('ember_analyst', 'comparison_by_thread'),
            ('ember_analyst', 'comparison_by_path'),
            ('ember_analyst', 'comparison_items'),
            ('ember_analyst', 'comparison_item_evidence'),
            ('ember_analyst', 'comparison_excluded_facts'),
            ('ember_analyst', 'comparison_rejected'),
            ('ember_analyst', 'comparison_run_list'),
            ('ember_analyst', 'comparison_context'),
            ('ember_analyst', 'comparison_cache_misses'),
            ('ember_analyst', 'comparison_explain_fact'),
            ('ember_analyst', 'comparison_explain_proposal'),
            -- ember_analyst: the consolidation job's review queue in the report (102_consolidation_review.sql)
            ('ember_analyst', 'comparison_review_queue'),
            -- ember_analyst: the results of `ember eval` (functions/096_eval_report.sql)
            ('ember_analyst', 'eval_runs_list'),
            ('ember_analyst', 'eval_summary'),
            ('ember_analyst', 'eval_categories'),
            ('ember_analyst', 'eval_disagreements'),
            ('ember_analyst', 'eval_question_results')
        ) AS g (role_name, fn_name)
        LEFT JOIN pg_proc AS p
            ON p.proname = g.fn_name AND p.pronamespace = 'ember'::regnamespace AND p.prokind IN ('f', 'p')
        ORDER BY g.role_name, g.fn_name
    LOOP
        IF v_grant.fn IS NULL THEN
            RAISE EXCEPTION '999_grants.sql grants ember.% to %, but no such function exists',
                v_grant.fn_name, v_grant.role_name;
        END IF;
        EXECUTE format('ALTER ROUTINE %s SECURITY DEFINER', v_grant.fn);
        EXECUTE format('GRANT EXECUTE ON ROUTINE %s TO %I', v_grant.fn, v_grant.role_name);
    END LOOP;
END;
$$;

-- A view runs the functions it calls with its reader's privileges, not its owner's, so a role
-- that may read a view in ember also needs EXECUTE on the ember functions that view calls. Derived
-- from the catalog rather than listed, so the comparison views (granted to ember_analyst in their
-- own files) keep working after the PUBLIC revoke above whatever functions they come to use.
DO $$
DECLARE
    v_need record;
BEGIN
    FOR v_need IN
        SELECT DISTINCT dep.refobjid::regprocedure AS fn, r.rolname
        FROM pg_class AS v
        INNER JOIN pg_rewrite AS rw ON rw.ev_class = v.oid
        INNER JOIN pg_depend AS dep
            ON dep.classid = 'pg_rewrite'::regclass AND dep.objid = rw.oid
                AND dep.refclassid = 'pg_proc'::regclass
        INNER JOIN pg_proc AS p ON dep.refobjid = p.oid AND p.pronamespace = 'ember'::regnamespace
        CROSS JOIN pg_roles AS r
        WHERE v.relnamespace = 'ember'::regnamespace
            AND v.relkind IN ('v', 'm')
            AND r.rolname IN ('ember_host', 'ember_worker', 'ember_analyst')
            AND has_table_privilege(r.oid, v.oid, 'SELECT')
            AND NOT r.rolsuper
    LOOP
        EXECUTE format('GRANT EXECUTE ON ROUTINE %s TO %I', v_need.fn, v_need.rolname);
    END LOOP;
END;
$$;
