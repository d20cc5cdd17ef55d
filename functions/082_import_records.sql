-- The record types of an import file (docs/import-format.md) and what makes one malformed;
-- import_staged() (functions/083_import.sql) uses them for every line.

-- Whether text is valid input for a type, without raising. PostgreSQL 16 added a function for
-- this; Ember runs on 15 as well, so each check is a cast inside an exception block, which
-- catches the data exceptions (class 22) that input functions raise for bad text. The block
-- costs a subtransaction per call, a few microseconds against the parse itself; one code path on
-- every server version was chosen over a version switch that the tests would exercise on only
-- one branch.
CREATE OR REPLACE FUNCTION ember.text_is_timestamptz(p_text text)
RETURNS boolean
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    PERFORM p_text::timestamptz;
    RETURN true;
EXCEPTION WHEN data_exception THEN
    RETURN false;
END;
$$;

CREATE OR REPLACE FUNCTION ember.text_is_json(p_text text)
RETURNS boolean
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
    PERFORM p_text::json;
    RETURN true;
EXCEPTION WHEN data_exception THEN
    RETURN false;
END;
$$;

-- The parsed document, or NULL when the text is not JSON that jsonb accepts (jsonb also refuses
-- the escape of character zero, which json lets through). Parsing once and returning the value
-- saves the second parse that a check followed by a cast would do.
CREATE OR REPLACE FUNCTION ember.text_to_jsonb_or_null(p_text text)
RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
    RETURN p_text::jsonb;
EXCEPTION WHEN data_exception THEN
    RETURN NULL;
END;
$$;

-- The JSON type of each field per record type: s string, S string or null, n number.
CREATE OR REPLACE FUNCTION ember.import_fields(p_type text)
RETURNS TABLE (field text, kind text, required boolean)
LANGUAGE sql IMMUTABLE
AS $$
    SELECT f.field, f.kind, f.required
    FROM (VALUES
        ('thread', 'type', 's', true), ('thread', 'id', 's', true), ('thread', 'kind', 's', true),
        ('thread', 'title', 'S', false), ('thread', 'category', 'S', false),
        ('thread', 'seal_tier', 'S', false), ('thread', 'model', 'S', false),
        ('thread', 'status', 'S', false), ('thread', 'created_at', 's', true),
        ('generation', 'type', 's', true), ('generation', 'thread', 's', true),
        ('generation', 'ordinal', 'n', true), ('generation', 'started_at', 's', true),
        ('generation', 'ended_at', 'S', false),
        ('message', 'type', 's', true), ('message', 'thread', 's', true),
        ('message', 'generation', 'n', true), ('message', 'role', 's', true),
        ('message', 'author', 'S', false), ('message', 'content', 's', true),
        ('message', 'blocks', 'S', false), ('message', 'tool_call_id', 'S', false),
        ('message', 'tool_name', 'S', false), ('message', 'tool_status', 'S', false),
        ('message', 'from_thread', 'S', false), ('message', 'created_at', 's', true)
    ) AS f (type, field, kind, required)
    WHERE f.type = p_type
$$;

-- Why a record's fields are malformed (unknown, missing, wrong JSON type, bad timestamp or
-- number), or NULL.
CREATE OR REPLACE FUNCTION ember.import_record_error(p_type text, p_record jsonb)
RETURNS text
LANGUAGE sql STABLE
AS $$
    SELECT coalesce(
        (SELECT format('unknown field "%s" in a %s record', k, p_type)
         FROM jsonb_object_keys(p_record) AS k
         WHERE k NOT IN (SELECT f.field FROM ember.import_fields(p_type) AS f)
         ORDER BY k LIMIT 1),
        (SELECT format('a %s record needs "%s"', p_type, f.field)
         FROM ember.import_fields(p_type) AS f
         WHERE f.required AND coalesce(jsonb_typeof(p_record -> f.field), 'null') = 'null'
         LIMIT 1),
        (SELECT format('"%s" must be %s, not %s', f.field,
                CASE f.kind WHEN 'n' THEN 'a whole number' ELSE 'a string' END
                || CASE WHEN f.kind = 'S' THEN ' or null' ELSE '' END,
                jsonb_typeof(p_record -> f.field))
         FROM ember.import_fields(p_type) AS f
         WHERE p_record -> f.field IS NOT NULL AND jsonb_typeof(p_record -> f.field) <> 'null'
             AND jsonb_typeof(p_record -> f.field) <> CASE f.kind WHEN 'n' THEN 'number' ELSE 'string' END
         LIMIT 1),
        (SELECT format('"%s" is not a whole number: %s', f.field, p_record ->> f.field)
         FROM ember.import_fields(p_type) AS f
         WHERE f.kind = 'n' AND jsonb_typeof(p_record -> f.field) = 'number'
             AND NOT (p_record ->> f.field ~ '^[0-9]{1,9}$')
         LIMIT 1),
        (SELECT CASE WHEN ember.text_is_timestamptz(v.t)
                THEN format('"%s" %s is outside the times Ember accepts (finite, from 1970 up to the end of 2199)',
                            f.field, v.t)
                ELSE format('"%s" is not a timestamp: %s', f.field, v.t) END
         FROM ember.import_fields(p_type) AS f
         CROSS JOIN LATERAL (SELECT p_record ->> f.field AS t) AS v
         WHERE f.field IN ('created_at', 'started_at', 'ended_at')
             AND jsonb_typeof(p_record -> f.field) = 'string'
             AND CASE WHEN ember.text_is_timestamptz(v.t) THEN NOT ember.time_accepted(v.t::timestamptz) ELSE true END
         LIMIT 1),
        (SELECT '"blocks" must hold JSON text'
         WHERE p_type = 'message' AND jsonb_typeof(p_record -> 'blocks') = 'string'
             AND NOT ember.text_is_json(p_record ->> 'blocks'))
    )
$$;

-- The common case answered cheaply: a well-formed message record (no unknown field, every
-- field of its JSON type, a parsable time and blocks). Lines it cannot clear, and the few thread
-- and generation lines, go to import_record_error for the reason.
CREATE OR REPLACE FUNCTION ember.import_message_ok(p_record jsonb)
RETURNS boolean
LANGUAGE sql STABLE
AS $$
    SELECT coalesce(
        (p_record - ARRAY[
            'type', 'thread', 'generation', 'role', 'author', 'content', 'blocks',
            'tool_call_id', 'tool_name', 'tool_status', 'from_thread', 'created_at'
        ]) = '{}'::jsonb
        AND jsonb_typeof(p_record -> 'thread') = 'string'
        AND jsonb_typeof(p_record -> 'generation') = 'number'
        AND p_record ->> 'generation' ~ '^[0-9]{1,9}$'
        AND jsonb_typeof(p_record -> 'role') = 'string'
        AND jsonb_typeof(p_record -> 'content') = 'string'
        AND jsonb_typeof(p_record -> 'created_at') = 'string'
        AND coalesce(jsonb_typeof(p_record -> 'author'), 'null') IN ('string', 'null')
        AND coalesce(jsonb_typeof(p_record -> 'blocks'), 'null') IN ('string', 'null')
        AND coalesce(jsonb_typeof(p_record -> 'tool_call_id'), 'null') IN ('string', 'null')
        AND coalesce(jsonb_typeof(p_record -> 'tool_name'), 'null') IN ('string', 'null')
        AND coalesce(jsonb_typeof(p_record -> 'tool_status'), 'null') IN ('string', 'null')
        AND coalesce(jsonb_typeof(p_record -> 'from_thread'), 'null') IN ('string', 'null')
        AND ember.text_is_timestamptz(p_record ->> 'created_at')
        AND (jsonb_typeof(p_record -> 'blocks') IS DISTINCT FROM 'string'
            OR ember.text_is_json(p_record ->> 'blocks')),
        false
    )
$$;
