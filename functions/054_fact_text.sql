-- The text of a fact or a proposal is what the person meant, not what a page showed. Models read
-- rows rendered on one line each (functions/035_render.sql): a line break in content is shown as
-- the two characters \n, a backslash as \\, U+2028 and other separators as \uXXXX. A model copies
-- what it reads, so a fact written from a page held those escapes, search_memory escaped them
-- again (\\n), and the steward's "is this already stored?" search no longer matched its own
-- facts, which were then written again. So every fact and proposal text is cleaned once, as it
-- is stored: the rendering escapes are undone (the exact inverse of render_escape, so a
-- backslash the person typed, shown as \\, comes back as one backslash), and line breaks, tabs
-- and other control or separator characters become single spaces: a fact is one statement, and
-- a line break inside it says nothing a space does not. Undoing escapes in the worker instead
-- would leave a hand-written INSERT, or another worker, to store them.

CREATE OR REPLACE FUNCTION ember.unescape_rendered(p_text text)
RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$
    SELECT coalesce(string_agg(
        CASE
            WHEN m.t = '\\' THEN '\'
            WHEN m.t = '\n' THEN E'\n'
            WHEN m.t = '\r' THEN E'\r'
            WHEN m.t ~ '^\\u[0-9a-fA-F]{4}$'
                 AND ('x' || lpad(substr(m.t, 3), 8, '0'))::bit(32)::integer IN (
                     SELECT c FROM generate_series(1, 8) AS c
                     UNION ALL SELECT c FROM generate_series(11, 31) AS c
                     UNION ALL SELECT c FROM generate_series(127, 159) AS c
                     UNION ALL SELECT 8232 UNION ALL SELECT 8233
                 )
                THEN chr(('x' || lpad(substr(m.t, 3), 8, '0'))::bit(32)::integer)
            ELSE m.t
        END, '' ORDER BY m.ord), '')
    FROM regexp_matches(p_text, '(\\\\|\\n|\\r|\\u[0-9a-fA-F]{4}|[^\\]+|\\)', 'g') WITH ORDINALITY AS x (g, ord)
    CROSS JOIN LATERAL (SELECT x.g[1] AS t, x.ord) AS m
$$;

-- A stored fact or proposal text: escapes undone, every run of whitespace, line or paragraph
-- separators and control characters one space, no space at either end.
CREATE OR REPLACE FUNCTION ember.clean_fact_text(p_text text)
RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$
    SELECT btrim(regexp_replace(
        ember.unescape_rendered(p_text),
        '[[:space:]\u0001-\u001f\u007f-\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+',
        ' ', 'g'
    ))
$$;

CREATE OR REPLACE FUNCTION ember.fact_text_cleaned()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    NEW.text := ember.clean_fact_text(NEW.text);
    RETURN NEW;
END;
$$;

-- BEFORE INSERT only: a text is cleaned once, when it is stored (cleaning is not idempotent on
-- purpose: "\\n" is a backslash and an n the person typed, and must not become a line break on a
-- second pass). The trigger names sort before the other BEFORE triggers of each table, which
-- therefore check the cleaned text.
CREATE OR REPLACE TRIGGER facts_a_clean_text
BEFORE INSERT ON ember.facts
FOR EACH ROW WHEN (new.text IS NOT NULL)
EXECUTE FUNCTION ember.fact_text_cleaned();

CREATE OR REPLACE TRIGGER shadow_proposals_a_clean_text
BEFORE INSERT ON ember.shadow_proposals
FOR EACH ROW WHEN (new.text IS NOT NULL)
EXECUTE FUNCTION ember.fact_text_cleaned();
