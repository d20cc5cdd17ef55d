-- Which rows a cut-over gives to shadow (issue 25): the one rule the steward's backlog, the
-- promotion and the rollback all ask, so "the steward reads it" and "shadow's proposals about it
-- become facts" can never both hold for one row, or neither.
--
-- A thread's rows above cutover_from_seq(thread) belong to shadow; NULL means the thread is not
-- cut over and the steward reads all of it. Threads shadow never reads (main, the steward's own
-- record, isolated threads: ember.shadow_excluded) are never cut over, whatever the scope says,
-- so "all" leaves main with the steward. At most one active cut-over covers a thread (cut_over
-- refuses overlaps); if a thread's category changed under two cut-overs, the earliest decides.
--
-- plpgsql, not sql: this file comes before the shadow functions it calls (the backlog view,
-- 025_visibility.sql, needs it to exist), and the view calls it once per thread with undigested
-- rows, never per row.
CREATE OR REPLACE FUNCTION ember.cutover_from_seq(p_tenant text, p_thread text)
RETURNS bigint
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    -- The common case, no cut-over at all, costs one probe of a partial index.
    IF NOT EXISTS (SELECT 1 FROM ember.cutovers WHERE tenant_id = p_tenant AND rolled_back_at IS NULL) THEN
        RETURN NULL;
    END IF;
    RETURN (
        SELECT c.from_seq FROM ember.cutovers AS c
        WHERE c.tenant_id = p_tenant AND c.id = ember.cutover_for_thread(p_tenant, p_thread)
    );
END;
$$;

-- The one-tenant form, for the callers that do not name the tenant yet (ember.sole_tenant()).
CREATE OR REPLACE FUNCTION ember.cutover_from_seq(p_thread text)
RETURNS bigint
LANGUAGE sql STABLE
AS $$
    SELECT ember.cutover_from_seq(ember.sole_tenant(), p_thread)
$$;

-- The active cut-over that covers a thread, or NULL: the earliest, as cutover_from_seq decides.
CREATE OR REPLACE FUNCTION ember.cutover_for_thread(p_tenant text, p_thread text)
RETURNS bigint
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_id bigint;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM ember.cutovers WHERE tenant_id = p_tenant AND rolled_back_at IS NULL)
       OR ember.shadow_excluded(p_tenant, p_thread) THEN
        RETURN NULL;
    END IF;
    SELECT c.id INTO v_id
    FROM ember.threads AS t
    INNER JOIN ember.cutovers AS c
        ON c.tenant_id = t.tenant_id
        AND c.rolled_back_at IS NULL
        AND (c.scope = 'all'
             OR (c.scope = 'thread' AND c.scope_value = t.id)
             OR (c.scope = 'category' AND c.scope_value = t.category))
    WHERE t.tenant_id = p_tenant AND t.id = p_thread
    ORDER BY c.from_seq, c.id
    LIMIT 1;
    RETURN v_id;
END;
$$;

-- The one-tenant form, for the callers that do not name the tenant yet (ember.sole_tenant()).
CREATE OR REPLACE FUNCTION ember.cutover_for_thread(p_thread text)
RETURNS bigint
LANGUAGE sql STABLE
AS $$
    SELECT ember.cutover_for_thread(ember.sole_tenant(), p_thread)
$$;
