-- Host API: how the agent runtime writes threads, generations and messages into Ember.
-- Each function validates its input and raises a named EM error (docs/errors.md) before it
-- writes anything, so a refused call leaves nothing half-written.

CREATE OR REPLACE FUNCTION ember.define_category(p_name text, p_description text DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql
AS $$
BEGIN
    IF p_name IS NULL OR p_name !~ '^[a-z][a-z0-9_-]*$' THEN
        RAISE EXCEPTION 'invalid category name "%"', p_name
            USING ERRCODE = 'EM012',
                  HINT = 'lower case letters, digits, "_" and "-", starting with a letter';
    END IF;
    INSERT INTO ember.categories (name, description) VALUES (p_name, p_description)
    ON CONFLICT (name) DO UPDATE SET description = coalesce(excluded.description, categories.description);
    RETURN p_name;
END;
$$;

-- Lock a thread row and return it; the lock serializes every write to one thread. With
-- p_append (append_message, append_messages), an archived thread is refused: it takes no new
-- messages. One call either way, so the hot path pays nothing for the check living here.
CREATE OR REPLACE FUNCTION ember.lock_thread(p_tenant text, p_thread text, p_append boolean DEFAULT FALSE)
RETURNS ember.threads
LANGUAGE plpgsql
AS $$
DECLARE
    t ember.threads;
BEGIN
    SELECT * INTO t FROM ember.threads WHERE tenant_id = p_tenant AND id = p_thread FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'unknown thread "%"', p_thread USING ERRCODE = 'EM001';
    END IF;
    IF p_append AND t.status = 'archived' THEN
        RAISE EXCEPTION 'thread "%" is archived: it takes no new messages', p_thread
            USING ERRCODE = 'EM007', HINT = 'set_thread_status(thread, ''active'') first';
    END IF;
    RETURN t;
END;
$$;

-- How a record of thread p_id (its kind, category and seal tier, as a file or a caller states
-- them) differs from the stored thread, by the rule that no write ever loosens who may read a
-- thread. NULL when the stored thread is what the record says, when the record is stricter only
-- in being isolated (the writer may seal the stored thread first: seal_thread), or when no such
-- thread is stored; otherwise why the record does not fit the stored thread. A category is fixed
-- when a thread is created (threads_category_fixed), so any other category is a difference,
-- more labels included: rows already stored carry the stored labels. The import refuses such a
-- record by line; create_thread names it in EM013's detail.
CREATE OR REPLACE FUNCTION ember.thread_record_conflict(
    p_tenant text, p_id text, p_kind text, p_category text, p_seal_tier text
)
RETURNS text
LANGUAGE sql STABLE
AS $$
    SELECT CASE
        WHEN t.kind IS DISTINCT FROM p_kind
            THEN format('thread "%s" is stored with kind %s, not %s', t.id, t.kind, coalesce(p_kind, 'none'))
        WHEN t.category IS DISTINCT FROM p_category
            THEN format('thread "%s" is stored with category %s, not %s: a category is fixed when a thread is created',
                        t.id, coalesce('"' || t.category || '"', 'none'), coalesce('"' || p_category || '"', 'none'))
        WHEN t.seal_tier = 'isolated' AND coalesce(p_seal_tier, 'open') <> 'isolated'
            THEN format('thread "%s" is stored isolated, not %s: isolation is never loosened', t.id,
                        coalesce(p_seal_tier, 'open'))
        WHEN t.seal_tier = 'open' AND p_seal_tier = 'isolated' AND t.kind = 'main'
            THEN format('thread "%s" is main, which is never isolated', t.id)
    END
    FROM ember.threads AS t
    WHERE t.tenant_id = p_tenant AND t.id = p_id
$$;

CREATE OR REPLACE FUNCTION ember.create_thread(
    p_tenant text,
    p_id text,
    p_kind text,
    p_title text DEFAULT NULL,
    p_category text DEFAULT NULL,
    p_seal_tier text DEFAULT 'open',
    p_model text DEFAULT NULL,
    p_now timestamptz DEFAULT clock_timestamp()
)
RETURNS text
LANGUAGE plpgsql
AS $$
BEGIN
    PERFORM ember.require_now(p_now);
    PERFORM ember.require_tenant(p_tenant);
    IF p_id IS NULL OR btrim(p_id) = '' THEN
        RAISE EXCEPTION 'a thread id must be a non-empty string' USING ERRCODE = 'EM012';
    END IF;
    -- Too long is said as such (EM012, with the limit) before the character rules (EM018).
    PERFORM ember.check_key_length('thread id', p_id);
    IF p_kind = 'steward' THEN
        RAISE EXCEPTION 'thread "%": the steward thread is created only by ensure_steward_thread()', p_id
            USING ERRCODE = 'EM002';
    END IF;
    IF p_id = 'memory-steward' OR p_id = 'human' THEN
        RAISE EXCEPTION 'thread id "%" is reserved%', p_id,
            CASE WHEN p_id = 'human' THEN ': it names the person as a viewer'
                 ELSE ' for the memory steward''s record' END
            USING ERRCODE = 'EM016',
                  HINT = CASE WHEN p_id = 'human' THEN 'choose another id'
                              ELSE 'ensure_steward_thread() creates it; choose another id' END;
    END IF;
    IF NOT ember.is_safe_thread_id(p_id) THEN
        RAISE EXCEPTION 'thread id % is not an identifier', to_json(p_id)
            USING ERRCODE = 'EM018',
                  HINT = 'a letter or digit, then letters, digits, "_", "-", ".", ":", "@" or "/"; 128 at most';
    END IF;
    IF p_kind IS NULL OR p_kind NOT IN ('main', 'side', 'task') THEN
        RAISE EXCEPTION 'thread "%": unknown kind "%"', p_id, p_kind
            USING ERRCODE = 'EM002', HINT = 'kinds: main, side, task';
    END IF;
    IF p_seal_tier IS NULL OR p_seal_tier NOT IN ('open', 'isolated') THEN
        RAISE EXCEPTION 'thread "%": unknown seal tier "%"', p_id, p_seal_tier
            USING ERRCODE = 'EM011', HINT = 'seal tiers: open, isolated';
    END IF;
    IF p_category IS NOT NULL
       AND NOT EXISTS (SELECT 1 FROM ember.categories WHERE name = p_category) THEN
        RAISE EXCEPTION 'thread "%": unknown category "%"', p_id, p_category
            USING ERRCODE = 'EM010', HINT = 'define it first with ember.define_category()';
    END IF;
    IF p_model IS NOT NULL AND NOT EXISTS (SELECT 1 FROM ember.models WHERE id = p_model) THEN
        RAISE EXCEPTION 'thread "%": unknown model "%"', p_id, p_model USING ERRCODE = 'EM009';
    END IF;
    IF EXISTS (SELECT 1 FROM ember.threads WHERE tenant_id = p_tenant AND id = p_id) THEN
        RAISE EXCEPTION 'thread "%" already exists', p_id USING ERRCODE = 'EM013',
            DETAIL = coalesce(ember.thread_record_conflict(p_tenant, p_id, p_kind, p_category, p_seal_tier),
                              'the stored thread has the kind, category and seal asked for');
    END IF;
    IF p_kind = 'main' AND EXISTS (SELECT 1 FROM ember.threads WHERE tenant_id = p_tenant AND kind = 'main') THEN
        RAISE EXCEPTION 'thread "%": a main thread already exists (%)', p_id,
            (SELECT id FROM ember.threads WHERE tenant_id = p_tenant AND kind = 'main')
            USING ERRCODE = 'EM006';
    END IF;

    INSERT INTO ember.threads (
        tenant_id, id, kind, title, category, seal_tier, model, created_at, status_changed_at
    ) VALUES (p_tenant, p_id, p_kind, p_title, p_category, p_seal_tier, p_model, p_now, p_now);
    PERFORM ember.open_generation(p_tenant, p_id, p_now);
    RETURN p_id;
EXCEPTION
    WHEN unique_violation THEN
        -- A concurrent create of the same id or a second main slipped past the checks above.
        RAISE EXCEPTION 'thread "%" conflicts with an existing thread (%)', p_id, SQLERRM
            USING ERRCODE = CASE WHEN p_kind = 'main' THEN 'EM006' ELSE 'EM013' END;
END;
$$;

-- Open the thread's next generation. The caller holds the thread's row lock (or has just created
-- the thread) and has ended any open generation.
CREATE OR REPLACE FUNCTION ember.open_generation(
    p_tenant text, p_thread text, p_now timestamptz DEFAULT clock_timestamp()
)
RETURNS uuid
LANGUAGE sql
AS $$
    INSERT INTO ember.generations (tenant_id, thread_id, ordinal, started_at)
    SELECT p_tenant, p_thread, coalesce(max(ordinal), 0) + 1, ember.require_now(p_now)
    FROM ember.generations WHERE tenant_id = p_tenant AND thread_id = p_thread
    RETURNING id
$$;

-- The thread's open generation, opening one when there is none (after an ended thread resumed,
-- or for a thread whose generation was closed by set_thread_status).
CREATE OR REPLACE FUNCTION ember.current_generation(
    p_tenant text, p_thread text, p_now timestamptz DEFAULT clock_timestamp()
)
RETURNS uuid
LANGUAGE plpgsql
AS $$
DECLARE
    g uuid;
BEGIN
    SELECT id INTO g FROM ember.generations
    WHERE tenant_id = p_tenant AND thread_id = p_thread AND ended_at IS NULL;
    IF g IS NULL THEN
        g := ember.open_generation(p_tenant, p_thread, p_now);
    END IF;
    RETURN g;
END;
$$;

CREATE OR REPLACE FUNCTION ember.start_generation(
    p_tenant text, p_thread text, p_now timestamptz DEFAULT clock_timestamp()
)
RETURNS uuid
LANGUAGE plpgsql
AS $$
DECLARE
    t ember.threads;
    g uuid;
BEGIN
    PERFORM ember.require_now(p_now);
    t := ember.lock_thread(p_tenant, p_thread);
    IF t.status = 'archived' THEN
        RAISE EXCEPTION 'thread "%" is archived: it takes no new generation', p_thread
            USING ERRCODE = 'EM007';
    END IF;
    -- Time runs forward: a generation starting before the one it follows would make "when" on a
    -- rendered page a lie, and its predecessor would end before it began. Refused by name
    -- rather than clamped, since the caller's clock is what is wrong.
    IF p_now < (SELECT max(g.started_at) FROM ember.generations AS g
                WHERE g.tenant_id = p_tenant AND g.thread_id = p_thread) THEN
        RAISE EXCEPTION 'thread "%": a generation cannot start at %, before the previous one started (%)',
            p_thread, p_now, (SELECT max(g.started_at) FROM ember.generations AS g
                              WHERE g.tenant_id = p_tenant AND g.thread_id = p_thread)
            USING ERRCODE = 'EM019', HINT = 'pass a time at or after the previous generation''s start';
    END IF;
    UPDATE ember.generations SET ended_at = p_now
    WHERE tenant_id = p_tenant AND thread_id = p_thread AND ended_at IS NULL;
    g := ember.open_generation(p_tenant, p_thread, p_now);
    -- The offer and its NOTIFY become visible only when this transaction commits, so shadow never
    -- reads a generation whose end could still roll back.
    PERFORM ember.shadow_memory_changed(p_tenant, p_thread, 'generation-ended', p_now);
    RETURN g;
END;
$$;

-- Its length: each refusal is one IF with its SQLSTATE, then one locked insert. It is the host's
-- hot path (B1): a helper for the checks would add a call to every append, for no shared rule.
CREATE OR REPLACE FUNCTION ember.append_message(
    p_tenant text,
    p_thread text,
    p_role text,
    p_content text,
    p_author text DEFAULT NULL,
    p_blocks json DEFAULT NULL,
    p_tool_call_id text DEFAULT NULL,
    p_tool_name text DEFAULT NULL,
    p_tool_status text DEFAULT NULL,
    p_from_thread text DEFAULT NULL,
    p_now timestamptz DEFAULT clock_timestamp()
)
RETURNS bigint
LANGUAGE plpgsql
AS $$
DECLARE
    t ember.threads;
    v_author text;
    v_generation uuid;
    v_id bigint;
BEGIN
    PERFORM ember.require_now(p_now);
    -- The steward's id is fixed (threads.steward_has_fixed_id): one comparison, no lookup.
    IF p_thread = 'memory-steward' THEN
        RAISE EXCEPTION 'thread "memory-steward": the memory steward''s record is written by the steward only'
            USING ERRCODE = 'EM027',
                  HINT = 'hosts write to main, side and task threads; the steward writes its own record';
    END IF;
    IF p_role IS NULL OR p_role NOT IN ('user', 'assistant', 'tool_result', 'event') THEN
        RAISE EXCEPTION 'thread "%": unknown role "%"', p_thread, p_role
            USING ERRCODE = 'EM003', HINT = 'roles: user, assistant, tool_result, event';
    END IF;
    v_author := coalesce(p_author, CASE p_role
        WHEN 'user' THEN 'human'
        WHEN 'assistant' THEN 'agent'
        ELSE 'system' END);
    IF v_author NOT IN ('human', 'agent', 'system', 'main') THEN
        RAISE EXCEPTION 'thread "%": unknown author "%"', p_thread, p_author
            USING ERRCODE = 'EM004', HINT = 'authors: human, agent, system, main';
    END IF;
    IF v_author = 'human' AND p_role <> 'user' THEN
        RAISE EXCEPTION 'thread "%": only user rows can have author human, not a row of role %', p_thread, p_role
            USING ERRCODE = 'EM004';
    END IF;
    IF p_tool_status IS NOT NULL AND p_role <> 'tool_result' THEN
        RAISE EXCEPTION 'thread "%": tool status "%" on a row of role %; only tool_result rows have one',
            p_thread, p_tool_status, p_role
            USING ERRCODE = 'EM008';
    END IF;
    IF p_role = 'tool_result' AND (p_tool_status IS NULL OR p_tool_status NOT IN ('ok', 'error', 'pending')) THEN
        RAISE EXCEPTION 'thread "%": a tool_result row needs tool status ok, error or pending, got %',
            p_thread, coalesce('"' || p_tool_status || '"', 'none')
            USING ERRCODE = 'EM008';
    END IF;
    IF p_content IS NULL THEN
        RAISE EXCEPTION 'thread "%": message content must not be null', p_thread
            USING ERRCODE = 'EM012';
    END IF;
    IF p_from_thread IS NOT NULL
       AND NOT EXISTS (SELECT 1 FROM ember.threads WHERE tenant_id = p_tenant AND id = p_from_thread) THEN
        RAISE EXCEPTION 'thread "%": unknown from_thread "%"', p_thread, p_from_thread
            USING ERRCODE = 'EM001';
    END IF;

    -- The row lock serializes appends to this thread, and seq is drawn under it: so within a
    -- thread seq order is commit order, and a reader that saw seq n has seen every earlier row
    -- of the thread (invariant 8). Drawing seq in a trigger would keep the same guarantee only
    -- if every writer also took this lock, which is exactly what this function is for.
    t := ember.lock_thread(p_tenant, p_thread, p_append => true);

    -- The one sanctioned insert: messages_arrival_guard (991_input_guards.sql) refuses others. A
    -- row of the thread's own stamps its generation's labels here ('labelled'), which spares the
    -- row trigger's call; a row from another thread is stamped by the trigger, which widens the
    -- generation first (020_labels.sql).
    v_generation := ember.current_generation(p_tenant, p_thread, p_now);
    IF p_from_thread IS NULL OR p_from_thread = p_thread THEN
        PERFORM set_config('ember.inserting_message', 'labelled', true);
        INSERT INTO ember.messages (
            tenant_id, seq, thread_id, generation_id, role, author, content, blocks,
            tool_call_id, tool_name, tool_status, from_thread, categories, created_at
        ) VALUES (
            p_tenant, nextval('ember.message_seq'), p_thread, v_generation,
            p_role, v_author, p_content, p_blocks,
            p_tool_call_id, p_tool_name, p_tool_status, p_from_thread,
            ember.generation_labels(v_generation), p_now
        )
        RETURNING id INTO v_id;
    ELSE
        PERFORM set_config('ember.inserting_message', 'on', true);
        INSERT INTO ember.messages (
            tenant_id, seq, thread_id, generation_id, role, author, content, blocks,
            tool_call_id, tool_name, tool_status, from_thread, created_at
        ) VALUES (
            p_tenant, nextval('ember.message_seq'), p_thread, v_generation,
            p_role, v_author, p_content, p_blocks,
            p_tool_call_id, p_tool_name, p_tool_status, p_from_thread, p_now
        )
        RETURNING id INTO v_id;
    END IF;
    PERFORM set_config('ember.inserting_message', '', true);
    RETURN v_id;
END;
$$;

CREATE OR REPLACE FUNCTION ember.set_thread_status(
    p_tenant text, p_thread text, p_status text, p_now timestamptz DEFAULT clock_timestamp()
)
RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
    t ember.threads;
BEGIN
    PERFORM ember.require_now(p_now);
    IF p_status IS NULL OR p_status NOT IN ('active', 'ended', 'archived') THEN
        RAISE EXCEPTION 'thread "%": unknown status "%"', p_thread, p_status
            USING ERRCODE = 'EM005', HINT = 'statuses: active, ended, archived';
    END IF;
    t := ember.lock_thread(p_tenant, p_thread);
    IF t.status = p_status THEN
        RETURN;
    END IF;
    UPDATE ember.threads SET status = p_status, status_changed_at = p_now
    WHERE tenant_id = p_tenant AND id = p_thread;
    PERFORM ember.shadow_memory_changed(p_tenant, p_thread, 'thread-' || p_status, p_now);
END;
$$;

-- The host's turn calls. They report what happened to the thread; shadow_memory_changed()
-- (040_shadow_signals.sql) decides what it means for shadow, and shadow_excluded() which threads
-- shadow never reads. Every body here is plpgsql, so this file may be applied before 040 defines
-- what they call (a SQL-language body is checked when it is created, a plpgsql one when it runs).

-- The thread's last real request and response, stored byte for byte (text: jsonb would reorder
-- keys and drop whitespace, and one changed byte is a cache miss). Returns false when the thread is
-- one shadow never reads (main, steward, isolated): nothing is stored for it at all.
--
-- model is the request's "model"; has_shadow_tool says whether the request's tools include
-- shadow_memory_propose (a replay cannot add it: a changed tools list misses the whole cache);
-- estimated_tokens is estimate_tokens() over the whole request text. That counts JSON syntax and
-- tool schemas too, so it overstates the prompt somewhat; it is compared with the model's minimum
-- cacheable length only to rule out prefixes that clearly are too short to be cached.
CREATE OR REPLACE FUNCTION ember.note_prefix(
    p_tenant text,
    p_thread text,
    p_request text,
    p_response text,
    p_request_started_at timestamptz DEFAULT clock_timestamp(),
    p_now timestamptz DEFAULT clock_timestamp()
)
RETURNS boolean
LANGUAGE plpgsql
AS $$
DECLARE
    v_request json;
BEGIN
    PERFORM ember.require_now(p_now);
    PERFORM ember.lock_thread(p_tenant, p_thread);
    IF ember.shadow_excluded(p_tenant, p_thread) THEN
        RETURN false;
    END IF;
    IF p_request IS NULL OR p_response IS NULL OR p_request_started_at IS NULL THEN
        RAISE EXCEPTION 'thread "%": a prefix needs a request, a response and a start time', p_thread
            USING ERRCODE = 'EM032';
    END IF;
    BEGIN
        v_request := p_request::json;
        PERFORM p_response::json;
    EXCEPTION WHEN invalid_text_representation OR statement_too_complex THEN
        -- statement_too_complex (54001): JSON nested deeper than the parser's stack allows.
        RAISE EXCEPTION 'thread "%": a prefix request and response must be JSON text', p_thread
            USING ERRCODE = 'EM032', DETAIL = SQLERRM;
    END;
    IF json_typeof(v_request) <> 'object' THEN
        RAISE EXCEPTION 'thread "%": a prefix request must be a JSON object, got %',
            p_thread, json_typeof(v_request)
            USING ERRCODE = 'EM032';
    END IF;

    INSERT INTO ember.shadow_prefixes AS p (
        tenant_id, thread_id, generation_id, request, response, model, request_started_at,
        has_shadow_tool, estimated_tokens, noted_at
    ) VALUES (
        p_tenant,
        p_thread,
        ember.current_generation(p_tenant, p_thread, p_now),
        p_request,
        p_response,
        v_request ->> 'model',
        p_request_started_at,
        coalesce(json_typeof(v_request -> 'tools') = 'array' AND EXISTS (
            SELECT 1 FROM json_array_elements(v_request -> 'tools') AS tool
            WHERE json_typeof(tool) = 'object' AND tool ->> 'name' = 'shadow_memory_propose'
        ), false),
        ember.estimate_tokens(p_request),
        p_now
    )
    ON CONFLICT (tenant_id, thread_id) DO UPDATE SET
        generation_id = excluded.generation_id,
        request = excluded.request,
        response = excluded.response,
        model = excluded.model,
        request_started_at = excluded.request_started_at,
        has_shadow_tool = excluded.has_shadow_tool,
        estimated_tokens = excluded.estimated_tokens,
        noted_at = excluded.noted_at;

    INSERT INTO ember.shadow_thread_state AS s (tenant_id, thread_id, last_activity_at)
    VALUES (p_tenant, p_thread, p_now)
    ON CONFLICT (tenant_id, thread_id) DO UPDATE SET last_activity_at = greatest(s.last_activity_at, p_now);
    RETURN true;
END;
$$;

-- A turn began: until it ends, offers wait for the boundary (unless the turn blocks on the user).
CREATE OR REPLACE FUNCTION ember.turn_started(
    p_tenant text, p_thread text, p_now timestamptz DEFAULT clock_timestamp()
)
RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
    PERFORM ember.require_now(p_now);
    PERFORM ember.lock_thread(p_tenant, p_thread);
    IF ember.shadow_excluded(p_tenant, p_thread) THEN
        RETURN;
    END IF;
    INSERT INTO ember.shadow_thread_state AS s (tenant_id, thread_id, turn_running, waiting_user, last_activity_at)
    VALUES (p_tenant, p_thread, true, false, p_now)
    ON CONFLICT (tenant_id, thread_id) DO UPDATE SET
        turn_running = true,
        waiting_user = false,
        last_activity_at = greatest(s.last_activity_at, p_now);
END;
$$;

-- A turn ended: normally (turn-boundary, which only drains) or with a failure (turn-failed, an
-- offer of its own: a failed turn may have left a half-done state worth recording).
CREATE OR REPLACE FUNCTION ember.turn_ended(
    p_tenant text, p_thread text, p_ok boolean, p_now timestamptz DEFAULT clock_timestamp()
)
RETURNS text
LANGUAGE plpgsql
AS $$
BEGIN
    IF p_ok IS NULL THEN
        -- Guessing "failed" would signal a failure that may not have happened.
        RAISE EXCEPTION 'turn_ended: thread "%": p_ok must say whether the turn succeeded, not NULL', p_thread
            USING ERRCODE = 'EM012';
    END IF;
    RETURN ember.shadow_memory_changed(
        p_tenant, p_thread, CASE WHEN p_ok THEN 'turn-boundary' ELSE 'turn-failed' END, p_now
    );
END;
$$;

CREATE OR REPLACE FUNCTION ember.waiting_for_user(
    p_tenant text, p_thread text, p_now timestamptz DEFAULT clock_timestamp()
)
RETURNS text
LANGUAGE plpgsql
AS $$
BEGIN
    RETURN ember.shadow_memory_changed(p_tenant, p_thread, 'waiting-user', p_now);
END;
$$;

-- A task's result reached the thread that dispatched it; the offer is on the task thread itself.
CREATE OR REPLACE FUNCTION ember.task_ended(
    p_tenant text, p_thread text, p_now timestamptz DEFAULT clock_timestamp()
)
RETURNS text
LANGUAGE plpgsql
AS $$
BEGIN
    RETURN ember.shadow_memory_changed(p_tenant, p_thread, 'task-ended', p_now);
END;
$$;
