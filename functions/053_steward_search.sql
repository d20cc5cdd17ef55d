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

-- The active facts a viewer may read that best match a query: pgvector nearest neighbours
-- (HNSW, cosine distance) and a full-text match, each ranked, fused by reciprocal rank
-- (score = sum over both lists of 1 / (60 + rank), the constant of Cormack et al.). Fusing ranks
-- rather than raw scores needs no calibration between a cosine distance and ts_rank_cd, which
-- live on unrelated scales. The text side matches facts that hold every word of the query
-- (plainto_tsquery), ranked by ts_rank_cd; facts that share only some of the words, or none, are
-- the vector side's to find by meaning. Matching any word would reach more facts by text alone,
-- but GIN answers an OR of a common word by building a bitmap of every fact that holds it (tens
-- of milliseconds at 100,000 facts), while an AND is driven by its rarest word. Ranking is
-- bounded too: the first 4k matches (k = max(4 x limit, 40)) are ranked, so a one-word query for
-- a word in half the facts does not rank half the facts; with no embedding the text side alone
-- answers.
--
-- Never returned: a fact whose labels the viewer's model is not tagged for (the person, 'human',
-- is tagged for everything), or one derived from an isolated thread. The label filter is inside
-- each candidate list, so hidden facts never crowd out visible ones; the index scan is iterative
-- (hnsw.iterative_scan) so a filter that drops many neighbours still yields enough candidates,
-- and ef_search is pgvector's default 40: the candidate list is 40 long for the usual limit of 10.
-- Refused: an unknown viewer (EM029); a limit outside 1..100, or neither text nor an embedding,
-- or an embedding of the wrong size (EM068).
CREATE OR REPLACE FUNCTION ember.search_memory(
    p_viewer text, p_query text, p_query_embedding vector DEFAULT NULL, p_limit integer DEFAULT 10
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
-- The planner estimates a label filter (categories <@ tags) as very selective and would rather
-- sort every fact by distance than walk the HNSW index; with the iterative scan the index walk
-- is the cheap plan at any size, so sequential scans are ruled out for this function's queries.
SET enable_seqscan = off
AS $$
DECLARE
    v_human boolean;
    v_tags text[];
    v_query tsquery;
    v_k integer;
BEGIN
    PERFORM ember.check_viewer(p_viewer);
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
    v_tags := ember.viewer_tags(p_viewer);
    v_k := greatest(p_limit * 4, 40);
    IF coalesce(btrim(p_query), '') <> '' THEN
        v_query := nullif(plainto_tsquery('english', p_query)::text, '')::tsquery;
    END IF;

    -- EXECUTE plans with the actual values: a cached generic plan cannot see that the embedding
    -- is there or which viewer asks, and falls back to scanning every fact.
    RETURN QUERY EXECUTE $q$
    WITH vec AS (
        SELECT c.id, row_number() OVER (ORDER BY c.distance, c.id)::integer AS rk
        FROM (
            SELECT f.id, f.embedding <=> $1::halfvec AS distance
            FROM ember.facts AS f
            WHERE $1 IS NOT NULL
              AND f.status = 'active'
              AND ($2 OR f.categories <@ $3)
            ORDER BY f.embedding <=> $1::halfvec
            LIMIT $4
        ) AS c
        WHERE c.distance IS NOT NULL
    ),
    txt AS (
        SELECT c.id, row_number() OVER (ORDER BY c.rank DESC, c.id)::integer AS rk
        FROM (
            SELECT m.id, ts_rank_cd(m.search_text, $5) AS rank
            FROM (
                SELECT f.id, f.search_text FROM ember.facts AS f
                WHERE $5 IS NOT NULL
                  AND f.search_text @@ $5
                  AND f.status = 'active'
                  AND ($2 OR f.categories <@ $3)
                LIMIT $6
            ) AS m
            ORDER BY ts_rank_cd(m.search_text, $5) DESC, m.id
            LIMIT $4
        ) AS c
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
    INNER JOIN ember.facts AS f ON f.id = fu.id
    WHERE ember.fact_visible($2, $3, f.categories, f.source_threads)
    ORDER BY fu.score DESC, f.id
    LIMIT $7
    $q$ USING p_query_embedding, v_human, v_tags, v_k, v_query, v_k * 4, p_limit;
END;
$$;
