-- Evidence (seed 000 section 5): what a fact or a shadow proposal may point at, and when the
-- pointers justify its kind. The model's word is never enough: every claim names rows, and
-- these functions decide whether those rows say what the kind promises.
--
-- Three layers, each usable alone: the pointer shape (evidence_shape_error), the lineage rule
-- for shadow, "every pointer stays in its own thread" (evidence_lineage_error, also enforced by
-- the trigger in 031_proposal_guard.sql), and the kind rules (check_evidence). The shadow
-- submit and the steward share check_evidence; only the lineage rule differs between them.

-- The one definition of an id and of a count (token counts, latencies, message ids): a JSON
-- number written as a plain non-negative integer that fits a bigint. `396` is one; `396.0`,
-- `"396"`, `-1` and `1.5` are not. Integer-only rather than "any number with a zero fraction":
-- every writer we have (the worker's JSON, the model's tool input validated by pydantic) writes
-- integers as integers, so a fraction is a bug to surface, and one rule here means every later
-- ::bigint cast of a value that passed it cannot fail. jsonb keeps a number's written scale
-- (396.0 stays 396.0), so the text form decides; an exponent that jsonb normalises to an
-- integer (4e2 is stored as 400) is an integer.
CREATE OR REPLACE FUNCTION ember.jsonb_is_count(p_value jsonb)
RETURNS boolean
LANGUAGE sql IMMUTABLE
AS $$
    SELECT CASE
        WHEN jsonb_typeof(p_value) = 'number' AND (p_value #>> '{}') ~ '^(0|[1-9][0-9]{0,18})$'
            THEN (p_value #>> '{}')::numeric <= 9223372036854775807
        ELSE false
    END
$$;

-- Whether a message is only a question. "A question is not a decision": a user-stated fact
-- that points at "Should we use Postgres?" is evidence of a question, not of a choice. The
-- kind check itself accepts such a pointer (the message is a human user message, which is all
-- the kind promises structurally); the evidence-quality comparison flags it with this helper.
-- The test is lexical on purpose: every sentence ends in a question mark (ASCII or full-width)
-- and nothing but whitespace and sentence ends is left once those sentences are removed. A
-- model-based judgement would be more accurate but not reproducible inside SQL.
CREATE OR REPLACE FUNCTION ember.is_question(p_text text)
RETURNS boolean
LANGUAGE sql IMMUTABLE
AS $$
    SELECT coalesce(
        p_text ~ '[?？]'
        AND regexp_replace(
            regexp_replace(p_text, '[^.!?。！？]*[?？]+', '', 'g'),
            '[[:space:].!。！]+', '', 'g'
        ) = '',
        false
    )
$$;

-- The pointer shape, or NULL when well formed: a non-empty JSON array whose every element is
-- exactly {"message_id": <positive integer>} or {"generation_id": "<uuid>"}, nothing more, and no
-- pointer twice (a repeated pointer pads the evidence without adding any: a model citing the same
-- row twice is counting, not reading).
-- Strict like the seed's zod .strict(): an extra key is more likely a model inventing a field
-- (a "thread_id" it hopes will be honoured) than harmless noise, so it is refused, not ignored.
CREATE OR REPLACE FUNCTION ember.evidence_shape_error(p_evidence jsonb)
RETURNS text
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
    e jsonb;
    i bigint;
    v_keys text[];
    v_repeat text;
BEGIN
    IF p_evidence IS NULL OR jsonb_typeof(p_evidence) = 'null' THEN
        RETURN 'evidence is missing';
    END IF;
    IF jsonb_typeof(p_evidence) <> 'array' THEN
        RETURN format('evidence must be an array of pointers, got %s', jsonb_typeof(p_evidence));
    END IF;
    IF jsonb_array_length(p_evidence) = 0 THEN
        RETURN 'evidence needs at least one pointer';
    END IF;
    FOR e, i IN SELECT x.value, x.ordinality FROM jsonb_array_elements(p_evidence) WITH ORDINALITY AS x LOOP
        IF jsonb_typeof(e) <> 'object' THEN
            RETURN format('pointer %s: must be {"message_id": n} or {"generation_id": uuid}, got %s',
                          i, jsonb_typeof(e));
        END IF;
        SELECT array_agg(k ORDER BY k) INTO v_keys FROM jsonb_object_keys(e) AS k;
        IF v_keys = ARRAY['message_id'] THEN
            IF NOT ember.jsonb_is_count(e -> 'message_id') OR e ->> 'message_id' = '0' THEN
                RETURN format('pointer %s: message_id must be a positive integer, got %s', i, e -> 'message_id');
            END IF;
        ELSIF v_keys = ARRAY['generation_id'] THEN
            IF jsonb_typeof(e -> 'generation_id') <> 'string'
               OR (e ->> 'generation_id') !~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN
                RETURN format('pointer %s: generation_id must be a uuid string, got %s', i, e -> 'generation_id');
            END IF;
        ELSE
            RETURN format('pointer %s: must have exactly one key, message_id or generation_id; got %s',
                          i, coalesce(array_to_string(v_keys, ', '), 'none'));
        END IF;
    END LOOP;
    SELECT format('pointer %s repeats pointer %s (%s)', d.ordinality, d.first, d.pointer)
    INTO v_repeat
    FROM (
        SELECT
            x.ordinality,
            coalesce('message ' || (x.value ->> 'message_id'), 'generation ' || lower(x.value ->> 'generation_id'))
                AS pointer,
            min(x.ordinality) OVER (PARTITION BY x.value ->> 'message_id', lower(x.value ->> 'generation_id'))
                AS first
        FROM jsonb_array_elements(p_evidence) WITH ORDINALITY AS x
    ) AS d
    WHERE d.ordinality > d.first
    ORDER BY d.ordinality
    LIMIT 1;
    RETURN v_repeat;
END;
$$;

-- What each pointer names, resolved. Call only on evidence whose shape is valid. message_id
-- and generation_id are the ids the pointer asked for (one of them is NULL); `found` is false
-- when that id names no row. `lineage` lists every thread the row came from: the
-- message's own thread, its generation's thread, the thread it was forwarded from
-- (from_thread), and for a copy the original's thread and from_thread. For a generation
-- pointer, the generation's thread.
CREATE OR REPLACE FUNCTION ember.evidence_targets(p_evidence jsonb)
RETURNS TABLE (
    ordinal bigint,
    message_id bigint,
    generation_id uuid,
    found boolean,
    thread_id text,
    lineage text[],
    role text,
    author text,
    tool_status text,
    seq bigint
)
LANGUAGE plpgsql STABLE
AS $$
-- One lookup by primary key per pointer, each a statement whose plan plpgsql keeps: the cost
-- is flat in the size of messages. Written as one SQL join, the planner was free to hash all of
-- messages, and the inlined query was planned again on every call.
-- (The output column "found" shadows plpgsql's FOUND here, so lookups are tested by their
-- NOT NULL columns instead.)
DECLARE
    e jsonb;
    v_ord bigint;
    v_mid bigint;
    v_gid uuid;
    v_m_gen uuid;
    v_m_from text;
    v_m_copied bigint;
    v_role text;
    v_author text;
    v_status text;
    v_seq bigint;
    v_gen_thread text;
    v_o_thread text;
    v_o_from text;
    v_found boolean;
    v_thread text;
    v_lineage text[];
BEGIN
    FOR e, v_ord IN
        SELECT x.value, x.ordinality FROM jsonb_array_elements(p_evidence) WITH ORDINALITY AS x
    LOOP
        v_mid := (e ->> 'message_id')::bigint;
        v_gid := (e ->> 'generation_id')::uuid;
        v_found := false;
        v_thread := NULL;
        v_lineage := NULL;
        v_role := NULL;
        v_author := NULL;
        v_status := NULL;
        v_seq := NULL;
        IF e ? 'message_id' AND v_mid IS NOT NULL THEN
            SELECT x.thread_id, x.generation_id, x.from_thread, x.copied_from, x.role, x.author,
                x.tool_status, x.seq
            INTO v_thread, v_m_gen, v_m_from, v_m_copied, v_role, v_author, v_status, v_seq
            FROM ember.messages AS x WHERE x.id = v_mid;
            IF v_thread IS NOT NULL THEN
                v_gen_thread := (SELECT g.thread_id FROM ember.generations AS g WHERE g.id = v_m_gen);
                v_o_thread := NULL;
                v_o_from := NULL;
                IF v_m_copied IS NOT NULL THEN
                    SELECT x.thread_id, x.from_thread INTO v_o_thread, v_o_from
                    FROM ember.messages AS x WHERE x.id = v_m_copied;
                END IF;
                v_found := true;
                v_lineage := array_remove(ARRAY[v_thread, v_gen_thread, v_m_from, v_o_thread, v_o_from], NULL);
            END IF;
        END IF;
        IF NOT v_found AND e ? 'generation_id' AND v_gid IS NOT NULL THEN
            v_gen_thread := (SELECT g.thread_id FROM ember.generations AS g WHERE g.id = v_gid);
            IF v_gen_thread IS NOT NULL THEN
                v_found := true;
                v_thread := v_gen_thread;
                v_lineage := ARRAY[v_gen_thread];
            END IF;
        END IF;
        RETURN QUERY SELECT v_ord, v_mid, v_gid, v_found, v_thread, v_lineage, v_role, v_author, v_status, v_seq;
    END LOOP;
END;
$$;

-- How a pointer is named in a reason. Never the content and never another thread's id: a
-- reason is stored as comparison data, and the row pointed at may belong to an isolated thread.
CREATE OR REPLACE FUNCTION ember.evidence_pointer_label(p_ordinal bigint, p_message bigint, p_generation uuid)
RETURNS text
LANGUAGE sql IMMUTABLE
AS $$
    SELECT format('pointer %s (%s)', p_ordinal,
                  CASE WHEN p_message IS NOT NULL THEN 'message ' || p_message
                       ELSE 'generation ' || p_generation END)
$$;

-- The shadow lineage rule, or NULL when it holds: the evidence is well formed, every pointer
-- names an existing row, and every thread in every pointer's lineage is p_thread. A single
-- shadow sees only its own thread, so a pointer elsewhere is a hallucination or crosstalk.
-- The proposal trigger calls this too, so the rule is written once.
CREATE OR REPLACE FUNCTION ember.evidence_lineage_error(p_thread text, p_evidence jsonb)
RETURNS text
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_reason text;
    t record;
BEGIN
    IF p_thread IS NULL THEN
        RETURN 'no thread to hold the evidence to';
    END IF;
    v_reason := ember.evidence_shape_error(p_evidence);
    IF v_reason IS NOT NULL THEN
        RETURN v_reason;
    END IF;
    FOR t IN SELECT * FROM ember.evidence_targets(p_evidence) LOOP
        IF NOT t.found THEN
            RETURN ember.evidence_pointer_label(t.ordinal, t.message_id, t.generation_id) || ': no such row';
        END IF;
        IF EXISTS (SELECT 1 FROM unnest(t.lineage) AS l WHERE l <> p_thread) THEN
            RETURN ember.evidence_pointer_label(t.ordinal, t.message_id, t.generation_id)
                   || format(': not in thread "%s" (a shadow proposal may cite only its own thread)', p_thread);
        END IF;
    END LOOP;
    RETURN NULL;
END;
$$;

-- Evidence limited to what the model saw (issue 8, item 7), or NULL when it holds: every pointer
-- names a message in p_seen_messages or a generation in p_seen_generations. Call it on evidence
-- whose shape is valid (evidence_shape_error, which also refuses a repeated pointer). The shadow
-- submit passes the rows its run rendered (cold) or the thread's rows up to through_seq in the
-- run's generation (hot), and that generation; the steward passes what its run read. A pointer
-- outside the set names a row the model never read: a guess, however real the row is.
CREATE OR REPLACE FUNCTION ember.evidence_seen_error(
    p_evidence jsonb, p_seen_messages bigint[], p_seen_generations uuid[] DEFAULT '{}'
)
RETURNS text
LANGUAGE sql IMMUTABLE
AS $$
    SELECT format('pointer %s (%s): not a row or generation this run''s model read', x.ordinality,
                  coalesce('message ' || (x.value ->> 'message_id'), 'generation ' || (x.value ->> 'generation_id')))
    FROM jsonb_array_elements(p_evidence) WITH ORDINALITY AS x
    WHERE CASE
        WHEN x.value ? 'message_id'
            THEN NOT coalesce((x.value ->> 'message_id')::bigint = ANY(p_seen_messages), false)
        ELSE NOT coalesce((x.value ->> 'generation_id')::uuid = ANY(p_seen_generations), false)
    END
    ORDER BY x.ordinality
    LIMIT 1
$$;

-- NULL when the evidence justifies the kind, else the reason.
--   user-stated       every pointer is a human user message (author human, role user)
--   user-accepted     every pointer is a conclusion (an assistant message) or a human user
--                     message; every cited conclusion is followed, later in its thread and before
--                     the thread's next assistant message, by a cited human message (the explicit
--                     acceptance: silence is not acceptance, and a "yes" after a later conclusion
--                     answers that one); and every cited human message is such an acceptance of a
--                     cited conclusion. A pointer that fits no part of the rule is named.
--   tool-verified     every pointer is a tool result with status ok
--   observed-outcome  every pointer is a tool result with status ok, or a generation
-- Every pointer must fit the kind, not just one: a pointer that does not support the claim is
-- at best noise, and accepting "one good pointer among several" would let a model launder an
-- invented reference behind a real one.
-- p_same_thread (the shadow mode, the default) adds the lineage rule; the steward, which reads
-- many threads, passes false. In both modes nothing may point into an isolated thread.
-- p_seen_messages / p_seen_generations, when either is given, add evidence_seen_error: the
-- pointers must name what the run's model saw.
-- The four-argument form this replaces would make every four-argument call ambiguous.
DROP FUNCTION IF EXISTS ember.check_evidence(text, text, jsonb, boolean);
-- Its length: one pass over the pointers (evidence_targets) applying every per-pointer rule in the
-- order stated; split per rule, each would walk the pointers again.
CREATE OR REPLACE FUNCTION ember.check_evidence(
    p_thread text,
    p_kind text,
    p_evidence jsonb,
    p_same_thread boolean DEFAULT TRUE,
    p_seen_messages bigint[] DEFAULT NULL,
    p_seen_generations uuid[] DEFAULT NULL
)
RETURNS text
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_reason text;
    t record;
    v_label text;
    v_lineage_error text;
    v_pointer_error text;
BEGIN
    IF p_kind IS NULL THEN
        RETURN 'evidence kind is missing';
    END IF;
    IF p_kind NOT IN ('user-stated', 'user-accepted', 'tool-verified', 'observed-outcome') THEN
        RETURN format('unknown evidence kind "%s" (kinds: user-stated, user-accepted, tool-verified, '
                      'observed-outcome)', p_kind);
    END IF;
    IF p_thread IS NOT NULL AND NOT EXISTS (SELECT 1 FROM ember.threads WHERE id = p_thread) THEN
        RETURN format('unknown thread "%s"', p_thread);
    END IF;
    IF ember.is_isolated(p_thread) THEN
        RETURN format('thread "%s" is isolated: nothing automated reads it', p_thread);
    END IF;

    -- One pass over the pointers, each looked up once (evidence_targets): the first lineage
    -- error (shadow mode), and the first error of the per-pointer rules below. They are reported
    -- in the order the rules are stated: lineage, then what the model saw, then the rest.
    IF coalesce(p_same_thread, true) AND p_thread IS NULL THEN
        RETURN 'no thread to hold the evidence to';
    END IF;
    v_reason := ember.evidence_shape_error(p_evidence);
    IF v_reason IS NOT NULL THEN
        RETURN v_reason;
    END IF;

    FOR t IN SELECT * FROM ember.evidence_targets(p_evidence) LOOP
        v_label := ember.evidence_pointer_label(t.ordinal, t.message_id, t.generation_id);
        IF coalesce(p_same_thread, true) AND v_lineage_error IS NULL THEN
            IF NOT t.found THEN
                v_lineage_error := v_label || ': no such row';
            ELSIF EXISTS (SELECT 1 FROM unnest(t.lineage) AS l WHERE l <> p_thread) THEN
                v_lineage_error := v_label
                    || format(': not in thread "%s" (a shadow proposal may cite only its own thread)', p_thread);
            END IF;
        END IF;
        CONTINUE WHEN v_pointer_error IS NOT NULL;
        IF NOT t.found THEN
            v_pointer_error := v_label || ': no such row';
            CONTINUE;
        END IF;
        IF EXISTS (SELECT 1 FROM unnest(t.lineage) AS l WHERE ember.is_isolated(l)) THEN
            v_pointer_error := v_label || ': in an isolated thread';
            CONTINUE;
        END IF;
        -- The steward's record holds Ember's own output: the pages it was given, its calls, and
        -- tool results such as a search_memory answer (fact texts, themselves rewordings of
        -- what someone wrote). A status-ok result there verifies nothing in the world, so no row
        -- or generation of that thread is evidence, whatever the kind.
        IF EXISTS (SELECT 1 FROM unnest(t.lineage) AS l WHERE ember.is_steward_thread(l)) THEN
            v_pointer_error := v_label || ': in the memory steward''s own record, which is not evidence';
            CONTINUE;
        END IF;
        CASE p_kind
            WHEN 'user-stated' THEN
                IF t.message_id IS NULL OR t.role <> 'user' OR t.author <> 'human' THEN
                    v_pointer_error := v_label || ': user-stated evidence must be a human user message';
                END IF;
            WHEN 'user-accepted' THEN
                IF t.message_id IS NULL
                   OR NOT (t.role = 'assistant' OR (t.role = 'user' AND t.author = 'human')) THEN
                    v_pointer_error := v_label || ': user-accepted evidence must be a conclusion (assistant '
                           'message) or the human user message that accepts it';
                END IF;
            WHEN 'tool-verified' THEN
                IF t.message_id IS NULL OR t.role <> 'tool_result' OR t.tool_status <> 'ok' THEN
                    v_pointer_error := v_label || ': tool-verified evidence must be a tool result with status ok';
                END IF;
            WHEN 'observed-outcome' THEN
                IF t.message_id IS NOT NULL AND (t.role <> 'tool_result' OR t.tool_status <> 'ok') THEN
                    v_pointer_error := v_label || ': observed-outcome evidence must be a tool result with status ok '
                           'or a generation';
                END IF;
        END CASE;
    END LOOP;

    IF v_lineage_error IS NOT NULL THEN
        RETURN v_lineage_error;
    END IF;
    IF p_seen_messages IS NOT NULL OR p_seen_generations IS NOT NULL THEN
        v_reason := ember.evidence_seen_error(p_evidence, coalesce(p_seen_messages, '{}'),
                                              coalesce(p_seen_generations, '{}'));
        IF v_reason IS NOT NULL THEN
            RETURN v_reason;
        END IF;
    END IF;
    IF v_pointer_error IS NOT NULL THEN
        RETURN v_pointer_error;
    END IF;

    IF p_kind = 'user-accepted' THEN
        RETURN ember.user_accepted_error(p_evidence);
    END IF;
    RETURN NULL;
END;
$$;

-- The pairing half of the user-accepted rule (see check_evidence), on pointers that are all
-- conclusions or human user messages. A conclusion's answer window runs from it to the next
-- assistant message of its thread (cited or not): a human message in that window answers it,
-- one after it answers something else.
CREATE OR REPLACE FUNCTION ember.user_accepted_error(p_evidence jsonb)
RETURNS text
LANGUAGE sql STABLE
AS $$
    WITH t AS (
        SELECT * FROM ember.evidence_targets(p_evidence)
    ),

    c AS (
        SELECT
            t.ordinal,
            t.message_id,
            t.thread_id,
            t.seq,
            coalesce((
                SELECT min(n.seq) FROM ember.messages AS n
                WHERE n.thread_id = t.thread_id AND n.role = 'assistant' AND n.seq > t.seq
            ), 9223372036854775807) AS window_end
        FROM t WHERE t.role = 'assistant'
    ),

    h AS (
        SELECT t.ordinal, t.message_id, t.thread_id, t.seq FROM t WHERE t.role = 'user' AND t.author = 'human'
    )

    SELECT CASE
        WHEN NOT EXISTS (SELECT 1 FROM c)
            THEN 'user-accepted evidence needs the conclusion it accepts (an assistant message)'
        ELSE (
            SELECT x.reason FROM (
                SELECT c.ordinal, ember.evidence_pointer_label(c.ordinal, c.message_id, NULL)
                    || ': user-accepted evidence needs a human user message, in the same thread and '
                    || 'after the conclusion but before the next assistant message, that accepts it' AS reason
                FROM c
                WHERE NOT EXISTS (
                    SELECT 1 FROM h
                    WHERE h.thread_id = c.thread_id AND h.seq > c.seq AND h.seq < c.window_end
                )
                UNION ALL
                SELECT h.ordinal, ember.evidence_pointer_label(h.ordinal, h.message_id, NULL)
                    || ': this human message accepts no cited conclusion (it must come after one, in '
                    || 'the same thread, before the next assistant message)'
                FROM h
                WHERE NOT EXISTS (
                    SELECT 1 FROM c
                    WHERE c.thread_id = h.thread_id AND h.seq > c.seq AND h.seq < c.window_end
                )
            ) AS x
            ORDER BY x.ordinal
            LIMIT 1
        )
    END
$$;
