-- Fact export (issue 17): the records `ember export --facts` writes after its header line, one
-- per fact in id order, in the family of the thread export (docs/export-facts.md). A pointer
-- names its row portably, by thread, generation ordinal and position in that generation (the
-- ids of another database differ), and locally by id. A forgotten fact is exported with its
-- history and a NULL text: the export never holds erased text, because nothing does.

CREATE OR REPLACE FUNCTION ember.export_time_utc(p_at timestamptz)
RETURNS text
LANGUAGE sql IMMUTABLE
AS $$
    SELECT to_char(p_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
$$;

CREATE OR REPLACE FUNCTION ember.export_fact_records()
RETURNS TABLE (record jsonb)
LANGUAGE sql STABLE
AS $$
    SELECT jsonb_build_object(
        'type', 'fact',
        'id', f.id,
        'text', f.text,
        'status', f.status,
        'evidence_kind', f.evidence_kind,
        'categories', to_jsonb(f.categories),
        'merged_into', f.merged_into,
        'retired_reason', f.retired_reason,
        'run', f.run_id,
        'created_at', ember.export_time_utc(f.created_at),
        'updated_at', ember.export_time_utc(f.updated_at),
        'evidence', coalesce((
            SELECT jsonb_agg(
                CASE WHEN e.message_id IS NOT NULL THEN jsonb_build_object(
                    'message_id', m.id, 'thread', m.thread_id, 'generation', g.ordinal,
                    'position', (SELECT count(*) FROM ember.messages AS x
                                 WHERE x.generation_id = m.generation_id AND x.seq <= m.seq)
                ) ELSE jsonb_build_object(
                    'generation_id', eg.id, 'thread', eg.thread_id, 'generation', eg.ordinal
                ) END
                ORDER BY e.ordinal)
            FROM ember.fact_evidence AS e
            LEFT JOIN ember.messages AS m ON m.id = e.message_id
            LEFT JOIN ember.generations AS g ON g.id = m.generation_id
            LEFT JOIN ember.generations AS eg ON eg.id = e.generation_id
            WHERE e.fact_id = f.id
        ), '[]'),
        'history', coalesce((
            SELECT jsonb_agg(jsonb_build_object(
                'at', ember.export_time_utc(h.at), 'change', h.change, 'status', h.status,
                'merged_into', h.merged_into, 'retired_reason', h.retired_reason,
                'evidence_removed', h.evidence_removed, 'run', h.run_id,
                'forgetting', h.forgetting_id,
                'forgetting_reason', fg.reason
            ) ORDER BY h.at, h.id)
            FROM ember.fact_history AS h
            LEFT JOIN ember.forgettings AS fg ON fg.id = h.forgetting_id
            WHERE h.fact_id = f.id
        ), '[]')
    )
    FROM ember.facts AS f
    ORDER BY f.id
$$;
