BEGIN;
SELECT plan(77);

-- Time is fixed: runs start at 10:00 with a 10-minute lease, outcomes finish at 10:01.

-- A running run for a thread, taken through the real claim: one unread row, a signal, a claim.
CREATE FUNCTION pg_temp.new_run(
    p_thread text, p_now timestamptz DEFAULT '2030-01-01 10:00+00', p_lease interval DEFAULT '10 minutes'
) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    v_plan jsonb;
BEGIN
    PERFORM ember.append_message('default', p_thread, 'assistant', 'Noted.', p_now => p_now - interval '1 second');
    PERFORM ember.shadow_memory_changed('default', p_thread, 'idle-or-ended', p_now);
    v_plan := ember.claim_shadow_run('test-worker', p_lease, p_now);
    IF v_plan ->> 'thread_id' IS DISTINCT FROM p_thread THEN
        RAISE EXCEPTION 'test set-up: expected a claim of %, got %', p_thread, v_plan;
    END IF;
    RETURN (v_plan ->> 'run_id')::bigint;
END;
$$;

-- A run inserted by hand, as no claim would ever write it (for an isolated thread).
CREATE FUNCTION pg_temp.forced_run(p_thread text) RETURNS bigint LANGUAGE sql AS $$
    INSERT INTO ember.shadow_runs (
        thread_id, generation_id, path, model, reason, from_seq, through_seq, started_at, worker,
        lease_token, lease_expires_at
    )
    SELECT p_thread, g.id, 'cold', 'claude-haiku-4-5', 'idle-or-ended', 0, 0,
           '2030-01-01 10:00+00', 'test-worker', gen_random_uuid(), '2030-01-01 10:10+00'
    FROM ember.generations AS g WHERE g.thread_id = p_thread AND g.ended_at IS NULL
    RETURNING id
$$;

CREATE FUNCTION pg_temp.token(p_run bigint) RETURNS uuid LANGUAGE sql AS $$
    SELECT lease_token FROM ember.shadow_runs WHERE id = p_run
$$;

CREATE FUNCTION pg_temp.outcome(
    p_status text DEFAULT 'completed',
    p_proposals jsonb DEFAULT '[]',
    p_error text DEFAULT NULL,
    p_finished timestamptz DEFAULT '2030-01-01 10:01+00'
) RETURNS jsonb LANGUAGE sql AS $$
    SELECT jsonb_build_object(
        'status', p_status,
        'error', p_error,
        'usage', jsonb_build_object(
            'input_tokens', 120, 'cache_read_input_tokens', 4000, 'cache_creation_5m_input_tokens', 30,
            'cache_creation_1h_input_tokens', 0, 'output_tokens', 55
        ),
        'latency_ms', 1800,
        'finished_at', p_finished,
        'proposals', p_proposals
    )
$$;

CREATE FUNCTION pg_temp.proposal(p_text text, p_kind text, VARIADIC p_ids bigint []) RETURNS jsonb LANGUAGE sql AS $$
    SELECT jsonb_build_object(
        'text', p_text, 'evidence_kind', p_kind,
        'evidence', (SELECT jsonb_agg(jsonb_build_object('message_id', i)) FROM unnest(p_ids) AS i)
    )
$$;

-- The SQL text of a submit, for throws_ok.
CREATE FUNCTION pg_temp.submit_sql(p_run bigint, p_token uuid, p_outcome jsonb) RETURNS text LANGUAGE sql AS $$
    SELECT format('SELECT ember.submit_shadow_run(''default'', %s, %L, %L)', p_run, p_token, p_outcome)
$$;

-- Nothing of run p_run was written: still running, no tokens, no proposals.
CREATE FUNCTION pg_temp.untouched(p_run bigint) RETURNS boolean LANGUAGE sql AS $$
    SELECT r.status = 'running' AND r.finished_at IS NULL AND r.error IS NULL
           AND r.input_tokens + r.output_tokens + r.cache_read_tokens = 0 AND r.latency_ms IS NULL
           AND NOT EXISTS (SELECT 1 FROM ember.shadow_proposals AS p WHERE p.run_id = r.id)
    FROM ember.shadow_runs AS r WHERE r.id = p_run
$$;

SELECT ember.shadow_activate('2030-01-01 09:00+00');
SELECT ember.define_category('health');
-- The diet thread is labelled health: its cold runs need a light model tagged for it.
UPDATE ember.models SET tags = '{health}' WHERE id = 'claude-haiku-4-5';
SELECT ember.create_thread('default', 's1', 'side', 'Diet', 'health');
SELECT ember.create_thread('default', 's2', 'side', 'Travel');
SELECT ember.create_thread('default', 's3', 'side', 'Refusals');
SELECT ember.create_thread('default', 's4', 'side', 'Real time');
SELECT ember.create_thread('default', 'vault', 'side', 'Private', NULL, 'isolated');
SELECT ember.append_message('default', 's1', 'user', 'I am vegetarian.') AS m_user \gset
SELECT ember.append_message('default', 's1', 'tool_result', 'lookup ok', NULL, NULL, 'c1', 'lookup', 'ok') AS m_tool \gset
SELECT ember.append_message('default', 's2', 'user', 'I live in Lisbon.') AS m_s2 \gset
SELECT ember.append_message('default', 's3', 'user', 'I like trains.') AS m_s3 \gset
SELECT ember.append_message('default', 'vault', 'user', 'my secret') AS m_vault \gset
SELECT id AS g_s1 FROM ember.generations WHERE thread_id = 's1' \gset

-- The steward digested one row earlier; shadow must leave that marker and everything else alone.
UPDATE ember.messages SET episode_id = gen_random_uuid() WHERE id = :m_tool;
CREATE TEMP TABLE episodes_before AS SELECT id, episode_id FROM ember.messages;

-- ---------------------------------------------------------------------------------------------
-- An invalid fact does not discard its valid siblings (seed: 2 rows, 1 with an error).
SELECT pg_temp.new_run('s1') AS r1 \gset
SELECT is(
    ember.submit_shadow_run('default', :r1, pg_temp.token(:r1), pg_temp.outcome('completed', jsonb_build_array(
        pg_temp.proposal('The user is vegetarian.', 'user-stated', :m_user),
        pg_temp.proposal('The user is vegan.', 'user-decided', :m_user)
    ))),
    jsonb_build_object('run_id', :r1, 'status', 'completed', 'proposals', 2, 'valid', 1, 'rejected', 1),
    'submit returns the run, its status and the counts'
);
SELECT is((SELECT count(*)::int FROM ember.shadow_proposals WHERE run_id = :r1), 2,
          'an invalid fact does not discard its valid sibling: two rows');
SELECT is((SELECT count(*)::int FROM ember.shadow_proposals WHERE run_id = :r1 AND validation_error IS NOT NULL), 1,
          'one of them carries its validation error');
SELECT matches((SELECT validation_error FROM ember.shadow_proposals WHERE run_id = :r1 AND ordinal = 2),
               '^unknown evidence kind "user-decided"', 'the error says why');
SELECT results_eq(
    format('SELECT ordinal, text, evidence_kind, evidence, validation_error FROM ember.shadow_proposals
            WHERE run_id = %s ORDER BY ordinal', :r1),
    format($$VALUES (1, 'The user is vegetarian.', 'user-stated', '[{"message_id": %s}]'::jsonb, NULL::text)$$, :m_user)
    || format($$, (2, 'The user is vegan.', 'user-decided', '[{"message_id": %s}]'::jsonb,
                   (SELECT validation_error FROM ember.shadow_proposals WHERE run_id = %s AND ordinal = 2))$$,
              :m_user, :r1),
    'each proposal is stored with its ordinal, text, kind and pointers as sent'
);
SELECT ok((SELECT bool_and(thread_id = 's1' AND generation_id = :'g_s1') FROM ember.shadow_proposals WHERE run_id = :r1),
          'proposals take their thread and generation from the run');
SELECT ok((SELECT bool_and(categories = ember.generation_labels(:'g_s1') AND categories = '{health}')
           FROM ember.shadow_proposals WHERE run_id = :r1),
          'proposals carry the labels of the run''s generation');
SELECT ok((SELECT bool_and(created_at = '2030-01-01 10:01+00') FROM ember.shadow_proposals WHERE run_id = :r1),
          'proposals are stamped with the outcome''s finish time');
SELECT results_eq(
    format('SELECT status, error, input_tokens, cache_read_tokens, cache_write_5m_tokens, cache_write_1h_tokens,
                   output_tokens, latency_ms, finished_at FROM ember.shadow_runs WHERE id = %s', :r1),
    $$VALUES ('completed', NULL::text, 120::bigint, 4000::bigint, 30::bigint, 0::bigint, 55::bigint, 1800::bigint,
              '2030-01-01 10:01+00'::timestamptz)$$,
    'the run records status, tokens by kind, latency and finish time'
);

-- A duplicate submit, and a submit to a finished run, are refused.
SELECT throws_ok(pg_temp.submit_sql(:r1, pg_temp.token(:r1), pg_temp.outcome()), 'EM043', NULL,
                 'a second submit of the same run is refused: an outcome is recorded once');
SELECT is((SELECT count(*)::int FROM ember.shadow_proposals WHERE run_id = :r1), 2, 'and adds nothing');

-- ---------------------------------------------------------------------------------------------
-- Cross-thread evidence is retained as a rejected proposal, never as a fact.
SELECT pg_temp.new_run('s1') AS r2 \gset
SELECT is(
    ember.submit_shadow_run('default', :r2, pg_temp.token(:r2), pg_temp.outcome('completed', jsonb_build_array(
        pg_temp.proposal('The user lives in Lisbon.', 'user-stated', :m_s2)
    ))) ->> 'rejected',
    '1', 'a proposal citing another thread is counted as rejected'
);
SELECT matches((SELECT validation_error FROM ember.shadow_proposals WHERE run_id = :r2),
               'not in thread "s1"', 'it is kept as a rejected comparison row, saying why');
SELECT is((SELECT count(*)::int FROM ember.facts), 0, 'and zero rows reach facts');

-- A proposal citing an isolated thread is rejected without naming it.
SELECT pg_temp.new_run('s1') AS r2b \gset
SELECT is(
    ember.submit_shadow_run('default', :r2b, pg_temp.token(:r2b), pg_temp.outcome('completed', jsonb_build_array(
        pg_temp.proposal('A secret.', 'user-stated', :m_vault)
    ))) ->> 'rejected',
    '1', 'a proposal citing an isolated thread is rejected'
);
SELECT unalike((SELECT validation_error FROM ember.shadow_proposals WHERE run_id = :r2b), '%vault%',
               'its error does not name the isolated thread');

-- ---------------------------------------------------------------------------------------------
-- A cancelled run commits no proposals.
SELECT pg_temp.new_run('s1') AS r3 \gset
SELECT ember.append_message('default', 's1', 'user', 'Wait, one more thing.', p_now => '2030-01-01 10:00:30+00');
SELECT ok((SELECT cancel_requested FROM ember.shadow_runs WHERE id = :r3),
          'a human message while the run is out asks it to cancel');
SELECT is(
    ember.submit_shadow_run('default', :r3, pg_temp.token(:r3), pg_temp.outcome('completed', jsonb_build_array(
        pg_temp.proposal('The user is vegetarian.', 'user-stated', :m_user)
    ))),
    jsonb_build_object('run_id', :r3, 'status', 'cancelled', 'proposals', 0, 'valid', 0, 'rejected', 0),
    'a submit after a cancel request reports the run cancelled with no proposals'
);
SELECT is((SELECT status || '/' || error FROM ember.shadow_runs WHERE id = :r3), 'cancelled/interrupted-by-user',
          'the run is cancelled with error interrupted-by-user');
SELECT is((SELECT count(*)::int FROM ember.shadow_proposals WHERE run_id = :r3), 0,
          'a cancelled run commits no proposals');
SELECT is((SELECT input_tokens + cache_read_tokens + output_tokens FROM ember.shadow_runs WHERE id = :r3),
          4175::bigint, 'a cancelled run still records the tokens it spent');

-- ---------------------------------------------------------------------------------------------
-- A failed run records its error and tokens (the backoff counts it; the tokens were spent).
SELECT pg_temp.new_run('s1') AS r4 \gset
SELECT is(
    ember.submit_shadow_run('default', :r4, pg_temp.token(:r4), pg_temp.outcome('failed', '[]', 'model output was not JSON')),
    jsonb_build_object('run_id', :r4, 'status', 'failed', 'proposals', 0, 'valid', 0, 'rejected', 0),
    'a failed outcome is recorded'
);
SELECT results_eq(
    format('SELECT status, error, output_tokens FROM ember.shadow_runs WHERE id = %s', :r4),
    $$VALUES ('failed', 'model output was not JSON', 55::bigint)$$,
    'a failed run keeps its error and its tokens'
);

-- ---------------------------------------------------------------------------------------------
-- Lease and status guards: a named error, nothing written.
SELECT pg_temp.new_run('s2') AS r5 \gset
SELECT throws_ok(pg_temp.submit_sql(:r5, gen_random_uuid(), pg_temp.outcome()), 'EM041', NULL,
                 'a wrong lease token is refused');
SELECT throws_ok(pg_temp.submit_sql(:r5, NULL, pg_temp.outcome()), 'EM041', NULL, 'a missing lease token is refused');
SELECT throws_ok(pg_temp.submit_sql(:r5, pg_temp.token(:r5), pg_temp.outcome('completed', '[]', NULL,
                                                                             '2030-01-01 10:10+00')),
                 'EM042', NULL, 'an outcome finished when the lease expired is refused');
SELECT throws_ok(pg_temp.submit_sql(:r5, pg_temp.token(:r5), pg_temp.outcome('completed', '[]', NULL,
                                                                             '2030-01-01 11:00+00')),
                 'EM042', NULL, 'an outcome finished after the lease expired is refused');
SELECT throws_ok(pg_temp.submit_sql(999999999, gen_random_uuid(), pg_temp.outcome()), 'EM040', NULL,
                 'an unknown run is refused');
SELECT ok(pg_temp.untouched(:r5), 'refused submits wrote nothing to the run');
UPDATE ember.shadow_runs SET status = 'abandoned', finished_at = '2030-01-01 10:11+00' WHERE id = :r5;
SELECT throws_ok(pg_temp.submit_sql(:r5, pg_temp.token(:r5), pg_temp.outcome()), 'EM043', NULL,
                 'a submit to an abandoned run is refused, even with a finish time inside the lease');
SELECT is((SELECT count(*)::int FROM ember.shadow_proposals WHERE run_id = :r5), 0, 'and stores no proposals');

-- The server clock is "now" when the outcome has no finish time.
SELECT pg_temp.new_run('s4', clock_timestamp() - interval '1 hour') AS r5c \gset
SELECT throws_ok(pg_temp.submit_sql(:r5c, pg_temp.token(:r5c), pg_temp.outcome() - 'finished_at'),
                 'EM042', NULL, 'without finished_at the server clock decides, and it is past this lease');
SELECT ok(pg_temp.untouched(:r5c), 'the late submit wrote nothing');
SELECT pg_temp.new_run('s2', clock_timestamp() - interval '1 minute') AS r6 \gset
SELECT is(ember.submit_shadow_run('default', :r6, pg_temp.token(:r6), pg_temp.outcome() - 'finished_at') ->> 'status',
          'completed', 'without finished_at an outcome inside the lease by the server clock is recorded');
SELECT ok((SELECT finished_at BETWEEN started_at AND clock_timestamp() FROM ember.shadow_runs WHERE id = :r6),
          'and stamped with the server clock');

-- ---------------------------------------------------------------------------------------------
-- A malformed envelope: a named error, never a partial run.
SELECT pg_temp.new_run('s3') AS r7 \gset
SELECT :r7 AS r, pg_temp.token(:r7) AS t \gset
SELECT throws_ok(pg_temp.submit_sql(:r, :'t', '[]'), 'EM044', NULL, 'an outcome that is not an object');
SELECT throws_ok(pg_temp.submit_sql(:r, :'t', pg_temp.outcome() - 'usage'), 'EM044',
                 'shadow run ' || :r || ': malformed outcome: missing outcome field(s): usage', 'missing usage');
SELECT throws_ok(pg_temp.submit_sql(:r, :'t', pg_temp.outcome() - 'proposals'), 'EM044', NULL, 'missing proposals');
SELECT throws_ok(pg_temp.submit_sql(:r, :'t', pg_temp.outcome() - 'status'), 'EM044', NULL, 'missing status');
SELECT throws_ok(pg_temp.submit_sql(:r, :'t', pg_temp.outcome() - 'error'), 'EM044', NULL, 'missing error');
SELECT throws_ok(pg_temp.submit_sql(:r, :'t', pg_temp.outcome() - 'latency_ms'), 'EM044', NULL, 'missing latency');
SELECT throws_ok(pg_temp.submit_sql(:r, :'t', pg_temp.outcome() || '{"latency": 5}'), 'EM044', NULL,
                 'an unknown field (a misspelt one) is refused');
SELECT throws_ok(pg_temp.submit_sql(:r, :'t', pg_temp.outcome('done')), 'EM044', NULL, 'an unknown status');
SELECT throws_ok(pg_temp.submit_sql(:r, :'t', pg_temp.outcome('cancelled')), 'EM044', NULL,
                 'a worker cannot report a run cancelled: only a human message cancels');
SELECT throws_ok(pg_temp.submit_sql(:r, :'t', pg_temp.outcome() || '{"status": 1}'), 'EM044', NULL,
                 'a status of the wrong type');
SELECT throws_ok(pg_temp.submit_sql(:r, :'t', jsonb_set(pg_temp.outcome(), '{usage,output_tokens}', '-1')), 'EM044',
                 NULL, 'negative tokens');
SELECT throws_ok(pg_temp.submit_sql(:r, :'t', jsonb_set(pg_temp.outcome(), '{usage,input_tokens}', '"120"')), 'EM044',
                 NULL, 'tokens given as a string');
SELECT throws_ok(pg_temp.submit_sql(:r, :'t', jsonb_set(pg_temp.outcome(), '{usage,input_tokens}', '1.5')), 'EM044',
                 NULL, 'fractional tokens');
SELECT throws_ok(pg_temp.submit_sql(:r, :'t', pg_temp.outcome() #- '{usage,cache_read_input_tokens}'), 'EM044',
                 NULL, 'a missing token kind');
SELECT throws_ok(pg_temp.submit_sql(:r, :'t', jsonb_set(pg_temp.outcome(), '{usage,cache_creation_input_tokens}',
                                                         '30')), 'EM044',
                 NULL, 'an unknown token kind');
SELECT throws_ok(pg_temp.submit_sql(:r, :'t', pg_temp.outcome() || '{"usage": [1, 2]}'), 'EM044', NULL,
                 'usage of the wrong type');
SELECT throws_ok(pg_temp.submit_sql(:r, :'t', pg_temp.outcome() || '{"latency_ms": -5}'), 'EM044', NULL,
                 'a negative latency');
SELECT throws_ok(pg_temp.submit_sql(:r, :'t', pg_temp.outcome() || '{"finished_at": "yesterday"}'), 'EM044', NULL,
                 'a finish time that is not a timestamp');
SELECT throws_ok(pg_temp.submit_sql(:r, :'t', pg_temp.outcome() || '{"finished_at": "2030-13-45 10:00"}'), 'EM044',
                 NULL, 'a finish time that is not a date');
SELECT throws_ok(pg_temp.submit_sql(:r, :'t', pg_temp.outcome() || '{"finished_at": "2030-01-01 10:01 Mars/Base"}'),
                 'EM044', NULL, 'a finish time in an unknown time zone');
SELECT throws_ok(pg_temp.submit_sql(:r, :'t', pg_temp.outcome() || '{"finished_at": "2030-01-01 10:01+99"}'),
                 'EM044', NULL, 'a finish time with an impossible offset');
SELECT throws_ok(pg_temp.submit_sql(:r, :'t', pg_temp.outcome('completed', '[]', NULL, '2030-01-01 09:59+00')),
                 'EM044', NULL, 'a run that finished before it started');
SELECT throws_ok(pg_temp.submit_sql(:r, :'t', pg_temp.outcome('failed')), 'EM044', NULL,
                 'a failed run without an error text');
SELECT throws_ok(pg_temp.submit_sql(:r, :'t', pg_temp.outcome('completed', '[]', 'oops')), 'EM044', NULL,
                 'a completed run with an error');
SELECT throws_ok(pg_temp.submit_sql(:r, :'t', pg_temp.outcome('failed', jsonb_build_array(
                     pg_temp.proposal('x', 'user-stated', :m_s3)), 'timeout')), 'EM044', NULL,
                 'a failed run with proposals');
SELECT throws_ok(pg_temp.submit_sql(:r, :'t', pg_temp.outcome('completed', '{"text": "x"}')), 'EM044', NULL,
                 'proposals that are not a list');
SELECT ok(pg_temp.untouched(:r7), 'a malformed outcome left the run running and wrote nothing');

-- ---------------------------------------------------------------------------------------------
-- A bad proposal gets its own validation_error; the run and its good proposals stand.
SELECT is(
    ember.submit_shadow_run('default', :r7, pg_temp.token(:r7), pg_temp.outcome('completed', jsonb_build_array(
        '"just a sentence"'::jsonb,
        jsonb_build_object('evidence_kind', 'user-stated', 'evidence', jsonb_build_array(
            jsonb_build_object('message_id', :m_s3))),
        pg_temp.proposal('   ', 'user-stated', :m_s3),
        pg_temp.proposal('x', 'user-stated', :m_s3) || '{"text": 42}',
        pg_temp.proposal('No kind.', 'user-stated', :m_s3) - 'evidence_kind',
        pg_temp.proposal('No pointers.', 'user-stated', :m_s3) || '{"evidence": []}',
        pg_temp.proposal('Wrong pointer.', 'user-stated', :m_s3) || '{"evidence": [{"seq": 1}]}',
        pg_temp.proposal('Extra field.', 'user-stated', :m_s3) || '{"confidence": 0.9}',
        pg_temp.proposal('The user likes trains.', 'user-stated', :m_s3)
    ))),
    jsonb_build_object('run_id', :r7, 'status', 'completed', 'proposals', 9, 'valid', 1, 'rejected', 8),
    'bad proposals are counted as rejected, the good one as valid'
);
SELECT results_eq(
    format('SELECT ordinal, validation_error FROM ember.shadow_proposals WHERE run_id = %s ORDER BY ordinal', :r7),
    $$VALUES (1, 'a proposal must be an object, got string'), (2, 'text must be a non-empty string'),
             (3, 'text must be a non-empty string'), (4, 'text must be a non-empty string'),
             (5, 'evidence_kind must be a string'), (6, 'evidence needs at least one pointer'),
             (7, 'pointer 1: must have exactly one key, message_id or generation_id; got seq'),
             (8, 'unknown proposal field(s): confidence'), (9, NULL)$$,
    'each bad proposal is stored with the reason it was rejected'
);

-- ---------------------------------------------------------------------------------------------
-- An isolated thread's run cannot record even a rejected proposal: the database refuses it.
SELECT pg_temp.forced_run('vault') AS r8 \gset
SELECT throws_ok(pg_temp.submit_sql(:r8, pg_temp.token(:r8), pg_temp.outcome('completed', jsonb_build_array(
                     pg_temp.proposal('A secret.', 'user-stated', :m_vault)))),
                 'EM045', NULL, 'a proposal about an isolated thread is refused, and the whole submit with it');
SELECT ok(pg_temp.untouched(:r8), 'the refused submit left nothing behind');

-- ---------------------------------------------------------------------------------------------
-- Shadow never touches episode_id, and writes facts only through promotion in a cut-over scope:
-- with none active, it writes none (pgtap/097_cutover.sql tests the promotion).
SELECT is((SELECT count(*)::int FROM ember.facts), 0, 'after every submit, facts is still empty');
SELECT is((SELECT count(*)::int FROM ember.fact_evidence), 0, 'and so is fact_evidence');
SELECT is((SELECT count(*)::int FROM ember.messages AS m LEFT JOIN episodes_before AS b USING (id)
           WHERE m.episode_id IS DISTINCT FROM b.episode_id), 0,
          'no digestion marker was written or cleared');
SELECT is((SELECT count(*)::int FROM ember.messages WHERE episode_id IS NOT NULL), 1,
          'the steward''s one marker is still there');


-- ---------------------------------------------------------------------------------------------
-- Issue 8: one malformed pointer never takes its siblings down; a count written 100.0 is EM044;
-- a pointer must name what the run's model saw, once.
SELECT ember.create_thread('default', 's5', 'side', 'Seen', p_now => '2030-01-02 08:00+00');
SELECT ember.append_message('default', 's5', 'user', 'I drink tea.', p_now => '2030-01-02 08:01+00') AS m5_user \gset
SELECT ember.start_generation('default', 's5', '2030-01-02 09:00+00');
SELECT ember.append_message('default', 's5', 'user', 'I moved to Porto.', p_now => '2030-01-02 09:01+00') AS m5_late \gset
SELECT pg_temp.new_run('s5', '2030-01-02 10:00+00') AS r5 \gset
SELECT is((SELECT g.ordinal FROM ember.shadow_runs AS r JOIN ember.generations AS g ON g.id = r.generation_id
           WHERE r.id = :r5), 1, 'the run reads the first generation only');
SELECT throws_ok(pg_temp.submit_sql(:r5, pg_temp.token(:r5),
                 jsonb_set(pg_temp.outcome('completed', '[]', NULL, '2030-01-02 10:01+00'), '{usage,input_tokens}', '100.0')),
                 'EM044', NULL, 'a token count written 100.0 is a malformed outcome, not a raw 22P02');
SELECT ok(pg_temp.untouched(:r5), 'and nothing of the run is written');
SELECT is(
    ember.submit_shadow_run('default', :r5, pg_temp.token(:r5), pg_temp.outcome('completed', jsonb_build_array(
        pg_temp.proposal('The user drinks tea.', 'user-stated', :m5_user),
        jsonb_build_object('text', 'The user drinks tea, really.', 'evidence_kind', 'user-stated',
                           'evidence', format('[{"message_id": %s.0}]', :m5_user)::jsonb),
        pg_temp.proposal('The user lives in Porto.', 'user-stated', :m5_late),
        pg_temp.proposal('The user drinks tea, twice.', 'user-stated', :m5_user, :m5_user)
    ), NULL, '2030-01-02 10:01+00')) - 'run_id',
    jsonb_build_object('status', 'completed', 'proposals', 4, 'valid', 1, 'rejected', 3),
    'a malformed pointer is stored as a rejected proposal beside its valid sibling'
);
SELECT is(ARRAY(SELECT validation_error FROM ember.shadow_proposals WHERE run_id = :r5 ORDER BY ordinal),
          ARRAY[NULL,
                format('pointer 1: message_id must be a positive integer, got %s.0', :m5_user),
                format('pointer 1 (message %s): not a row or generation this run''s model read', :m5_late),
                format('pointer 2 repeats pointer 1 (message %s)', :m5_user)],
          'each rejection says why: the N.0 id, the row of a generation the run never read, the repeated pointer');


-- No malformed pointer a model could write raises a raw error: each is a rejected proposal.
SELECT ember.append_message('default', 's5', 'assistant', 'More.', p_now => '2030-01-02 11:00+00');
SELECT ember.shadow_memory_changed('default', 's5', 'idle-or-ended', '2030-01-02 11:00+00');
SELECT (ember.claim_shadow_run('test-worker', '10 minutes', '2030-01-02 11:00+00') ->> 'run_id')::bigint AS r6 \gset
CREATE TEMP TABLE bad_evidence (e jsonb);
INSERT INTO bad_evidence VALUES
('[{"message_id": 1.5}]'), ('[{"message_id": -3}]'), ('[{"message_id": "12"}]'), ('[{"message_id": 1e30}]'),
('[{"message_id": 9223372036854775808}]'), ('[{"message_id": 0}]'), ('[{"message_id": null}]'),
('[{"generation_id": "nope"}]'), ('[{"generation_id": 42}]'),
('[{"message_id": 5, "generation_id": "00000000-0000-0000-0000-000000000000"}]'),
('{"message_id": 5}'), ('[]'), ('null'), ('"m:5"'), ('[[1]]'), ('[{"generation_id": "00000000-0000-0000-0000-000000000000"}]');
SELECT is(
    ember.submit_shadow_run('default', :r6, pg_temp.token(:r6), pg_temp.outcome('completed',
        (SELECT jsonb_agg(jsonb_build_object('text', 'x', 'evidence_kind', 'observed-outcome', 'evidence', e)) FROM bad_evidence),
        NULL, '2030-01-02 11:01+00')) - 'run_id',
    jsonb_build_object('status', 'completed', 'proposals', 16, 'valid', 0, 'rejected', 16),
    'sixteen malformed evidence lists: sixteen rejected proposals, no raw error'
);
SELECT is((SELECT count(*)::int FROM ember.shadow_proposals WHERE run_id = :r6 AND validation_error IS NOT NULL), 16,
          'each kept with its reason');

SELECT * FROM finish();
ROLLBACK;
