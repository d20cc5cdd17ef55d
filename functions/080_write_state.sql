-- Write-path state (issue 13): the figures tick(), shadow_ready() and claim_shadow_run() need,
-- kept current by the statements that change them, in the same transaction. Kept in triggers
-- rather than in append_message's body so that every writer (append_message, append_messages,
-- copies, imports) maintains them the same way, and the host API stays about the host.
--
-- generation_progress.last_seq / last_message_at follow the rows of a generation; read_seq
-- follows ember.shadow_read_position (cursor baselines and completed runs). Both only grow, so
-- each update takes the greater value and concurrent writers cannot move them backwards.
-- Appends to one thread already hold that thread's row lock (append_message, append_messages),
-- so the generation's progress row is updated in seq order and invariant 8 is untouched.

-- After an INSERT statement into messages: one upsert per generation the statement wrote to. A
-- statement-level trigger with a transition table, so a bulk append of 10,000 rows does one
-- upsert, not 10,000.
CREATE OR REPLACE FUNCTION ember.messages_note_progress()
RETURNS trigger
LANGUAGE plpgsql
AS $$
DECLARE
    v_updated integer;
BEGIN
    -- The common case is a generation that already has rows: a plain update. Only a
    -- generation's first rows take the insert, which also asks for its read position.
    --
    -- The steward's own record is never read by shadow (shadow_excluded), so nothing would ever
    -- move the read position of its generations: one per steward run would stay in the unread
    -- set that tick() and work_status start from, for ever, growing with every run. Its rows are
    -- counted read as they are written, so its generations never enter the set.
    UPDATE ember.generation_progress AS p SET
        last_seq = greatest(p.last_seq, n.last_seq),
        last_message_at = greatest(p.last_message_at, n.last_message_at),
        read_seq = CASE WHEN n.steward THEN greatest(p.read_seq, p.last_seq, n.last_seq) ELSE p.read_seq END,
        undigested = p.undigested + n.undigested
    FROM (
        SELECT
            x.tenant_id, x.generation_id, max(x.seq) AS last_seq, max(x.created_at) AS last_message_at,
            ember.is_steward_thread(x.tenant_id, min(x.thread_id)) AS steward,
            (count(*) FILTER (WHERE x.episode_id IS NULL))::integer AS undigested
        FROM new_rows AS x GROUP BY x.tenant_id, x.generation_id
    ) AS n
    WHERE p.tenant_id = n.tenant_id AND p.generation_id = n.generation_id;
    GET DIAGNOSTICS v_updated = ROW_COUNT;
    IF v_updated < (SELECT count(*) FROM (SELECT DISTINCT x.tenant_id, x.generation_id FROM new_rows AS x) AS d) THEN
        INSERT INTO ember.generation_progress AS p (
            tenant_id, generation_id, thread_id, last_seq, last_message_at, read_seq,
            undigested, steward_reads, ended
        )
        SELECT
            n.tenant_id,
            n.generation_id,
            min(n.thread_id),
            max(n.seq),
            max(n.created_at),
            CASE WHEN ember.is_steward_thread(n.tenant_id, min(n.thread_id)) THEN max(n.seq)
                ELSE ember.shadow_read_position(n.tenant_id, min(n.thread_id), n.generation_id) END,
            (count(*) FILTER (WHERE n.episode_id IS NULL))::integer,
            NOT ember.is_steward_thread(n.tenant_id, min(n.thread_id))
                AND NOT ember.is_isolated(n.tenant_id, min(n.thread_id)),
            coalesce((
                SELECT g.ended_at IS NOT NULL FROM ember.generations AS g
                WHERE g.tenant_id = n.tenant_id AND g.id = n.generation_id
            ), false)
        FROM new_rows AS n
        GROUP BY n.tenant_id, n.generation_id
        ON CONFLICT (tenant_id, generation_id, thread_id) DO UPDATE SET
            last_seq = greatest(p.last_seq, excluded.last_seq),
            last_message_at = greatest(p.last_message_at, excluded.last_message_at),
            read_seq = greatest(p.read_seq, excluded.read_seq),
            undigested = p.undigested + excluded.undigested;
    END IF;
    RETURN NULL;
END;
$$;

CREATE OR REPLACE TRIGGER messages_note_progress
AFTER INSERT ON ember.messages
REFERENCING NEW TABLE AS new_rows
FOR EACH STATEMENT EXECUTE FUNCTION ember.messages_note_progress();

-- A new generation (including a new thread's first) is a generation change tick() has to record.
CREATE OR REPLACE FUNCTION ember.generations_note_change()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    INSERT INTO ember.generation_changes (tenant_id, thread_id)
    SELECT DISTINCT n.tenant_id, n.thread_id FROM new_rows AS n
    ON CONFLICT (tenant_id, thread_id) DO NOTHING;
    RETURN NULL;
END;
$$;

CREATE OR REPLACE TRIGGER generations_note_change
AFTER INSERT ON ember.generations
REFERENCING NEW TABLE AS new_rows
FOR EACH STATEMENT EXECUTE FUNCTION ember.generations_note_change();

-- A cursor's baseline is part of the read position (shadow_activate writes many at once).
CREATE OR REPLACE FUNCTION ember.shadow_cursors_note_progress()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    UPDATE ember.generation_progress AS p
    SET read_seq = n.baseline_seq
    FROM (
        SELECT c.tenant_id, c.generation_id, max(c.baseline_seq) AS baseline_seq
        FROM new_rows AS c GROUP BY c.tenant_id, c.generation_id
    ) AS n
    WHERE p.tenant_id = n.tenant_id AND p.generation_id = n.generation_id AND p.read_seq < n.baseline_seq;
    RETURN NULL;
END;
$$;

CREATE OR REPLACE TRIGGER shadow_cursors_note_progress
AFTER INSERT ON ember.shadow_cursors
REFERENCING NEW TABLE AS new_rows
FOR EACH STATEMENT EXECUTE FUNCTION ember.shadow_cursors_note_progress();

-- A completed run moves the read position of its generation to its through_seq. Then, if the
-- thread still has an ended generation with unread rows, the thread is offered again at once
-- (generation-ended): a claim reads one generation, and without this a thread with 30 unread
-- sessions would wait for 30 ticks. Only ended generations are re-offered; rows of the open one
-- wait for the turn boundary or idleness as always. Caller (submit_shadow_run) holds the thread.
CREATE OR REPLACE FUNCTION ember.shadow_runs_note_progress()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    UPDATE ember.generation_progress AS p
    SET read_seq = new.through_seq
    WHERE p.tenant_id = new.tenant_id AND p.generation_id = new.generation_id
        AND p.thread_id = new.thread_id AND p.read_seq < new.through_seq;
    IF EXISTS (
        SELECT 1
        FROM ember.generation_progress AS p
        INNER JOIN ember.generations AS g
            ON g.tenant_id = p.tenant_id AND g.id = p.generation_id AND g.thread_id = p.thread_id
        WHERE p.tenant_id = new.tenant_id AND p.thread_id = new.thread_id
            AND p.unread
            AND g.ended_at IS NOT NULL
    ) THEN
        PERFORM ember.shadow_memory_changed(
            new.tenant_id, new.thread_id, 'generation-ended', coalesce(new.finished_at, clock_timestamp())
        );
    END IF;
    RETURN NULL;
END;
$$;

CREATE OR REPLACE TRIGGER shadow_runs_note_progress
AFTER INSERT OR UPDATE OF status ON ember.shadow_runs
FOR EACH ROW
WHEN (new.status = 'completed')
EXECUTE FUNCTION ember.shadow_runs_note_progress();

-- Failure backoff state (shadow_backoff_until): a failed run, or one abandoned because its lease
-- lapsed, adds one to its generation's failures since the last completed run and moves
-- last_failed_at; a completed run resets both.
-- One run per thread runs at a time (shadow_runs_one_running), so runs finish in id order and
-- this matches counting the failed runs after the last completed one.
CREATE OR REPLACE FUNCTION ember.shadow_runs_note_failures()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    IF new.status = 'completed' THEN
        UPDATE ember.generation_progress AS p SET failures = 0, last_failed_at = NULL
        WHERE p.tenant_id = new.tenant_id AND p.generation_id = new.generation_id
            AND (p.failures <> 0 OR p.last_failed_at IS NOT NULL);
    ELSIF new.status = 'failed' OR (new.status = 'abandoned' AND new.error = 'lease expired') THEN
        UPDATE ember.generation_progress AS p SET
            failures = p.failures + 1,
            last_failed_at = CASE WHEN p.last_failed_at IS NULL OR new.finished_at > p.last_failed_at
                THEN new.finished_at ELSE p.last_failed_at END
        WHERE p.tenant_id = new.tenant_id AND p.generation_id = new.generation_id;
    END IF;
    RETURN NULL;
END;
$$;

CREATE OR REPLACE TRIGGER shadow_runs_note_failures
AFTER UPDATE OF status ON ember.shadow_runs
FOR EACH ROW
WHEN (new.status IN ('failed', 'completed', 'abandoned') AND new.status IS DISTINCT FROM old.status)
EXECUTE FUNCTION ember.shadow_runs_note_failures();

CREATE OR REPLACE TRIGGER shadow_runs_note_failures_new
AFTER INSERT ON ember.shadow_runs
FOR EACH ROW
WHEN (new.status IN ('failed', 'completed', 'abandoned'))
EXECUTE FUNCTION ember.shadow_runs_note_failures();

-- Digesting (steward_finish sets episode_id) takes rows out of their generation's undigested
-- count; a statement-level trigger, so a wake that digests 500 rows does one update per
-- generation. Rows only ever gain an episode_id.
CREATE OR REPLACE FUNCTION ember.messages_note_digested()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    UPDATE ember.generation_progress AS p SET undigested = greatest(p.undigested - d.n, 0)
    FROM (
        SELECT n.tenant_id, n.generation_id, count(*)::integer AS n
        FROM new_rows AS n
        INNER JOIN old_rows AS o ON o.tenant_id = n.tenant_id AND o.id = n.id
        WHERE o.episode_id IS NULL AND n.episode_id IS NOT NULL
        GROUP BY n.tenant_id, n.generation_id
    ) AS d
    WHERE p.tenant_id = d.tenant_id AND p.generation_id = d.generation_id;
    RETURN NULL;
END;
$$;

CREATE OR REPLACE TRIGGER messages_note_digested
AFTER UPDATE ON ember.messages
REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
FOR EACH STATEMENT EXECUTE FUNCTION ember.messages_note_digested();

-- A generation ending, and a thread sealed isolated, change what steward_has_work() may count.
CREATE OR REPLACE FUNCTION ember.generations_note_ended()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    UPDATE ember.generation_progress SET ended = new.ended_at IS NOT NULL
    WHERE tenant_id = new.tenant_id AND generation_id = new.id AND ended IS DISTINCT FROM (new.ended_at IS NOT NULL);
    RETURN NULL;
END;
$$;

CREATE OR REPLACE TRIGGER generations_note_ended
AFTER UPDATE OF ended_at ON ember.generations
FOR EACH ROW WHEN (new.ended_at IS DISTINCT FROM old.ended_at)
EXECUTE FUNCTION ember.generations_note_ended();

CREATE OR REPLACE FUNCTION ember.threads_note_steward_reads()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    UPDATE ember.generation_progress SET steward_reads = false
    WHERE tenant_id = new.tenant_id AND thread_id = new.id AND steward_reads;
    RETURN NULL;
END;
$$;

CREATE OR REPLACE TRIGGER threads_note_steward_reads
AFTER UPDATE OF seal_tier ON ember.threads
FOR EACH ROW WHEN (new.seal_tier = 'isolated' AND old.seal_tier IS DISTINCT FROM 'isolated')
EXECUTE FUNCTION ember.threads_note_steward_reads();
