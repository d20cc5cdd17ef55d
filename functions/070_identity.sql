-- Identity and tool surface of a thread's next turn (seed 001 section 4): one agent in three
-- chairs. The steward reads only prompts/steward.md; main reads prompts/system.md and then
-- prompts/main.md, a role rather than a persona; every other thread reads prompts/system.md.
-- The differences are the identity's last part and the tool list, and both are decided here.

-- The identity files of a thread kind, in prompt order.
CREATE OR REPLACE FUNCTION ember.identity_files(p_kind text)
RETURNS text[]
LANGUAGE sql IMMUTABLE
AS $$
    SELECT CASE p_kind
        WHEN 'steward' THEN ARRAY['prompts/steward.md']
        WHEN 'main' THEN ARRAY['prompts/system.md', 'prompts/main.md']
        ELSE ARRAY['prompts/system.md']
    END
$$;

-- The identity files of a thread's next turn: what a host reads before calling turn_identity.
-- A function rather than a read of ember.threads, so ember_host needs no table privilege.
CREATE OR REPLACE FUNCTION ember.thread_identity_files(p_thread text)
RETURNS text[]
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_kind text;
BEGIN
    SELECT t.kind INTO v_kind FROM ember.threads AS t WHERE t.id = p_thread;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'unknown thread "%"', p_thread USING ERRCODE = 'EM001';
    END IF;
    RETURN ember.identity_files(v_kind);
END;
$$;

-- The whole tool registry in registry order, for hosts and tests that list it.
CREATE OR REPLACE FUNCTION ember.tool_registry()
RETURNS TABLE (
    name text, kinds text[], availability text, file_tool boolean, offered_isolated boolean,
    description text
)
LANGUAGE sql STABLE
AS $$
    SELECT tl.name, tl.kinds, tl.availability, tl.file_tool, tl.offered_isolated, tl.description
    FROM ember.tools AS tl
    ORDER BY tl.position
$$;

-- The hex sha256 of a text's UTF-8 bytes: the version of an identity document.
CREATE OR REPLACE FUNCTION ember.text_version(p_text text)
RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$ SELECT encode(sha256(convert_to(p_text, 'UTF8')), 'hex') $$;

-- A run's prompt digest as its worker reported it (NULL when it reported none): the
-- text_version of the prompts/ text the run's requests carried, taken by the worker from the
-- bytes it sent. Anything but 64 lower-case hex characters is refused (EM140), naming p_where,
-- the run it concerns; the runs tables' CHECK is the same rule against a direct write.
CREATE OR REPLACE FUNCTION ember.prompt_digest(p_value jsonb, p_where text)
RETURNS text
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
    IF p_value IS NULL OR jsonb_typeof(p_value) = 'null' THEN
        RETURN NULL;
    END IF;
    IF jsonb_typeof(p_value) <> 'string' OR p_value #>> '{}' !~ '^[0-9a-f]{64}$' THEN
        RAISE EXCEPTION '%: prompt_sha256 must be 64 lower-case hex characters, got %',
            p_where, left(p_value::text, 80)
            USING ERRCODE = 'EM140', HINT = 'the hex sha256 of the prompt text as sent, as ember.text_version(text) gives it';
    END IF;
    RETURN p_value #>> '{}';
END;
$$;

-- The tools a thread's turns get, in registry order (a stable order keeps the tools list, and so
-- the cached prefix, byte for byte the same from turn to turn).
CREATE OR REPLACE FUNCTION ember.thread_tools(p_thread text)
RETURNS TABLE (name text, availability text, file_tool boolean)
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    t ember.threads;
BEGIN
    SELECT * INTO t FROM ember.threads WHERE id = p_thread;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'unknown thread "%"', p_thread USING ERRCODE = 'EM001';
    END IF;
    RETURN QUERY
    SELECT tl.name, tl.availability, tl.file_tool
    FROM ember.tools AS tl
    WHERE t.kind = ANY(tl.kinds) AND (tl.offered_isolated OR NOT ember.is_isolated(t.id))
    ORDER BY tl.position;
END;
$$;

-- Refuses (EM087) a tool call the thread's surface does not offer: the registry is what the
-- model was shown, so it is also what the database accepts.
CREATE OR REPLACE FUNCTION ember.require_tool(p_thread text, p_tool text)
RETURNS void
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM ember.thread_tools(p_thread) AS tl WHERE tl.name = p_tool) THEN
        RAISE EXCEPTION 'thread "%" (%) is not offered the tool %', p_thread,
            (SELECT concat_ws(', ', t.kind, CASE WHEN t.seal_tier = 'isolated' THEN 'isolated' END)
             FROM ember.threads AS t WHERE t.id = p_thread),
            p_tool
            USING ERRCODE = 'EM087', HINT = 'see ember.thread_tools(thread)';
    END IF;
END;
$$;

-- Host registration of its own tools (or a change to a registered one). Ember's own tools are
-- registered by the migration; a host changes their surface only deliberately, through here.
CREATE OR REPLACE FUNCTION ember.register_tool(
    p_name text,
    p_kinds text[],
    p_availability text,
    p_description text,
    p_file_tool boolean DEFAULT FALSE,
    p_offered_isolated boolean DEFAULT TRUE
)
RETURNS text
LANGUAGE plpgsql
AS $$
BEGIN
    IF p_name IS NULL OR p_name !~ '^[a-z][a-z0-9_]*$' THEN
        RAISE EXCEPTION 'invalid tool name %', coalesce('"' || p_name || '"', 'NULL')
            USING ERRCODE = 'EM088', HINT = 'lower case letters, digits and "_", starting with a letter';
    END IF;
    IF p_kinds IS NULL OR cardinality(p_kinds) = 0
       OR NOT p_kinds <@ ARRAY['main', 'side', 'task', 'steward'] THEN
        RAISE EXCEPTION 'tool "%": thread kinds must be a non-empty subset of main, side, task, steward, got %',
            p_name, p_kinds
            USING ERRCODE = 'EM088';
    END IF;
    IF p_availability IS NULL OR p_availability NOT IN ('resident', 'per-turn') THEN
        RAISE EXCEPTION 'tool "%": availability must be resident or per-turn, got %', p_name,
            coalesce('"' || p_availability || '"', 'NULL')
            USING ERRCODE = 'EM088';
    END IF;
    IF p_description IS NULL OR btrim(p_description) = '' OR p_file_tool IS NULL OR p_offered_isolated IS NULL THEN
        RAISE EXCEPTION 'tool "%": a description and both flags are required', p_name
            USING ERRCODE = 'EM088';
    END IF;
    INSERT INTO ember.tools AS tl (name, position, kinds, availability, file_tool, offered_isolated, description)
    VALUES (
        p_name, (SELECT coalesce(max(position), 0) + 10 FROM ember.tools), ember.label_set(p_kinds),
        p_availability, p_file_tool, p_offered_isolated, p_description
    )
    ON CONFLICT (name) DO UPDATE SET
        kinds = excluded.kinds,
        availability = excluded.availability,
        file_tool = excluded.file_tool,
        offered_isolated = excluded.offered_isolated,
        description = excluded.description;
    RETURN p_name;
END;
$$;

-- Record what the host read of the identity documents this turn. p_reads maps a document's file
-- to the text read, or to {"error": "..."} when the read failed. An empty text counts as a
-- failed read: an empty role is never better than the last good one.
CREATE OR REPLACE FUNCTION ember.note_identity_reads(p_reads jsonb, p_now timestamptz)
RETURNS text[]
LANGUAGE plpgsql
AS $$
DECLARE
    v_file text;
    v_value jsonb;
    v_text text;
    v_error text;
    v_version text;
    v_read text[] := '{}';
BEGIN
    IF p_reads IS NULL THEN
        RETURN v_read;
    END IF;
    IF jsonb_typeof(p_reads) <> 'object' THEN
        RAISE EXCEPTION 'identity reads must be a JSON object of file to text or {"error": ...}, got %',
            jsonb_typeof(p_reads)
            USING ERRCODE = 'EM085';
    END IF;
    FOR v_file, v_value IN SELECT key, value FROM jsonb_each(p_reads) ORDER BY key LOOP
        IF NOT EXISTS (SELECT 1 FROM ember.identity_documents WHERE file = v_file) THEN
            RAISE EXCEPTION 'unknown identity document "%"', v_file
                USING ERRCODE = 'EM085', HINT = 'see SELECT file FROM ember.identity_documents';
        END IF;
        v_text := NULL;
        v_error := NULL;
        IF jsonb_typeof(v_value) = 'string' THEN
            v_text := v_value #>> '{}';
            IF v_text !~ '\S' THEN
                v_error := 'the document is empty';
            END IF;
        ELSIF jsonb_typeof(v_value) = 'object' AND jsonb_typeof(v_value -> 'error') = 'string'
              AND (SELECT count(*) FROM jsonb_object_keys(v_value)) = 1 THEN
            v_error := coalesce(nullif(btrim(v_value ->> 'error'), ''), 'read failed');
        ELSE
            RAISE EXCEPTION 'identity read of "%" must be the text or {"error": "..."}, got %',
                v_file, v_value
                USING ERRCODE = 'EM085';
        END IF;

        IF v_error IS NOT NULL THEN
            UPDATE ember.identity_documents
            SET last_error = v_error, last_error_at = p_now
            WHERE file = v_file;
        ELSE
            v_version := ember.text_version(v_text);
            INSERT INTO ember.identity_versions (file, version, text, first_read_at)
            VALUES (v_file, v_version, v_text, p_now)
            ON CONFLICT (file, version) DO NOTHING;
            UPDATE ember.identity_documents
            SET last_good_version = v_version, last_read_at = p_now
            WHERE file = v_file;
            v_read := v_read || v_file;
        END IF;
    END LOOP;
    RETURN v_read;
END;
$$;

-- The identity and tools of p_thread's next turn, as jsonb:
--   parts: [{file, hot, source, version, text}] in prompt order. source is 'read' (this call's
--          read), 'last-good' (a read failed or was not passed: the last good text), 'built-in'
--          (a hot document never read: the minimal role) or 'host' (a document Ember has never
--          seen: the host's own copy, unversioned here);
--   identity_version: the sha256 of the parts' files and versions;
--   generation, segment {ordinal, opened}: the identity is part of the context-segment key, so a
--          new version opens a new segment of the current generation and leaves the earlier
--          segments as they were;
--   tools: [{name, availability, file_tool}] in registry order;
--   model: {thread, model, labels}: the model the turn's call goes to and the labels it carries
--          (ember.thread_call_model). A thread whose labels have outgrown its pinned model (main,
--          say, after a progress report from a health chat) is refused with category_model
--          (EM022) here, before the turn, rather than having its call sent to an untagged model.
-- The host re-reads every hot document each turn that uses it and passes the text or the failure
-- in p_reads (see note_identity_reads); a failed read never changes what the turn is told.
CREATE OR REPLACE FUNCTION ember.turn_identity(
    p_thread text, p_reads jsonb DEFAULT NULL, p_now timestamptz DEFAULT clock_timestamp()
)
RETURNS jsonb
LANGUAGE plpgsql
AS $$
DECLARE
    t ember.threads;
    v_read text[];
    v_parts jsonb;
    v_version text;
    v_generation uuid;
    v_last ember.identity_segments;
    v_ordinal integer;
    v_opened boolean := false;
    v_call jsonb;
BEGIN
    PERFORM ember.require_now(p_now);
    t := ember.lock_thread(ember.sole_tenant(), p_thread);
    v_call := ember.thread_call_model(p_thread);
    v_read := ember.note_identity_reads(p_reads, p_now);

    SELECT jsonb_agg(jsonb_build_object(
        'file', f.file,
        'hot', d.hot,
        'source', CASE
            WHEN v.version IS NOT NULL AND f.file = ANY(v_read) THEN 'read'
            WHEN v.version IS NOT NULL THEN 'last-good'
            WHEN d.hot THEN 'built-in'
            ELSE 'host' END,
        'version', CASE
            WHEN v.version IS NOT NULL THEN v.version
            WHEN d.hot THEN ember.text_version(d.builtin) END,
        'text', coalesce(v.text, d.builtin)
    ) ORDER BY f.ord)
    INTO v_parts
    FROM unnest(ember.identity_files(t.kind)) WITH ORDINALITY AS f (file, ord)
    JOIN ember.identity_documents AS d ON d.file = f.file
    LEFT JOIN ember.identity_versions AS v ON v.file = d.file AND v.version = d.last_good_version;

    v_version := ember.text_version((
        SELECT string_agg(p ->> 'file' || ':' || coalesce(p ->> 'version', 'host'), E'\n' ORDER BY ord)
        FROM jsonb_array_elements(v_parts) WITH ORDINALITY AS e (p, ord)
    ));

    v_generation := ember.current_generation(ember.sole_tenant(), p_thread, p_now);
    SELECT * INTO v_last FROM ember.identity_segments
    WHERE generation_id = v_generation ORDER BY ordinal DESC LIMIT 1;
    v_ordinal := v_last.ordinal;
    IF v_last.ordinal IS NULL OR v_last.identity_version <> v_version THEN
        v_ordinal := coalesce(v_last.ordinal, 0) + 1;
        v_opened := true;
        INSERT INTO ember.identity_segments (
            thread_id, generation_id, ordinal, identity_version, parts, opened_at
        ) VALUES (
            p_thread, v_generation, v_ordinal, v_version,
            (SELECT jsonb_agg(p - 'text' - 'hot' ORDER BY ord)
             FROM jsonb_array_elements(v_parts) WITH ORDINALITY AS e (p, ord)),
            p_now
        );
    END IF;

    RETURN jsonb_build_object(
        'thread', t.id,
        'kind', t.kind,
        'parts', v_parts,
        'identity_version', v_version,
        'generation', v_generation,
        'segment', jsonb_build_object('ordinal', v_ordinal, 'opened', v_opened),
        'model', v_call,
        'tools', coalesce((
            SELECT jsonb_agg(jsonb_build_object(
                'name', tl.name, 'availability', tl.availability, 'file_tool', tl.file_tool
            ) ORDER BY tl.ord)
            FROM ember.thread_tools(p_thread) WITH ORDINALITY AS tl (name, availability, file_tool, ord)
        ), '[]'::jsonb)
    );
END;
$$;
