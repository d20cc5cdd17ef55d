-- search_memory and fact embeddings. Embeddings are computed by the worker's embedder
-- (worker/ember/embed.py), never in a trigger: a model call inside a write transaction would
-- hold the write for as long as the model takes, and a database must not need the model's
-- weights. A fact written without one is found by text until the worker fills it in.

CREATE OR REPLACE FUNCTION ember.embedding_dimensions()
RETURNS integer
LANGUAGE sql IMMUTABLE
AS $$ SELECT 384 $$;

CREATE OR REPLACE FUNCTION ember.embedding_model()
RETURNS text
LANGUAGE sql STABLE
AS $$ SELECT ember.setting('embedding_model') #>> '{}' $$;

-- Whether a JSON value is an embedding: an array of exactly embedding_dimensions() numbers.
CREATE OR REPLACE FUNCTION ember.is_embedding(p_value jsonb)
RETURNS boolean
LANGUAGE sql IMMUTABLE
AS $$
    SELECT coalesce(
        jsonb_typeof(p_value) = 'array'
        AND jsonb_array_length(p_value) = ember.embedding_dimensions()
        AND NOT EXISTS (SELECT 1 FROM jsonb_array_elements(p_value) AS x (v) WHERE jsonb_typeof(x.v) <> 'number'),
        false
    )
$$;

-- Active facts that still need an embedding, oldest first, for the worker's embedder.
CREATE OR REPLACE FUNCTION ember.facts_to_embed(p_limit integer DEFAULT 64)
RETURNS TABLE (fact_id bigint, text text)
LANGUAGE sql STABLE
AS $$
    SELECT f.id, f.text FROM ember.facts AS f
    WHERE f.embedding IS NULL AND f.status = 'active'
    ORDER BY f.id
    LIMIT greatest(coalesce(p_limit, 64), 1)
$$;

-- Store a fact's embedding, once: an embedding describes the fact's text, which never changes.
-- Refused (EM067): an unknown fact, a vector of the wrong size, a fact that already has one.
CREATE OR REPLACE FUNCTION ember.set_fact_embedding(p_fact bigint, p_embedding vector, p_model text DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
    IF p_embedding IS NULL OR vector_dims(p_embedding) <> ember.embedding_dimensions() THEN
        RAISE EXCEPTION 'fact %: an embedding must have % dimensions, got %', p_fact,
            ember.embedding_dimensions(), coalesce(vector_dims(p_embedding)::text, 'none')
            USING ERRCODE = 'EM067';
    END IF;
    UPDATE ember.facts
    SET embedding = p_embedding::halfvec, embedding_model = coalesce(p_model, ember.embedding_model())
    WHERE id = p_fact AND embedding IS NULL;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'fact %: %', p_fact,
            CASE WHEN EXISTS (SELECT 1 FROM ember.facts WHERE id = p_fact) THEN 'it already has an embedding'
                 ELSE 'no such fact' END
            USING ERRCODE = 'EM067';
    END IF;
END;
$$;

-- The terms of a query, as search_document() makes a fact's terms (db/migrations/0033): stemmed
-- english words without stop words, and for CJK runs their character pairs (a one-character run
-- as itself). Words that ask rather than say are dropped, so a question is matched by what it is
-- about: the english stop list already holds what, who, when, where, why, how, do, did; the
-- Chinese question words and particles are cut out of the runs before pairing, so
-- 「我喜欢用什么写周报」 asks for 我喜 喜欢 欢用 and 写周 周报, not 用什 or 什么.
CREATE OR REPLACE FUNCTION ember.search_query_terms(p_query text)
RETURNS text[]
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$
    WITH n AS (SELECT ember.search_normalize(p_query) AS t)
    SELECT coalesce(array_agg(x.term ORDER BY x.term), '{}')
    FROM (
        SELECT w.term
        FROM n, unnest(tsvector_to_array(
            to_tsvector('english', regexp_replace(n.t, ember.search_cjk_pattern(), ' ', 'g'))
        )) AS w (term)
        WHERE NOT w.term = ANY(ARRAY['tell', 'rememb', 'recal', 'pleas', 'ever', 'anyth', 'someth'])
        UNION
        SELECT g.gram
        FROM n, ember.search_cjk_grams(
            regexp_replace(
                n.t,
                '为什么|什么|怎么样|怎么|怎样|如何|哪里|哪儿|哪些|哪个|哪|谁|多少|是否|是不是|有没有|请问|还记得|记得|知道|告诉|吗|呢|吧|的',
                ' ', 'g'
            ),
            false
        ) AS g
    ) AS x
$$;

-- Each query term with how many facts hold it and its weight, ln(1 + facts / holding), the
-- inverse document frequency of BM25 without its length part (facts are one sentence each). The
-- counts come from the planner's statistics on facts.search_text (pg_stats, most common
-- elements: ANALYZE keeps the lexemes in more than about one fact in a thousand of its sample);
-- a term not among them is rarer than the rarest that is, and is counted at half of that. Before
-- the table has statistics every term weighs 1 and counts as rare. Counting each term in the index
-- instead would cost what this avoids: a common term's whole posting list.
CREATE OR REPLACE FUNCTION ember.search_term_weights(p_terms text[])
RETURNS TABLE (term text, holding double precision, weight double precision)
LANGUAGE sql STABLE
AS $$
    -- Materialized: the statistics row is read and its lexeme array parsed once per call, not
    -- once per term and use.
    WITH s AS MATERIALIZED (
        SELECT
            st.most_common_elems::text::text[] AS elems,
            st.most_common_elem_freqs AS freqs,
            greatest(c.reltuples, 0)::double precision AS total
        FROM pg_catalog.pg_stats AS st
        INNER JOIN pg_catalog.pg_class AS c ON c.oid = 'ember.facts'::regclass
        WHERE st.schemaname = 'ember' AND st.tablename = 'facts' AND st.attname = 'search_text'
          AND st.most_common_elems IS NOT NULL AND c.reltuples > 0
    ),
    e AS (
        SELECT
            t.term,
            s.total * coalesce(
                s.freqs[array_position(s.elems, t.term)],
                s.freqs[cardinality(s.elems) + 1] / 2
            ) AS holding,
            s.total
        FROM unnest(p_terms) AS t (term)
        LEFT JOIN s ON TRUE
    )
    SELECT e.term, e.holding,
        CASE WHEN e.holding IS NULL THEN 1.0 ELSE ln(1.0 + e.total / greatest(e.holding, 1.0)) END
    FROM e
$$;

-- The active facts a viewer may read that best match a query: pgvector nearest neighbours
-- (HNSW, cosine distance) and a full-text match, each ranked, fused by reciprocal rank
-- (score = sum over both lists of 1 / (60 + rank), the constant of Cormack et al.). Fusing ranks
-- rather than raw scores needs no calibration between a cosine distance and a text score, which
-- live on unrelated scales.
--
-- The text side answers questions as well as keywords: a fact need not hold every word of the
-- query. Each fact is scored by the summed weights (search_term_weights) of the query terms it
-- holds, so the rare words of a question decide and the common ones only add a little; ties go
-- to ts_rank (how often they occur; ts_rank_cd, which also weighs how close they are, cost five
-- times as much per fact), then to the older fact. Which facts are scored is
-- bounded, so that a common word cannot decide the cost either: GIN answers an OR of terms by
-- building a bitmap of every fact holding any of them (tens of milliseconds for a word in half
-- of 100,000 facts), so only the terms held by at most search_common_facts facts (and by at most
-- one fact in twenty) choose the candidates, and the common ones rank them. A query made only of
-- common terms is matched against the search_recent_window newest facts instead, where a common
-- term is found often enough. Either way at most 400 candidates are read and scored: each costs
-- a heap fetch and a few microseconds of matching, which is what the text side spends.
--
-- Never returned: a fact whose labels the viewer's model is not tagged for (the person, 'human',
-- is tagged for everything), or one derived from an isolated thread. Both filters are inside each
-- candidate list, so hidden facts never crowd out visible ones; the index scan is iterative
-- (hnsw.iterative_scan) so a filter that drops many neighbours still yields enough candidates.
-- ef_search is pgvector's default 40 and the nearest 30 are taken for the usual limit of 10: a
-- first pass of 40 still holds 30 after the usual few labelled neighbours are dropped, while
-- asking for all 40 sent nearly every search into a second pass that read twice the index
-- (bench/b9_search.py). The text side keeps 40 candidates.
--
-- Static SQL, planned once per session (plan_cache_mode = force_generic_plan): the plan that
-- suits every call is known, an HNSW walk and a GIN bitmap each behind a one-time test of whether
-- its input is there, and planning it again for every call cost more than running it.
-- Refused: an unknown viewer (EM029); a limit outside 1..100, or neither text nor an embedding,
-- or an embedding of the wrong size (EM068).
--
-- Its length: one query (vector pool, text pool, fusion) planned once per session; benchmarked
-- (B9), and split into functions each pool would be a call and a plan of its own per search.
CREATE OR REPLACE FUNCTION ember.search_memory(
    p_tenant text, p_viewer text, p_query text, p_query_embedding vector DEFAULT NULL, p_limit integer DEFAULT 10
)
RETURNS TABLE (
    fact_id bigint,
    text text,
    evidence_kind text,
    categories text[],
    score double precision,
    vector_rank integer,
    text_rank integer,
    created_at timestamptz
)
LANGUAGE plpgsql STABLE
SET "hnsw.iterative_scan" = 'relaxed_order'
SET "hnsw.ef_search" = 40
SET plan_cache_mode = 'force_generic_plan'
-- The planner estimates a label filter (categories <@ tags) as very selective and would rather
-- sort every fact by distance than walk the HNSW index; with the iterative scan the index walk
-- is the cheap plan at any size, so sequential scans are ruled out for this function's queries.
SET enable_seqscan = off
AS $$
DECLARE
    v_human boolean;
    v_tags text[];
    v_isolated text[];
    v_vector halfvec;
    v_k integer;
    v_near integer;
    v_terms tsquery[];
    v_weights double precision[];
    v_choose tsquery;
    v_any tsquery;
    v_common double precision;
    v_window integer := ember.setting_int('search_recent_window');
    v_pool constant integer := 400;
BEGIN
    PERFORM ember.check_viewer(p_tenant, p_viewer);
    IF p_limit IS NULL OR p_limit < 1 OR p_limit > 100 THEN
        RAISE EXCEPTION 'search_memory: the limit must be between 1 and 100, got %', coalesce(p_limit::text, 'NULL')
            USING ERRCODE = 'EM068';
    END IF;
    IF coalesce(btrim(p_query), '') = '' AND p_query_embedding IS NULL THEN
        RAISE EXCEPTION 'search_memory: give a query text, an embedding, or both' USING ERRCODE = 'EM068';
    END IF;
    IF p_query_embedding IS NOT NULL AND vector_dims(p_query_embedding) <> ember.embedding_dimensions() THEN
        RAISE EXCEPTION 'search_memory: the query embedding must have % dimensions, got %',
            ember.embedding_dimensions(), vector_dims(p_query_embedding)
            USING ERRCODE = 'EM068';
    END IF;
    v_human := p_viewer = 'human';
    v_tags := ember.viewer_tags(p_tenant, p_viewer);
    v_isolated := ARRAY(SELECT t.id FROM ember.threads AS t WHERE t.tenant_id = p_tenant AND t.seal_tier = 'isolated');
    v_vector := p_query_embedding::halfvec;
    v_k := greatest(p_limit * 4, 40);
    v_near := greatest(p_limit * 3, 30);
    -- A term is common when more than search_common_facts facts hold it, or more than one in
    -- twenty (but never fewer than ten facts): in a small table a word in every fact chooses
    -- nothing either.
    SELECT least(ember.setting_int('search_common_facts'), greatest(0.05 * c.reltuples, 10))
    INTO v_common
    FROM pg_catalog.pg_class AS c WHERE c.oid = 'ember.facts'::regclass;
    IF coalesce(btrim(p_query), '') <> '' THEN
        -- One single-term tsquery per term (quoted, so no term is parsed again), their OR over
        -- all terms, and their OR over the terms rare enough to choose candidates.
        SELECT
            array_agg(q.lexeme::tsquery ORDER BY w.term),
            array_agg(w.weight ORDER BY w.term),
            string_agg(q.lexeme, ' | ' ORDER BY w.term) FILTER (WHERE coalesce(w.holding, 0) <= v_common)::tsquery,
            string_agg(q.lexeme, ' | ' ORDER BY w.term)::tsquery
        INTO v_terms, v_weights, v_choose, v_any
        FROM ember.search_term_weights(ember.search_query_terms(p_query)) AS w
        CROSS JOIN LATERAL (
            SELECT '''' || replace(replace(w.term, '\', '\\'), '''', '''''') || '''' AS lexeme
        ) AS q;
    END IF;

    RETURN QUERY
    WITH vec AS (
        SELECT c.id, row_number() OVER (ORDER BY c.distance, c.id)::integer AS rk
        FROM (
            SELECT f.id, f.embedding <=> v_vector AS distance
            FROM ember.facts AS f
            WHERE v_vector IS NOT NULL
              AND f.tenant_id = p_tenant AND f.status = 'active'
              AND (v_human OR f.categories <@ v_tags)
              AND NOT f.source_threads && v_isolated
            ORDER BY f.embedding <=> v_vector
            LIMIT v_near
        ) AS c
        WHERE c.distance IS NOT NULL
    ),
    pool AS (
        (
            SELECT f.id, f.search_text
            FROM ember.facts AS f
            WHERE v_choose IS NOT NULL
              AND f.search_text @@ v_choose
              AND f.tenant_id = p_tenant AND f.status = 'active'
              AND (v_human OR f.categories <@ v_tags)
              AND NOT f.source_threads && v_isolated
            LIMIT v_pool
        )
        UNION ALL
        (
            SELECT r.id, r.search_text
            FROM (
                SELECT f.id, f.search_text
                FROM ember.facts AS f
                WHERE v_choose IS NULL AND v_any IS NOT NULL
                  AND f.tenant_id = p_tenant AND f.status = 'active'
                  AND (v_human OR f.categories <@ v_tags)
                  AND NOT f.source_threads && v_isolated
                ORDER BY f.id DESC
                LIMIT v_window
            ) AS r
            WHERE r.search_text @@ v_any
            LIMIT v_pool
        )
    ),
    txt AS (
        SELECT s.id, row_number() OVER (ORDER BY s.weight DESC, s.density DESC, s.id)::integer AS rk
        FROM (
            SELECT p.id,
                (SELECT sum(t.weight) FROM unnest(v_terms, v_weights) AS t (query, weight)
                 WHERE p.search_text @@ t.query) AS weight,
                ts_rank(p.search_text, v_any) AS density
            FROM pool AS p
        ) AS s
        ORDER BY s.weight DESC, s.density DESC, s.id
        LIMIT v_k
    ),
    fused AS (
        SELECT u.id, sum(1.0 / (60 + u.rk))::double precision AS score,
            min(u.rk) FILTER (WHERE u.src = 'v') AS vrk, min(u.rk) FILTER (WHERE u.src = 't') AS trk
        FROM (
            SELECT vec.id, vec.rk, 'v' AS src FROM vec
            UNION ALL
            SELECT txt.id, txt.rk, 't' FROM txt
        ) AS u
        GROUP BY u.id
    )
    SELECT f.id, f.text, f.evidence_kind, f.categories, fu.score, fu.vrk, fu.trk, f.created_at
    FROM fused AS fu
    INNER JOIN ember.facts AS f ON f.tenant_id = p_tenant AND f.id = fu.id
    ORDER BY fu.score DESC, f.id
    LIMIT p_limit;
END;
$$;
