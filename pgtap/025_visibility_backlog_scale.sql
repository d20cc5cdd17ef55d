BEGIN;
SELECT plan(13);

-- backlog and backlog_waiting against their definitions before issue 13 (an anti-join over all
-- threads), in several configurations of steward, tags and threads: the faster views must list
-- exactly the same rows and reasons.

CREATE TEMP VIEW old_backlog AS
WITH steward AS (
    SELECT
        t.id,
        t.created_at,
        ember.viewer_tags(t.id) AS tags
    FROM ember.threads AS t
    WHERE ember.is_steward_thread(t.id)
),

readable AS (
    SELECT
        t.id,
        ember.is_label_carrier(t.id) AS carrier
    FROM ember.threads AS t
    LEFT JOIN steward AS s ON TRUE
    WHERE
        NOT ember.is_steward_thread(t.id)
        AND NOT ember.is_isolated(t.id)
        AND ember.hidden_reason_unchecked(s.id, t.id) IS NULL
)

SELECT
    m.id,
    m.seq,
    m.thread_id,
    m.generation_id,
    m.role,
    m.author,
    m.content,
    m.blocks,
    m.tool_call_id,
    m.tool_name,
    m.tool_status,
    m.from_thread,
    m.categories,
    m.created_at
FROM ember.messages AS m
INNER JOIN readable AS r ON m.thread_id = r.id
LEFT JOIN steward AS s ON TRUE
WHERE
    m.episode_id IS NULL
    AND m.categories <@ coalesce(s.tags, '{}')
    AND (NOT r.carrier OR m.created_at > s.created_at);

-- Undigested work that waits for a tagged model, and why: the "says why" of invariant 9. One
-- row per thread whose undigested rows are kept out of the backlog only by labels (never an
-- isolated thread, the steward's own, or main's rows from before the steward existed).
CREATE TEMP VIEW old_backlog_waiting AS
WITH steward AS (
    SELECT
        t.id,
        t.created_at,
        coalesce(t.model, 'none pinned') AS model
    FROM ember.threads AS t
    WHERE ember.is_steward_thread(t.id)
),

pending AS (
    SELECT
        m.thread_id,
        m.id,
        m.categories
    FROM ember.messages AS m
    LEFT JOIN steward AS s ON TRUE
    LEFT JOIN old_backlog AS b ON m.id = b.id
    WHERE
        m.episode_id IS NULL
        AND b.id IS NULL
        AND NOT ember.is_steward_thread(m.thread_id)
        AND NOT ember.is_isolated(m.thread_id)
        AND (NOT ember.is_label_carrier(m.thread_id) OR m.created_at > s.created_at)
)

SELECT
    p.thread_id,
    count(DISTINCT p.id)::integer AS waiting_rows,
    ember.label_set(array_agg(c.label) || ember.thread_call_labels(p.thread_id)) AS labels,
    coalesce(
        ember.hidden_reason_unchecked(s.id, p.thread_id),
        format('rows carry labels the steward''s model (%s) is not tagged for', coalesce(s.model, 'none'))
    ) AS reason
FROM pending AS p
LEFT JOIN LATERAL unnest(p.categories) AS c (label) ON TRUE
LEFT JOIN steward AS s ON TRUE
GROUP BY p.thread_id, s.id, s.model;

CREATE FUNCTION pg_temp.same(p_label text) RETURNS SETOF text LANGUAGE plpgsql AS $$
BEGIN
    RETURN NEXT is_empty($q$
        (SELECT id, seq, thread_id, categories, blocks::text FROM ember.backlog
         EXCEPT SELECT id, seq, thread_id, categories, blocks::text FROM old_backlog)
        UNION ALL
        (SELECT id, seq, thread_id, categories, blocks::text FROM old_backlog
         EXCEPT SELECT id, seq, thread_id, categories, blocks::text FROM ember.backlog)
    $q$, 'backlog as before: ' || p_label);
    RETURN NEXT is_empty($q$
        (SELECT thread_id, waiting_rows, labels, reason FROM ember.backlog_waiting EXCEPT SELECT * FROM old_backlog_waiting)
        UNION ALL (SELECT * FROM old_backlog_waiting EXCEPT SELECT thread_id, waiting_rows, labels, reason FROM ember.backlog_waiting)
    $q$, 'backlog_waiting as before: ' || p_label);
END;
$$;

SELECT ember.define_category('health');
SELECT ember.define_category('finance');
SELECT ember.create_thread('default', 'main', 'main', NULL, NULL, 'open', 'claude-haiku-4-5', '2026-12-01 09:00Z');
SELECT ember.create_thread('default', 'doc', 'side', 'Doctor', 'health', 'open', NULL, '2026-12-01 09:00Z');
SELECT ember.create_thread('default', 'bank', 'side', 'Bank', 'finance', 'open', NULL, '2026-12-01 09:00Z');
SELECT ember.create_thread('default', 'plain', 'side', 'Plain', NULL, 'open', NULL, '2026-12-01 09:00Z');
SELECT ember.create_thread('default', 'vault', 'side', 'Private', NULL, 'isolated', NULL, '2026-12-01 09:00Z');
SELECT ember.append_message('default', t, 'user', 'early ' || t, p_now => '2026-12-01 09:05Z')
FROM unnest(ARRAY['main', 'doc', 'bank', 'plain', 'vault']) AS t;
SELECT * FROM pg_temp.same('no steward yet');

SELECT ember.ensure_steward_thread('default', '2026-12-01 09:10Z');
SELECT ember.append_message('default', t, 'assistant', 'later ' || t, p_now => '2026-12-01 09:20Z')
FROM unnest(ARRAY['main', 'doc', 'bank', 'plain', 'vault']) AS t;
SELECT ember.append_steward_record('default', 'assistant', 'later memory-steward', p_now => '2026-12-01 09:20Z');
SELECT ember.append_message('default', 'main', 'event', 'doc: results', NULL, NULL, NULL, NULL, NULL, 'doc', '2026-12-01 09:21Z');
SELECT * FROM pg_temp.same('a steward whose model is tagged for nothing');
SELECT ok((SELECT count(*) FROM ember.backlog_waiting) >= 3, 'labelled threads and main wait for a tagged model');

UPDATE ember.models SET tags = '{health}' WHERE id = 'claude-haiku-4-5';
SELECT * FROM pg_temp.same('a steward tagged for some categories');

UPDATE ember.models SET tags = '{health,finance}' WHERE id = 'claude-haiku-4-5';
SELECT * FROM pg_temp.same('a steward tagged for every category');
SELECT is_empty('SELECT * FROM ember.backlog_waiting', 'with every category tagged, nothing waits');
SELECT ok((SELECT count(*) FROM ember.backlog WHERE thread_id IN ('doc', 'bank', 'main')) >= 5,
          'and labelled rows and main''s later rows are in the backlog');

SELECT ember.define_category('legal');
SELECT ember.create_thread('default', 'lawyer', 'side', 'Lawyer', 'legal', 'open', NULL, '2026-12-01 09:00Z');
SELECT ember.append_message('default', 'lawyer', 'user', 'contract', p_now => '2026-12-01 09:30Z');
UPDATE ember.messages SET episode_id = gen_random_uuid() WHERE content LIKE 'early%';
SELECT * FROM pg_temp.same('a category added since, and digested rows');

SELECT * FROM finish();
ROLLBACK;
