-- Model routing (design.md invariant 9): labelled content goes only to a model tagged for all
-- of its categories. Routing never downgrades: when no model of the tier fits, the work waits
-- with an error that says why, rather than going to a cheaper or untagged model.

-- Operators tag models with UPDATE ember.models SET tags = ...; a tag must name a known
-- category (a typo would otherwise silently keep labelled work from ever being routed), and
-- tags are kept sorted and de-duplicated like every label array.
CREATE OR REPLACE FUNCTION ember.models_tags_known()
RETURNS trigger
LANGUAGE plpgsql
AS $$
DECLARE
    v_unknown text[];
BEGIN
    v_unknown := ARRAY(
        SELECT DISTINCT tag FROM unnest(new.tags) AS tag
        WHERE tag IS NULL OR NOT EXISTS (SELECT 1 FROM ember.categories AS c WHERE c.name = tag)
        ORDER BY tag
    );
    IF cardinality(v_unknown) > 0 THEN
        RAISE EXCEPTION 'model "%": unknown categories in tags: %', new.id, v_unknown
            USING ERRCODE = 'EM010', HINT = 'define them first with ember.define_category()';
    END IF;
    new.tags := ember.label_set(new.tags);
    -- Removing a tag must not downgrade what already relies on it: a thread pinned to the model
    -- that carries the label now (set_thread_model refuses the same downgrade from the thread's
    -- side), or a shadow run planned on the model for a generation that carries it.
    IF tg_op = 'UPDATE' THEN
        v_unknown := ARRAY(
            SELECT DISTINCT l
            FROM ember.threads AS t
            CROSS JOIN LATERAL unnest(ember.thread_call_labels(t.tenant_id, t.id)) AS l
            WHERE t.model = new.id AND NOT l = ANY(new.tags)
            UNION
            SELECT l
            FROM ember.shadow_runs AS r
            CROSS JOIN LATERAL unnest(ember.generation_labels(r.generation_id)) AS l
            WHERE r.model = new.id AND r.status = 'running' AND NOT l = ANY(new.tags)
            ORDER BY 1
        );
        IF cardinality(v_unknown) > 0 THEN
            RAISE EXCEPTION 'category_model: model "%" cannot drop tags %: pinned threads or running shadow runs carry them',
                new.id, v_unknown
                USING ERRCODE = 'EM022',
                      HINT = 'repin those threads (or let the runs finish) first';
        END IF;
    END IF;
    RETURN new;
END;
$$;

CREATE OR REPLACE TRIGGER models_tags_known
BEFORE INSERT OR UPDATE OF tags ON ember.models
FOR EACH ROW EXECUTE FUNCTION ember.models_tags_known();

-- The first model of the tier, in registry order (position), whose tags cover every category;
-- or, when none does, model NULL and the reason (what route_model raises as category_model).
-- For callers that only ask (readiness, status): the answer costs no exception and so no
-- subtransaction. A caller's own mistakes (NULL categories, an unknown tier or category) still
-- raise, since no answer would be true for them.
CREATE OR REPLACE FUNCTION ember.route_model_or_reason(
    p_tier text, p_categories text[], OUT model text, OUT reason text, OUT missing text[]
)
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_needed text[] := ember.label_set(coalesce(p_categories, '{}'));
    v_unknown text[];
BEGIN
    IF p_categories IS NULL THEN
        -- No labels is '{}'; NULL is a caller that lost them, and routing it as unlabelled
        -- would be a downgrade (invariant 9).
        RAISE EXCEPTION 'route_model: categories must not be NULL; pass ''{}'' for none'
            USING ERRCODE = 'EM012';
    END IF;
    IF p_tier IS NULL OR p_tier NOT IN ('light', 'standard', 'frontier') THEN
        RAISE EXCEPTION 'unknown model tier "%"', p_tier
            USING ERRCODE = 'EM023', HINT = 'tiers: light, standard, frontier';
    END IF;
    IF cardinality(v_needed) > 0 THEN
        v_unknown := ARRAY(
            SELECT c FROM unnest(v_needed) AS c
            WHERE NOT EXISTS (SELECT 1 FROM ember.categories AS k WHERE k.name = c)
        );
        IF cardinality(v_unknown) > 0 THEN
            RAISE EXCEPTION 'routing a % call: unknown categories %', p_tier, v_unknown
                USING ERRCODE = 'EM010', HINT = 'define them first with ember.define_category()';
        END IF;
    END IF;

    SELECT m.id INTO model FROM ember.models AS m
    WHERE m.tier = p_tier AND m.tags @> v_needed
    ORDER BY m.position
    LIMIT 1;
    IF model IS NOT NULL THEN
        RETURN;
    END IF;

    -- Name what is missing: the categories no model of the tier is tagged for at all, or,
    -- when each is covered by some model, the fact that no single model covers them all.
    missing := ARRAY(
        SELECT c FROM unnest(v_needed) AS c
        WHERE NOT EXISTS (SELECT 1 FROM ember.models AS m WHERE m.tier = p_tier AND c = ANY(m.tags))
    );
    IF cardinality(missing) > 0 THEN
        reason := format('category_model: no %s model is tagged for %s', p_tier, missing);
    ELSE
        reason := format('category_model: no single %s model is tagged for all of %s', p_tier, v_needed);
    END IF;
END;
$$;

-- The same answer, raising category_model (EM022) when there is no model: for callers about to
-- send work, for whom no model is an error.
CREATE OR REPLACE FUNCTION ember.route_model(p_tier text, p_categories text[])
RETURNS text
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    r record;
BEGIN
    r := ember.route_model_or_reason(p_tier, p_categories);
    IF r.model IS NOT NULL THEN
        RETURN r.model;
    END IF;
    IF cardinality(r.missing) > 0 THEN
        RAISE EXCEPTION '%', r.reason
            USING ERRCODE = 'EM022',
                  DETAIL = format('the call carries %s', ember.label_set(p_categories)),
                  HINT = 'tag a model of this tier (UPDATE ember.models SET tags = ...); '
                      || 'the work waits rather than going to an untagged model';
    END IF;
    RAISE EXCEPTION '%', r.reason
        USING ERRCODE = 'EM022',
              HINT = 'tag one model of this tier for all of them; the work waits meanwhile';
END;
$$;

-- The model a call for p_thread may go to now (seed 001 sections 1 and 8): the thread's pinned
-- model, when that model is tagged for every label the thread carries. Labels only grow within a
-- generation, and a label carrier gathers them from what it receives (check_carrier_flow lets main
-- take a progress report from a health chat whatever main's pin), so a pin can fall behind its
-- thread's labels; the next call is then refused with category_model (EM022), never sent to an
-- untagged model. Rerouting to some other tagged model instead would override the user's choice
-- of model behind their back; the refusal names a model that would do. Unpinned, an unlabelled
-- thread's call is the host's to route (model NULL); a labelled one is refused, since no pin
-- proves no tags. Returns {thread, model, labels}.
CREATE OR REPLACE FUNCTION ember.thread_call_model(p_thread text)
RETURNS jsonb
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    t ember.threads;
    v_labels text[];
    v_tags text[];
    v_tier text;
    v_missing text[];
    v_fit text;
BEGIN
    SELECT * INTO t FROM ember.threads WHERE id = p_thread;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'unknown thread "%"', p_thread USING ERRCODE = 'EM001';
    END IF;
    v_labels := ember.thread_call_labels(ember.sole_tenant(), p_thread);
    SELECT m.tags, m.tier INTO v_tags, v_tier FROM ember.models AS m WHERE m.id = t.model;
    v_missing := ARRAY(SELECT l FROM unnest(v_labels) AS l WHERE NOT l = ANY(coalesce(v_tags, '{}')));
    IF cardinality(v_missing) > 0 THEN
        SELECT m.id INTO v_fit FROM ember.models AS m
        WHERE m.tags @> v_labels
        ORDER BY m.tier IS NOT DISTINCT FROM v_tier DESC, m.position
        LIMIT 1;
        RAISE EXCEPTION 'category_model: thread "%" carries %, and %', p_thread, v_labels,
            CASE WHEN t.model IS NULL THEN 'no model is pinned for it'
                 ELSE format('its pinned model "%s" is not tagged for %s', t.model, v_missing) END
            USING ERRCODE = 'EM022',
                  DETAIL = 'labelled content goes only to a model tagged for all of its labels; the call is refused, not sent',
                  HINT = CASE WHEN v_fit IS NOT NULL
                      THEN format('pin a tagged model (ember.set_thread_model(%L, %L) would do), ', p_thread, v_fit)
                      ELSE 'tag a model for them (UPDATE ember.models SET tags = ...) and pin it, ' END
                      || 'or start a new generation for a clean context';
    END IF;
    RETURN jsonb_build_object('thread', p_thread, 'model', t.model, 'labels', to_jsonb(v_labels));
END;
$$;
