-- Tables hold their own invariants (issue 8, item 9), whatever writes to them: a role with table
-- rights, a later function that forgets a rule, a hand-written fix. The functions of 015-022
-- check their input and name the refusal; these triggers are the floor under them.

-- A message row is immutable once written: it is the evidence that facts point at, the content
-- whose labels its generation carries, and the row a cursor has already stepped past. Allowed:
--   * episode_id set once (the steward's digestion mark, in its finish step);
--   * copied_from set once (copy_messages records the lineage right after the append);
--   * erasure by forgetting, when the transaction says so with SET LOCAL ember.erasing = 'on':
--     content, blocks and tool fields may be rewritten and the row deleted.
-- Never, not even when erasing: moving a row to another thread or generation, renumbering it,
-- rewriting its time or from_thread, or changing its labels (EM021: labels never shrink).
-- A setting rather than a role check: the forget functions run as whatever role calls them, and
-- the flag is scoped to their own transaction by SET LOCAL.
CREATE OR REPLACE FUNCTION ember.messages_immutable()
RETURNS trigger
LANGUAGE plpgsql
AS $$
DECLARE
    v_erasing boolean := coalesce(current_setting('ember.erasing', true) = 'on', false);
BEGIN
    IF tg_op = 'TRUNCATE' OR (tg_op = 'DELETE' AND NOT v_erasing) THEN
        RAISE EXCEPTION 'messages are never deleted: % refused', tg_op
            USING ERRCODE = 'EM017', HINT = 'forget_messages() erases content by name';
    END IF;
    IF tg_op = 'DELETE' THEN
        RETURN old;
    END IF;
    IF new.categories IS DISTINCT FROM old.categories THEN
        RAISE EXCEPTION 'message %: its labels % are stamped at insert and cannot change (to %)',
            old.id, old.categories, new.categories
            USING ERRCODE = 'EM021';
    END IF;
    IF (new.id, new.seq, new.thread_id, new.generation_id, new.from_thread, new.created_at)
       IS DISTINCT FROM (old.id, old.seq, old.thread_id, old.generation_id, old.from_thread, old.created_at) THEN
        RAISE EXCEPTION 'message %: its thread, generation, seq, time and from_thread never change', old.id
            USING ERRCODE = 'EM017';
    END IF;
    IF v_erasing THEN
        RETURN new;
    END IF;
    IF (old.episode_id IS NOT NULL AND new.episode_id IS DISTINCT FROM old.episode_id)
       OR (old.copied_from IS NOT NULL AND new.copied_from IS DISTINCT FROM old.copied_from) THEN
        RAISE EXCEPTION 'message %: the digestion mark and the copy lineage are set once', old.id
            USING ERRCODE = 'EM017';
    END IF;
    IF (new.role, new.author, new.content, new.blocks::text, new.tool_call_id, new.tool_name, new.tool_status)
       IS DISTINCT FROM
       (old.role, old.author, old.content, old.blocks::text, old.tool_call_id, old.tool_name, old.tool_status) THEN
        RAISE EXCEPTION 'message %: a message is immutable once written', old.id
            USING ERRCODE = 'EM017',
                  HINT = 'only episode_id and copied_from may be set, once; erasure goes through forgetting';
    END IF;
    RETURN new;
END;
$$;

-- Replaced by messages_immutable, which also refuses a change of labels.
DROP TRIGGER IF EXISTS messages_labels_fixed ON ember.messages;
DROP FUNCTION IF EXISTS ember.messages_labels_fixed();

CREATE OR REPLACE TRIGGER messages_immutable
BEFORE UPDATE OR DELETE ON ember.messages
FOR EACH ROW EXECUTE FUNCTION ember.messages_immutable();

CREATE OR REPLACE TRIGGER messages_no_truncate
BEFORE TRUNCATE ON ember.messages
FOR EACH STATEMENT EXECUTE FUNCTION ember.messages_immutable();

-- Metadata is rendered for a model like content (functions/035_render.sql), in a row's header
-- line. A tool name is an identifier: letters, digits, "_", "-", "." and ":" (the providers'
-- own tool-name rule, plus "." and ":" for namespaced tools), at most 128 characters; anything
-- else (a line break, a forged row header) is refused by name rather than escaped, because a
-- tool name that needs escaping is a bug in the caller.
CREATE OR REPLACE FUNCTION ember.is_safe_tool_name(p_name text)
RETURNS boolean
LANGUAGE sql IMMUTABLE
AS $$ SELECT p_name ~ '^[A-Za-z0-9_.:-]{1,128}$' $$;

CREATE OR REPLACE FUNCTION ember.messages_tool_name_safe()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    IF NOT ember.is_safe_tool_name(new.tool_name) THEN
        RAISE EXCEPTION 'thread "%": tool name % is not an identifier', new.thread_id, to_json(new.tool_name)
            USING ERRCODE = 'EM018',
                  HINT = 'letters, digits, "_", "-", "." and ":", 1 to 128 characters';
    END IF;
    RETURN new;
END;
$$;

CREATE OR REPLACE TRIGGER messages_tool_name_safe
BEFORE INSERT ON ember.messages
FOR EACH ROW WHEN (new.tool_name IS NOT NULL AND NOT ember.is_safe_tool_name(new.tool_name))
EXECUTE FUNCTION ember.messages_tool_name_safe();

-- A thread's model changes only through the routing rule (design.md invariant 9): the new model
-- must be tagged for every label the thread carries now, and a labelled thread is not unpinned
-- (no pin proves no tags). A trigger, so that a direct UPDATE ember.threads SET model cannot
-- downgrade either; set_thread_model is the named way in.
CREATE OR REPLACE FUNCTION ember.threads_model_routed()
RETURNS trigger
LANGUAGE plpgsql
AS $$
DECLARE
    v_labels text[];
    v_missing text[];
BEGIN
    v_labels := ember.thread_call_labels(new.tenant_id, new.id);
    v_missing := ARRAY(
        SELECT l FROM unnest(v_labels) AS l
        WHERE NOT l = ANY(coalesce((SELECT m.tags FROM ember.models AS m WHERE m.id = new.model), '{}'))
    );
    IF cardinality(v_missing) > 0 THEN
        RAISE EXCEPTION 'category_model: thread "%" carries %, and model % is not tagged for %',
            new.id, v_labels, coalesce('"' || new.model || '"', '(none pinned)'), v_missing
            USING ERRCODE = 'EM022',
                  HINT = 'pin a model tagged for these categories, or start a new generation first';
    END IF;
    RETURN new;
END;
$$;

CREATE OR REPLACE TRIGGER threads_model_routed
BEFORE UPDATE OF model ON ember.threads
FOR EACH ROW WHEN (old.model IS DISTINCT FROM new.model)
EXECUTE FUNCTION ember.threads_model_routed();
