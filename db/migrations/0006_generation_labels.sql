-- Labels are conserved through every thread (design.md invariant 4, issue 8). A generation's
-- label set is stored with it and only grows: it starts as its thread's category and is widened,
-- in the same transaction, by whatever brings a label in (a row from another thread, a read, a
-- copy). Answering a label question is then a lookup of this column instead of a walk over the
-- history, and every caller (row stamps, backlog, flow, routing, shadow, the steward) reads the
-- same value through ember.generation_labels. The rules that write it are in
-- functions/020_labels.sql; a trigger refuses any narrowing.
ALTER TABLE ember.generations ADD COLUMN labels text[] NOT NULL DEFAULT '{}';

-- Existing generations: the set the earlier rule computed on demand (the thread's category, the
-- categories of recorded sources, and what rows from other threads brought). Plain SQL, since
-- migrations run before functions/ is applied.
UPDATE ember.generations AS g
SET labels = coalesce((
    SELECT array_agg(DISTINCT x.l ORDER BY x.l)
    FROM (
        SELECT t.category AS l
        FROM ember.threads AS t
        WHERE t.id = g.thread_id
        UNION ALL
        SELECT t.category
        FROM ember.generation_sources AS s
        INNER JOIN ember.threads AS t ON s.source_thread = t.id
        WHERE s.generation_id = g.id
        UNION ALL
        SELECT unnest(m.categories)
        FROM ember.messages AS m
        WHERE m.generation_id = g.id AND m.from_thread IS NOT NULL
    ) AS x
    WHERE x.l IS NOT NULL
), '{}');
