-- The central predicates. Each rule is decided here and nowhere else: every "all threads"
-- mechanism asks these instead of comparing kinds or ids itself, so a new kind of hidden or
-- carrier thread changes one function, not ten call sites.

CREATE OR REPLACE FUNCTION ember.is_steward_thread(p_tenant text, p_thread text)
RETURNS boolean
LANGUAGE sql STABLE
AS $$
    SELECT coalesce(
        (SELECT t.kind = 'steward' FROM ember.threads AS t WHERE t.tenant_id = p_tenant AND t.id = p_thread),
        false
    )
$$;

-- The steward's thread, or NULL before ensure_steward_thread: kind = 'steward' narrows the search
-- to the one candidate through the index on kind (threads_one_main_one_steward), and
-- is_steward_thread still decides. Asking it of every thread cost a call per thread.
CREATE OR REPLACE FUNCTION ember.steward_thread_id(p_tenant text)
RETURNS text
LANGUAGE sql STABLE
AS $$
    SELECT t.id FROM ember.threads AS t
    WHERE t.tenant_id = p_tenant AND t.kind = 'steward' AND ember.is_steward_thread(t.tenant_id, t.id)
$$;

-- The one-tenant form, for the callers that do not name the tenant yet (ember.sole_tenant()).
CREATE OR REPLACE FUNCTION ember.steward_thread_id()
RETURNS text
LANGUAGE sql STABLE
AS $$
    SELECT ember.steward_thread_id(ember.sole_tenant())
$$;

-- Label carriers: threads whose rows carry the union of what their generation has read.
CREATE OR REPLACE FUNCTION ember.is_label_carrier(p_tenant text, p_thread text)
RETURNS boolean
LANGUAGE sql STABLE
AS $$
    SELECT coalesce(
        (SELECT t.kind IN ('main', 'steward') FROM ember.threads AS t
         WHERE t.tenant_id = p_tenant AND t.id = p_thread),
        false
    )
$$;

-- Isolated threads: nothing automated ever reads them.
CREATE OR REPLACE FUNCTION ember.is_isolated(p_tenant text, p_thread text)
RETURNS boolean
LANGUAGE sql STABLE
AS $$
    SELECT coalesce(
        (SELECT t.seal_tier = 'isolated' FROM ember.threads AS t
         WHERE t.tenant_id = p_tenant AND t.id = p_thread),
        false
    )
$$;

-- The one-tenant forms of the three predicates, for the callers that do not name the tenant
-- yet (ember.sole_tenant(), functions/006_tenants.sql).
CREATE OR REPLACE FUNCTION ember.is_steward_thread(p_thread text)
RETURNS boolean
LANGUAGE sql STABLE
AS $$
    SELECT ember.is_steward_thread(ember.sole_tenant(), p_thread)
$$;

CREATE OR REPLACE FUNCTION ember.is_label_carrier(p_thread text)
RETURNS boolean
LANGUAGE sql STABLE
AS $$
    SELECT ember.is_label_carrier(ember.sole_tenant(), p_thread)
$$;

CREATE OR REPLACE FUNCTION ember.is_isolated(p_thread text)
RETURNS boolean
LANGUAGE sql STABLE
AS $$
    SELECT ember.is_isolated(ember.sole_tenant(), p_thread)
$$;

-- A thread's kind never changes: the predicates above read it, and main turning into a side
-- thread would stop being a label carrier halfway through a generation.
CREATE OR REPLACE FUNCTION ember.threads_kind_fixed()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    RAISE EXCEPTION 'thread "%": kind "%" cannot be changed (to "%")', old.id, old.kind, new.kind
        USING ERRCODE = 'EM002', HINT = 'create a new thread of the kind you need';
END;
$$;

CREATE OR REPLACE TRIGGER threads_kind_fixed
BEFORE UPDATE OF kind ON ember.threads
FOR EACH ROW WHEN (old.kind IS DISTINCT FROM new.kind)
EXECUTE FUNCTION ember.threads_kind_fixed();
