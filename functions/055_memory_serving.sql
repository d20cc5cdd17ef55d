-- Memory served to a host's agent and to MCP clients (ember.host, ember mcp): always as one
-- viewer, whose labels apply (design.md section 4). search_memory is the search; these are the
-- rest of what those tools offer, each deciding visibility the way search does, so a client that
-- may not read a fact cannot learn it through any of them.

-- Refused the same way whether a fact does not exist or is hidden from the viewer (EM095): the
-- difference would tell a client that a fact it may not read exists.
CREATE OR REPLACE FUNCTION ember.visible_fact(p_tenant text, p_viewer text, p_fact bigint)
RETURNS ember.facts
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    f ember.facts;
BEGIN
    PERFORM ember.check_viewer(p_tenant, p_viewer);
    SELECT * INTO f FROM ember.facts WHERE tenant_id = p_tenant AND id = p_fact;
    IF NOT FOUND OR ember.fact_hidden_reason(p_viewer, f) IS NOT NULL THEN
        RAISE EXCEPTION 'no such fact: %', coalesce(p_fact::text, 'NULL')
            USING ERRCODE = 'EM095', HINT = 'fact ids come from search_memory or recent_facts';
    END IF;
    RETURN f;
END;
$$;

-- explain_fact as a viewer sees it: refused for a fact the viewer may not read, and a pointer's
-- row is shown only when the viewer may read its thread (an isolated thread's rows never are,
-- nor a label carrier's to anyone but the steward); the pointer itself stays, so the evidence
-- list is complete without its content.
CREATE OR REPLACE FUNCTION ember.explain_fact_as(p_tenant text, p_viewer text, p_fact bigint)
RETURNS jsonb
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    f ember.facts;
    v_doc jsonb;
BEGIN
    f := ember.visible_fact(p_tenant, p_viewer, p_fact);
    v_doc := ember.explain_fact(f.id);
    RETURN v_doc
        || jsonb_build_object('evidence', coalesce((
            SELECT jsonb_agg(
                CASE
                    WHEN (e.value ->> 'isolated')::boolean
                         OR ember.hidden_reason_unchecked(p_tenant, p_viewer, e.value ->> 'thread') IS NOT NULL
                        THEN (e.value - 'rendered') || jsonb_build_object('hidden', true)
                    ELSE e.value
                END ORDER BY (e.value ->> 'ordinal')::integer)
            FROM jsonb_array_elements(v_doc -> 'evidence') AS e (value)
        ), '[]'))
        || jsonb_build_object('merged_from', coalesce((
            SELECT jsonb_agg(m.value ORDER BY (m.value ->> 'fact')::bigint)
            FROM jsonb_array_elements(v_doc -> 'merged_from') AS m (value)
            INNER JOIN ember.facts AS s ON s.tenant_id = p_tenant AND s.id = (m.value ->> 'fact')::bigint
            WHERE ember.fact_hidden_reason(p_viewer, s) IS NULL
        ), '[]'));
END;
$$;

-- The newest active facts the viewer may read, newest first.
CREATE OR REPLACE FUNCTION ember.recent_facts(p_tenant text, p_viewer text, p_limit integer DEFAULT 10)
RETURNS TABLE (fact_id bigint, text text, evidence_kind text, categories text[], created_at timestamptz)
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_human boolean := p_viewer = 'human';
    v_tags text[];
    v_isolated text[];
BEGIN
    PERFORM ember.check_viewer(p_tenant, p_viewer);
    IF p_limit IS NULL OR p_limit < 1 OR p_limit > 100 THEN
        RAISE EXCEPTION 'recent_facts: the limit must be between 1 and 100, got %', coalesce(p_limit::text, 'NULL')
            USING ERRCODE = 'EM068';
    END IF;
    v_tags := ember.viewer_tags(p_tenant, p_viewer);
    v_isolated := ARRAY(SELECT t.id FROM ember.threads AS t WHERE t.tenant_id = p_tenant AND t.seal_tier = 'isolated');
    RETURN QUERY
    SELECT f.id, f.text, f.evidence_kind, f.categories, f.created_at
    FROM ember.facts AS f
    WHERE f.tenant_id = p_tenant AND f.status = 'active'
      AND (v_human OR f.categories <@ v_tags)
      AND NOT f.source_threads && v_isolated
    ORDER BY f.created_at DESC, f.id DESC
    LIMIT p_limit;
END;
$$;

-- Forget a fact the viewer may read, the way Ember forgets (docs/forgetting.md): the rows it was
-- written from are erased (a generation pointer: every row of that generation), and with them
-- this fact and whatever else rests only on them. Refused like explain for a fact the viewer may
-- not read (EM095), and for one already forgotten (EM097).
CREATE OR REPLACE FUNCTION ember.forget_fact(
    p_tenant text, p_viewer text, p_fact bigint, p_reason text, p_now timestamptz DEFAULT clock_timestamp()
)
RETURNS jsonb
LANGUAGE plpgsql
AS $$
DECLARE
    f ember.facts;
    v_ids bigint[];
BEGIN
    f := ember.visible_fact(p_tenant, p_viewer, p_fact);
    v_ids := ARRAY(
        SELECT m.id
        FROM ember.fact_evidence AS e
        INNER JOIN ember.messages AS m ON m.tenant_id = e.tenant_id AND m.id = e.message_id
        WHERE e.tenant_id = p_tenant AND e.fact_id = f.id AND m.erased_by IS NULL
        UNION
        SELECT m.id
        FROM ember.fact_evidence AS e
        INNER JOIN ember.messages AS m ON m.tenant_id = e.tenant_id AND m.generation_id = e.generation_id
        WHERE e.tenant_id = p_tenant AND e.fact_id = f.id AND m.erased_by IS NULL
        ORDER BY 1
    );
    IF cardinality(v_ids) = 0 THEN
        RAISE EXCEPTION 'fact %: nothing left to forget (its sources are forgotten already)', f.id
            USING ERRCODE = 'EM097';
    END IF;
    RETURN ember.forget_messages(p_tenant, v_ids, p_reason, p_now) || jsonb_build_object('fact', f.id);
END;
$$;
