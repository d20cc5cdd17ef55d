BEGIN;
SELECT plan(9);

-- A property test of label conservation (issue 8, item 1): random chains of threads (categories,
-- plain rows, sends, reads, copies, new generations) for three seeds. An oracle written here,
-- independently of functions/020_labels.sql, tracks what each generation received; and every row
-- records the rows it was derived from (its generation's earlier rows, what was sent, read or
-- copied into it). Then: every row carries at least the labels of every row it was derived from;
-- every label set equals the oracle's; and no untagged model is offered any of it.
SELECT ember.define_category(c) FROM unnest(ARRAY['c1', 'c2', 'c3']) AS c;
-- Every agent thread may read everything (so sends, reads and copies happen); the light model
-- (shadow's cold path) and the steward's model are tagged for only part of it.
UPDATE ember.models SET tags = '{c1,c2,c3}' WHERE id = 'claude-opus-4-8';
UPDATE ember.models SET tags = '{c1}' WHERE id = 'claude-haiku-4-5';
UPDATE ember.models SET tags = '{c1,c2}' WHERE id = 'claude-sonnet-4-5';
SELECT ember.create_thread('default', 'main', 'main', NULL, NULL, 'open', 'claude-opus-4-8', '2026-03-01 00:00Z');
SELECT ember.ensure_steward_thread('default', '2026-03-01 00:00Z');
SELECT ember.set_thread_model('default', 'memory-steward', 'claude-sonnet-4-5');
SELECT ember.shadow_activate('2026-03-01 00:00Z');

CREATE TEMP TABLE oracle (generation_id uuid PRIMARY KEY, labels text[] NOT NULL);
CREATE TEMP TABLE row_oracle (id bigint PRIMARY KEY, labels text[] NOT NULL);
CREATE TEMP TABLE derived (child bigint NOT NULL, parent bigint NOT NULL);
-- Rows each generation's later rows derive from.
CREATE TEMP TABLE context (generation_id uuid NOT NULL, parent bigint NOT NULL);
CREATE TEMP TABLE ops (seed int, op text, ok boolean);

CREATE FUNCTION pg_temp.u(a text[], b text[]) RETURNS text[]
LANGUAGE sql AS $$ SELECT coalesce(array_agg(DISTINCT x ORDER BY x), '{}') FROM unnest(a || b) AS x WHERE x IS NOT NULL $$;

CREATE FUNCTION pg_temp.gen(p_thread text) RETURNS uuid
LANGUAGE sql AS $$ SELECT ember.latest_generation('default', p_thread) $$;

-- Record a new generation in the oracle: it starts with its thread's category.
CREATE FUNCTION pg_temp.oracle_gen(p_thread text) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO oracle SELECT pg_temp.gen(p_thread), pg_temp.u(ARRAY[t.category], '{}')
    FROM ember.threads AS t WHERE t.id = p_thread
    ON CONFLICT (generation_id) DO NOTHING
$$;

-- A row was appended to p_thread's current generation, bringing p_brought and deriving from p_parents.
CREATE FUNCTION pg_temp.oracle_row(p_id bigint, p_brought text[], p_parents bigint[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    g uuid := (SELECT generation_id FROM ember.messages WHERE id = p_id);
BEGIN
    UPDATE oracle SET labels = pg_temp.u(labels, p_brought) WHERE generation_id = g;
    INSERT INTO row_oracle SELECT p_id, labels FROM oracle WHERE generation_id = g;
    INSERT INTO derived SELECT p_id, c.parent FROM context AS c WHERE c.generation_id = g;
    INSERT INTO derived SELECT p_id, p FROM unnest(p_parents) AS p;
    INSERT INTO context SELECT g, p FROM unnest(p_parents) AS p;
    INSERT INTO context VALUES (g, p_id);
END;
$$;

CREATE FUNCTION pg_temp.chain(p_seed double precision, p_ops integer) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_threads text[] := ARRAY['main'];
    v_t text;
    v_from text;
    v_op text;
    v_id bigint;
    v_ids bigint[];
    v_gens uuid[];
    v_brought text[];
    v_now timestamptz := '2026-03-02 00:00Z'::timestamptz + p_seed * interval '10 days';
    i integer;
BEGIN
    PERFORM setseed(p_seed);
    FOR i IN 1..6 LOOP
        v_t := format('s%s_t%s', (p_seed * 100)::int, i);
        PERFORM ember.create_thread('default', v_t, CASE WHEN i % 2 = 0 THEN 'side' ELSE 'task' END, NULL,
            (ARRAY['c1', 'c2', 'c3', NULL, NULL, NULL])[1 + floor(random() * 6)::int], 'open',
            'claude-opus-4-8', '2026-03-01 00:00Z');
        v_threads := v_threads || v_t;
    END LOOP;
    PERFORM pg_temp.oracle_gen(t) FROM unnest(v_threads) AS t;

    FOR i IN 1..p_ops LOOP
        v_now := v_now + interval '1 minute';
        v_t := v_threads[1 + floor(random() * cardinality(v_threads))::int];
        v_from := v_threads[1 + floor(random() * cardinality(v_threads))::int];
        v_op := (ARRAY['row', 'row', 'send', 'send', 'read', 'copy', 'generation'])[1 + floor(random() * 7)::int];
        BEGIN
            IF v_op = 'row' THEN
                v_id := ember.append_message('default', v_t, (ARRAY['user', 'assistant'])[1 + floor(random() * 2)::int],
                                             'r' || i, p_now => v_now);
                PERFORM pg_temp.oracle_row(v_id, '{}', '{}');
            ELSIF v_op = 'send' AND v_from <> v_t THEN
                v_brought := (SELECT labels FROM oracle WHERE generation_id = pg_temp.gen(v_from));
                v_ids := ARRAY(SELECT m.id FROM ember.messages AS m WHERE m.generation_id = pg_temp.gen(v_from));
                v_id := ember.append_message('default', v_t, 'event', 'sent ' || i, 'main', NULL, NULL, NULL, NULL, v_from, v_now);
                PERFORM pg_temp.oracle_row(v_id, v_brought, v_ids);
            ELSIF v_op = 'read' AND v_from <> v_t THEN
                v_ids := ARRAY(SELECT r.id FROM ember.read_thread('default', v_t, v_from, 1 + floor(random() * 4)::int) AS r);
                v_gens := ARRAY(SELECT DISTINCT m.generation_id FROM ember.messages AS m WHERE m.id = ANY(v_ids));
                PERFORM pg_temp.oracle_gen(v_t);  -- read_thread may have opened the viewer's generation
                UPDATE oracle SET labels = pg_temp.u(labels, ARRAY(
                    SELECT unnest(o.labels) FROM oracle AS o WHERE o.generation_id = ANY(v_gens)
                )) WHERE generation_id = pg_temp.gen(v_t);
                INSERT INTO context SELECT pg_temp.gen(v_t), x FROM unnest(v_ids) AS x;
            ELSIF v_op = 'copy' AND v_from <> v_t THEN
                v_ids := ARRAY(SELECT m.id FROM ember.messages AS m WHERE m.thread_id = v_from
                               ORDER BY random() LIMIT 2);
                v_brought := ARRAY(SELECT unnest(r.labels) FROM row_oracle AS r WHERE r.id = ANY(v_ids));
                v_ids := ember.copy_messages('default', v_from, v_ids, v_t, v_now);
                -- A copy brings the copied rows' labels; a copy of a forwarded row names its sender,
                -- and is held to the sender's current labels like any row from another thread.
                FOREACH v_id IN ARRAY v_ids LOOP
                    PERFORM pg_temp.oracle_row(v_id, pg_temp.u(v_brought, coalesce((
                            SELECT o.labels FROM ember.messages AS m JOIN oracle AS o
                                ON o.generation_id = pg_temp.gen(m.from_thread)
                            WHERE m.id = v_id AND m.from_thread <> m.thread_id), '{}')),
                        ARRAY(SELECT m.copied_from FROM ember.messages AS m WHERE m.id = v_id));
                END LOOP;
            ELSIF v_op = 'generation' THEN
                PERFORM ember.start_generation('default', v_t, v_now);
                PERFORM pg_temp.oracle_gen(v_t);
            ELSE
                v_op := v_op || ' (same thread)';
            END IF;
            INSERT INTO ops VALUES ((p_seed * 100)::int, v_op, true);
        EXCEPTION WHEN SQLSTATE 'EM024' OR SQLSTATE 'EM025' OR SQLSTATE 'EM028' THEN
            -- A refused flow, copy or read writes nothing: the oracle is left as it was.
            INSERT INTO ops VALUES ((p_seed * 100)::int, v_op, false);
        END;
    END LOOP;
END;
$$;

SELECT pg_temp.chain(0.11, 150);
SELECT pg_temp.chain(0.37, 150);
SELECT pg_temp.chain(0.73, 150);

SELECT cmp_ok((SELECT count(DISTINCT op)::int FROM ops WHERE ok AND op IN ('row', 'send', 'read', 'copy', 'generation')),
              '=', 5, 'the chains exercised rows, sends, reads, copies and new generations');
SELECT cmp_ok((SELECT count(*)::int FROM derived AS d JOIN ember.messages AS c ON c.id = d.child
               JOIN ember.messages AS p ON p.id = d.parent WHERE c.thread_id <> p.thread_id), '>', 50,
              'many rows derive from rows of other threads');
SELECT is((SELECT count(*)::int FROM derived AS d
           JOIN ember.messages AS c ON c.id = d.child
           JOIN ember.messages AS p ON p.id = d.parent
           WHERE NOT c.categories @> p.categories), 0,
          'every row carries at least the labels of every row it was derived from (so, transitively, of all its ancestors)');
SELECT is((SELECT count(*)::int FROM oracle AS o WHERE ember.generation_labels(o.generation_id) IS DISTINCT FROM o.labels), 0,
          'every generation''s label set is the oracle''s: its category and everything it received, transitively');
SELECT is((SELECT count(*)::int FROM row_oracle AS r JOIN ember.messages AS m ON m.id = r.id
           WHERE m.categories IS DISTINCT FROM r.labels), 0,
          'every row is stamped with its generation''s set as it stood when the row was written');
SELECT cmp_ok((SELECT count(*)::int FROM ember.generations WHERE cardinality(labels) >= 2), '>', 3,
              'labels did gather: several generations carry two categories or more');

-- No untagged model is offered any of it.
UPDATE ember.shadow_thread_state SET turn_running = false;
SELECT ember.shadow_memory_changed('default', t.id, 'task-ended', '2026-03-20 00:00Z') FROM ember.threads AS t;
SELECT is((SELECT count(*)::int FROM ember.shadow_ready('2026-03-20 00:01Z') AS r
           JOIN ember.models AS m ON m.id = r.model
           WHERE NOT m.tags @> ember.generation_labels(r.generation_id)), 0,
          'shadow_ready offers no generation to a model not tagged for its labels');
SELECT is((SELECT count(*)::int FROM ember.backlog AS b
           WHERE NOT ember.viewer_tags('memory-steward') @> ember.generation_labels(b.generation_id)
              OR NOT ember.viewer_tags('memory-steward') @> b.categories), 0,
          'the backlog holds no row the steward''s model is not tagged for');
CREATE FUNCTION pg_temp.routed(p_labels text[]) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
    RETURN ember.route_model('light', p_labels);
EXCEPTION WHEN SQLSTATE 'EM022' THEN
    RETURN NULL;
END;
$$;
SELECT is((SELECT count(*)::int FROM ember.generations AS g
           WHERE pg_temp.routed(g.labels) IS NOT NULL
             AND NOT (SELECT m.tags FROM ember.models AS m WHERE m.id = pg_temp.routed(g.labels)) @> g.labels), 0,
          'route_model routes every generation to a tagged model or refuses');

SELECT * FROM finish();
ROLLBACK;
