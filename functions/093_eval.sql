-- `ember eval` (issue 28), the write side: a run, its conversations and questions, shadow cut
-- over for one conversation at a time, and every answer and judge call with its price snapshot.
-- The model calls are the worker's (worker/ember/evaluation/); what is stored and what counts is
-- decided here. Reading a run back is functions/096_eval_report.sql.
--
-- A run is answered one conversation at a time: import, both pipelines digest it, the questions
-- are searched against the steward's facts, then (inside a transaction that is rolled back)
-- against shadow's proposals cut over as facts, and finally the conversation's facts are
-- retired. So every conversation starts from an empty memory, as a user of its own would, and
-- the steward never merges one benchmark user's facts with another's.

-- The run named, in any status; EM111 when there is none. The write side (eval_running) and the
-- read side (096_eval_report.sql) both find a run through here.
CREATE OR REPLACE FUNCTION ember.eval_run_row(p_run bigint)
RETURNS ember.eval_runs
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    r ember.eval_runs;
BEGIN
    SELECT * INTO r FROM ember.eval_runs WHERE id = p_run;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'eval run % does not exist', coalesce(p_run::text, 'NULL')
            USING ERRCODE = 'EM111', HINT = 'ember eval creates a run with ember.eval_begin()';
    END IF;
    RETURN r;
END;
$$;

-- The run named, running; EM111 otherwise.
CREATE OR REPLACE FUNCTION ember.eval_running(p_run bigint)
RETURNS ember.eval_runs
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    r ember.eval_runs := ember.eval_run_row(p_run);
BEGIN
    IF r.status <> 'running' THEN
        RAISE EXCEPTION 'eval run % is %, not running', p_run, r.status USING ERRCODE = 'EM111';
    END IF;
    RETURN r;
END;
$$;

-- The thread of one of the run's conversations; EM111 for any other thread.
CREATE OR REPLACE FUNCTION ember.eval_conversation_of(p_run bigint, p_thread text)
RETURNS ember.eval_conversations
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    c ember.eval_conversations;
BEGIN
    SELECT * INTO c FROM ember.eval_conversations WHERE run_id = p_run AND thread_id = p_thread;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'thread % is not a conversation of eval run %', to_json(p_thread), p_run
            USING ERRCODE = 'EM111';
    END IF;
    RETURN c;
END;
$$;

CREATE OR REPLACE FUNCTION ember.eval_bad_record(p_what text, p_detail text)
RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
    RAISE EXCEPTION '%: %', p_what, p_detail USING ERRCODE = 'EM112';
END;
$$;

-- Start a run in a fresh database: nothing may be stored yet (EM110), because the run retires
-- facts and judges memory as if it held nothing but the benchmark. Creates main (the steward
-- copies its model pin: none, so the steward routes to the first light model like any unpinned
-- deployment), the steward's thread, and activates shadow before the first import, so shadow
-- reads every imported row. A NULL answer or judge model is routed: the first light model
-- answers, the first standard model judges (a stricter reader than the model it checks).
CREATE OR REPLACE FUNCTION ember.eval_begin(
    p_benchmark text,
    p_source text,
    p_sha256 text,
    p_answer_model text DEFAULT NULL,
    p_judge_model text DEFAULT NULL,
    p_top_k integer DEFAULT 10,
    p_limit integer DEFAULT NULL,
    p_now timestamptz DEFAULT clock_timestamp()
)
RETURNS bigint
LANGUAGE plpgsql
AS $$
DECLARE
    v_answer text;
    v_judge text;
    v_run bigint;
    v_held text;
BEGIN
    PERFORM ember.require_now(p_now);
    PERFORM pg_advisory_xact_lock(hashtext('ember.eval_begin'));
    SELECT CASE
        WHEN EXISTS (SELECT 1 FROM ember.eval_runs) THEN 'an eval run'
        WHEN EXISTS (SELECT 1 FROM ember.threads) THEN 'threads'
        WHEN EXISTS (SELECT 1 FROM ember.facts) THEN 'facts'
    END INTO v_held;
    IF v_held IS NOT NULL THEN
        RAISE EXCEPTION 'eval_begin: this database already holds %; an eval runs in a fresh database', v_held
            USING ERRCODE = 'EM110',
                  HINT = 'ember eval creates one (--database); it retires facts, so never point it at real memory';
    END IF;
    IF p_benchmark IS NULL OR p_benchmark NOT IN ('locomo', 'longmemeval') THEN
        PERFORM ember.eval_bad_record('eval_begin', format('unknown benchmark %s (locomo, longmemeval)',
                                                           coalesce(to_json(p_benchmark)::text, 'NULL')));
    END IF;
    IF coalesce(btrim(p_source), '') = '' OR p_sha256 IS NULL OR p_sha256 !~ '^[0-9a-f]{64}$' THEN
        PERFORM ember.eval_bad_record('eval_begin', 'the source file and its SHA-256 (64 hex digits) are required');
    END IF;
    IF p_top_k IS NULL OR p_top_k NOT BETWEEN 1 AND 100 THEN
        PERFORM ember.eval_bad_record('eval_begin', format('top_k must be between 1 and 100, got %s',
                                                           coalesce(p_top_k::text, 'NULL')));
    END IF;
    IF p_limit IS NOT NULL AND p_limit < 1 THEN
        PERFORM ember.eval_bad_record('eval_begin', format('the question limit must be positive, got %s', p_limit));
    END IF;
    v_answer := coalesce(p_answer_model, ember.route_model('light', '{}'));
    v_judge := coalesce(p_judge_model, ember.route_model('standard', '{}'));
    IF NOT EXISTS (SELECT 1 FROM ember.models WHERE id = v_answer) THEN
        RAISE EXCEPTION 'eval_begin: unknown answer model "%"', v_answer
            USING ERRCODE = 'EM113', HINT = 'SELECT id FROM ember.models';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM ember.models WHERE id = v_judge) THEN
        RAISE EXCEPTION 'eval_begin: unknown judge model "%"', v_judge
            USING ERRCODE = 'EM113', HINT = 'SELECT id FROM ember.models';
    END IF;

    INSERT INTO ember.eval_runs (
        benchmark, source, source_sha256, answer_model, judge_model, top_k, question_limit, started_at
    ) VALUES (p_benchmark, p_source, p_sha256, v_answer, v_judge, p_top_k, p_limit, p_now)
    RETURNING id INTO v_run;
    PERFORM ember.create_thread(ember.sole_tenant(), 'main', 'main', 'ember eval', NULL, 'open', NULL, p_now);
    PERFORM ember.ensure_steward_thread(ember.sole_tenant(), p_now);
    PERFORM ember.shadow_activate(p_now);
    RETURN v_run;
END;
$$;

-- The rows of an imported thread as the import file placed them: each message with the ordinal
-- of its generation and its position there (from 1, in seq order), the one numbering
-- eval_add_conversation both checks a turn against and records it by.
CREATE OR REPLACE FUNCTION ember.eval_thread_rows(p_thread text)
RETURNS TABLE (message_id bigint, generation integer, row_in_generation bigint)
LANGUAGE sql STABLE
AS $$
    SELECT m.id, g.ordinal,
           row_number() OVER (PARTITION BY m.generation_id ORDER BY m.seq)
    FROM ember.messages AS m
    INNER JOIN ember.generations AS g ON g.id = m.generation_id
    WHERE m.thread_id = p_thread
$$;

-- Record an imported conversation: its thread, and which generation and message each session and
-- turn of the benchmark became. Sessions are [{"ordinal": n, "source": "...", "date": "..."}]
-- (the generation of that ordinal), turns [{"generation": n, "position": i, "source": "...",
-- "has_answer": bool}] (the i-th row, from 1, of generation n), exactly as the import file placed
-- them. A session or turn that names no imported row is refused (EM114): the report would
-- otherwise cite evidence by the wrong name.
CREATE OR REPLACE FUNCTION ember.eval_add_conversation(
    p_run bigint, p_conversation text, p_thread text, p_sessions jsonb, p_turns jsonb
)
RETURNS jsonb
LANGUAGE plpgsql
AS $$
DECLARE
    v_ordinal integer;
    v_missing text;
    v_sessions integer;
    v_turns integer;
BEGIN
    PERFORM ember.eval_running(p_run);
    IF coalesce(btrim(p_conversation), '') = '' THEN
        PERFORM ember.eval_bad_record('eval_add_conversation', 'the conversation id is empty');
    END IF;
    IF jsonb_typeof(p_sessions) IS DISTINCT FROM 'array' OR jsonb_typeof(p_turns) IS DISTINCT FROM 'array' THEN
        PERFORM ember.eval_bad_record('eval_add_conversation', 'sessions and turns must be JSON arrays');
    END IF;
    IF NOT EXISTS (SELECT 1 FROM ember.threads WHERE id = p_thread AND kind IN ('side', 'task')) THEN
        RAISE EXCEPTION 'eval_add_conversation: % is not an imported conversation thread', to_json(p_thread)
            USING ERRCODE = 'EM114';
    END IF;
    SELECT coalesce(max(ordinal), 0) + 1 INTO v_ordinal FROM ember.eval_conversations WHERE run_id = p_run;
    INSERT INTO ember.eval_conversations (run_id, conversation, thread_id, ordinal)
    VALUES (p_run, p_conversation, p_thread, v_ordinal);

    SELECT format('session %s (generation %s)', s.value ->> 'source', s.value ->> 'ordinal') INTO v_missing
    FROM jsonb_array_elements(p_sessions) AS s
    WHERE NOT EXISTS (
        SELECT 1 FROM ember.generations AS g
        WHERE g.thread_id = p_thread AND g.ordinal::text = s.value ->> 'ordinal'
    )
    LIMIT 1;
    IF v_missing IS NULL THEN
        SELECT format('turn %s (generation %s, row %s)', t.value ->> 'source', t.value ->> 'generation',
                      t.value ->> 'position') INTO v_missing
        FROM jsonb_array_elements(p_turns) AS t
        WHERE NOT EXISTS (
            SELECT 1 FROM ember.eval_thread_rows(p_thread) AS r
            WHERE r.generation::text = t.value ->> 'generation' AND r.row_in_generation::text = t.value ->> 'position'
        )
        LIMIT 1;
    END IF;
    IF v_missing IS NOT NULL THEN
        RAISE EXCEPTION 'eval_add_conversation: % of conversation % names no imported row', v_missing,
            to_json(p_conversation)
            USING ERRCODE = 'EM114';
    END IF;

    INSERT INTO ember.eval_sessions (generation_id, run_id, conversation, source_id, source_date)
    SELECT g.id, p_run, p_conversation, s.value ->> 'source', coalesce(s.value ->> 'date', '')
    FROM jsonb_array_elements(p_sessions) AS s
    INNER JOIN ember.generations AS g ON g.thread_id = p_thread AND g.ordinal::text = s.value ->> 'ordinal';
    GET DIAGNOSTICS v_sessions = ROW_COUNT;

    INSERT INTO ember.eval_turns (message_id, run_id, conversation, source_id, has_answer)
    SELECT r.message_id, p_run, p_conversation, t.value ->> 'source',
           coalesce((t.value ->> 'has_answer')::boolean, false)
    FROM jsonb_array_elements(p_turns) AS t
    INNER JOIN ember.eval_thread_rows(p_thread) AS r
        ON r.generation::text = t.value ->> 'generation' AND r.row_in_generation::text = t.value ->> 'position';
    GET DIAGNOSTICS v_turns = ROW_COUNT;
    RETURN jsonb_build_object('ordinal', v_ordinal, 'sessions', v_sessions, 'turns', v_turns);
END;
$$;

-- The questions of a run: [{"question_id", "conversation", "category", "question", "gold",
-- "question_date", "evidence": [...], "excluded"}], numbered in the order given.
CREATE OR REPLACE FUNCTION ember.eval_add_questions(p_run bigint, p_questions jsonb)
RETURNS integer
LANGUAGE plpgsql
AS $$
DECLARE
    v_bad text;
    v_next integer;
    v_count integer;
BEGIN
    PERFORM ember.eval_running(p_run);
    IF jsonb_typeof(p_questions) IS DISTINCT FROM 'array' THEN
        PERFORM ember.eval_bad_record('eval_add_questions', 'questions must be a JSON array');
    END IF;
    SELECT format('questions[%s]: %s', q.ordinality - 1,
        CASE
            WHEN jsonb_typeof(q.value) IS DISTINCT FROM 'object' THEN 'not an object'
            WHEN coalesce(btrim(q.value ->> 'question_id'), '') = '' THEN 'no question_id'
            WHEN coalesce(btrim(q.value ->> 'category'), '') = '' THEN 'no category'
            WHEN jsonb_typeof(q.value -> 'question') IS DISTINCT FROM 'string' THEN 'no question text'
            WHEN jsonb_typeof(q.value -> 'gold') IS DISTINCT FROM 'string' THEN 'no gold answer'
            WHEN q.value ? 'evidence' AND jsonb_typeof(q.value -> 'evidence') <> 'array' THEN 'evidence is not an array'
            ELSE format('conversation %s is not one of the run', to_json(q.value ->> 'conversation'))
        END)
    INTO v_bad
    FROM jsonb_array_elements(p_questions) WITH ORDINALITY AS q (value, ordinality)
    WHERE jsonb_typeof(q.value) IS DISTINCT FROM 'object'
       OR coalesce(btrim(q.value ->> 'question_id'), '') = ''
       OR coalesce(btrim(q.value ->> 'category'), '') = ''
       OR jsonb_typeof(q.value -> 'question') IS DISTINCT FROM 'string'
       OR jsonb_typeof(q.value -> 'gold') IS DISTINCT FROM 'string'
       OR (q.value ? 'evidence' AND jsonb_typeof(q.value -> 'evidence') <> 'array')
       OR NOT EXISTS (
           SELECT 1 FROM ember.eval_conversations AS c
           WHERE c.run_id = p_run AND c.conversation = q.value ->> 'conversation'
       )
    ORDER BY q.ordinality
    LIMIT 1;
    IF v_bad IS NOT NULL THEN
        PERFORM ember.eval_bad_record('eval_add_questions', v_bad);
    END IF;
    SELECT coalesce(max(ordinal), 0) INTO v_next FROM ember.eval_questions WHERE run_id = p_run;
    INSERT INTO ember.eval_questions (
        run_id, question_id, conversation, ordinal, category, question, gold, question_date, evidence, excluded
    )
    SELECT p_run, q.value ->> 'question_id', q.value ->> 'conversation', v_next + q.ordinality::integer,
           q.value ->> 'category', q.value ->> 'question', q.value ->> 'gold', q.value ->> 'question_date',
           ARRAY(SELECT jsonb_array_elements_text(coalesce(q.value -> 'evidence', '[]'))),
           coalesce((q.value ->> 'excluded')::boolean, false)
    FROM jsonb_array_elements(p_questions) WITH ORDINALITY AS q (value, ordinality);
    GET DIAGNOSTICS v_count = ROW_COUNT;
    RETURN v_count;
END;
$$;

-- Whether shadow is cut over for the run in this transaction: eval_cut_over's promotions exist
-- only until the transaction that made them rolls back. Both a second cut-over and closing a
-- conversation are refused while one is.
CREATE OR REPLACE FUNCTION ember.eval_cut_over_open(p_run bigint)
RETURNS boolean
LANGUAGE sql STABLE
AS $$
    SELECT EXISTS (SELECT 1 FROM ember.eval_promotions AS e WHERE e.run_id = p_run)
$$;

-- Retire the active facts of a conversation's thread, with the reason, and count them: the one
-- way an eval empties memory, whether for a cut-over (eval_cut_over) or once a conversation is
-- answered (eval_close_conversation).
CREATE OR REPLACE FUNCTION ember.eval_retire_facts(p_thread text, p_reason text, p_now timestamptz)
RETURNS integer
LANGUAGE plpgsql
AS $$
DECLARE
    v_retired integer;
BEGIN
    UPDATE ember.facts
    SET status = 'retired', retired_reason = p_reason, updated_at = p_now
    WHERE status = 'active' AND p_thread = ANY(source_threads);
    GET DIAGNOSTICS v_retired = ROW_COUNT;
    RETURN v_retired;
END;
$$;

-- Shadow cut over for one conversation, as issue 25's promotion would do it: the steward's
-- active facts of the thread are retired, and each valid proposal of the thread becomes a fact,
-- its evidence checked again with the shadow rule (check_evidence in its own thread, never
-- trusted from the proposal row; a proposal refused now is counted and left out), its labels the
-- union of the proposal's and its generation's (never fewer than it carried), its sources the
-- lineage of its evidence. A proposal whose normalized text an earlier promoted one already
-- states is not promoted twice. Which fact stands for which proposal goes to eval_promotions.
--
-- `ember eval` calls this inside a transaction that it rolls back once the questions have been
-- searched: the cut-over exists for exactly as long as shadow's memory is being searched, so the
-- database never holds a fact that came from a proposal, and the comparison views of the same
-- database still compare what each pipeline wrote. A second call in the same transaction is
-- refused (EM111): the mapping would mix two cut-overs.
CREATE OR REPLACE FUNCTION ember.eval_cut_over(
    p_run bigint, p_thread text, p_now timestamptz DEFAULT clock_timestamp()
)
RETURNS jsonb
LANGUAGE plpgsql
AS $$
DECLARE
    p ember.shadow_proposals;
    v_retired integer;
    v_promoted integer := 0;
    v_refused integer := 0;
    v_duplicates integer := 0;
    v_id bigint;
BEGIN
    PERFORM ember.require_now(p_now);
    PERFORM ember.eval_running(p_run);
    PERFORM ember.eval_conversation_of(p_run, p_thread);
    IF ember.eval_cut_over_open(p_run) THEN
        RAISE EXCEPTION 'eval_cut_over: shadow is already cut over in this transaction'
            USING ERRCODE = 'EM111', HINT = 'roll the cut-over back before the next one';
    END IF;
    v_retired := ember.eval_retire_facts(p_thread, 'ember eval: shadow cut over for this conversation', p_now);

    FOR p IN
        SELECT * FROM ember.shadow_proposals
        WHERE thread_id = p_thread AND validation_error IS NULL AND text IS NOT NULL
        ORDER BY id
    LOOP
        IF ember.check_evidence(p.thread_id, p.evidence_kind, p.evidence, true) IS NOT NULL THEN
            v_refused := v_refused + 1;
            CONTINUE;
        END IF;
        IF EXISTS (
            SELECT 1 FROM ember.eval_promotions AS e
            INNER JOIN ember.facts AS f ON f.id = e.fact_id
            WHERE e.run_id = p_run AND f.text_key = p.text_key
        ) THEN
            v_duplicates := v_duplicates + 1;
            CONTINUE;
        END IF;
        INSERT INTO ember.facts (text, evidence_kind, categories, run_id, source_threads, created_at, updated_at)
        VALUES (
            p.text, p.evidence_kind,
            ember.label_set(p.categories || ember.generation_labels(p.generation_id)),
            NULL,
            ember.label_set(ARRAY(
                SELECT DISTINCT l FROM ember.evidence_targets(p.evidence) AS t, unnest(t.lineage) AS l
            )),
            p_now, p_now
        )
        RETURNING id INTO v_id;
        INSERT INTO ember.fact_evidence (fact_id, ordinal, message_id, generation_id)
        SELECT v_id, x.ordinality, (x.value ->> 'message_id')::bigint, (x.value ->> 'generation_id')::uuid
        FROM jsonb_array_elements(p.evidence) WITH ORDINALITY AS x (value, ordinality);
        INSERT INTO ember.eval_promotions (fact_id, proposal_id, run_id) VALUES (v_id, p.id, p_run);
        v_promoted := v_promoted + 1;
    END LOOP;
    RETURN jsonb_build_object(
        'retired', v_retired, 'promoted', v_promoted, 'refused', v_refused, 'duplicates', v_duplicates
    );
END;
$$;

-- A conversation is answered: its remaining facts are retired, so the next conversation's steward
-- starts from an empty memory (a steward that searched one benchmark user's facts while reading
-- another's would be judged on a mix no deployment has). Refused inside a cut-over (EM111).
CREATE OR REPLACE FUNCTION ember.eval_close_conversation(
    p_run bigint, p_thread text, p_now timestamptz DEFAULT clock_timestamp()
)
RETURNS integer
LANGUAGE plpgsql
AS $$
DECLARE
    v_retired integer;
BEGIN
    PERFORM ember.require_now(p_now);
    PERFORM ember.eval_running(p_run);
    PERFORM ember.eval_conversation_of(p_run, p_thread);
    IF ember.eval_cut_over_open(p_run) THEN
        RAISE EXCEPTION 'eval_close_conversation: shadow is cut over in this transaction'
            USING ERRCODE = 'EM111', HINT = 'roll the cut-over back first';
    END IF;
    v_retired := ember.eval_retire_facts(p_thread, 'ember eval: conversation answered', p_now);
    UPDATE ember.eval_conversations SET status = 'answered' WHERE run_id = p_run AND thread_id = p_thread;
    RETURN v_retired;
END;
$$;
