-- Whether the steward has work, from state rather than from the backlog (issue 21): the steward's
-- claim and the worker ask ember.steward_has_work() first, which answers through the indexes
-- below however large the backlog is.
--
-- undigested counts the generation's rows without an episode_id (the messages triggers keep it,
-- functions/080_write_state.sql); steward_reads is false for a generation the steward never reads
-- (its own record, an isolated thread); ended mirrors generations.ended_at.
ALTER TABLE ember.generation_progress
ADD COLUMN undigested integer NOT NULL DEFAULT 0,
ADD COLUMN steward_reads boolean NOT NULL DEFAULT TRUE,
ADD COLUMN ended boolean NOT NULL DEFAULT FALSE;

UPDATE ember.generation_progress AS p SET
    steward_reads = t.kind <> 'steward' AND t.seal_tier <> 'isolated',
    ended = g.ended_at IS NOT NULL
FROM ember.threads AS t, ember.generations AS g
WHERE t.id = p.thread_id AND g.id = p.generation_id;

-- A carrier's (main's) rows from before the steward existed are never its backlog.
UPDATE ember.generation_progress AS p SET undigested = u.n
FROM (
    SELECT
        m.generation_id,
        count(*)::integer AS n
    FROM ember.messages AS m
    INNER JOIN ember.threads AS t ON m.thread_id = t.id
    LEFT JOIN ember.threads AS s ON s.kind = 'steward'
    WHERE
        m.episode_id IS NULL
        AND NOT (t.kind = 'main' AND m.created_at <= coalesce(s.created_at, 'infinity'))
    GROUP BY m.generation_id
) AS u
WHERE p.generation_id = u.generation_id;

CREATE INDEX generation_progress_steward_ended ON ember.generation_progress (generation_id)
WHERE undigested > 0 AND steward_reads AND ended;

CREATE INDEX generation_progress_steward_idle ON ember.generation_progress (last_message_at)
WHERE undigested > 0 AND steward_reads;
