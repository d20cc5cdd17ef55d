-- ember_analyst (design.md section 2): reads the comparison views, and nothing else. Not raw
-- messages, not prefixes, not rows of isolated threads (the views leave them out), no writes.
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

-- The views, and the windowed functions of the same names (SECURITY DEFINER, so the role needs
-- no table privilege at all). The views call the functions, so EXECUTE is needed for them too.
GRANT SELECT ON
ember.comparison_exact,
ember.comparison_evidence,
ember.comparison_semantic,
ember.comparison_cost,
ember.comparison_latency,
ember.comparison_evidence_quality,
ember.comparison_summary,
ember.comparison_daily,
ember.comparison_by_thread
TO ember_analyst;

-- Only these SECURITY DEFINER functions, and only to the analyst: granted to PUBLIC (the default)
-- they would let any role read comparison data it has no table privilege for.
REVOKE ALL ON FUNCTION
ember.comparison_exact(timestamptz, timestamptz),
ember.comparison_evidence(timestamptz, timestamptz),
ember.comparison_semantic(timestamptz, timestamptz),
ember.comparison_cost(timestamptz, timestamptz),
ember.comparison_latency(timestamptz, timestamptz),
ember.comparison_evidence_quality(timestamptz, timestamptz),
ember.comparison_summary(timestamptz, timestamptz),
ember.comparison_daily(timestamptz, timestamptz),
ember.comparison_by_thread(timestamptz, timestamptz)
FROM public;

GRANT EXECUTE ON FUNCTION
ember.comparison_exact(timestamptz, timestamptz),
ember.comparison_evidence(timestamptz, timestamptz),
ember.comparison_semantic(timestamptz, timestamptz),
ember.comparison_cost(timestamptz, timestamptz),
ember.comparison_latency(timestamptz, timestamptz),
ember.comparison_evidence_quality(timestamptz, timestamptz),
ember.comparison_summary(timestamptz, timestamptz),
ember.comparison_daily(timestamptz, timestamptz),
ember.comparison_by_thread(timestamptz, timestamptz)
TO ember_analyst;
