-- ember_analyst (design.md section 2): reads the comparison views and explains, and nothing else.
-- Not raw messages (only evidence rows rendered and bounded, comparison_item_evidence), not
-- prefixes, not rows of isolated threads (the views leave them out), no writes.
-- NOLOGIN: a DBA grants it to a login role (README, "Comparing shadow with the steward").
--
-- Roles belong to the cluster, not the database, so creating it is guarded both ways: it may
-- exist already, and two databases migrating at once may both try (the loser's duplicate is fine).
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'ember_analyst') THEN
        CREATE ROLE ember_analyst NOLOGIN;
    END IF;
EXCEPTION
    WHEN duplicate_object OR unique_violation THEN
        NULL;
END;
$$;

GRANT USAGE ON SCHEMA ember TO ember_analyst;

-- The views. The windowed functions of the same names, and the analyst's explain, are granted in
-- 999_grants.sql with every other role's functions (SECURITY DEFINER, so the role needs no table
-- privilege at all; a view runs its function with its reader's privileges, so EXECUTE is needed
-- for the views too, and 999 derives those grants from the views).
GRANT SELECT ON
ember.comparison_exact,
ember.comparison_evidence,
ember.comparison_semantic,
ember.comparison_cost,
ember.comparison_latency,
ember.comparison_evidence_quality,
ember.comparison_summary,
ember.comparison_daily,
ember.comparison_by_thread,
ember.comparison_by_path,
ember.comparison_items,
ember.comparison_item_evidence,
ember.comparison_excluded_facts,
ember.comparison_rejected,
ember.comparison_run_list
TO ember_analyst;
