BEGIN;
SELECT plan(16);

-- The guard holds even when the writer is wrong: these rows are written by hand, bypassing
-- submit_shadow_run and its validation.

-- A running run for a thread, inserted directly (as a claim would).
CREATE FUNCTION pg_temp.new_run(p_thread text) RETURNS bigint LANGUAGE sql AS $$
    INSERT INTO ember.shadow_runs (
        thread_id, generation_id, path, model, from_seq, through_seq, started_at, worker,
        lease_token, lease_expires_at
    )
    SELECT p_thread, g.id, 'cold', 'claude-haiku-4-5', 0, 0, now(), 'test', gen_random_uuid(),
           now() + interval '10 minutes'
    FROM ember.generations AS g WHERE g.thread_id = p_thread AND g.ended_at IS NULL
    RETURNING id
$$;

-- A proposal row for run p_run, by hand.
CREATE FUNCTION pg_temp.propose(
    p_run bigint, p_ordinal integer, p_evidence jsonb, p_error text DEFAULT NULL,
    p_kind text DEFAULT 'user-stated', p_thread text DEFAULT NULL, p_generation uuid DEFAULT NULL
) RETURNS text LANGUAGE sql AS $$
    INSERT INTO ember.shadow_proposals (
        run_id, thread_id, generation_id, ordinal, text, evidence_kind, evidence,
        validation_error, created_at
    )
    SELECT r.id, coalesce(p_thread, r.thread_id), coalesce(p_generation, r.generation_id), p_ordinal,
           'a fact', p_kind, p_evidence, p_error, now()
    FROM ember.shadow_runs AS r WHERE r.id = p_run
    RETURNING 'stored'
$$;

SELECT ember.create_thread('default', 's1', 'side');
SELECT ember.create_thread('default', 's2', 'side');
SELECT ember.create_thread('default', 'vault', 'side', 'Private', NULL, 'isolated');
SELECT ember.append_message('default', 's1', 'user', 'I prefer tea.') AS m_s1 \gset
SELECT ember.append_message('default', 's1', 'tool_result', 'relayed', NULL, NULL, 'c1', 'ls', 'ok', 's2') AS m_relayed \gset
SELECT ember.append_message('default', 's2', 'user', 'I live in Lisbon.') AS m_s2 \gset
SELECT ember.append_message('default', 'vault', 'user', 'my secret') AS m_vault \gset
SELECT pg_temp.new_run('s1') AS r_s1 \gset
SELECT pg_temp.new_run('s2') AS r_s2 \gset
SELECT pg_temp.new_run('vault') AS r_vault \gset
SELECT id AS g_s2 FROM ember.generations WHERE thread_id = 's2' \gset

SELECT has_trigger('ember', 'shadow_proposals', 'shadow_proposal_guard', 'the proposal guard is installed');

SELECT lives_ok(format($$SELECT pg_temp.propose(%s, 1, '[{"message_id": %s}]')$$, :r_s1, :m_s1),
                'a valid row pointing into its own thread is stored');
SELECT throws_ok(format($$SELECT pg_temp.propose(%s, 2, '[{"message_id": %s}]')$$, :r_s1, :m_s2),
                 'EM046', NULL, 'a valid-marked row pointing into another thread is refused');
SELECT throws_ok(format($$SELECT pg_temp.propose(%s, 2, '[{"message_id": %s}]')$$, :r_s1, :m_relayed),
                 'EM046', NULL, 'a valid-marked row whose pointer''s lineage leaves the thread is refused');
SELECT throws_ok(format($$SELECT pg_temp.propose(%s, 2, '[{"generation_id": "%s"}]', NULL, 'observed-outcome')$$,
                        :r_s1, :'g_s2'),
                 'EM046', NULL, 'a valid-marked row pointing at another thread''s generation is refused');
SELECT throws_ok(format($$SELECT pg_temp.propose(%s, 2, '[{"message_id": %s, "thread_id": "s1"}]')$$, :r_s1, :m_s2),
                 'EM046', NULL, 'a valid-marked row with a malformed pointer is refused');
SELECT throws_ok(format($$SELECT pg_temp.propose(%s, 2, '[{"message_id": 999999999}]')$$, :r_s1),
                 'EM046', NULL, 'a valid-marked row pointing at no row is refused');
SELECT throws_ok(format($$SELECT pg_temp.propose(%s, 2, '[]')$$, :r_s1),
                 'EM046', NULL, 'a valid-marked row without pointers is refused');
SELECT lives_ok(format($$SELECT pg_temp.propose(%s, 2, '[{"message_id": %s}]', 'not in thread')$$, :r_s1, :m_s2),
                'a rejected row may keep its cross-thread pointer as comparison data');
SELECT throws_ok($$UPDATE ember.shadow_proposals SET validation_error = NULL WHERE validation_error IS NOT NULL$$,
                 'EM046', NULL, 'clearing the error of a cross-thread row is refused like an insert');
SELECT throws_ok(format($$SELECT pg_temp.propose(%s, 3, '[{"message_id": %s}]', NULL, 'user-stated', 's1')$$,
                        :r_s2, :m_s1),
                 'EM046', NULL, 'a row whose run belongs to another thread is refused');
SELECT throws_ok(format($$SELECT pg_temp.propose(%s, 3, '[{"message_id": %s}]', NULL, 'user-stated', NULL, '%s')$$,
                        :r_s1, :m_s1, :'g_s2'),
                 'EM046', NULL, 'a row whose generation belongs to another thread is refused');
SELECT throws_ok(format($$SELECT pg_temp.propose(%s, 1, '[{"message_id": %s}]')$$, :r_vault, :m_vault),
                 'EM045', NULL, 'a valid row of an isolated thread is refused');
SELECT throws_ok(format($$SELECT pg_temp.propose(%s, 1, '[{"message_id": %s}]', 'rejected')$$, :r_vault, :m_vault),
                 'EM045', NULL, 'even a rejected row of an isolated thread is refused');
SELECT throws_ok(format($$UPDATE ember.shadow_proposals SET thread_id = 'vault' WHERE run_id = %s$$, :r_s1),
                 'EM045', NULL, 'moving a row to an isolated thread is refused');

SELECT results_eq(
    'SELECT ordinal, validation_error FROM ember.shadow_proposals ORDER BY ordinal',
    $$VALUES (1, NULL::text), (2, 'not in thread')$$,
    'only the two rows the guard allows are stored'
);

SELECT * FROM finish();
ROLLBACK;
