-- Guards on input and on how rows arrive, each its own trigger with its own name, so they sit
-- beside the triggers other files put on the same tables (e.g. message immutability).

-- Text keys: a documented limit (setting max_key_chars) and a message that names the field,
-- instead of PostgreSQL's "index row requires ... bytes" from deep inside an insert. Checked in
-- triggers rather than in each host function: every key column is covered whichever function
-- (or a later import) writes it.
CREATE OR REPLACE FUNCTION ember.check_key_length(p_field text, p_value text)
RETURNS void
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_limit integer := ember.setting_int('max_key_chars');
BEGIN
    IF length(p_value) > v_limit THEN
        RAISE EXCEPTION '% is % characters long; the limit is %', p_field, length(p_value), v_limit
            USING ERRCODE = 'EM012', HINT = 'setting max_key_chars';
    END IF;
END;
$$;

CREATE OR REPLACE FUNCTION ember.key_length_guard()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    CASE tg_table_name
        WHEN 'threads' THEN
            PERFORM ember.check_key_length('thread id', new.id);
        WHEN 'categories' THEN
            PERFORM ember.check_key_length('category name', new.name);
        WHEN 'models' THEN
            PERFORM ember.check_key_length('model id', new.id);
        WHEN 'shadow_runs' THEN
            PERFORM ember.check_key_length('worker name', new.worker);
    END CASE;
    RETURN new;
END;
$$;

CREATE OR REPLACE TRIGGER threads_key_length
BEFORE INSERT OR UPDATE OF id ON ember.threads
FOR EACH ROW EXECUTE FUNCTION ember.key_length_guard();

CREATE OR REPLACE TRIGGER categories_key_length
BEFORE INSERT OR UPDATE OF name ON ember.categories
FOR EACH ROW EXECUTE FUNCTION ember.key_length_guard();

CREATE OR REPLACE TRIGGER models_key_length
BEFORE INSERT OR UPDATE OF id ON ember.models
FOR EACH ROW EXECUTE FUNCTION ember.key_length_guard();

CREATE OR REPLACE TRIGGER shadow_runs_key_length
BEFORE INSERT OR UPDATE OF worker ON ember.shadow_runs
FOR EACH ROW EXECUTE FUNCTION ember.key_length_guard();

-- Messages: rows arrive only through the host API, and within the size limit. append_message and
-- copy_messages mark the insert they are about to make (ember.inserting_message, reset right
-- after); a bare INSERT, which would skip the thread lock that orders seq (invariant 8), the
-- archive check and author rules, is told which function to call. A transaction-local flag
-- rather than a check of the caller's role: the owner and superusers are refused as well, which
-- is the point, since privileges already stop everyone else. The flag is 'on', or 'labelled'
-- when the inserting function has stamped each row's labels itself (messages_stamp_labels,
-- 020_labels.sql).
--
-- The flag is checked once per statement, and the limits are read once per statement into
-- transaction-local settings that the row trigger's WHEN clause compares against: a row within
-- the limits (nearly every row) costs no function call at all. Reading the settings table for
-- every row was most of the cost of a bulk write (three lookups a row).
CREATE OR REPLACE FUNCTION ember.messages_arrival_statement()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    IF coalesce(current_setting('ember.inserting_message', true), '') NOT IN ('on', 'labelled') THEN
        RAISE EXCEPTION 'messages are added with ember.append_message(), not inserted directly'
            USING ERRCODE = 'EM091',
                  HINT = 'SELECT ember.append_message(tenant, thread, role, content, ...); copies: ember.copy_messages()';
    END IF;
    PERFORM set_config('ember.guard_max_message_bytes', ember.setting_int('max_message_bytes')::text, true);
    PERFORM set_config('ember.guard_max_key_chars', ember.setting_int('max_key_chars')::text, true);
    RETURN NULL;
END;
$$;

CREATE OR REPLACE TRIGGER messages_arrival_check
BEFORE INSERT ON ember.messages
FOR EACH STATEMENT EXECUTE FUNCTION ember.messages_arrival_statement();

-- A row over a limit: named, with the limit, by the setting's own reading.
CREATE OR REPLACE FUNCTION ember.messages_arrival_guard()
RETURNS trigger
LANGUAGE plpgsql
AS $$
DECLARE
    v_limit integer := ember.setting_int('max_message_bytes');
BEGIN
    PERFORM ember.check_key_length('tool call id', new.tool_call_id);
    PERFORM ember.check_key_length('tool name', new.tool_name);
    IF octet_length(new.content) > v_limit THEN
        RAISE EXCEPTION 'thread "%": message content is % bytes; the limit is %',
            new.thread_id, octet_length(new.content), v_limit
            USING ERRCODE = 'EM090', HINT = 'setting max_message_bytes';
    END IF;
    RETURN new;
END;
$$;

CREATE OR REPLACE TRIGGER messages_arrival_guard
BEFORE INSERT ON ember.messages
FOR EACH ROW
WHEN (
    octet_length(new.content) > current_setting('ember.guard_max_message_bytes', TRUE)::integer
    OR length(new.tool_call_id) > current_setting('ember.guard_max_key_chars', TRUE)::integer
    OR length(new.tool_name) > current_setting('ember.guard_max_key_chars', TRUE)::integer
)
EXECUTE FUNCTION ember.messages_arrival_guard();
