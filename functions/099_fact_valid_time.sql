-- Time on facts (issue 25, item 2). Two axes:
--   recorded time   when Ember learned and changed a fact: fact_history, as before;
--   valid time      when the fact was true as far as its evidence says: facts.valid_from and
--                   valid_until, valid_until NULL while it still holds.
-- facts_as_of answers on either axis: "what did Ember believe at T" (recorded) and "what was true
-- at T according to what Ember knows now" (valid). explain_fact shows both.
--
-- A fact's validity starts when its earliest evidence was written: a user says "I moved to
-- Lisbon" at 10:05, so the fact is true from 10:05 even if the steward writes it at 18:00. That is
-- the evidence's word and nothing more; a writer that knows better (a person, or a consolidation
-- that closes a fact it supersedes) changes it through set_fact_validity, which history records
-- with the interval before and after.

-- The time of a fact's earliest evidence: a message's time, or a generation's start.
CREATE OR REPLACE FUNCTION ember.fact_evidence_time(p_fact bigint)
RETURNS timestamptz
LANGUAGE sql STABLE
AS $$
    SELECT min(coalesce(m.created_at, g.started_at))
    FROM ember.fact_evidence AS e
    LEFT JOIN ember.messages AS m ON m.id = e.message_id
    LEFT JOIN ember.generations AS g ON g.id = e.generation_id
    WHERE e.fact_id = p_fact
$$;

-- A fact written without a valid_from takes its evidence's time once the evidence is in (the
-- writers insert the fact first, then its pointers). Not a history row: this is the validity the
-- fact was written with, and the 'written' row stands for it.
CREATE OR REPLACE FUNCTION ember.fact_valid_from_evidence()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    UPDATE ember.facts AS f
    SET valid_from = least(coalesce(ember.fact_evidence_time(f.id), f.created_at), f.created_at)
    WHERE f.id IN (SELECT DISTINCT n.fact_id FROM added AS n) AND f.valid_from IS NULL;
    RETURN NULL;
END;
$$;

CREATE OR REPLACE TRIGGER fact_valid_from_evidence
AFTER INSERT ON ember.fact_evidence
REFERENCING NEW TABLE AS added
FOR EACH STATEMENT EXECUTE FUNCTION ember.fact_valid_from_evidence();

-- Change when a fact was true. Refused (EM124): an interval that ends before it starts, a
-- blank reason, or a fact that is merged, retired or forgotten (its validity is its successor's
-- or nobody's), a time outside those Ember accepts, a superseded fact that would end after its
-- successor starts, or a fact that would start before a fact it superseded did. A fact that
-- starts earlier closes what it superseded there too. EM095 for an unknown fact. A NULL
-- p_valid_from keeps the fact's start. History records each change with both intervals and the
-- reason.
CREATE OR REPLACE FUNCTION ember.set_fact_validity(
    p_fact bigint, p_valid_from timestamptz, p_valid_until timestamptz, p_reason text,
    p_now timestamptz DEFAULT clock_timestamp()
)
RETURNS jsonb
LANGUAGE plpgsql
AS $$
DECLARE
    f ember.facts;
    v_from timestamptz;
    v_next bigint;
    v_next_from timestamptz;
    v_prev bigint;
    v_prev_from timestamptz;
BEGIN
    PERFORM ember.require_now(p_now);
    SELECT * INTO f FROM ember.facts WHERE id = p_fact FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no such fact: %', coalesce(p_fact::text, 'NULL') USING ERRCODE = 'EM095';
    END IF;
    IF p_reason IS NULL OR btrim(p_reason) = '' THEN
        RAISE EXCEPTION 'fact %: a change of validity needs a reason', p_fact USING ERRCODE = 'EM124';
    END IF;
    IF f.status NOT IN ('active', 'superseded') OR f.text IS NULL THEN
        RAISE EXCEPTION 'fact %: it is %, so its validity is not its own to change', p_fact,
            CASE WHEN f.text IS NULL THEN 'forgotten' ELSE f.status END
            USING ERRCODE = 'EM124';
    END IF;
    IF NOT ember.time_accepted(coalesce(p_valid_from, '2000-01-01')) OR NOT ember.time_accepted(coalesce(p_valid_until, '2000-01-01')) THEN
        RAISE EXCEPTION 'fact %: a validity is finite times from 1970 up to the end of 2199, got % to %', p_fact,
            coalesce(p_valid_from::text, 'unchanged'), coalesce(p_valid_until::text, 'open')
            USING ERRCODE = 'EM124';
    END IF;
    v_from := coalesce(p_valid_from, f.valid_from, f.created_at);
    -- Validity follows the supersede chain: a superseded fact ends no later than its successor
    -- starts, and a fact starts no earlier than any fact it superseded ends, so "what was true at
    -- T" never holds both.
    SELECT n.id, n.valid_from INTO v_next, v_next_from FROM ember.facts AS n WHERE n.id = f.superseded_by;
    IF f.status = 'superseded' AND v_next_from IS NOT NULL AND p_valid_until > v_next_from THEN
        RAISE EXCEPTION 'fact %: valid until % would overlap fact %, which superseded it and is valid from %',
            p_fact, p_valid_until, v_next, v_next_from
            USING ERRCODE = 'EM124';
    END IF;
    SELECT o.id, o.valid_from INTO v_prev, v_prev_from FROM ember.facts AS o
    WHERE o.superseded_by = p_fact AND o.status = 'superseded' AND o.valid_from > v_from
    ORDER BY o.valid_from DESC, o.id LIMIT 1;
    IF v_prev IS NOT NULL THEN
        RAISE EXCEPTION 'fact %: valid from % would start before fact %, which it superseded, became true (%)',
            p_fact, v_from, v_prev, v_prev_from
            USING ERRCODE = 'EM124';
    END IF;
    IF p_valid_until IS NOT NULL AND p_valid_until < v_from THEN
        RAISE EXCEPTION 'fact %: valid until % is before valid from %', p_fact, p_valid_until, v_from
            USING ERRCODE = 'EM124';
    END IF;
    IF f.status = 'superseded' AND p_valid_until IS NULL THEN
        RAISE EXCEPTION 'fact %: it is superseded, so its validity stays closed', p_fact USING ERRCODE = 'EM124';
    END IF;
    -- History rows are written by the trigger alone; the reason reaches its detail through a
    -- transaction-local setting, cleared at once.
    PERFORM set_config('ember.history_reason', p_reason, true);
    UPDATE ember.facts SET valid_from = v_from, valid_until = p_valid_until, updated_at = ember.require_now(p_now)
    WHERE id = p_fact;
    -- An earlier start closes what it superseded earlier too: each such fact now ends where this
    -- one begins, with its own history row.
    PERFORM set_config('ember.history_reason',
                       format('fact %s, which superseded it, now starts at %s: %s', p_fact, v_from, p_reason), true);
    UPDATE ember.facts AS o SET valid_until = v_from, updated_at = p_now
    WHERE o.superseded_by = p_fact AND o.status = 'superseded' AND o.valid_until > v_from;
    PERFORM set_config('ember.history_reason', '', true);
    RETURN jsonb_build_object('fact', p_fact, 'valid_from', v_from, 'valid_until', p_valid_until,
                              'was_from', f.valid_from, 'was_until', f.valid_until, 'reason', p_reason);
END;
$$;

-- A fact closed by another stays closed only while its closer holds. When a fact that superseded
-- others is retired (by the steward, consolidation, a cut-over's rollback) or forgotten, each fact
-- it superseded is open again, with the validity it had before (the 'superseded' history row keeps
-- it) and a 'reopened' history row saying why: Berlin superseded by Lisbon, Lisbon forgotten, and
-- the person lives in Berlin again rather than nowhere. A retired fact that was itself superseded
-- hands what it closed on to its own successor instead, which still holds: Berlin, Lisbon, Paris,
-- Lisbon forgotten, and Berlin stays closed, by Paris. The reason names the closer and what became
-- of it, never its retirement reason, which a model wrote and forgetting may have to erase.
--
-- A merge is not undone this way: a merged fact retired as no longer true takes its sources'
-- statement with it, and forgetting re-checks the sources itself (087_forget.sql). Only a
-- cut-over's rollback splits a merge back out, because the merge stood on a fact that is being
-- taken back (097_cutover.sql).
CREATE OR REPLACE FUNCTION ember.fact_reopen_closed()
RETURNS trigger
LANGUAGE plpgsql
AS $$
DECLARE
    v_reason text := current_setting('ember.history_reason', true);
BEGIN
    IF old.status = 'superseded' AND old.superseded_by IS NOT NULL THEN
        UPDATE ember.facts AS s SET superseded_by = old.superseded_by
        WHERE s.superseded_by = new.id AND s.status = 'superseded';
        RETURN NULL;
    END IF;
    PERFORM set_config('ember.history_reason', format('fact %s, which superseded it, was %s', new.id,
        CASE WHEN new.text IS NULL THEN 'forgotten' ELSE 'retired' END), true);
    UPDATE ember.facts AS s
    SET status = 'active', superseded_by = NULL,
        valid_until = (
            SELECT (h.validity ->> 'was_until')::timestamptz FROM ember.fact_history AS h
            WHERE h.fact_id = s.id AND h.change = 'superseded'
            ORDER BY h.id DESC LIMIT 1
        ),
        updated_at = greatest(new.updated_at, s.updated_at)
    WHERE s.superseded_by = new.id AND s.status = 'superseded';
    PERFORM set_config('ember.history_reason', coalesce(v_reason, ''), true);
    RETURN NULL;
END;
$$;

CREATE OR REPLACE TRIGGER fact_reopen_closed
AFTER UPDATE OF status ON ember.facts
FOR EACH ROW
WHEN (new.status = 'retired' AND old.status <> 'retired')
EXECUTE FUNCTION ember.fact_reopen_closed();

-- What Ember believed at recorded time p_at about when fact p_fact was true: the interval the
-- last validity change at or before p_at left, else the one the first change after p_at found
-- (the fact had it from its write until then), else the fact's own.
CREATE OR REPLACE FUNCTION ember.fact_validity_as_of(p_fact bigint, p_at timestamptz)
RETURNS TABLE (valid_from timestamptz, valid_until timestamptz)
LANGUAGE sql STABLE
AS $$
    SELECT coalesce(b.f, a.f, x.valid_from), CASE WHEN b.found THEN b.u WHEN a.found THEN a.u ELSE x.valid_until END
    FROM ember.facts AS x
    LEFT JOIN LATERAL (
        SELECT true AS found, (h.validity ->> 'from')::timestamptz AS f, (h.validity ->> 'until')::timestamptz AS u
        FROM ember.fact_history AS h
        WHERE h.fact_id = x.id AND h.validity ? 'was_from' AND h.at <= p_at
        ORDER BY h.at DESC, h.id DESC LIMIT 1
    ) AS b ON true
    LEFT JOIN LATERAL (
        SELECT true AS found, (h.validity ->> 'was_from')::timestamptz AS f,
            (h.validity ->> 'was_until')::timestamptz AS u
        FROM ember.fact_history AS h
        WHERE h.fact_id = x.id AND h.validity ? 'was_from' AND h.at > p_at
        ORDER BY h.at, h.id LIMIT 1
    ) AS a ON true
    WHERE x.id = p_fact
$$;

-- The pointers a fact had at recorded time p_at: today's, plus those removed after p_at.
CREATE OR REPLACE FUNCTION ember.fact_evidence_as_of(p_fact bigint, p_at timestamptz)
RETURNS jsonb
LANGUAGE sql STABLE
AS $$
    SELECT coalesce((
        SELECT jsonb_agg(p.pointer ORDER BY p.ord)
        FROM (
            SELECT e.ordinal::bigint AS ord,
                CASE WHEN e.message_id IS NOT NULL THEN jsonb_build_object('message_id', e.message_id)
                     ELSE jsonb_build_object('generation_id', e.generation_id) END AS pointer
            FROM ember.fact_evidence AS e WHERE e.fact_id = p_fact
            UNION ALL
            SELECT 1000000 + r.ordinality, r.value
            FROM ember.fact_history AS h2
            CROSS JOIN LATERAL jsonb_array_elements(h2.evidence_removed) WITH ORDINALITY AS r (value, ordinality)
            WHERE h2.fact_id = p_fact AND h2.change = 'evidence-shrunk' AND h2.at > p_at
        ) AS p
    ), '[]'::jsonb)
$$;

DROP FUNCTION IF EXISTS ember.facts_as_of(timestamptz);

-- facts_as_of(T) or facts_as_of(T, 'recorded'): what Ember believed at T. The facts active at that
-- moment of recorded time, with the evidence they had then (today's pointers plus those removed
-- after T) and the validity Ember then gave them. The text is the fact's own: a fact forgotten
-- since has text NULL and forgotten true, since the history never held its text.
--
-- facts_as_of(T, 'valid'): what was true at T according to what Ember knows now. The facts Ember
-- holds now (active, or superseded: a superseded fact was true for its interval) whose validity
-- contains T, with today's evidence. Retired, merged and forgotten facts are not knowledge.
--
-- status is the fact's status at T (recorded) or now (valid). EM125 for another axis. On both
-- axes a fact derived from an isolated thread is left out, as search_memory leaves it out
-- (fact_visible): the person's history is no door into a sealed thread.
CREATE OR REPLACE FUNCTION ember.facts_as_of(p_at timestamptz, p_axis text DEFAULT 'recorded')
RETURNS TABLE (
    fact_id bigint,
    text text,
    evidence_kind text,
    categories text[],
    evidence jsonb,
    written_at timestamptz,
    forgotten boolean,
    valid_from timestamptz,
    valid_until timestamptz,
    status text
)
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    IF p_at IS NULL THEN
        RAISE EXCEPTION 'facts_as_of needs a time' USING ERRCODE = 'EM125';
    END IF;
    IF p_axis = 'recorded' THEN
        RETURN QUERY
        SELECT f.id, f.text, f.evidence_kind, f.categories, ember.fact_evidence_as_of(f.id, p_at), w.at,
            f.text IS NULL, v.valid_from, v.valid_until, s.status
        FROM ember.facts AS f
        INNER JOIN LATERAL (
            SELECT h.at FROM ember.fact_history AS h
            WHERE h.fact_id = f.id AND h.change = 'written'
            ORDER BY h.id LIMIT 1
        ) AS w ON w.at <= p_at
        INNER JOIN LATERAL (
            SELECT h.status FROM ember.fact_history AS h
            WHERE h.fact_id = f.id AND h.at <= p_at
            ORDER BY h.at DESC, h.id DESC LIMIT 1
        ) AS s ON s.status = 'active'
        CROSS JOIN LATERAL ember.fact_validity_as_of(f.id, p_at) AS v
        WHERE ember.fact_visible(true, '{}', f.categories, f.source_threads)
        ORDER BY f.id;
    ELSIF p_axis = 'valid' THEN
        RETURN QUERY
        SELECT f.id, f.text, f.evidence_kind, f.categories, ember.fact_evidence_as_of(f.id, 'infinity'), w.at,
            false, f.valid_from, f.valid_until, f.status
        FROM ember.facts AS f
        LEFT JOIN LATERAL (
            SELECT h.at FROM ember.fact_history AS h
            WHERE h.fact_id = f.id AND h.change = 'written'
            ORDER BY h.id LIMIT 1
        ) AS w ON true
        WHERE f.status IN ('active', 'superseded') AND f.text IS NOT NULL
            AND f.valid_from <= p_at AND (f.valid_until IS NULL OR f.valid_until > p_at)
            AND ember.fact_visible(true, '{}', f.categories, f.source_threads)
        ORDER BY f.id;
    ELSE
        RAISE EXCEPTION 'facts_as_of: the axis is recorded or valid, got %', coalesce(p_axis, 'none')
            USING ERRCODE = 'EM125';
    END IF;
END;
$$;
