-- setup(): the one-time calls a host makes before its first turn, in one idempotent call that says
-- what it did (issue 22). Without the steward's thread the steward never runs, and without
-- activation shadow never reads anything; both used to be silent. Host.setup() and `ember init`
-- call this.
--
-- The order matters: the steward's thread copies main's model pin once, when it is created
-- (functions/016_steward_thread.sql), so main is created first when p_main names it. A second
-- call changes nothing and says that everything was already in place. p_categories is a JSON
-- object of name to description (or null), or an array of names.
--
-- Its length: the steps of a first start, in the order stated above, each saying what it changed;
-- split, the order that matters would be spread over calls.
CREATE OR REPLACE FUNCTION ember.setup(
    p_tenant text,
    p_categories jsonb DEFAULT '{}',
    p_main text DEFAULT NULL,
    p_main_model text DEFAULT NULL,
    p_activate_shadow boolean DEFAULT TRUE,
    p_now timestamptz DEFAULT clock_timestamp()
)
RETURNS TABLE (step text, changed boolean, detail text)
LANGUAGE plpgsql
AS $$
#variable_conflict use_column
DECLARE
    v_name text;
    v_description text;
    v_old ember.categories;
    m ember.threads;
    st ember.threads;
    a ember.shadow_activation;
    v_result jsonb;
BEGIN
    PERFORM ember.require_now(p_now);
    IF p_categories IS NULL OR jsonb_typeof(p_categories) NOT IN ('object', 'array') THEN
        RAISE EXCEPTION 'setup: categories must be a JSON object of name to description, or an array of names'
            USING ERRCODE = 'EM012';
    END IF;
    -- Two hosts starting at once: the second waits and finds everything done.
    PERFORM pg_advisory_xact_lock(hashtext('ember.setup'), hashtext(p_tenant));

    -- The tenant first: everything below is its own (functions/006_tenants.sql).
    SELECT 'tenant', t.changed, t.detail INTO step, changed, detail FROM ember.create_tenant(p_tenant, p_now) AS t;
    RETURN NEXT;

    FOR v_name, v_description IN
        SELECT e.key, e.value #>> '{}' FROM jsonb_each(CASE jsonb_typeof(p_categories)
            WHEN 'object' THEN p_categories ELSE '{}' END) AS e
        UNION ALL
        SELECT e.value #>> '{}', NULL FROM jsonb_array_elements(CASE jsonb_typeof(p_categories)
            WHEN 'array' THEN p_categories ELSE '[]' END) AS e
    LOOP
        SELECT * INTO v_old FROM ember.categories AS c WHERE c.name = v_name;
        PERFORM ember.define_category(v_name, v_description);
        step := 'category';
        changed := v_old.name IS NULL OR v_old.description IS DISTINCT FROM coalesce(v_description, v_old.description);
        detail := format('category "%s" %s', v_name, CASE
            WHEN v_old.name IS NULL THEN 'defined'
            WHEN changed THEN 'already defined; its description updated'
            ELSE 'already defined' END);
        RETURN NEXT;
    END LOOP;

    step := 'main';
    SELECT * INTO m FROM ember.threads AS t WHERE t.tenant_id = p_tenant AND t.kind = 'main';
    IF FOUND THEN
        changed := false;
        detail := format('main thread "%s" exists (model %s)', m.id, coalesce(m.model, 'not pinned'));
    ELSIF p_main IS NOT NULL THEN
        PERFORM ember.create_thread(p_tenant, p_main, 'main', NULL, NULL, 'open', p_main_model, p_now);
        SELECT * INTO m FROM ember.threads AS t WHERE t.tenant_id = p_tenant AND t.id = p_main;
        changed := true;
        detail := format('main thread "%s" created (model %s)', m.id, coalesce(m.model, 'not pinned'));
    ELSE
        changed := false;
        detail := 'no main thread yet: create it before the steward''s thread, which copies its model pin once';
    END IF;
    RETURN NEXT;

    step := 'steward';
    SELECT * INTO st FROM ember.threads AS t
    WHERE t.tenant_id = p_tenant AND t.kind = 'steward' AND ember.is_steward_thread(t.tenant_id, t.id);
    changed := NOT FOUND;
    IF changed THEN
        PERFORM ember.ensure_steward_thread(p_tenant, p_now);
        SELECT * INTO st FROM ember.threads AS t
        WHERE t.tenant_id = p_tenant AND t.kind = 'steward' AND ember.is_steward_thread(t.tenant_id, t.id);
    END IF;
    detail := format('the steward''s thread "%s" %s (model %s)', st.id,
        CASE WHEN changed THEN 'created' ELSE 'exists' END,
        coalesce('"' || st.model || '"' || CASE WHEN changed THEN ', copied from main' ELSE '' END,
                 'not pinned: the first light model, for unlabelled content only'));
    RETURN NEXT;

    step := 'shadow';
    SELECT * INTO a FROM ember.shadow_activation;
    IF FOUND THEN
        changed := false;
        detail := format('shadow memory active since %s (history through seq %s left to the steward)',
            a.activated_at, a.through_seq);
    ELSIF p_activate_shadow THEN
        v_result := ember.shadow_activate(p_now);
        changed := true;
        detail := format('shadow memory activated (history through seq %s left to the steward; %s cursors)',
            v_result ->> 'through_seq', v_result ->> 'cursors_created');
    ELSE
        changed := false;
        detail := 'shadow memory not activated (ember.shadow_activate() switches it on)';
    END IF;
    RETURN NEXT;
END;
$$;

-- Tag a model for a category: the operator's decision that this model may read it (invariant 9).
-- Returns true when the tag is new. The model's tags are held to their rules by the trigger
-- models_tags_known (functions/021_routing.sql): the category must exist.
CREATE OR REPLACE FUNCTION ember.tag_model(p_model text, p_category text)
RETURNS boolean
LANGUAGE plpgsql
AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM ember.models WHERE id = p_model) THEN
        RAISE EXCEPTION 'unknown model "%"', p_model
            USING ERRCODE = 'EM009', HINT = 'see SELECT id, tier, tags FROM ember.models';
    END IF;
    UPDATE ember.models SET tags = tags || p_category
    WHERE id = p_model AND NOT (p_category = ANY(tags));
    RETURN FOUND;
END;
$$;
