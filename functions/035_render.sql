-- The one renderer of message rows for a model to read: the shadow cold path and the shadow
-- question use it now, the steward's backlog pages will use it later, so both pipelines read the
-- same text and a comparison between them is not a comparison of two formats.
--
-- A row renders as `m:<id> <role>(<author>): <content>`; the id is there so a model can cite the
-- row as evidence. The user's own words are kept whole (they are the best evidence there is);
-- assistant and event text, tool calls and tool results are shortened, always with a marker that
-- says how much was cut, so a reader never mistakes a cut for the whole.

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

-- One row as text. `p_max_chars`, when given, bounds the whole rendered row (the pager passes
-- its page size, so that one huge user message still fits a page); without it only the
-- per-kind limits of the settings apply.
--
-- A row of an isolated thread is refused rather than skipped: every caller is supposed to have
-- filtered those out already, and a silent skip would hide the caller's bug while an error stops
-- the leak where it starts (invariant 1).
CREATE OR REPLACE FUNCTION ember.render_row(m ember.messages, p_max_chars integer DEFAULT NULL)
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
    IF ember.is_isolated(m.thread_id) THEN
        RAISE EXCEPTION 'message % belongs to isolated thread "%": it is never rendered for a model',
            m.id, m.thread_id
            USING ERRCODE = 'EM031';
    END IF;
    IF p_max_chars IS NOT NULL AND p_max_chars < 100 THEN
        RAISE EXCEPTION 'a rendered row needs room for at least 100 characters, got %', p_max_chars
            USING ERRCODE = 'EM034';
    END IF;

    v_head := 'm:' || m.id || ' ' || CASE m.role
        WHEN 'tool_result' THEN
            'tool_result ' || coalesce(m.tool_name, 'unknown_tool') || ' [' || m.tool_status || ']'
        WHEN 'event' THEN
            'event(' || m.author || ')' || coalesce(' from ' || m.from_thread, '')
        ELSE m.role || '(' || m.author || ')'
    END || ': ';

    v_body := CASE m.role
        WHEN 'user' THEN m.content
        WHEN 'tool_result' THEN ember.shorten(m.content, ember.setting_int('render_tool_chars'))
        ELSE ember.shorten(m.content, ember.setting_int('render_text_chars'))
    END;

    -- Tool calls live in the provider's raw blocks. Only their name and input are shown, the
    -- input shortened like a tool result: the call's arguments are rarely the evidence, the
    -- result or the user's reply is.
    IF m.role = 'assistant' AND m.blocks IS NOT NULL AND json_typeof(m.blocks) = 'array' THEN
        SELECT string_agg(
            '[tool call ' || coalesce(b ->> 'name', 'unknown_tool') || ' '
            || ember.shorten(coalesce(b -> 'input', '{}'::json)::text, ember.setting_int('render_tool_chars'))
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

-- The pager: the given messages, rendered in seq order and packed greedily into pages of at most
-- `p_page_tokens` (default: the cold_page_tokens setting) estimated tokens. A page is measured as
-- its rows joined by one newline, which is how a reader sends it, so the bound holds for the text
-- the model actually receives. Returns [[row, ...], ...].
CREATE OR REPLACE FUNCTION ember.render_pages(p_message_ids bigint[], p_page_tokens integer DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_tokens integer := coalesce(p_page_tokens, ember.setting_int('cold_page_tokens'));
    v_limit integer;
    v_pages jsonb := '[]';
    v_page jsonb := '[]';
    v_chars integer := 0;
    v_row text;
    m ember.messages;
BEGIN
    IF v_tokens IS NULL OR v_tokens < 25 THEN
        RAISE EXCEPTION 'a page must hold at least 25 estimated tokens, got %', v_tokens
            USING ERRCODE = 'EM034';
    END IF;
    v_limit := v_tokens * 4;  -- ceil(chars / 4) <= tokens exactly when chars <= 4 * tokens
    FOR m IN
        SELECT * FROM ember.messages WHERE id = ANY (p_message_ids) ORDER BY seq
    LOOP
        v_row := ember.render_row(m, v_limit);
        IF jsonb_array_length(v_page) > 0 AND v_chars + 1 + char_length(v_row) > v_limit THEN
            v_pages := v_pages || jsonb_build_array(v_page);
            v_page := '[]';
            v_chars := 0;
        END IF;
        v_chars := v_chars + char_length(v_row) + CASE WHEN jsonb_array_length(v_page) > 0 THEN 1 ELSE 0 END;
        v_page := v_page || to_jsonb(v_row);
    END LOOP;
    IF jsonb_array_length(v_page) > 0 THEN
        v_pages := v_pages || jsonb_build_array(v_page);
    END IF;
    RETURN v_pages;
END;
$$;
