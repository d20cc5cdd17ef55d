BEGIN;
SELECT plan(9);

-- The distribution plan (ember.distribution_plan() and its companions, functions/004) checked
-- against the catalog, so that a deployment can still distribute Ember by thread_id with Citus
-- after any change. Each check lists what breaks it, naming the table and the constraint, index,
-- column or function. The rules are Citus's (docs/operations.md, "Distribution by thread_id").

CREATE TEMP TABLE plan ON COMMIT DROP AS
SELECT ('ember.' || quote_ident(p.table_name))::regclass AS rel, p.table_name, p.role, p.distribution_column
FROM ember.distribution_plan() AS p
WHERE to_regclass('ember.' || quote_ident(p.table_name)) IS NOT NULL;

-- 1. Every table of schema ember is in one of the plan's lists.
SELECT is_empty(
    $$SELECT format('table ember.%s is in none of the plan''s lists (ember.distribution_plan())', c.relname)
      FROM pg_class AS c
      WHERE c.relnamespace = 'ember'::regnamespace AND c.relkind IN ('r', 'p')
        AND NOT EXISTS (SELECT 1 FROM plan AS p WHERE p.rel = c.oid)
      ORDER BY 1$$,
    'every table of schema ember is distributed, reference or local in the plan'
);

-- 2. The plan names only tables that exist, each once, with a known role and a column where one is due.
SELECT is_empty(
    $$SELECT format('plan row ember.%s: %s', p.table_name, p.problem)
      FROM (
          SELECT d.table_name, CASE
              WHEN to_regclass('ember.' || quote_ident(d.table_name)) IS NULL THEN 'no such table'
              WHEN d.role NOT IN ('distributed', 'reference', 'local') THEN 'unknown role ' || d.role
              WHEN count(*) OVER (PARTITION BY d.table_name) > 1 THEN 'listed more than once'
              WHEN (d.role = 'distributed') <> (d.distribution_column IS NOT NULL)
                  THEN 'a distribution column is given for, and only for, a distributed table'
              WHEN d.role = 'distributed' AND NOT EXISTS (
                  SELECT 1 FROM pg_attribute AS a
                  WHERE a.attrelid = ('ember.' || quote_ident(d.table_name))::regclass
                    AND a.attname = d.distribution_column AND a.attnotnull AND NOT a.attisdropped
              ) THEN format('distribution column %s is not a NOT NULL column', d.distribution_column)
          END AS problem
          FROM ember.distribution_plan() AS d
      ) AS p
      WHERE p.problem IS NOT NULL
      ORDER BY 1$$,
    'the plan names existing tables, once each, with a NOT NULL distribution column where distributed'
);

-- 3. A primary or unique key (constraint or unique index) of a distributed table holds its
--    distribution column: Citus checks uniqueness on one shard only. Exceptions are named in
--    ember.distribution_exceptions() and dropped by the operator before distributing.
SELECT is_empty(
    $$SELECT format('%s: %s %s (%s) lacks distribution column %s', p.rel, CASE
                        WHEN con.contype = 'p' THEN 'primary key'
                        WHEN con.contype = 'u' THEN 'unique constraint'
                        ELSE 'unique index' END,
                    ic.relname, pg_get_indexdef(i.indexrelid, 0, true), p.distribution_column)
      FROM plan AS p
      INNER JOIN pg_index AS i ON i.indrelid = p.rel AND i.indisunique
      INNER JOIN pg_class AS ic ON ic.oid = i.indexrelid
      LEFT JOIN pg_constraint AS con ON con.conindid = i.indexrelid AND con.conrelid = p.rel
      WHERE p.role = 'distributed'
        AND NOT EXISTS (
            SELECT 1 FROM pg_attribute AS a
            WHERE a.attrelid = p.rel AND a.attname = p.distribution_column AND a.attnum = ANY(i.indkey)
        )
        AND NOT EXISTS (
            SELECT 1 FROM ember.distribution_exceptions() AS e
            WHERE e.table_name = p.table_name AND e.constraint_name = ic.relname
        )
      ORDER BY 1$$,
    'every primary and unique key of a distributed table includes its distribution column'
);

-- 4. A foreign key of a distributed table points to a reference table, or to a distributed table
--    with the distribution column matched to the distribution column (co-located shards); never
--    to a local table.
SELECT is_empty(
    $$SELECT format('%s: foreign key %s (%s) %s', s.rel, con.conname, pg_get_constraintdef(con.oid), CASE
                        WHEN t.role = 'local' THEN format('points to local table %s', t.rel)
                        ELSE format('does not match %s.%s to %s.%s', s.table_name, s.distribution_column,
                                    t.table_name, t.distribution_column) END)
      FROM plan AS s
      INNER JOIN pg_constraint AS con ON con.conrelid = s.rel AND con.contype = 'f'
      INNER JOIN plan AS t ON t.rel = con.confrelid
      WHERE s.role = 'distributed' AND t.role <> 'reference'
        AND (t.role = 'local' OR NOT EXISTS (
            SELECT 1 FROM unnest(con.conkey, con.confkey) AS k (src, dst)
            WHERE k.src = (SELECT attnum FROM pg_attribute WHERE attrelid = s.rel AND attname = s.distribution_column)
              AND k.dst = (SELECT attnum FROM pg_attribute WHERE attrelid = t.rel AND attname = t.distribution_column)
        ))
      ORDER BY 1$$,
    'foreign keys of distributed tables go to reference tables or match thread_id to thread_id'
);

-- 5. A reference or local table never points into a distributed table: Citus refuses a key whose
--    referenced rows are on another node.
SELECT is_empty(
    $$SELECT format('%s (%s): foreign key %s (%s) points into distributed table %s',
                    s.rel, s.role, con.conname, pg_get_constraintdef(con.oid), t.rel)
      FROM plan AS s
      INNER JOIN pg_constraint AS con ON con.conrelid = s.rel AND con.contype = 'f'
      INNER JOIN plan AS t ON t.rel = con.confrelid
      WHERE s.role <> 'distributed' AND t.role = 'distributed'
      ORDER BY 1$$,
    'no reference or local table has a foreign key into a distributed table'
);

-- 6. A column of a distributed table filled from a sequence (identity or nextval default) is
--    bigint: Citus gives each node its own range of a bigint sequence (the node's group id in the
--    high bits), so values stay unique across shards wherever the row is written; smaller types
--    can be drawn on the coordinator only.
SELECT is_empty(
    $$SELECT format('%s: column %s (%s) takes values from a sequence but is not bigint',
                    p.rel, a.attname, format_type(a.atttypid, a.atttypmod))
      FROM plan AS p
      INNER JOIN pg_attribute AS a ON a.attrelid = p.rel AND a.attnum > 0 AND NOT a.attisdropped
      LEFT JOIN pg_attrdef AS d ON d.adrelid = p.rel AND d.adnum = a.attnum
      WHERE p.role = 'distributed' AND a.atttypid <> 'bigint'::regtype
        AND (a.attidentity <> '' OR pg_get_expr(d.adbin, d.adrelid) LIKE 'nextval(%')
      ORDER BY 1$$,
    'every sequence-filled column of a distributed table is bigint'
);

-- 7. The hot path's functions exist.
SELECT is_empty(
    $$SELECT format('hot-path function ember.%s does not exist', h.function_name)
      FROM ember.distribution_hot_path() AS h
      WHERE NOT EXISTS (
          SELECT 1 FROM pg_proc WHERE proname = h.function_name AND pronamespace = 'ember'::regnamespace
      )
      ORDER BY 1$$,
    'every hot-path function of the plan exists'
);

-- 8. A hot-path function joins a distributed table only on its distribution column. Read from the
--    function's source: each `JOIN ember.<table> [AS] <alias> ON <condition>` (or USING) of a
--    distributed table must equate <alias>.<distribution column> with something. What this does
--    not see: joins written as FROM a, b WHERE ..., EXISTS/IN subqueries, views and the functions
--    a hot-path function calls (they are checked only if listed), dynamic SQL; and it checks that
--    the column is equated, not that the other side is the same thread's column.
CREATE TEMP TABLE hot_joins ON COMMIT DROP AS
SELECT h.function_name, j.piece
FROM ember.distribution_hot_path() AS h
INNER JOIN pg_proc AS f ON f.proname = h.function_name AND f.pronamespace = 'ember'::regnamespace
CROSS JOIN LATERAL regexp_split_to_table(
    regexp_replace(f.prosrc, '--[^\n]*', '', 'g'), '\mJOIN\M', 'i'
) WITH ORDINALITY AS j (piece, n)
WHERE j.n > 1;

CREATE TEMP TABLE hot_join_checks ON COMMIT DROP AS
SELECT x.function_name, x.table_name, x.alias, p.distribution_column,
       regexp_replace(x.rest, '\m(WHERE|GROUP|ORDER|LIMIT|RETURNING|UNION|HAVING|WINDOW|LEFT|RIGHT|INNER|CROSS|FULL|FOR|INTO)\M.*$|;.*$', '', 'i') AS cond
FROM (
    SELECT hj.function_name, m[1] AS table_name, coalesce(m[2], m[1]) AS alias, m[3] AS rest
    FROM hot_joins AS hj
    CROSS JOIN LATERAL regexp_match(
        hj.piece, '^\s+ember\.([a-z_][a-z0-9_]*)(?:\s+(?:AS\s+)?(?!ON\M|USING\M)([a-z_][a-z0-9_]*))?\s+((?:ON|USING)\M.*)$', 'i'
    ) AS m
    WHERE m IS NOT NULL
) AS x
INNER JOIN plan AS p ON p.table_name = x.table_name AND p.role = 'distributed';

SELECT is_empty(
    $$SELECT format('ember.%s: JOIN ember.%s AS %s %s does not join on %s.%s',
                    c.function_name, c.table_name, c.alias, btrim(regexp_replace(c.cond, '\s+', ' ', 'g')),
                    c.alias, c.distribution_column)
      FROM hot_join_checks AS c
      WHERE NOT (
          c.cond ~* format('\m%s\.%s\M\s*=|=\s*%s\.%s\M', c.alias, c.distribution_column, c.alias, c.distribution_column)
          OR c.cond ~* format('^USING\s*\([^)]*\m%s\M', c.distribution_column)
      )
      ORDER BY 1$$,
    'hot-path functions join distributed tables only on the distribution column'
);

-- 9. The check above reads joins at all: the hot path's sources hold some, and it parses each.
SELECT cmp_ok(
    (SELECT count(*) FROM hot_join_checks), '>', 0::bigint,
    'the join check finds the hot path''s joins of distributed tables'
);

SELECT * FROM finish();
ROLLBACK;
