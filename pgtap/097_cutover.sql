BEGIN;
SELECT plan(55);

-- Time: the day is 2030-03-01; the cut-over is made at 10:00.

CREATE FUNCTION pg_temp.shadow_run(p_thread text, p_now timestamptz) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    v_plan jsonb;
BEGIN
    PERFORM ember.shadow_memory_changed('default', p_thread, 'idle-or-ended', p_now);
    v_plan := ember.claim_shadow_run('test-worker', '10 minutes', p_now);
    IF v_plan ->> 'thread_id' IS DISTINCT FROM p_thread THEN
        RAISE EXCEPTION 'test set-up: expected a claim of %, got %', p_thread, v_plan;
    END IF;
    RETURN (v_plan ->> 'run_id')::bigint;
END;
$$;

CREATE FUNCTION pg_temp.submit(p_run bigint, p_proposals jsonb, p_finished timestamptz) RETURNS jsonb LANGUAGE sql AS $$
    SELECT ember.submit_shadow_run('default', p_run, (SELECT lease_token FROM ember.shadow_runs WHERE id = p_run),
        jsonb_build_object('status', 'completed', 'error', NULL,
            'usage', jsonb_build_object('input_tokens', 100, 'cache_read_input_tokens', 0,
                'cache_creation_5m_input_tokens', 0, 'cache_creation_1h_input_tokens', 0, 'output_tokens', 20),
            'latency_ms', 900, 'finished_at', p_finished, 'proposals', p_proposals))
$$;

CREATE FUNCTION pg_temp.prop(p_text text, p_kind text, VARIADIC p_ids bigint []) RETURNS jsonb LANGUAGE sql AS $$
    SELECT jsonb_build_object('text', p_text, 'evidence_kind', p_kind,
        'evidence', (SELECT jsonb_agg(jsonb_build_object('message_id', i)) FROM unnest(p_ids) AS i))
$$;

CREATE FUNCTION pg_temp.ev(VARIADIC p_ids bigint []) RETURNS jsonb LANGUAGE sql AS $$
    SELECT jsonb_agg(jsonb_build_object('message_id', i)) FROM unnest(p_ids) AS i
$$;

-- A proposal stored as valid by hand, as no submit would store it: the promotion must not trust it.
-- The next ordinal of its run: within shadow_max_proposals, so the row is stored as valid.
CREATE FUNCTION pg_temp.forced(p_run bigint, p_text text, p_kind text, p_evidence jsonb) RETURNS bigint
LANGUAGE sql AS $$
    INSERT INTO ember.shadow_proposals (run_id, thread_id, generation_id, ordinal, text, evidence_kind, evidence,
                                        categories, created_at)
    SELECT r.id, r.thread_id, r.generation_id,
           (SELECT coalesce(max(p.ordinal), 0) + 1 FROM ember.shadow_proposals AS p WHERE p.run_id = r.id), p_text,
           p_kind, p_evidence, '{}', '2030-03-01 11:01+00'
    FROM ember.shadow_runs AS r WHERE r.id = p_run
    RETURNING id
$$;

CREATE FUNCTION pg_temp.outcome(p_proposal bigint) RETURNS text LANGUAGE sql AS $$
    SELECT outcome FROM ember.cutover_promotions WHERE proposal_id = p_proposal
$$;

SELECT ember.define_category('travel');
SELECT ember.create_thread('default', 'main', 'main', NULL, NULL, 'open', 'claude-haiku-4-5', '2030-03-01 08:00+00');
SELECT ember.ensure_steward_thread('default', '2030-03-01 08:00+00');
SELECT ember.create_thread('default', 's1', 'side', 'Diet', NULL, 'open', NULL, '2030-03-01 08:00+00');
SELECT ember.create_thread('default', 's2', 'side', 'Trips', 'travel', 'open', NULL, '2030-03-01 08:00+00');
SELECT ember.create_thread('default', 'vault', 'side', 'Private', NULL, 'isolated', NULL, '2030-03-01 08:00+00');
UPDATE ember.models SET tags = '{travel}' WHERE id = 'claude-haiku-4-5';

SELECT ember.append_message('default', 's1', 'user', 'I am vegetarian.', p_now => '2030-03-01 09:00+00') AS m_old \gset
SELECT ember.append_message('default', 's2', 'user', 'I fly to Lisbon often.', p_now => '2030-03-01 09:00+00') AS m_s2 \gset

-- ---------------------------------------------------------------------------------------------
-- Refusals.
SELECT throws_ok($$SELECT ember.cut_over('thread', 's1', 'ops', NULL, '2030-03-01 09:30+00')$$, 'EM121', NULL,
                 'no cut-over before shadow is activated: nothing would read the new rows');
SELECT ember.shadow_activate('2030-03-01 09:30+00');
-- A row after activation, before the cut-over: shadow reads it, and it stays the steward's.
SELECT ember.append_message('default', 's1', 'user', 'I like rice.', p_now => '2030-03-01 09:40+00') AS m_pre \gset
SELECT throws_ok($$SELECT ember.cut_over('room', 's1')$$, 'EM120', NULL, 'an unknown scope kind is refused');
SELECT throws_ok($$SELECT ember.cut_over('thread', NULL)$$, 'EM120', NULL, 'a thread scope needs a thread');
SELECT throws_ok($$SELECT ember.cut_over('all', 's1')$$, 'EM120', NULL, 'the all scope takes no value');
SELECT throws_ok($$SELECT ember.cut_over('thread', 'nope')$$, 'EM120', NULL, 'an unknown thread is refused');
SELECT throws_ok($$SELECT ember.cut_over('thread', 'main')$$, 'EM120', NULL,
                 'main is never cut over: shadow does not read it');
SELECT throws_ok($$SELECT ember.cut_over('thread', 'vault')$$, 'EM120', NULL, 'nor is an isolated thread');
SELECT throws_ok($$SELECT ember.cut_over('category', 'nope')$$, 'EM120', NULL, 'an unknown category is refused');
SELECT throws_ok($$SELECT ember.cutover_rollback('thread', 's1')$$, 'EM123', NULL,
                 'a rollback of a scope that is not cut over is refused');

-- ---------------------------------------------------------------------------------------------
-- The dry run changes nothing and shows the scope's numbers.
SELECT is(ember.cutover_plan('thread', 's1', false, '2030-03-01 10:00+00') ->> 'refused', NULL,
          'the dry run of a valid cut-over names no refusal');
SELECT is((ember.cutover_plan('thread', 's1', false, '2030-03-01 10:00+00') -> 'steward_rows_to_digest')::int, 2,
          'it counts the scope''s rows the steward still digests');
SELECT ok(ember.cutover_plan('thread', 's1', false, '2030-03-01 10:00+00') -> 'comparison' ? 'exact_coverage',
          'and carries the comparison''s numbers for the scope');
SELECT is((SELECT count(*)::int FROM ember.cutovers), 0, 'a dry run writes no cut-over');

SELECT ember.cut_over('thread', 's1', 'ops', 'first thread', '2030-03-01 10:00+00') AS cut1 \gset
SELECT is((SELECT created_by FROM ember.cutovers), 'ops', 'the cut-over records who made it');
SELECT is((SELECT from_seq FROM ember.cutovers), (SELECT max(seq) FROM ember.messages),
          'and its point: the global max(seq) when it was made');
SELECT throws_ok($$SELECT ember.cut_over('all')$$, 'EM122', NULL, 'an overlapping all scope is refused');
SELECT throws_ok($$SELECT ember.cut_over('thread', 's1')$$, 'EM122', NULL, 'as is the same thread again');
SELECT lives_ok($$SELECT ember.cut_over('category', 'travel', 'ops', NULL, '2030-03-01 10:00+00')$$,
                'a category that does not hold the thread can be cut over beside it');
SELECT throws_ok($$SELECT ember.cut_over('thread', 's2')$$, 'EM122', NULL,
                 'a thread of a cut-over category is refused');
SELECT ember.cutover_rollback('category', 'travel', 'ops', '2030-03-01 10:00+00');

-- ---------------------------------------------------------------------------------------------
-- The steward stops at the point; the rows before it stay its own.
SELECT ember.append_message('default', 's1', 'user', 'I moved to Lisbon.', p_now => '2030-03-01 10:05+00') AS m_new \gset
SELECT ember.append_message('default', 's1', 'assistant', 'Shall I note Lisbon as home?', p_now => '2030-03-01 10:06+00') AS m_asst \gset
SELECT ember.append_message('default', 's1', 'tool_result', 'lookup failed', NULL, NULL, 'c1', 'lookup', 'error', NULL,
                            '2030-03-01 10:07+00') AS m_err \gset
SELECT ember.append_message('default', 's1', 'user', 'I drink tea.', p_now => '2030-03-01 10:08+00') AS m_tea \gset
SELECT is((SELECT array_agg(id ORDER BY seq) FROM ember.backlog WHERE thread_id = 's1'), ARRAY[:m_old, :m_pre]::bigint[],
          'the steward''s backlog of a cut-over thread ends at the point: its older row stays, the new ones are shadow''s');
SELECT is((SELECT count(*)::int FROM ember.backlog_waiting WHERE thread_id = 's1'), 0,
          'and shadow''s rows are not reported as waiting for the steward');
SELECT is((SELECT array_agg(id) FROM ember.backlog WHERE thread_id = 's2'), ARRAY[:m_s2]::bigint[],
          'a thread outside the scope is read by the steward as before');

-- ---------------------------------------------------------------------------------------------
-- Promotion: the valid proposal citing shadow's rows becomes a fact; the rest is refused or kept.
SELECT pg_temp.shadow_run('s1', '2030-03-01 11:00+00') AS r1 \gset
SELECT pg_temp.submit(:r1, jsonb_build_array(
    pg_temp.prop('The user lives in Lisbon.', 'user-stated', :m_new),
    pg_temp.prop('The user likes rice.', 'user-stated', :m_pre),
    pg_temp.prop('The user lives in Lisbon and likes rice.', 'user-stated', :m_new, :m_pre),
    pg_temp.prop('The user likes lookups.', 'tool-verified', :m_err)
), '2030-03-01 11:01+00');

SELECT is((SELECT count(*)::int FROM ember.cutover_promotions WHERE shadow_run_id = :r1), 3,
          'each valid proposal of the scope is considered once (the invalid one never)');
SELECT is((SELECT f.text FROM ember.facts AS f WHERE f.shadow_run_id = :r1), 'The user lives in Lisbon.',
          'the proposal citing only shadow''s rows became a fact');
SELECT is((SELECT (f.run_id IS NULL, f.cutover_id = (:'cut1'::jsonb ->> 'cutover_id')::bigint,
                   f.shadow_proposal_id IS NOT NULL, f.created_at)::text
           FROM ember.facts AS f WHERE f.shadow_run_id = :r1),
          (true, true, true, '2030-03-01 11:01+00'::timestamptz)::text,
          'the fact names its proposal and cut-over, no steward run, and the proposal''s time');
SELECT is((SELECT array_agg(e.message_id) FROM ember.fact_evidence AS e
           JOIN ember.facts AS f ON f.id = e.fact_id WHERE f.shadow_run_id = :r1), ARRAY[:m_new]::bigint[],
          'with the proposal''s evidence');
SELECT is((SELECT (h.change, h.shadow_run_id, h.proposal_id IS NOT NULL, h.cutover_id IS NOT NULL)::text
           FROM ember.fact_history AS h JOIN ember.facts AS f ON f.id = h.fact_id WHERE f.shadow_run_id = :r1),
          ('written', :r1, true, true)::text,
          'fact history records the write with its proposal, shadow run and cut-over');
SELECT matches((SELECT reason FROM ember.cutover_promotions AS p JOIN ember.shadow_proposals AS s ON s.id = p.proposal_id
                WHERE s.run_id = :r1 AND s.text = 'The user likes rice.'),
               'at or before cut-over \d+''s point', 'a proposal citing a row before the point is refused: it is the steward''s');
SELECT matches((SELECT reason FROM ember.cutover_promotions AS p JOIN ember.shadow_proposals AS s ON s.id = p.proposal_id
                WHERE s.run_id = :r1 AND s.text LIKE '%and likes rice.'),
               'pointer 2 .*at or before', 'as is one citing both sides of it');
SELECT is((SELECT count(*)::int FROM ember.messages WHERE episode_id IS NOT NULL), 0,
          'promotion marks no row digested: episode_id stays the steward''s');

-- ---------------------------------------------------------------------------------------------
-- Promotion re-checks the evidence and refuses exactly what the steward would refuse.
CREATE TEMP TABLE cases (kind text, evidence jsonb);
INSERT INTO cases VALUES
    ('user-stated', pg_temp.ev(:m_asst)),
    ('user-stated', pg_temp.ev(:m_tea)),
    ('tool-verified', pg_temp.ev(:m_err)),
    ('observed-outcome', pg_temp.ev(:m_tea)),
    ('user-accepted', pg_temp.ev(:m_asst)),
    ('user-accepted', pg_temp.ev(:m_asst, :m_tea)),
    ('observed-outcome', pg_temp.ev(:m_err)),
    ('tool-verified', pg_temp.ev(:m_tea)),
    ('user-stated', pg_temp.ev(:m_asst, :m_tea));
CREATE TEMP TABLE forced_props AS
SELECT c.kind, c.evidence, pg_temp.forced(:r1, 'Forced ' || md5(c.kind || c.evidence::text), c.kind, c.evidence) AS id
FROM cases AS c;
SELECT is((SELECT count(*)::int FROM forced_props AS p
           WHERE (pg_temp.outcome(p.id) = 'refused')
                 <> (ember.check_evidence(NULL, p.kind, p.evidence, false) IS NOT NULL)), 0,
          'for every hand-stored "valid" proposal, promotion refuses it exactly when the steward''s check would');
SELECT is((SELECT count(*)::int FROM forced_props AS p WHERE pg_temp.outcome(p.id) = 'refused'), 7,
          'and the hand-stored cases include refusals (7 of 9)');
SELECT is((SELECT count(*)::int FROM forced_props AS p JOIN ember.cutover_promotions AS c ON c.proposal_id = p.id
           WHERE c.outcome = 'refused' AND c.reason NOT LIKE 'evidence refused: %'), 0,
          'each refusal says the evidence was refused, with the steward''s reason');

-- A pointer the run's model never saw is refused though the steward's kind rules pass it.
SELECT ember.append_message('default', 's1', 'user', 'I cycle to work.', p_now => '2030-03-01 11:30+00') AS m_unseen \gset
SELECT is(pg_temp.outcome(pg_temp.forced(:r1, 'The user cycles.', 'user-stated', pg_temp.ev(:m_unseen))), 'refused',
          'a pointer to a row the run did not read is refused at promotion');

-- A forgotten row: its tombstone keeps role and author, and promotion still refuses it.
SELECT pg_temp.shadow_run('s1', '2030-03-01 12:00+00') AS r2 \gset
SELECT pg_temp.submit(:r2, '[]', '2030-03-01 12:01+00');
-- A generation pointer into the generation that straddles the point: it names the rows the run
-- read, so a cold run that read only rows above the point may cite it; one that read the older
-- row may not.
SELECT is((SELECT (path, from_seq >= (:'cut1'::jsonb ->> 'from_seq')::bigint)::text FROM ember.shadow_runs WHERE id = :r2),
          ('cold', true)::text, 'the second run read only rows above the point, cold');
SELECT is(pg_temp.outcome(pg_temp.forced(:r2, 'The conversation went well.', 'observed-outcome',
              jsonb_build_array(jsonb_build_object('generation_id', (SELECT generation_id FROM ember.shadow_runs
                                                                      WHERE id = :r2))))),
          'promoted', 'its pointer to the straddling generation is promotable');
SELECT pg_temp.forced(:r1, 'The conversation started well.', 'observed-outcome',
                      jsonb_build_array(jsonb_build_object('generation_id', (SELECT generation_id FROM ember.shadow_runs
                                                                              WHERE id = :r1)))) AS p_gen1 \gset
SELECT matches((SELECT reason FROM ember.cutover_promotions WHERE proposal_id = :p_gen1),
               'the generation has rows at or before', 'the first run, which read the older row, may not cite it');
SELECT ember.forget_messages('default', ARRAY[:m_unseen]::bigint[], 'asked');
SELECT pg_temp.forced(:r2, 'The user cycles to work.', 'user-stated', pg_temp.ev(:m_unseen)) AS p_forgot \gset
SELECT matches((SELECT reason FROM ember.cutover_promotions WHERE proposal_id = :p_forgot),
               'forgotten', 'a pointer to a forgotten row is refused at promotion');

-- ---------------------------------------------------------------------------------------------
-- The steward confirms one promoted fact from its own reading of another thread.
SELECT ember.append_message('default', 's2', 'user', 'I drink tea every day.', p_now => '2030-03-01 12:10+00') AS m_s2tea \gset
SELECT fact_id AS f_tea FROM ember.cutover_promotions
WHERE proposal_id = (SELECT id FROM forced_props WHERE kind = 'user-stated' AND evidence = pg_temp.ev(:m_tea)) \gset
CREATE TEMP TABLE plan AS SELECT ember.claim_steward_run('w', '10 minutes', '2030-03-01 13:00+00') AS p;
SELECT is((SELECT (p -> 'row_count')::int FROM plan), 4,
          'the steward reads the rows before the point and the other thread''s: never shadow''s');
CREATE FUNCTION pg_temp.step(p_name text, p_input jsonb) RETURNS text LANGUAGE sql AS $$
    SELECT ember.steward_step('default', (SELECT (p ->> 'run_id')::bigint FROM plan), (SELECT (p ->> 'lease_token')::uuid FROM plan),
        jsonb_build_object('content', jsonb_build_array(jsonb_build_object('type', 'tool_use', 'id', 'c-' || md5(random()::text),
            'name', p_name, 'input', p_input)), 'usage', '{"input_tokens": 10, "output_tokens": 5}'::jsonb),
        '{}', 100, '2030-03-01 13:01+00') -> 'results' -> 0 ->> 'content'
$$;
SELECT is(pg_temp.step('write_fact', jsonb_build_object('text', (SELECT text FROM ember.facts WHERE id = :f_tea),
              'evidence_kind', 'user-stated', 'evidence', pg_temp.ev(:m_s2tea))),
          format('fact %s already states this; nothing written', :f_tea),
          'the steward, writing what a promoted fact states, is told it is in memory');
SELECT is((SELECT count(*)::int FROM ember.fact_confirmations WHERE fact_id = :f_tea), 1,
          'and its confirmation is recorded');
SELECT is(pg_temp.step('write_fact', jsonb_build_object('text', 'The user lives in Lisbon.',
              'evidence_kind', 'user-stated', 'evidence', pg_temp.ev(:m_new))) LIKE '%already states%', true,
          'a write citing a row it never read gets the same answer');
SELECT is((SELECT count(*)::int FROM ember.fact_confirmations AS k JOIN ember.facts AS f ON f.id = k.fact_id
           WHERE f.text = 'The user lives in Lisbon.'), 0, 'but confirms nothing: its evidence fails the steward''s check');
SELECT pg_temp.step('finish', jsonb_build_object('through_message_id', (SELECT (p ->> 'last_message_id')::bigint FROM plan)));
SELECT is((SELECT count(*)::int FROM ember.messages WHERE thread_id = 's1' AND episode_id IS NOT NULL), 2,
          'the steward digested the cut-over thread''s rows before the point, and only those');

SELECT ok(ember.explain_fact(:f_tea) -> 'promotion' ->> 'proposal' IS NOT NULL
          AND jsonb_array_length(ember.explain_fact(:f_tea) -> 'promotion' -> 'confirmed_by_steward') = 1,
          'explain_fact shows the promotion and the steward''s confirmation');

-- ---------------------------------------------------------------------------------------------
-- Rollback.
CREATE TEMP TABLE promoted AS SELECT id, status FROM ember.facts WHERE cutover_id IS NOT NULL AND status = 'active';
CREATE TEMP TABLE steward_before AS SELECT id, status, updated_at FROM ember.facts WHERE cutover_id IS NULL;
SELECT is((ember.cutover_plan('thread', 's1', true, '2030-03-01 14:00+00') -> 'facts_to_keep'), jsonb_build_array(:f_tea),
          'the rollback''s dry run names the facts it keeps');
SELECT ember.cutover_rollback('thread', 's1', 'ops', '2030-03-01 14:00+00') AS rb \gset
-- (A promoted fact forgotten since is retired already, its text gone: not the rollback's.)
SELECT is((SELECT array_agg(id ORDER BY id) FROM ember.facts
           WHERE cutover_id IS NOT NULL AND status = 'retired' AND text IS NOT NULL),
          (SELECT array_agg(id ORDER BY id) FROM promoted WHERE id <> :f_tea),
          'a rollback retires exactly the facts the promotion wrote, but the confirmed one');
SELECT is((SELECT status FROM ember.facts WHERE id = :f_tea), 'active', 'the fact the steward confirmed stays');
SELECT is((SELECT count(*)::int FROM ember.fact_history AS h JOIN promoted AS p ON p.id = h.fact_id
           WHERE h.change = 'retired' AND h.cutover_id IS NOT NULL AND h.run_id IS NULL), (SELECT count(*)::int - 1 FROM promoted),
          'each retirement is in fact history with its cut-over, never put on a steward run');
SELECT is((SELECT count(*)::int FROM ember.facts AS f JOIN steward_before AS b USING (id)
           WHERE (f.status, f.updated_at) IS DISTINCT FROM (b.status, b.updated_at)), 0,
          'the steward''s own facts are untouched');
SELECT is((SELECT array_agg(id ORDER BY seq) FROM ember.backlog WHERE thread_id = 's1'),
          ARRAY[:m_new, :m_asst, :m_err, :m_tea, :m_unseen]::bigint[],
          'the steward reads the thread again from the cut-over point');
SELECT is((:'rb'::jsonb ->> 'rows_returned')::int, 5, 'and the rollback says how many rows it returned');
SELECT ember.append_message('default', 's1', 'user', 'I own a bike.', p_now => '2030-03-01 14:30+00') AS m_bike \gset
SELECT pg_temp.shadow_run('s1', '2030-03-01 15:00+00') AS r3 \gset
SELECT pg_temp.submit(:r3, jsonb_build_array(pg_temp.prop('The user owns a bike.', 'user-stated', :m_bike)), '2030-03-01 15:01+00');
SELECT is((SELECT count(*)::int FROM ember.cutover_promotions WHERE shadow_run_id = :r3), 0,
          'after the rollback, no proposal is promoted');

-- Nobody but the owner, and whoever a DBA grants these to, may cut over.
SET LOCAL ROLE ember_analyst;
SELECT throws_ok($$SELECT ember.cut_over('thread', 's1')$$, '42501', NULL, 'the analyst role may not cut over');
RESET ROLE;
SET LOCAL ROLE ember_worker;
SELECT throws_ok($$SELECT ember.cutover_rollback('thread', 's1')$$, '42501', NULL, 'nor may the worker roll back');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
