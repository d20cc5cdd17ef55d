-- The one renderer of message rows for a model to read: the shadow cold path and the shadow
-- question use it now, the steward's backlog pages will use it later, so both pipelines read the
-- same text and a comparison between them is not a comparison of two formats.
--
-- A page is lines. A page opens with a header line (`# `: the thread's title and id, the
-- generation and when it started, in UTC), repeated where the generation changes. Every other
-- line is one whole row: `m:<id> <role>(<author>)[ <date>]: <content>`; the id is there so a
-- model can cite the row as evidence, and the date (YYYY-MM-DD, UTC) is shown on a page's first
-- row and wherever it changes, so the reader can answer "when" at the cost of a few tokens.
--
-- Row boundaries are unambiguous whatever the content holds (issue 8, item 6): a row never spans
-- lines. Content and every rendered piece of metadata are escaped (ember.render_escape): a
-- backslash is written `\\`, a line feed `\n`, a carriage return `\r`, and every other control or
-- separator character that some reader might break a line at (vertical tab, form feed, the
-- file/group/record separators, NEL, U+2028, U+2029, and the rest of C0 and C1 but tab) as
-- `\uXXXX`. So text that looks like a row header inside content stays inside its row, and a line
-- that starts with `m:` is always a real row. Indenting continuation lines would keep long texts
-- more readable, but then a reader has to count indentation right to stay safe, while a line is
-- a line. The prompts (prompts/cold_reader.md, prompts/shadow_question.md) explain the format.
--
-- The user's own words are kept whole (they are the best evidence there is); assistant and event
-- text, tool calls and tool results are shortened, always with a marker that says how much was
-- cut, so a reader never mistakes a cut for the whole.

-- Ember's token estimate: ceil(code points / 4), 0 for ''. Not a tokenizer: the simulator
-- (worker/ember/tokens.py) uses the same rule, and agreement between the page splitter and the
-- simulator matters more here than closeness to any real tokenizer.
CREATE OR REPLACE FUNCTION ember.estimate_tokens(p_text text)
RETURNS integer
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$ SELECT ceil(char_length(p_text) / 4.0)::integer $$;

-- `p_text` cut to `p_keep` characters plus the marker, or unchanged when it fits.
CREATE OR REPLACE FUNCTION ember.shorten(p_text text, p_keep integer)
RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$
    SELECT CASE
        WHEN char_length(p_text) <= greatest(p_keep, 0) THEN p_text
        ELSE left(p_text, greatest(p_keep, 0))
            || '… [shortened: ' || to_char(greatest(p_keep, 0), 'FM999,999,999,990')
            || ' of ' || to_char(char_length(p_text), 'FM999,999,999,990') || ' characters]'
    END
$$;

-- `p_text` cut so that the result, marker included, is at most `p_max` characters. The marker's
-- length depends on the numbers in it; measuring it with the largest possible kept length gives
-- an upper bound, so one pass is enough.
CREATE OR REPLACE FUNCTION ember.shorten_to(p_text text, p_max integer)
RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$
    SELECT CASE
        WHEN char_length(p_text) <= p_max THEN p_text
        ELSE ember.shorten(
            p_text,
            p_max - (char_length(ember.shorten(p_text, p_max - 1)) - (p_max - 1))
        )
    END
$$;

-- Text escaped for a rendered line: no character of the result starts a new line in any reader.
CREATE OR REPLACE FUNCTION ember.render_escape(p_text text)
RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
AS $$
DECLARE
    v text := replace(p_text, E'\\', E'\\\\');
    c text;
BEGIN
    v := replace(replace(replace(v, E'\r\n', E'\\n'), E'\n', E'\\n'), E'\r', E'\\r');
    -- The rest, rarely present, one distinct character at a time.
    FOR c IN
        SELECT DISTINCT x[1]
        FROM regexp_matches(
            v, '([' || chr(1) || '-' || chr(8) || chr(11) || '-' || chr(31) || chr(127) || '-' || chr(159)
            || chr(8232) || chr(8233) || '])', 'g'
        ) AS x
    LOOP
        v := replace(v, c, '\u' || lpad(to_hex(ascii(c)), 4, '0'));
    END LOOP;
    RETURN v;
END;
$$;

-- One row as text, on one line. `p_max_chars`, when given, bounds the whole rendered row (the
-- pager passes what is left of its page, so that one huge user message still fits a page);
-- without it only the per-kind limits of the settings apply. `p_show_date` adds the row's date.
--
-- A row of an isolated thread is refused rather than skipped: every caller is supposed to have
-- filtered those out already, and a silent skip would hide the caller's bug while an error stops
-- the leak where it starts (invariant 1).
-- EM031 for a row of an isolated thread, which no renderer may show a model (invariant 1).
CREATE OR REPLACE FUNCTION ember.render_refuse_isolated(m ember.messages)
RETURNS void
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    IF ember.is_isolated(m.thread_id) THEN
        RAISE EXCEPTION 'message % belongs to isolated thread "%": it is never rendered for a model',
            m.id, m.thread_id
            USING ERRCODE = 'EM031';
    END IF;
END;
$$;

DROP FUNCTION IF EXISTS ember.render_row(ember.messages, integer);
CREATE OR REPLACE FUNCTION ember.render_row(
    m ember.messages, p_max_chars integer DEFAULT NULL, p_show_date boolean DEFAULT FALSE
)
RETURNS text
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_head text;
    v_body text;
    v_calls text;
    v_row text;
BEGIN
    IF m.id IS NULL THEN
        RETURN NULL;
    END IF;
    PERFORM ember.render_refuse_isolated(m);
    IF p_max_chars IS NOT NULL AND p_max_chars < 100 THEN
        RAISE EXCEPTION 'a rendered row needs room for at least 100 characters, got %', p_max_chars
            USING ERRCODE = 'EM034';
    END IF;

    -- Tool names and thread ids are identifiers (EM018) and escaped all the same: a row written
    -- before that rule, or by a raw INSERT, must not be able to break the line either.
    v_head := 'm:' || m.id || ' ' || CASE m.role
        WHEN 'tool_result' THEN
            'tool_result ' || ember.render_escape(coalesce(m.tool_name, 'unknown_tool'))
            || ' [' || m.tool_status || ']'
        WHEN 'event' THEN
            'event(' || m.author || ')' || coalesce(' from ' || ember.render_escape(m.from_thread), '')
        ELSE m.role || '(' || m.author || ')'
    END
    || CASE WHEN p_show_date THEN ' ' || to_char(m.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') ELSE '' END
    || ': ';

    v_body := ember.render_escape(CASE m.role
        WHEN 'user' THEN m.content
        WHEN 'tool_result' THEN ember.shorten(m.content, ember.setting_int('render_tool_chars'))
        ELSE ember.shorten(m.content, ember.setting_int('render_text_chars'))
    END);

    -- Tool calls live in the provider's raw blocks. Only their name and input are shown, the
    -- input shortened like a tool result: the call's arguments are rarely the evidence, the
    -- result or the user's reply is.
    IF m.role = 'assistant' AND m.blocks IS NOT NULL AND json_typeof(m.blocks) = 'array' THEN
        SELECT string_agg(
            '[tool call ' || ember.render_escape(coalesce(b ->> 'name', 'unknown_tool')) || ' '
            || ember.render_escape(
                ember.shorten(coalesce(b -> 'input', '{}'::json)::text, ember.setting_int('render_tool_chars'))
            )
            || ']',
            ' ' ORDER BY ord
        )
        INTO v_calls
        FROM json_array_elements(m.blocks) WITH ORDINALITY AS e (b, ord)
        WHERE json_typeof(b) = 'object' AND b ->> 'type' IN ('tool_use', 'server_tool_use');
        v_body := concat_ws(' ', nullif(v_body, ''), v_calls);
    END IF;

    v_row := v_head || v_body;
    IF p_max_chars IS NOT NULL THEN
        v_row := ember.shorten_to(v_row, p_max_chars);
    END IF;
    RETURN v_row;
END;
$$;

-- A row of the conversation the hot path replays, as a line of the shadow question's key: the
-- model has read the row itself in the replayed request, so the key gives only what it needs to
-- cite it, its id, never the row again (issue 39: the tail points instead of repeating):
--   `m:<id> = #<n> <role>(<author>): <opening>...`
-- n is the row's place in its generation (1 for the first), the opening the first
-- key_opening_chars (48) characters of its content (escaped like a rendered row, so the key line
-- is one line whatever the content), "..." when there is more. A tool result names its tool and
-- status, an assistant row without text its first tool call. The " = #" after the id is what
-- tells a key line from a rendered row (`m:<id> <role>...`), for a reader and for the simulator.
-- A row of an isolated thread is refused, as render_row refuses it.
CREATE OR REPLACE FUNCTION ember.render_key_row(m ember.messages, p_position bigint)
RETURNS text
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_chars constant integer := 48;
    v_text text;
BEGIN
    IF m.id IS NULL THEN
        RETURN NULL;
    END IF;
    PERFORM ember.render_refuse_isolated(m);
    v_text := nullif(btrim(m.content), '');
    IF v_text IS NULL AND m.role = 'assistant' AND m.blocks IS NOT NULL AND json_typeof(m.blocks) = 'array' THEN
        SELECT '[tool call ' || coalesce(b ->> 'name', 'unknown_tool') || ']' INTO v_text
        FROM json_array_elements(m.blocks) WITH ORDINALITY AS e (b, ord)
        WHERE json_typeof(b) = 'object' AND b ->> 'type' IN ('tool_use', 'server_tool_use')
        ORDER BY ord LIMIT 1;
    END IF;
    RETURN 'm:' || m.id || ' = #' || p_position || ' ' || CASE m.role
        WHEN 'tool_result' THEN
            'tool_result ' || ember.render_escape(coalesce(m.tool_name, 'unknown_tool')) || ' [' || m.tool_status || ']'
        WHEN 'event' THEN 'event(' || m.author || ')'
        ELSE m.role || '(' || m.author || ')'
    END
    || ': ' || ember.render_escape(left(coalesce(v_text, ''), v_chars))
    || CASE WHEN length(coalesce(v_text, '')) > v_chars THEN '...' ELSE '' END;
END;
$$;

-- The header line that opens a page and marks a change of generation: the thread's title
-- (escaped, and shortened to 60 characters: it is a label, not content), its id, the generation
-- (a reader may cite it as {"generation_id": ...}) and the generation's start, in UTC.
CREATE OR REPLACE FUNCTION ember.render_page_header(p_generation uuid)
RETURNS text
LANGUAGE sql STABLE
AS $$
    SELECT '# ' || coalesce(ember.render_escape(ember.shorten_to(nullif(btrim(t.title), ''), 60)), '(untitled)')
        || ' · thread ' || ember.render_escape(t.id)
        || ' · generation ' || g.id
        || ' · started ' || to_char(g.started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI') || ' UTC'
    FROM ember.generations AS g
    INNER JOIN ember.threads AS t ON g.thread_id = t.id
    WHERE g.id = p_generation
$$;

-- The pager: the given messages, rendered in seq order and packed greedily into pages of at most
-- `p_page_tokens` (default: the cold_page_tokens setting) estimated tokens. A page is measured as
-- its lines joined by one newline, which is how a reader sends it: the joining newline counts, so
-- rows that would exactly fill a page without it split. The bound thus holds for the text the
-- model actually receives. Returns [[line, ...], ...]: each page's first line is a header (see
-- the top of this file), then rows, with another header where the generation changes.
CREATE OR REPLACE FUNCTION ember.render_pages(
    p_tenant text, p_message_ids bigint[], p_page_tokens integer DEFAULT NULL
)
RETURNS jsonb
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_tokens integer := coalesce(p_page_tokens, ember.setting_int('cold_page_tokens'));
    v_limit integer;
    v_pages jsonb := '[]';
    v_page jsonb := '[]';
    v_chars integer := 0;
    v_lines text[];
    v_header text;
    v_generation uuid;
    v_date text;
    v_row_date text;
    v_need integer;
    m ember.messages;
BEGIN
    IF v_tokens IS NULL OR v_tokens < 128 THEN
        RAISE EXCEPTION 'a page must hold at least 128 estimated tokens, got %', v_tokens
            USING ERRCODE = 'EM034', HINT = 'a page holds a header line and at least one row';
    END IF;
    v_limit := v_tokens * 4;  -- ceil(chars / 4) <= tokens exactly when chars <= 4 * tokens
    FOR m IN
        SELECT * FROM ember.messages WHERE tenant_id = p_tenant AND id = ANY (p_message_ids) ORDER BY seq
    LOOP
        v_header := ember.render_page_header(m.generation_id);
        v_row_date := to_char(m.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD');
        -- On the current page: a header when the generation changes, the date when it changes.
        v_lines := CASE WHEN m.generation_id IS DISTINCT FROM v_generation THEN ARRAY[v_header] ELSE '{}' END
            || ember.render_row(
                m, v_limit - char_length(v_header) - 1,
                m.generation_id IS DISTINCT FROM v_generation OR v_row_date IS DISTINCT FROM v_date
            );
        v_need := (SELECT sum(char_length(l) + 1)::integer FROM unnest(v_lines) AS l);
        IF v_chars > 0 AND v_chars + v_need > v_limit THEN
            v_pages := v_pages || jsonb_build_array(v_page);
            v_page := '[]';
            v_chars := 0;
            -- A new page opens with the header and shows the date again.
            v_lines := ARRAY[v_header, ember.render_row(m, v_limit - char_length(v_header) - 1, true)];
            v_need := (SELECT sum(char_length(l) + 1)::integer FROM unnest(v_lines) AS l);
        END IF;
        -- Every line but a page's first is preceded by the newline that joins it.
        v_chars := v_chars + v_need - CASE WHEN v_chars = 0 THEN 1 ELSE 0 END;
        v_page := v_page || to_jsonb(v_lines);
        v_generation := m.generation_id;
        v_date := v_row_date;
    END LOOP;
    IF jsonb_array_length(v_page) > 0 THEN
        v_pages := v_pages || jsonb_build_array(v_page);
    END IF;
    RETURN v_pages;
END;
$$;

-- The one-tenant form, for the callers that do not name the tenant yet (ember.sole_tenant()).
CREATE OR REPLACE FUNCTION ember.render_pages(p_message_ids bigint[], p_page_tokens integer DEFAULT NULL)
RETURNS jsonb
LANGUAGE sql STABLE
AS $$
    SELECT ember.render_pages(ember.sole_tenant(), p_message_ids, p_page_tokens)
$$;
