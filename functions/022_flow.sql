-- Flow and copy rules (design.md invariant 4): what leaves a thread carries the thread's current
-- labels (ember.thread_call_labels) and may go only to a thread whose pinned model is tagged for
-- all of them; labelled carrier rows are never copied, forked or quoted into another thread.

-- Refuses (EM024) unless p_to may receive what leaves p_from now; returns the labels that
-- travel. A thread without a pinned model proves no tags, so it receives only unlabelled
-- content: assuming some default model would be a guess, and a wrong guess is a leak.
-- The one exception is a label carrier receiving from a thread that is not one (a progress
-- report into main, a row into the steward): gathering is what a carrier is for, its labels grow
-- with what it receives, and what leaves it again is held to this same rule. The seeds checked
-- only what left a carrier; since every generation now carries what it received, a side thread
-- that got main's labels is held to them too.
CREATE OR REPLACE FUNCTION ember.check_carrier_flow(p_tenant text, p_from text, p_to text)
RETURNS text[]
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_labels text[];
    v_model text;
    v_tags text[];
    v_missing text[];
BEGIN
    IF NOT EXISTS (SELECT 1 FROM ember.threads WHERE tenant_id = p_tenant AND id = p_from) THEN
        RAISE EXCEPTION 'unknown thread "%"', p_from USING ERRCODE = 'EM001';
    END IF;
    SELECT t.model, coalesce(m.tags, '{}') INTO v_model, v_tags
    FROM ember.threads AS t LEFT JOIN ember.models AS m ON m.id = t.model
    WHERE t.tenant_id = p_tenant AND t.id = p_to;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'unknown thread "%"', p_to USING ERRCODE = 'EM001';
    END IF;
    IF p_from = p_to THEN
        RETURN '{}';
    END IF;
    v_labels := ember.thread_call_labels(p_tenant, p_from);
    IF ember.is_label_carrier(p_tenant, p_to) AND NOT ember.is_label_carrier(p_tenant, p_from) THEN
        RETURN v_labels;
    END IF;
    v_missing := ARRAY(SELECT l FROM unnest(v_labels) AS l WHERE NOT l = ANY(v_tags));
    IF cardinality(v_missing) > 0 THEN
        RAISE EXCEPTION 'carrier_label_flow: "%" carries %, but the model of "%" (%) is not tagged for %',
            p_from, v_labels, p_to, coalesce(v_model, 'none pinned'), v_missing
            USING ERRCODE = 'EM024',
                  HINT = 'pin a model tagged for these categories on the receiving thread, '
                      || 'or send from a fresh generation';
    END IF;
    RETURN v_labels;
END;
$$;

-- The database enforces the flow rules on every row that arrives from another thread, whatever
-- wrote it (a side-chat message from main, a progress report, a copy), instead of trusting each
-- caller to ask. A row sent from an isolated thread is that thread's content: in an open thread it
-- would be in the backlog, a shadow plan and the receiver's own prompts, so it goes only to another
-- isolated thread, exactly like a copy (copy_messages, EM028). Checking the sender's seal at the
-- readers instead would leave the row in the open thread for every future reader to get right.
-- The steward's record is the source of no other thread's row or event (EM027): such a row would
-- land in the backlog and the steward would read what it had written, the self-reading loop of
-- seed 001 section 3; and what the steward holds reaches anyone only as facts, by search_memory.
CREATE OR REPLACE FUNCTION ember.messages_carrier_flow()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    IF new.from_thread IS NOT NULL AND new.from_thread <> new.thread_id THEN
        IF ember.is_steward_thread(new.tenant_id, new.from_thread) THEN
            RAISE EXCEPTION 'thread "%": a row from "%" refused: the memory steward''s record is never the source of another thread''s row or event',
                new.thread_id, new.from_thread
                USING ERRCODE = 'EM027',
                      HINT = 'memories are found with ember.search_memory(tenant, viewer, query): facts, with their evidence, that the viewer may read';
        END IF;
        IF ember.is_isolated(new.tenant_id, new.from_thread) AND NOT ember.is_isolated(new.tenant_id, new.thread_id) THEN
            RAISE EXCEPTION 'thread "%": a row from isolated thread "%" goes only to an isolated thread',
                new.thread_id, new.from_thread
                USING ERRCODE = 'EM028',
                      HINT = 'nothing automated reads an isolated thread, so nothing of it is forwarded';
        END IF;
        PERFORM ember.check_carrier_flow(new.tenant_id, new.from_thread, new.thread_id);
    END IF;
    RETURN new;
END;
$$;

-- The WHEN clause keeps the trigger from being called at all for a thread's own rows, nearly
-- every row written: the body would do nothing for them, but the call alone costs a plpgsql
-- invocation per row.
CREATE OR REPLACE TRIGGER messages_carrier_flow
BEFORE INSERT ON ember.messages
FOR EACH ROW
WHEN (new.from_thread IS NOT NULL AND new.from_thread <> new.thread_id)
EXECUTE FUNCTION ember.messages_carrier_flow();

-- Fork, clone or quote rows of p_from into p_to, all or nothing; returns the new ids in the
-- originals' conversation (seq) order. Refusals, checked before anything is written:
--   EM026 an id that is missing or not a row of p_from;
--   EM027 the steward's record, on either side (it is never a reference);
--   EM028 rows of an isolated thread into a thread that is not isolated;
--   EM025 any labelled row of a carrier (main_record_copy);
--   EM024 labelled rows into a thread that is not a carrier and whose own category does not
--         cover them (a copy is the thread's own row from then on, under its own category).
-- The receiving generation's labels grow by the copied rows' labels before the rows are
-- appended (so the copies, and every later row, carry them), and the source thread is recorded.
-- Copies go through append_message, so they take the thread lock, a fresh seq and every check
-- and trigger an ordinary append does.
--
-- Its length: the refusals in the order stated above, each an IF with its SQLSTATE, then the lock,
-- the widening and the copy loop; split, the order of the checks would no longer read in one place.
CREATE OR REPLACE FUNCTION ember.copy_messages(
    p_tenant text, p_from text, p_ids bigint[], p_to text, p_now timestamptz DEFAULT clock_timestamp()
)
RETURNS bigint[]
LANGUAGE plpgsql
AS $$
DECLARE
    v_to ember.threads;
    v_missing bigint[];
    v_labelled bigint[];
    v_labels text[];
    v_lost text[];
    r ember.messages;
    v_new bigint[] := '{}';
    v_id bigint;
BEGIN
    PERFORM ember.require_now(p_now);
    IF NOT EXISTS (SELECT 1 FROM ember.threads WHERE tenant_id = p_tenant AND id = p_from) THEN
        RAISE EXCEPTION 'unknown thread "%"', p_from USING ERRCODE = 'EM001';
    END IF;
    SELECT * INTO v_to FROM ember.threads WHERE tenant_id = p_tenant AND id = p_to;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'unknown thread "%"', p_to USING ERRCODE = 'EM001';
    END IF;
    IF p_ids IS NULL THEN
        RAISE EXCEPTION 'copy from "%" to "%": the list of message ids must not be null', p_from, p_to
            USING ERRCODE = 'EM012';
    END IF;
    v_missing := ARRAY(
        SELECT DISTINCT i FROM unnest(p_ids) AS i
        WHERE i IS NULL
           OR NOT EXISTS (
               SELECT 1 FROM ember.messages AS m WHERE m.tenant_id = p_tenant AND m.id = i AND m.thread_id = p_from
           )
        ORDER BY i
    );
    IF cardinality(v_missing) > 0 THEN
        RAISE EXCEPTION 'copy from "%": no such messages in that thread: %', p_from, v_missing
            USING ERRCODE = 'EM026';
    END IF;
    IF cardinality(p_ids) = 0 THEN
        RETURN '{}';  -- nothing copied: nothing to record as a carrier's source either
    END IF;
    IF ember.is_steward_thread(p_tenant, p_from) OR ember.is_steward_thread(p_tenant, p_to) THEN
        RAISE EXCEPTION 'copy from "%" to "%": the memory steward''s record is never copied, forked or quoted',
            p_from, p_to
            USING ERRCODE = 'EM027',
                  HINT = 'memories are found with ember.search_memory(tenant, viewer, query): facts, with their evidence, that the viewer may read';
    END IF;
    IF ember.is_isolated(p_tenant, p_from) AND NOT ember.is_isolated(p_tenant, p_to) THEN
        RAISE EXCEPTION 'copy from "%" to "%": rows of an isolated thread go only to an isolated thread',
            p_from, p_to
            USING ERRCODE = 'EM028';
    END IF;
    IF ember.is_label_carrier(p_tenant, p_from) THEN
        v_labelled := ARRAY(
            SELECT m.id FROM ember.messages AS m
            WHERE m.tenant_id = p_tenant AND m.id = ANY(p_ids) AND m.categories <> '{}'
            ORDER BY m.id
        );
        IF cardinality(v_labelled) > 0 THEN
            RAISE EXCEPTION 'main_record_copy: messages % of "%" carry labels; a carrier''s labelled rows are never copied, forked or quoted',
                v_labelled, p_from
                USING ERRCODE = 'EM025',
                      HINT = 'copy only rows written before the generation read labelled content';
        END IF;
    END IF;
    v_labels := ember.label_set(ARRAY(
        SELECT unnest(m.categories) FROM ember.messages AS m WHERE m.tenant_id = p_tenant AND m.id = ANY(p_ids)
    ));
    IF NOT ember.is_label_carrier(p_tenant, p_to) THEN
        v_lost := ARRAY(SELECT l FROM unnest(v_labels) AS l WHERE l IS DISTINCT FROM v_to.category);
        IF cardinality(v_lost) > 0 THEN
            RAISE EXCEPTION 'carrier_label_flow: rows copied from "%" carry %, but rows of "%" carry only %',
                p_from, v_labels, p_to, ember.label_set(ARRAY[v_to.category])
                USING ERRCODE = 'EM024',
                      HINT = 'copy labelled rows only into a thread of the same category';
        END IF;
    END IF;
    -- Lock before widening so the rows appended below are stamped with the new labels.
    PERFORM ember.lock_thread(p_tenant, p_to);
    PERFORM ember.add_generation_sources(ember.current_generation(p_tenant, p_to, p_now), ARRAY[p_from], 'copy');
    PERFORM ember.widen_generation_labels(ember.current_generation(p_tenant, p_to, p_now), v_labels);

    FOR r IN
        SELECT * FROM ember.messages AS m WHERE m.tenant_id = p_tenant AND m.id = ANY(p_ids) ORDER BY m.seq
    LOOP
        v_id := ember.append_message(
            p_tenant, p_to, r.role, r.content, r.author, r.blocks, r.tool_call_id, r.tool_name,
            r.tool_status, r.from_thread, p_now
        );
        -- Lineage: evidence checks follow it back to the original's thread.
        UPDATE ember.messages SET copied_from = coalesce(r.copied_from, r.id)
        WHERE tenant_id = p_tenant AND id = v_id;
        v_new := v_new || v_id;
    END LOOP;
    RETURN v_new;
END;
$$;
