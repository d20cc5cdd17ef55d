-- Evidence (seed 000 section 5): what a fact or a shadow proposal may point at, and when the
-- pointers justify its kind. The model's word is never enough: every claim names rows, and
-- these functions decide whether those rows say what the kind promises.
--
-- Three layers, each usable alone: the pointer shape (evidence_shape_error), the lineage rule
-- for shadow, "every pointer stays in its own thread" (evidence_lineage_error, also enforced by
-- the trigger in 031_proposal_guard.sql), and the kind rules (check_evidence). The shadow
-- submit and the steward share check_evidence; only the lineage rule differs between them.

-- A non-negative JSON integer that fits a bigint (token counts, ids, latencies).
CREATE OR REPLACE FUNCTION ember.jsonb_is_count(p_value jsonb)
RETURNS boolean
LANGUAGE sql IMMUTABLE
AS $$
    SELECT coalesce(
        jsonb_typeof(p_value) = 'number'
        AND CASE
            WHEN jsonb_typeof(p_value) = 'number' THEN
                (p_value #>> '{}')::numeric >= 0
                AND (p_value #>> '{}')::numeric = trunc((p_value #>> '{}')::numeric)
                AND (p_value #>> '{}')::numeric <= 9223372036854775807
            ELSE false
        END,
        false
    )
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
-- exactly {"message_id": <positive integer>} or {"generation_id": "<uuid>"}, nothing more.
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
            IF NOT ember.jsonb_is_count(e -> 'message_id') OR (e ->> 'message_id')::numeric = 0 THEN
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
    RETURN NULL;
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
LANGUAGE sql STABLE
AS $$
    SELECT
        p.ordinality,
        (p.value ->> 'message_id')::bigint,
        (p.value ->> 'generation_id')::uuid,
        (m.id IS NOT NULL OR g.id IS NOT NULL),
        coalesce(m.thread_id, g.thread_id),
        CASE
            WHEN m.id IS NOT NULL THEN
                array_remove(
                    ARRAY[m.thread_id, mg.thread_id, m.from_thread, o.thread_id, o.from_thread], NULL
                )
            WHEN g.id IS NOT NULL THEN ARRAY[g.thread_id]
        END,
        m.role,
        m.author,
        m.tool_status,
        m.seq
    FROM jsonb_array_elements(p_evidence) WITH ORDINALITY AS p (value, ordinality)
    LEFT JOIN ember.messages AS m
        ON p.value ? 'message_id' AND m.id = (p.value ->> 'message_id')::bigint
    LEFT JOIN ember.generations AS mg ON mg.id = m.generation_id
    LEFT JOIN ember.messages AS o ON o.id = m.copied_from
    LEFT JOIN ember.generations AS g
        ON p.value ? 'generation_id' AND g.id = (p.value ->> 'generation_id')::uuid
    ORDER BY p.ordinality
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

-- NULL when the evidence justifies the kind, else the reason.
--   user-stated       every pointer is a human user message (author human, role user)
--   user-accepted     every pointer is a conclusion (an assistant message) or a human user
--                     message, and some human user message in the same thread comes after a
--                     cited conclusion: both halves are required, silence is not acceptance
--   tool-verified     every pointer is a tool result with status ok
--   observed-outcome  every pointer is a tool result with status ok, or a generation
-- Every pointer must fit the kind, not just one: a pointer that does not support the claim is
-- at best noise, and accepting "one good pointer among several" would let a model launder an
-- invented reference behind a real one.
-- p_same_thread (the shadow mode, the default) adds the lineage rule; the steward, which reads
-- many threads, passes false. In both modes nothing may point into an isolated thread.
CREATE OR REPLACE FUNCTION ember.check_evidence(
    p_thread text,
    p_kind text,
    p_evidence jsonb,
    p_same_thread boolean DEFAULT TRUE
)
RETURNS text
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_reason text;
    t record;
    v_label text;
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

    IF coalesce(p_same_thread, true) THEN
        v_reason := ember.evidence_lineage_error(p_thread, p_evidence);
        IF v_reason IS NOT NULL THEN
            RETURN v_reason;
        END IF;
    ELSE
        v_reason := ember.evidence_shape_error(p_evidence);
        IF v_reason IS NOT NULL THEN
            RETURN v_reason;
        END IF;
    END IF;

    FOR t IN SELECT * FROM ember.evidence_targets(p_evidence) LOOP
        v_label := ember.evidence_pointer_label(t.ordinal, t.message_id, t.generation_id);
        IF NOT t.found THEN
            RETURN v_label || ': no such row';
        END IF;
        IF EXISTS (SELECT 1 FROM unnest(t.lineage) AS l WHERE ember.is_isolated(l)) THEN
            RETURN v_label || ': in an isolated thread';
        END IF;
        CASE p_kind
            WHEN 'user-stated' THEN
                IF t.message_id IS NULL OR t.role <> 'user' OR t.author <> 'human' THEN
                    RETURN v_label || ': user-stated evidence must be a human user message';
                END IF;
            WHEN 'user-accepted' THEN
                IF t.message_id IS NULL
                   OR NOT (t.role = 'assistant' OR (t.role = 'user' AND t.author = 'human')) THEN
                    RETURN v_label || ': user-accepted evidence must be a conclusion (assistant '
                           'message) or the human user message that accepts it';
                END IF;
            WHEN 'tool-verified' THEN
                IF t.message_id IS NULL OR t.role <> 'tool_result' OR t.tool_status <> 'ok' THEN
                    RETURN v_label || ': tool-verified evidence must be a tool result with status ok';
                END IF;
            WHEN 'observed-outcome' THEN
                IF t.message_id IS NOT NULL AND (t.role <> 'tool_result' OR t.tool_status <> 'ok') THEN
                    RETURN v_label || ': observed-outcome evidence must be a tool result with status ok '
                           'or a generation';
                END IF;
        END CASE;
    END LOOP;

    IF p_kind = 'user-accepted' THEN
        IF NOT EXISTS (SELECT 1 FROM ember.evidence_targets(p_evidence) AS c WHERE c.role = 'assistant') THEN
            RETURN 'user-accepted evidence needs the conclusion it accepts (an assistant message)';
        END IF;
        IF NOT EXISTS (
            SELECT 1
            FROM ember.evidence_targets(p_evidence) AS c
            JOIN ember.evidence_targets(p_evidence) AS a
                ON a.thread_id = c.thread_id AND a.seq > c.seq
                AND a.role = 'user' AND a.author = 'human'
            WHERE c.role = 'assistant'
        ) THEN
            RETURN 'user-accepted evidence needs a human user message, in the same thread and after '
                   'the conclusion, that accepts it';
        END IF;
    END IF;
    RETURN NULL;
END;
$$;
