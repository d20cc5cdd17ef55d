-- Comparison, continued: the rows behind every number (issue 24). Each fact and each proposal of a
-- window, with its status in each coverage, its pipeline and path, its thread, and its evidence
-- rendered as the rows it names, so an analyst goes from any count of comparison_summary,
-- comparison_by_thread or comparison_by_path to the items it counts, and from an item to its rows.
--
-- Nothing of an isolated thread appears: no proposal of one, no fact citing one, and a pointer
-- into one (a rejected proposal may hold such a pointer) is named as isolated and nothing more.

-- comparison_item_rows: the statuses by id, the one definition the views dress and count -------

-- Which shadow paths have read a fact's rows in a thread it cites, one row per pointer and run that
-- read it: a completed run of that thread whose range holds the cited row, or any completed run of
-- a cited generation. The one definition of read_by_shadow, for comparison_item_rows and the
-- analyst's explain (088_explain_analyst.sql).
CREATE OR REPLACE VIEW ember.comparison_fact_reads AS
SELECT
    fp.fact_id,
    fp.thread_id,
    r.path
FROM ember.comparison_fact_pointers AS fp
LEFT JOIN ember.messages AS m ON fp.message_id = m.id
INNER JOIN ember.shadow_runs AS r
    ON
        fp.thread_id = r.thread_id
        AND coalesce(m.generation_id, fp.generation_id) = r.generation_id
        AND r.status = 'completed'
        AND (fp.message_id IS NULL OR (m.seq > r.from_seq AND m.seq <= r.through_seq));

-- One row per (fact, thread it cites) and per proposal (valid or rejected), with the ids of the
-- other side's items it pairs with in each coverage, whether a judge was shown it, and, for a
-- fact, which shadow paths have read its rows in that thread (completed runs whose range holds a
-- cited row, or runs of a cited generation). Exact and evidence pairs are of one thread; a judged
-- pair is the proposal's thread's, and counts for every thread its fact cites.
CREATE OR REPLACE FUNCTION ember.comparison_item_rows(p_since timestamptz, p_until timestamptz)
RETURNS TABLE (
    item text,
    item_id bigint,
    thread_id text,
    path text,
    excluded_reason text,
    rejected boolean,
    exact_ids bigint[],
    evidence_ids bigint[],
    semantic_ids bigint[],
    judged boolean,
    read_by_shadow text[]
)
LANGUAGE sql STABLE
AS $$
    WITH matches AS MATERIALIZED (
        SELECT * FROM ember.comparison_matches(p_since, p_until)
    ),
    judged AS MATERIALIZED (
        SELECT * FROM ember.comparison_judged_items()
    ),
    facts AS MATERIALIZED (
        SELECT a.fact_id, a.thread_id, a.excluded_reason FROM ember.comparison_all_facts(p_since, p_until) AS a
    ),
    reads AS (
        SELECT fr.fact_id, fr.thread_id, array_agg(DISTINCT fr.path ORDER BY fr.path) AS paths
        FROM ember.comparison_fact_reads AS fr
        JOIN facts AS f ON f.fact_id = fr.fact_id AND f.thread_id = fr.thread_id
        GROUP BY fr.fact_id, fr.thread_id
    ),
    fact_pairs AS (
        SELECT x.fact_id, x.thread_id,
               array_agg(DISTINCT x.proposal_id ORDER BY x.proposal_id) FILTER (WHERE x.kind = 'exact') AS ex,
               array_agg(DISTINCT x.proposal_id ORDER BY x.proposal_id) FILTER (WHERE x.kind = 'evidence') AS ev
        FROM matches AS x WHERE x.kind IN ('exact', 'evidence')
        GROUP BY x.fact_id, x.thread_id
    ),
    fact_semantic AS (
        SELECT x.fact_id, array_agg(DISTINCT x.proposal_id ORDER BY x.proposal_id) AS se
        FROM matches AS x WHERE x.kind = 'semantic'
        GROUP BY x.fact_id
    ),
    proposal_pairs AS (
        SELECT x.proposal_id,
               array_agg(DISTINCT x.fact_id ORDER BY x.fact_id) FILTER (WHERE x.kind = 'exact') AS ex,
               array_agg(DISTINCT x.fact_id ORDER BY x.fact_id) FILTER (WHERE x.kind = 'evidence') AS ev,
               array_agg(DISTINCT x.fact_id ORDER BY x.fact_id) FILTER (WHERE x.kind = 'semantic') AS se
        FROM matches AS x
        GROUP BY x.proposal_id
    )
    SELECT 'fact'::text, f.fact_id, f.thread_id, 'steward'::text, f.excluded_reason, NULL::boolean,
           coalesce(fp.ex, '{}'), coalesce(fp.ev, '{}'),
           CASE WHEN f.excluded_reason IS NULL THEN coalesce(fs.se, '{}') ELSE '{}' END,
           f.fact_id IN (SELECT j.item_id FROM judged AS j WHERE j.side = 'fact'),
           coalesce(rd.paths, '{}')
    FROM facts AS f
    LEFT JOIN fact_pairs AS fp ON fp.fact_id = f.fact_id AND fp.thread_id = f.thread_id
    LEFT JOIN fact_semantic AS fs ON fs.fact_id = f.fact_id
    LEFT JOIN reads AS rd ON rd.fact_id = f.fact_id AND rd.thread_id = f.thread_id
    UNION ALL
    SELECT 'proposal', p.id, p.thread_id, r.path, NULL, p.validation_error IS NOT NULL,
           coalesce(pp.ex, '{}'), coalesce(pp.ev, '{}'), coalesce(pp.se, '{}'),
           p.id IN (SELECT j.item_id FROM judged AS j WHERE j.side = 'proposal'),
           NULL
    FROM ember.comparison_window_proposals(p_since, p_until) AS p
    JOIN ember.shadow_runs AS r ON r.id = p.run_id
    LEFT JOIN proposal_pairs AS pp ON pp.proposal_id = p.id
$$;

-- comparison_items --------------------------------------------------------------------------------

-- The drill-down section an item falls in, strongest match first: the one rule comparison_items
-- and the explains (088_explain_analyst.sql) share.
CREATE OR REPLACE FUNCTION ember.comparison_agreement(
    p_item text, p_rejected boolean, p_excluded boolean, p_exact boolean, p_semantic boolean, p_evidence boolean
)
RETURNS text
LANGUAGE sql IMMUTABLE
AS $$
    SELECT CASE
        WHEN p_rejected THEN 'rejected'
        WHEN p_excluded THEN 'excluded'
        WHEN p_exact THEN 'exact'
        WHEN p_semantic THEN 'semantic'
        WHEN p_evidence THEN 'evidence'
        WHEN p_item = 'fact' THEN 'steward only'
        ELSE 'shadow only'
    END
$$;

-- Its length is its 24 result columns, one line or so each: every status is computed in
-- comparison_item_rows, and this only names each one for the drill-down, in one pass over them.
CREATE OR REPLACE FUNCTION ember.comparison_items(
    p_since timestamptz DEFAULT NULL, p_until timestamptz DEFAULT NULL
)
RETURNS TABLE (
    item text,
    item_id bigint,
    thread_id text,
    pipeline text,
    path text,
    run_id bigint,
    model text,
    created_at timestamptz,
    text text,
    evidence_kind text,
    categories text[],
    status text,
    agreement text,
    exact text,
    evidence text,
    semantic text,
    exact_ids bigint[],
    evidence_ids bigint[],
    semantic_ids bigint[],
    read_by_shadow text[],
    excluded_reason text,
    rejection text,
    rejection_class text,
    pointers integer
)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, ember, pg_temp
SET work_mem = '64MB'
AS $$
BEGIN
    PERFORM ember.comparison_check_window(p_since, p_until);
    RETURN QUERY
    WITH rows AS (
        SELECT * FROM ember.comparison_item_rows(p_since, p_until)
    ),
    fact_pointer_counts AS (
        SELECT fp.fact_id, fp.thread_id, count(*) AS n
        FROM ember.comparison_fact_pointers AS fp
        GROUP BY fp.fact_id, fp.thread_id
    )
    SELECT x.item, x.item_id, x.thread_id,
           CASE x.item WHEN 'fact' THEN 'steward' ELSE 'shadow' END,
           x.path,
           coalesce(f.run_id, p.run_id),
           coalesce(sr.model, hr.model),
           coalesce(f.created_at, p.created_at),
           coalesce(f.text, p.text),
           coalesce(f.evidence_kind, p.evidence_kind),
           coalesce(f.categories, p.categories),
           CASE WHEN x.item = 'fact' THEN f.status WHEN x.rejected THEN 'rejected' ELSE 'valid' END,
           ember.comparison_agreement(
               x.item, coalesce(x.rejected, false), x.excluded_reason IS NOT NULL,
               x.exact_ids <> '{}', x.semantic_ids <> '{}', x.evidence_ids <> '{}'
           ),
           CASE WHEN x.rejected OR x.excluded_reason IS NOT NULL THEN 'not compared'
                WHEN x.exact_ids <> '{}' THEN 'exact' ELSE 'unmatched' END,
           CASE WHEN x.rejected OR x.excluded_reason IS NOT NULL THEN 'not compared'
                WHEN x.evidence_ids <> '{}' THEN 'neighbour' ELSE 'unmatched' END,
           CASE WHEN x.rejected OR x.excluded_reason IS NOT NULL THEN 'not compared'
                WHEN x.semantic_ids <> '{}' THEN 'pair'
                WHEN x.judged THEN 'unmatched' ELSE 'not judged' END,
           x.exact_ids, x.evidence_ids, x.semantic_ids, x.read_by_shadow,
           x.excluded_reason,
           p.validation_error,
           ember.rejection_reason_class(p.validation_error),
           CASE WHEN x.item = 'fact' THEN fc.n::integer
                WHEN jsonb_typeof(p.evidence) = 'array' THEN jsonb_array_length(p.evidence)
                ELSE 0 END
    FROM rows AS x
    LEFT JOIN fact_pointer_counts AS fc ON x.item = 'fact' AND fc.fact_id = x.item_id AND fc.thread_id = x.thread_id
    LEFT JOIN ember.facts AS f ON x.item = 'fact' AND f.id = x.item_id
    LEFT JOIN ember.steward_runs AS sr ON sr.id = f.run_id
    LEFT JOIN ember.shadow_proposals AS p ON x.item = 'proposal' AND p.id = x.item_id
    LEFT JOIN ember.shadow_runs AS hr ON hr.id = p.run_id
    ORDER BY x.thread_id, x.item, x.item_id;
END;
$$;

CREATE OR REPLACE VIEW ember.comparison_items AS
SELECT * FROM ember.comparison_items(NULL, NULL);

COMMENT ON VIEW ember.comparison_items IS
'The rows behind every count: one row per steward fact and thread it cites (a fact citing two threads has
two rows, since exact and evidence matching are per thread) and one per shadow proposal, valid or
rejected. item: fact or proposal; item_id: the fact or proposal id (explain it with
ember.comparison_explain_fact(id) or ember.comparison_explain_proposal(id), or `ember explain`); thread_id;
pipeline: steward or shadow; path: steward, hot or cold; run_id and model of the run that wrote it;
created_at; text (NULL once forgotten); evidence_kind; categories (label categories); status: a fact''s
active, merged or retired, a proposal''s valid or rejected. Coverage, each kept apart: exact (exact or
unmatched), evidence (neighbour or unmatched: shared evidence, not coverage of meaning), semantic (pair,
unmatched once a judge was shown it, not judged otherwise: reviewable, not truth); each is "not compared"
for an excluded fact or a rejected proposal. exact_ids, evidence_ids, semantic_ids: the other side''s ids it
pairs with. agreement, the drill-down section: exact, semantic, evidence (the strongest match), steward only
(a fact in no pair), shadow only (a valid proposal in no pair), rejected, or excluded (a fact whose rows in
this thread shadow never reads). read_by_shadow: for a fact, the shadow paths whose completed runs read its
rows in this thread ({} while none has). excluded_reason: why shadow could not have read them (main, the
steward''s record, history before shadow''s activation). rejection and rejection_class: a rejected
proposal''s reason, and the reason with pointer numbers and names left out, as comparison_summary groups
it. pointers: its evidence pointers, listed in comparison_item_evidence. Windowed:
ember.comparison_items(since, until). No isolated thread.';

-- comparison_excluded_facts and comparison_rejected -----------------------------------------------

CREATE OR REPLACE FUNCTION ember.comparison_excluded_facts(
    p_since timestamptz DEFAULT NULL, p_until timestamptz DEFAULT NULL
)
RETURNS TABLE (
    fact_id bigint,
    thread_id text,
    text text,
    evidence_kind text,
    status text,
    created_at timestamptz,
    excluded_reason text
)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, ember, pg_temp
AS $$
BEGIN
    PERFORM ember.comparison_check_window(p_since, p_until);
    RETURN QUERY
    SELECT a.fact_id, a.thread_id, f.text, f.evidence_kind, f.status, f.created_at, a.excluded_reason
    FROM ember.comparison_all_facts(p_since, p_until) AS a
    JOIN ember.facts AS f ON f.id = a.fact_id
    WHERE a.fact_id NOT IN (SELECT c.fact_id FROM ember.comparison_facts(p_since, p_until) AS c)
    ORDER BY a.thread_id, a.fact_id;
END;
$$;

CREATE OR REPLACE VIEW ember.comparison_excluded_facts AS
SELECT * FROM ember.comparison_excluded_facts(NULL, NULL);

COMMENT ON VIEW ember.comparison_excluded_facts IS
'The steward facts left out of shadow''s coverage (comparison_summary.excluded_facts), listed apart: facts none
of whose evidence pointers name a row shadow reads, one row per thread cited, with the reason: main (shadow
never reads main), the steward''s own record, or history from before shadow''s activation (already digested
by the steward, or skipped by the activation watermark). Windowed: ember.comparison_excluded_facts(since,
until). No isolated thread.';

CREATE OR REPLACE FUNCTION ember.comparison_rejected(
    p_since timestamptz DEFAULT NULL, p_until timestamptz DEFAULT NULL
)
RETURNS TABLE (
    proposal_id bigint,
    thread_id text,
    path text,
    run_id bigint,
    model text,
    created_at timestamptz,
    text text,
    evidence_kind text,
    reason text,
    reason_class text
)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, ember, pg_temp
AS $$
BEGIN
    PERFORM ember.comparison_check_window(p_since, p_until);
    RETURN QUERY
    SELECT p.id, p.thread_id, r.path, r.id, r.model, p.created_at, p.text, p.evidence_kind,
           p.validation_error, ember.rejection_reason_class(p.validation_error)
    FROM ember.comparison_window_proposals(p_since, p_until) AS p
    JOIN ember.shadow_runs AS r ON r.id = p.run_id
    WHERE p.validation_error IS NOT NULL
    ORDER BY p.thread_id, p.id;
END;
$$;

CREATE OR REPLACE VIEW ember.comparison_rejected AS
SELECT * FROM ember.comparison_rejected(NULL, NULL);

COMMENT ON VIEW ember.comparison_rejected IS
'Rejected shadow proposals (comparison_summary.rejected_proposals) with their reasons: the proposal, its
thread, the path, run and model that proposed it, its text and kind, the reason as stored (it names pointers
by number and never another thread) and reason_class, the reason with pointer numbers and quoted names left
out, as rejected_by_reason groups it. Kept as comparison data: how often shadow invents evidence, and on
what. Windowed: ember.comparison_rejected(since, until). No isolated thread.';
