BEGIN;
SELECT plan(30);

-- A running run for a thread, taken through the real claim.
CREATE FUNCTION pg_temp.new_run(p_thread text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    v_plan jsonb;
BEGIN
    PERFORM ember.append_message('default', p_thread, 'assistant', 'Noted.', p_now => '2030-01-01 09:59:59+00');
    PERFORM ember.shadow_memory_changed('default', p_thread, 'idle-or-ended', '2030-01-01 10:00+00');
    v_plan := ember.claim_shadow_run('guard-worker', '10 minutes', '2030-01-01 10:00+00');
    IF v_plan ->> 'thread_id' IS DISTINCT FROM p_thread THEN
        RAISE EXCEPTION 'test set-up: expected a claim of %, got %', p_thread, v_plan;
    END IF;
    RETURN (v_plan ->> 'run_id')::bigint;
END;
$$;

CREATE FUNCTION pg_temp.completed_with_a_proposal(p_message bigint) RETURNS jsonb LANGUAGE sql AS $$
    SELECT jsonb_build_object(
        'status', 'completed', 'error', NULL,
        'usage', jsonb_build_object('input_tokens', 1, 'cache_read_input_tokens', 0,
                                    'cache_creation_5m_input_tokens', 0,
                                    'cache_creation_1h_input_tokens', 0, 'output_tokens', 1),
        'latency_ms', 10, 'finished_at', '2030-01-01 10:01+00',
        'proposals', jsonb_build_array(jsonb_build_object(
            'text', 'likes tea', 'evidence_kind', 'user-stated',
            'evidence', jsonb_build_array(jsonb_build_object('message_id', p_message)))))
$$;

SELECT ember.shadow_activate('2030-01-01 09:00+00');

-- Text keys: a documented limit, named, never PostgreSQL's index-row error.
SELECT is(ember.setting_int('max_key_chars'), 128, 'text keys are limited to 128 characters by default');
SELECT lives_ok(format($$SELECT ember.create_thread('default', %L, 'side')$$, repeat('t', 128)),
                'a 128-character thread id is accepted');
SELECT throws_ok(format($$SELECT ember.create_thread('default', %L, 'side')$$, repeat('t', 129)), 'EM012',
                 'thread id is 129 characters long; the limit is 128',
                 'a longer thread id is EM012 naming the field and the limit');
SELECT throws_ok(format($$SELECT ember.create_thread('default', %L, 'side')$$, repeat('x', 5000)), 'EM012', NULL,
                 'a thread id far past the index limit is the same named error');
SELECT throws_ok(format($$SELECT ember.define_category(%L)$$, repeat('c', 129)), 'EM012',
                 'category name is 129 characters long; the limit is 128', 'so is a category name');
SELECT ember.create_thread('default', 't1', 'side', 'Tea');
SELECT throws_ok(format($$SELECT ember.append_message('default', 't1', 'tool_result', 'ok', NULL, NULL, %L, 'lookup', 'ok')$$,
                        repeat('i', 300)), 'EM012',
                 'tool call id is 300 characters long; the limit is 128', 'and a tool call id');

-- Message content: a size limit, as a setting.
SELECT is(ember.setting_int('max_message_bytes'), 1048576, 'messages are limited to 1 MiB by default');
UPDATE ember.settings SET value = '100' WHERE key = 'max_message_bytes';
SELECT lives_ok($$SELECT ember.append_message('default', 't1', 'user', repeat('a', 100))$$, 'content at the limit is kept');
SELECT throws_ok($$SELECT ember.append_message('default', 't1', 'user', repeat('a', 101))$$, 'EM090',
                 'thread "t1": message content is 101 bytes; the limit is 100',
                 'content above the limit is EM090 with its size');
SELECT throws_ok($$SELECT ember.append_message('default', 't1', 'user', repeat('é', 51))$$, 'EM090', NULL,
                 'the limit counts bytes, not characters');
UPDATE ember.settings SET value = '1048576' WHERE key = 'max_message_bytes';

-- NULL arguments are EM012, as docs/errors.md says.
SELECT throws_ok($$SELECT ember.route_model('light', NULL)$$, 'EM012', NULL, 'route_model(tier, NULL) is EM012');
SELECT throws_ok($$SELECT ember.turn_ended('default', 't1', NULL)$$, 'EM012', NULL, 'turn_ended(thread, NULL) is EM012');
SELECT is(ember.route_model('light', '{}'), 'claude-haiku-4-5', 'an empty list still routes as unlabelled');

-- Direct inserts are refused with the function to use.
SELECT throws_ok($$INSERT INTO ember.messages (seq, thread_id, generation_id, role, author, content)
                   VALUES (nextval('ember.message_seq'), 't1', ember.latest_generation('default', 't1'), 'user', 'human', 'x')$$,
                 'EM091', 'messages are added with ember.append_message(), not inserted directly',
                 'a direct INSERT INTO ember.messages names append_message');
SELECT lives_ok($$SELECT ember.append_message('default', 't1', 'user', 'after the refusal')$$,
                'append_message still inserts');
SELECT throws_ok($$INSERT INTO ember.messages (seq, thread_id, generation_id, role, author, content)
                   VALUES (nextval('ember.message_seq'), 't1', ember.latest_generation('default', 't1'), 'user', 'human', 'x')$$,
                 'EM091', NULL, 'and a direct insert right after an append is refused all the same');

-- Message grammar.
SELECT throws_ok($$SELECT ember.append_message('default', 't1', 'assistant', 'x', 'human')$$, 'EM004',
                 'thread "t1": only user rows can have author human, not a row of role assistant',
                 'the author refusal reads as English for every role');
SELECT throws_ok($$SELECT ember.append_message('default', 't1', 'event', 'x', NULL, NULL, NULL, NULL, 'ok')$$, 'EM008',
                 'thread "t1": tool status "ok" on a row of role event; only tool_result rows have one',
                 'and so does the tool-status refusal');

-- Deeply nested JSON in a prefix.
SELECT throws_ok(format($$SELECT ember.note_prefix('default', 't1', %L, '{}')$$,
                        '{"a":' || repeat('[', 200000) || repeat(']', 200000) || '}'),
                 'EM032', NULL, 'note_prefix with JSON nested past the parser''s stack is EM032, not 54001');

-- define_category on an existing name is an update of its description (docs/sql-api.md).
SELECT ember.define_category('tea', 'hot drinks');
SELECT ember.define_category('tea', 'tea and infusions');
SELECT is((SELECT description FROM ember.categories WHERE name = 'tea'), 'tea and infusions',
          'defining a category again replaces its description');
SELECT ember.define_category('tea');
SELECT is((SELECT description FROM ember.categories WHERE name = 'tea'), 'tea and infusions',
          'and defining it without one keeps the description it had');
SELECT is((SELECT count(*)::int FROM ember.categories WHERE name = 'tea'), 1, 'the category exists once');

-- A NULL lease token says the token is missing.
SELECT ember.create_thread('default', 't2', 'side', 'Tokens');
SELECT pg_temp.new_run('t2') AS r_token \gset
SELECT throws_ok(format($$SELECT ember.submit_shadow_run('default', %s, NULL, '{}')$$, :r_token), 'EM041',
                 format('shadow run %s: the lease token is missing', :r_token),
                 'a NULL lease token is reported as missing, not as another claim''s');

-- Ending or archiving a thread cancels its running shadow run.
SELECT ember.create_thread('default', 't3', 'side', 'Ends');
SELECT ember.append_message('default', 't3', 'user', 'I like tea.', 'human') AS m_t3 \gset
SELECT pg_temp.new_run('t3') AS r_end \gset
SELECT ember.create_thread('default', 't4', 'side', 'Archived');
SELECT ember.append_message('default', 't4', 'user', 'I like coffee.', 'human') AS m_t4 \gset
SELECT pg_temp.new_run('t4') AS r_arch \gset
SELECT ember.set_thread_status('default', 't3', 'ended');
SELECT ok((SELECT cancel_requested FROM ember.shadow_runs WHERE id = :r_end),
          'ending the thread flags its running run');
SELECT is(ember.submit_shadow_run('default', :r_end, (SELECT lease_token FROM ember.shadow_runs WHERE id = :r_end),
                                  pg_temp.completed_with_a_proposal(:m_t3)) ->> 'status',
          'cancelled', 'its submit records the run as cancelled');
SELECT is((SELECT count(*)::int FROM ember.shadow_proposals WHERE run_id = :r_end), 0,
          'and writes no proposal for the ended thread');

SELECT ember.note_prefix('default', 't4', '{"model": "claude-haiku-4-5"}', '{}');
SELECT ember.set_thread_status('default', 't4', 'archived');
SELECT ok((SELECT cancel_requested FROM ember.shadow_runs WHERE id = :r_arch),
          'archiving the thread flags its running run');
SELECT is(ember.submit_shadow_run('default', :r_arch, (SELECT lease_token FROM ember.shadow_runs WHERE id = :r_arch),
                                  pg_temp.completed_with_a_proposal(:m_t4)) ->> 'status',
          'cancelled', 'its submit records the run as cancelled');
SELECT is((SELECT count(*)::int FROM ember.shadow_proposals WHERE run_id = :r_arch), 0,
          'and writes no proposal for the archived thread');
SELECT is((SELECT count(*)::int FROM ember.shadow_prefixes WHERE thread_id = 't4'), 0,
          'an archived thread''s prefix is dropped');

SELECT * FROM finish();
ROLLBACK;
