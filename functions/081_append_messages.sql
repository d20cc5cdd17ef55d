-- append_messages(): many rows into one thread in one call, under the same rules as
-- append_message (functions/015_host.sql). Each element of p_rows is an object with the keys
-- of append_message's parameters without the p_ prefix: role, content, author, blocks,
-- tool_call_id, tool_name, tool_status, from_thread, and created_at (that row's p_now; the
-- call's p_now when absent). Returns the new ids in the order of p_rows.
--
-- p_rows is json, not jsonb: a row's blocks are the provider's raw content blocks and are
-- stored byte for byte, as append_message stores its json argument; jsonb would reorder their
-- keys and drop their whitespace before they reach the table.
--
-- Every row is validated first, in one pass, and the first bad row (by index, counted from 0)
-- refuses the whole call with the same SQLSTATE append_message raises for it, naming rows[i];
-- nothing is written. Then the thread row is locked, as append_message locks it, and all rows
-- are inserted by one INSERT ... SELECT in p_rows order, seq drawn under the lock: within the
-- thread seq order is commit order (invariant 8), and the rows are contiguous in the thread.
-- The row triggers that decide labels, flow and cancellation fire for each row as they do for
-- a single append, and the write-path state (080_write_state.sql) is updated once per call.
--
-- A row from another thread widens its generation's labels in its own insert trigger
-- (functions/020_labels.sql), so the rows after it in the same statement carry what it brought,
-- exactly as with one append_message call per row.

-- check_carrier_flow's refusal as a value: its message, or NULL when the flow is allowed.
CREATE OR REPLACE FUNCTION ember.carrier_flow_error(p_tenant text, p_from text, p_to text)
RETURNS text
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    PERFORM ember.check_carrier_flow(p_tenant, p_from, p_to);
    RETURN NULL;
EXCEPTION WHEN SQLSTATE 'EM024' THEN
    RETURN SQLERRM;
END;
$$;

-- The staging table of a bulk write (append_messages, import): one row per message to write,
-- in the session's temporary schema, emptied for each use and dropped at commit.
CREATE OR REPLACE FUNCTION ember.staged_rows_reset()
RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
    IF to_regclass('pg_temp.staged_rows') IS NULL THEN
        CREATE TEMP TABLE staged_rows (
            idx integer NOT NULL,
            tenant_id text,
            thread_id text,
            generation_id uuid,
            role text,
            author text,
            content text,
            blocks json,
            tool_call_id text,
            tool_name text,
            tool_status text,
            from_thread text,
            created_at timestamptz,
            error_code text,
            error text
        ) ON COMMIT DROP;
    END IF;
    TRUNCATE staged_rows;
END;
$$;

-- append_message's checks, in its order, for every staged row at once: the first failing check
-- of each row sets its error_code (append_message's SQLSTATE for it) and error. One UPDATE over
-- the set rather than a function call per row. Rows that already have an error keep it.
CREATE OR REPLACE FUNCTION ember.staged_rows_check()
RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
    -- The limits are read once for the statement (pgtap/081_append_messages_cost.sql).
    v_max_bytes constant integer := ember.setting_int('max_message_bytes');
    v_max_key constant integer := ember.setting_int('max_key_chars');
BEGIN
    UPDATE staged_rows AS a SET (error_code, error) = (
        SELECT c.code, c.msg FROM (VALUES
            (0, 'EM027', CASE WHEN a.thread_id = 'memory-steward'
                THEN 'the memory steward''s record is written by the steward only' END),
            (1, 'EM003', CASE WHEN a.role IS NULL OR a.role NOT IN ('user', 'assistant', 'tool_result', 'event')
                THEN format('unknown role %s', coalesce('"' || a.role || '"', 'NULL')) END),
            (2, 'EM004', CASE WHEN a.author NOT IN ('human', 'agent', 'system', 'main')
                THEN format('unknown author "%s"', a.author) END),
            (3, 'EM004', CASE WHEN a.author = 'human' AND a.role <> 'user'
                THEN format('a %s row cannot have author human', a.role) END),
            (4, 'EM008', CASE WHEN a.tool_status IS NOT NULL AND a.role <> 'tool_result'
                THEN format('tool status "%s" on a %s row; only tool_result rows have one', a.tool_status, a.role) END),
            (5, 'EM008', CASE WHEN a.role = 'tool_result'
                    AND (a.tool_status IS NULL OR a.tool_status NOT IN ('ok', 'error', 'pending'))
                THEN format('a tool_result row needs tool status ok, error or pending, got %s',
                    coalesce('"' || a.tool_status || '"', 'none')) END),
            (6, 'EM012', CASE WHEN a.content IS NULL THEN 'message content must not be null' END),
            (6, 'EM090', CASE WHEN octet_length(a.content) > v_max_bytes
                THEN format('content is %s bytes; the limit is %s (setting max_message_bytes)',
                            octet_length(a.content), v_max_bytes) END),
            (6, 'EM012', CASE WHEN length(a.tool_call_id) > v_max_key OR length(a.tool_name) > v_max_key
                THEN format('tool call id or tool name is longer than %s characters (setting max_key_chars)',
                            v_max_key) END),
            (7, 'EM001', CASE WHEN a.from_thread IS NOT NULL
                    AND NOT EXISTS (SELECT 1 FROM ember.threads AS x WHERE x.tenant_id = a.tenant_id AND x.id = a.from_thread)
                THEN format('unknown from_thread "%s"', a.from_thread) END),
            (8, 'EM027', CASE WHEN a.from_thread = 'memory-steward'
                THEN 'a row from the memory steward''s record: it is never copied, forked or quoted' END),
            -- The flow rules the messages_carrier_flow trigger enforces, asked here first so that
            -- the refusal names the row.
            (9, 'EM028', CASE WHEN a.from_thread IS NOT NULL AND a.from_thread <> a.thread_id
                    AND EXISTS (SELECT 1 FROM ember.threads AS x WHERE x.tenant_id = a.tenant_id AND x.id = a.from_thread)
                    AND ember.is_isolated(a.tenant_id, a.from_thread) AND NOT ember.is_isolated(a.tenant_id, a.thread_id)
                THEN format('a row from isolated thread "%s" goes only to an isolated thread', a.from_thread) END),
            (10, 'EM024', CASE WHEN a.from_thread IS NOT NULL AND a.from_thread <> a.thread_id
                    AND EXISTS (SELECT 1 FROM ember.threads AS x WHERE x.tenant_id = a.tenant_id AND x.id = a.from_thread)
                    AND EXISTS (SELECT 1 FROM ember.threads AS x WHERE x.tenant_id = a.tenant_id AND x.id = a.thread_id)
                THEN ember.carrier_flow_error(a.tenant_id, a.from_thread, a.thread_id) END),
            (11, 'EM018', CASE WHEN a.tool_name IS NOT NULL AND NOT ember.is_safe_tool_name(a.tool_name)
                THEN format('tool name %s is not an identifier', to_json(a.tool_name)) END),
            (12, 'EM012', CASE WHEN NOT ember.time_accepted(a.created_at)
                THEN format('created_at %s is outside the times Ember accepts (finite, from 1970 up to the end of 2199)',
                            a.created_at) END)
        ) AS c (ord, code, msg)
        WHERE c.msg IS NOT NULL
        ORDER BY c.ord
        LIMIT 1
    )
    -- Only rows a cheap test cannot clear are put through the list: a plain row (known role
    -- and author, consistent tool status, content, no from_thread) passes every check.
    WHERE a.error_code IS NULL AND NOT coalesce(
        a.role IN ('user', 'assistant', 'tool_result', 'event')
        AND a.author IN ('human', 'agent', 'system', 'main')
        AND (a.author <> 'human' OR a.role = 'user')
        AND (a.role = 'tool_result') = (a.tool_status IS NOT NULL)
        AND (a.tool_status IS NULL OR a.tool_status IN ('ok', 'error', 'pending'))
        AND a.content IS NOT NULL
        AND octet_length(a.content) <= v_max_bytes
        AND greatest(length(a.tool_call_id), length(a.tool_name), 0) <= v_max_key
        AND a.from_thread IS NULL
        AND a.thread_id <> 'memory-steward'
        AND ember.time_accepted(a.created_at)
        AND (a.tool_name IS NULL OR ember.is_safe_tool_name(a.tool_name)),
        false
    );
END;
$$;

-- Its length: staging, the shared checks (staged_rows_check) and one insert; the host's batch hot
-- path (B1), where every statement runs once per call and none per row.
CREATE OR REPLACE FUNCTION ember.append_messages(
    p_tenant text,
    p_thread text,
    p_rows json,
    p_now timestamptz DEFAULT clock_timestamp()
)
RETURNS bigint[]
LANGUAGE plpgsql
AS $$
DECLARE
    t ember.threads;
    bad record;
    v_generation uuid;
    v_labels text[];
    v_ids bigint[];
BEGIN
    PERFORM ember.require_now(p_now);
    IF p_thread = 'memory-steward' THEN
        RAISE EXCEPTION 'thread "memory-steward": the memory steward''s record is written by the steward only'
            USING ERRCODE = 'EM027',
                  HINT = 'hosts write to main, side and task threads; the steward writes its own record';
    END IF;
    IF p_rows IS NULL OR json_typeof(p_rows) <> 'array' THEN
        RAISE EXCEPTION 'thread "%": rows must be a JSON array of objects, got %',
            p_thread, coalesce(json_typeof(p_rows), 'NULL')
            USING ERRCODE = 'EM055';
    END IF;

    PERFORM ember.staged_rows_reset();

    -- Shape first: every element an object with known keys of the right JSON types.
    SELECT e.idx - 1 AS idx, e.value, (
        CASE
            WHEN json_typeof(e.value) <> 'object' THEN 'is ' || json_typeof(e.value) || ', not an object'
            ELSE (
                SELECT string_agg(format('unknown key "%s"', k), ', ' ORDER BY k)
                FROM json_object_keys(e.value) AS k
                WHERE k NOT IN (
                    'role', 'content', 'author', 'blocks', 'tool_call_id', 'tool_name',
                    'tool_status', 'from_thread', 'created_at'
                )
            )
        END
    ) AS problem
    INTO bad
    FROM json_array_elements(p_rows) WITH ORDINALITY AS e (value, idx)
    WHERE json_typeof(e.value) <> 'object'
        OR EXISTS (
            SELECT 1 FROM json_object_keys(e.value) AS k
            WHERE k NOT IN (
                'role', 'content', 'author', 'blocks', 'tool_call_id', 'tool_name',
                'tool_status', 'from_thread', 'created_at'
            )
        )
        OR EXISTS (
            SELECT 1 FROM json_each(e.value) AS f
            WHERE f.key <> 'blocks' AND json_typeof(f.value) NOT IN ('string', 'null')
        )
    ORDER BY e.idx
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'thread "%": rows[%]: %', p_thread, bad.idx,
            coalesce(bad.problem, 'has a non-string value; every field but blocks is a string or null')
            USING ERRCODE = 'EM055',
                  HINT = 'keys: role, content, author, blocks, tool_call_id, tool_name, tool_status, '
                      || 'from_thread, created_at';
    END IF;

    BEGIN
        INSERT INTO staged_rows (
            idx, tenant_id, thread_id, role, author, content, blocks, tool_call_id, tool_name, tool_status,
            from_thread, created_at
        )
        SELECT
            e.idx - 1,
            p_tenant,
            p_thread,
            e.value ->> 'role',
            coalesce(e.value ->> 'author', CASE e.value ->> 'role'
                WHEN 'user' THEN 'human'
                WHEN 'assistant' THEN 'agent'
                ELSE 'system' END),
            e.value ->> 'content',
            CASE WHEN json_typeof(e.value -> 'blocks') <> 'null' THEN e.value -> 'blocks' END,
            e.value ->> 'tool_call_id',
            e.value ->> 'tool_name',
            e.value ->> 'tool_status',
            e.value ->> 'from_thread',
            coalesce((e.value ->> 'created_at')::timestamptz, p_now)
        FROM json_array_elements(p_rows) WITH ORDINALITY AS e (value, idx);
    EXCEPTION WHEN invalid_datetime_format OR datetime_field_overflow THEN
        FOR bad IN
            SELECT e.idx - 1 AS idx, e.value ->> 'created_at' AS v
            FROM json_array_elements(p_rows) WITH ORDINALITY AS e (value, idx)
            WHERE e.value ->> 'created_at' IS NOT NULL
            ORDER BY e.idx
        LOOP
            BEGIN
                PERFORM bad.v::timestamptz;
            EXCEPTION WHEN invalid_datetime_format OR datetime_field_overflow THEN
                RAISE EXCEPTION 'thread "%": rows[%]: created_at "%" is not a timestamp',
                    p_thread, bad.idx, bad.v
                    USING ERRCODE = 'EM055';
            END;
        END LOOP;
        RAISE;
    END;

    PERFORM ember.staged_rows_check();
    SELECT a.idx, a.error_code, a.error INTO bad
    FROM staged_rows AS a WHERE a.error_code IS NOT NULL ORDER BY a.idx LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'thread "%": rows[%]: %', p_thread, bad.idx, bad.error
            USING ERRCODE = bad.error_code;
    END IF;

    -- The same lock append_message takes: appends to one thread are serialized.
    t := ember.lock_thread(p_tenant, p_thread, p_append => true);
    IF NOT EXISTS (SELECT 1 FROM staged_rows) THEN
        RETURN '{}';
    END IF;
    v_generation := ember.current_generation(p_tenant, p_thread, p_now);

    -- nextval() is evaluated after the sort (a volatile target is computed above the Sort
    -- node), so seq follows the index order of p_rows. A sanctioned insert of the host API:
    -- messages_arrival_guard (991_input_guards.sql) refuses unmarked ones.
    -- Rows of the thread's own all carry the generation's labels, looked up once ('labelled':
    -- no row of the statement can widen them); a row from another thread leaves the stamping
    -- to the row trigger, for every row after it too (020_labels.sql).
    IF EXISTS (SELECT 1 FROM staged_rows AS a WHERE a.from_thread <> p_thread) THEN
        PERFORM set_config('ember.inserting_message', 'on', true);
    ELSE
        PERFORM set_config('ember.inserting_message', 'labelled', true);
        v_labels := ember.generation_labels(v_generation);
    END IF;
    WITH ins AS (
        INSERT INTO ember.messages (
            tenant_id, seq, thread_id, generation_id, role, author, content, blocks,
            tool_call_id, tool_name, tool_status, from_thread, categories, created_at
        )
        SELECT
            p_tenant, nextval('ember.message_seq'), p_thread, v_generation, a.role, a.author, a.content,
            a.blocks, a.tool_call_id, a.tool_name, a.tool_status, a.from_thread,
            coalesce(v_labels, '{}'), a.created_at
        FROM staged_rows AS a
        ORDER BY a.idx
        RETURNING id, seq
    )
    SELECT array_agg(ins.id ORDER BY ins.seq) INTO v_ids FROM ins;
    PERFORM set_config('ember.inserting_message', '', true);
    RETURN v_ids;
END;
$$;
