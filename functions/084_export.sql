-- Export (docs/import-format.md): the records ember export writes, in file order.

-- Times as export writes them: UTC, microseconds, a Z.
CREATE OR REPLACE FUNCTION ember.export_time(p_at timestamptz)
RETURNS text
LANGUAGE sql IMMUTABLE
AS $$
    SELECT to_char(p_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
$$;

-- The records of an export, in the order a file has them: threads (by creation, then id),
-- their generations, then every message in seq order. The steward's record is not exported:
-- it is written by the steward, not through the host API, and is rebuilt by it. The caller
-- serializes each record as one line (worker/ember/transfer.py); blocks stay raw JSON text.
CREATE OR REPLACE FUNCTION ember.export_records()
RETURNS TABLE (record jsonb)
LANGUAGE sql STABLE
AS $$
    WITH t AS (
        SELECT
            th.*,
            row_number() OVER (ORDER BY th.created_at, th.id) AS position
        FROM ember.threads AS th
        WHERE NOT ember.is_steward_thread(th.id)
    )

    SELECT x.record FROM (
        SELECT 1 AS part, t.position, 0 AS ordinal, 0::bigint AS seq, jsonb_build_object(
            'type', 'thread', 'id', t.id, 'kind', t.kind, 'title', t.title, 'category', t.category,
            'seal_tier', t.seal_tier, 'model', t.model, 'status', t.status,
            'created_at', ember.export_time(t.created_at)
        ) AS record
        FROM t
        UNION ALL
        SELECT 2, t.position, g.ordinal, 0, jsonb_build_object(
            'type', 'generation', 'thread', g.thread_id, 'ordinal', g.ordinal,
            'started_at', ember.export_time(g.started_at), 'ended_at', ember.export_time(g.ended_at)
        )
        FROM ember.generations AS g
        INNER JOIN t ON t.id = g.thread_id
        UNION ALL
        SELECT 3, 0, 0, m.seq, jsonb_build_object(
            'type', 'message', 'thread', m.thread_id, 'generation', g.ordinal, 'role', m.role,
            'author', m.author, 'content', m.content, 'blocks', m.blocks::text,
            'tool_call_id', m.tool_call_id, 'tool_name', m.tool_name, 'tool_status', m.tool_status,
            'from_thread', m.from_thread, 'created_at', ember.export_time(m.created_at)
        )
        FROM ember.messages AS m
        INNER JOIN ember.generations AS g ON g.id = m.generation_id
        WHERE NOT ember.is_steward_thread(m.thread_id)
    ) AS x
    ORDER BY x.part, x.position, x.ordinal, x.seq
$$;
