-- Search terms that work in every script. The full-text side of search_memory indexed
-- to_tsvector('english', text), which makes a whole run of Chinese, Japanese or Korean characters
-- one token: 「我喜欢用中文写周报」 was found by the entire sentence and by nothing shorter. A fact's
-- terms are now its Latin-script words as the english configuration stems them, plus, for every
-- run of CJK characters, each character and each overlapping pair of characters (the bigrams
-- that CJK analyzers of search engines index). A query of two to four characters is then its own
-- pairs, which every fact holding those characters in that order shares, with no dictionary to
-- segment words. pg_trgm was measured against this on the seeds' own sentences
-- (bench/b9_search_recall.py): its trigrams cannot represent a two-character word at all, which
-- is the commonest length of a Chinese word, so a two-character query falls back to scanning.
--
-- Both sides are NFKC-normalised and lower-cased first: full-width Latin letters and digits, and
-- compatibility forms, match their ordinary forms.
--
-- These functions compute a stored column, so they live here and not in functions/: changing
-- one changes what every stored row should hold, which needs a migration that recomputes the
-- column. functions/053_steward_search.sql builds queries with the same pieces.

CREATE FUNCTION ember.search_normalize(p_text text)
RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$ SELECT lower(normalize(p_text, NFKC)) $$;

COMMENT ON FUNCTION ember.search_normalize(text) IS
'What search compares: NFKC, lower case (both the stored terms and the query).';

-- A run of CJK characters: kana, CJK ideographs (the unified blocks, extension A and the
-- supplementary planes, compatibility ideographs), the iteration marks, and Hangul syllables and
-- jamo. The katakana middle dot (U+30FB) is punctuation and ends a run.
CREATE FUNCTION ember.search_cjk_pattern()
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT '[\u3005\u3007\u3041-\u30fa\u30fc-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff'
        || '\u1100-\u11ff\u3131-\u318e\uac00-\ud7af\U00020000-\U0003134f]+'
$$;

-- The CJK terms of a normalised text, with their positions (counted in characters across the
-- text's CJK runs): every overlapping pair of characters of each run, a run of one character as
-- itself and, with p_unigrams, every single character too. A fact stores both, so that a
-- one-character query finds it; a query of two or more characters asks for its pairs only,
-- since a single character matches far more facts than the word it is part of.
CREATE FUNCTION ember.search_cjk_grams(p_text text, p_unigrams boolean)
RETURNS TABLE (gram text, pos integer)
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$
    SELECT g.gram, g.pos
    FROM (
        SELECT
            m.x[1] AS run,
            (coalesce(sum(char_length(m.x[1])) OVER (ORDER BY m.ord ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0))::integer
                AS base
        FROM regexp_matches(p_text, ember.search_cjk_pattern(), 'g') WITH ORDINALITY AS m (x, ord)
    ) AS r
    CROSS JOIN LATERAL (
        SELECT substr(r.run, i, 2) AS gram, r.base + i AS pos
        FROM generate_series(1, greatest(char_length(r.run) - 1, 1)) AS i
        UNION ALL
        SELECT substr(r.run, i, 1) AS gram, r.base + i AS pos
        FROM generate_series(1, char_length(r.run)) AS i
        WHERE p_unigrams AND char_length(r.run) > 1
    ) AS g
$$;

-- A fact's search terms: the english configuration over the text with its CJK runs blanked out
-- (stemmed words, stop words dropped, as before), then the CJK terms. Positions stay, so
-- ts_rank_cd can still weigh how close matched terms are.
CREATE FUNCTION ember.search_document(p_text text)
RETURNS tsvector
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$
    SELECT to_tsvector('english', regexp_replace(n.t, ember.search_cjk_pattern(), ' ', 'g'))
        || coalesce(
            (SELECT string_agg('''' || g.gram || ''':' || least(g.pos, 16383), ' ')::tsvector
             FROM ember.search_cjk_grams(n.t, true) AS g),
            ''::tsvector
        )
    FROM (SELECT ember.search_normalize(p_text) AS t) AS n
$$;

COMMENT ON FUNCTION ember.search_document(text) IS
'The terms a fact is found by: stemmed english words plus CJK characters and character pairs.';

DROP INDEX ember.facts_search_text;
ALTER TABLE ember.facts DROP COLUMN search_text;
ALTER TABLE ember.facts
ADD COLUMN search_text tsvector GENERATED ALWAYS AS (ember.search_document(text)) STORED;
-- search_term_weights reads the most common terms from the planner's statistics on every search;
-- 300 of them (statistics target 30; the default 100 keeps 1,000) tell a common term from a rare
-- one at any size and take a third of the time to read. The sample ANALYZE takes is unchanged.
ALTER TABLE ember.facts ALTER COLUMN search_text SET STATISTICS 30;
-- No pending list: facts arrive a few per wake, and a pending list is scanned by every search.
CREATE INDEX facts_search_text ON ember.facts USING gin (search_text) WITH (fastupdate = off);

-- search_memory leaves out facts derived from an isolated thread; there are few such threads,
-- and this finds them without reading every thread.
CREATE INDEX threads_isolated ON ember.threads (id) WHERE seal_tier = 'isolated';

-- How many facts one query term may match and still choose the candidates by itself (fewer
-- than this many facts hold it, by the planner's statistics); a term more common than that only
-- ranks them. And how many of the newest facts a query of common terms alone reads.
INSERT INTO ember.settings (key, value, description, value_type, min_value, max_value, default_value)
VALUES
(
    'search_common_facts', '250',
    'a query term in more facts than this ranks search candidates but does not choose them',
    'integer', '1', '100000000', '250'
),
(
    'search_recent_window', '400',
    'facts (newest first) that a query of only common terms is matched against',
    'integer', '1', '100000', '400'
)
ON CONFLICT (key) DO NOTHING;

-- The steward's write_fact asks whether an active fact already says the same (text_key equal)
-- before writing one more.
CREATE INDEX facts_active_text_key ON ember.facts (text_key) WHERE status = 'active';
