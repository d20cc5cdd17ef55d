BEGIN;
SELECT plan(77);

-- Evidence pointers built from ids: pg_temp.msg(1, 2) = [{"message_id":1},{"message_id":2}].
CREATE FUNCTION pg_temp.msg(VARIADIC p_ids bigint []) RETURNS jsonb LANGUAGE sql AS $$
    SELECT jsonb_agg(jsonb_build_object('message_id', i) ORDER BY o)
    FROM unnest(p_ids) WITH ORDINALITY AS x (i, o)
$$;
CREATE FUNCTION pg_temp.gen(p_id uuid) RETURNS jsonb LANGUAGE sql AS $$
    SELECT jsonb_build_array(jsonb_build_object('generation_id', p_id))
$$;

SELECT ember.create_thread('default', 'main', 'main');
SELECT ember.create_thread('default', 's1', 'side', 'Topic');
SELECT ember.create_thread('default', 's2', 'side', 'Other topic');
SELECT ember.create_thread('default', 'vault', 'side', 'Private', NULL, 'isolated');

SELECT ember.append_message('default', 's1', 'user', 'I prefer tea.') AS m_user \gset
SELECT ember.append_message('default', 's1', 'user', 'Should we use Postgres?') AS m_question \gset
SELECT ember.append_message('default', 's1', 'assistant', 'Let us store everything in Postgres.') AS m_conclusion \gset
SELECT ember.append_message('default', 's1', 'user', 'Yes, go with Postgres.') AS m_accept \gset
SELECT ember.append_message('default', 's1', 'user', 'forwarded by main', 'main') AS m_from_main \gset
SELECT ember.append_message('default', 's1', 'tool_result', '200 OK', NULL, NULL, 'c1', 'http_get', 'ok') AS m_tool_ok \gset
SELECT ember.append_message('default', 's1', 'tool_result', '500', NULL, NULL, 'c2', 'http_get', 'error') AS m_tool_err \gset
SELECT ember.append_message('default', 
    's1', 'tool_result', 'relayed result', NULL, NULL, 'c3', 'http_get', 'ok', 's2'
) AS m_relayed \gset
SELECT ember.append_message('default', 's2', 'user', 'I live in Lisbon.') AS m_s2_user \gset
SELECT ember.append_message('default', 's2', 'assistant', 'So you are in Lisbon.') AS m_s2_conclusion \gset
SELECT ember.append_message('default', 's2', 'user', 'Right.') AS m_s2_accept \gset
SELECT ember.append_message('default', 's2', 'tool_result', 'ok', NULL, NULL, 'c4', 'ls', 'ok') AS m_s2_tool \gset
SELECT ember.append_message('default', 'vault', 'user', 'my secret') AS m_vault \gset
SELECT id AS g_s1 FROM ember.generations WHERE thread_id = 's1' \gset
SELECT id AS g_s2 FROM ember.generations WHERE thread_id = 's2' \gset

-- Pointer shape: exactly one of {"message_id": n} or {"generation_id": uuid}, at least one.
SELECT is(ember.evidence_shape_error(pg_temp.msg(:m_user)), NULL, 'a message pointer is well formed');
SELECT is(ember.evidence_shape_error(pg_temp.gen(:'g_s1')), NULL, 'a generation pointer is well formed');
SELECT is(ember.check_evidence('s1', 'user-stated', '[]'), 'evidence needs at least one pointer',
          'an empty pointer list is refused');
SELECT is(ember.check_evidence('s1', 'user-stated', NULL), 'evidence is missing', 'missing evidence is refused');
SELECT matches(ember.check_evidence('s1', 'user-stated', '{"message_id": 1}'), '^evidence must be an array',
               'a bare object instead of a list is refused');
SELECT matches(ember.check_evidence('s1', 'user-stated',
                                    jsonb_build_array(jsonb_build_object('message_id', :m_user, 'generation_id',
                                                                         :'g_s1'))),
               '^pointer 1: must have exactly one key', 'a pointer with both keys is refused');
SELECT matches(ember.check_evidence('s1', 'user-stated',
                                    jsonb_build_array(jsonb_build_object('message_id', :m_user, 'thread_id', 's1'))),
               '^pointer 1: must have exactly one key', 'a pointer with an extra key is refused');
SELECT matches(ember.check_evidence('s1', 'user-stated', '[{}]'), '^pointer 1: must have exactly one key',
               'an empty pointer is refused');
SELECT matches(ember.check_evidence('s1', 'user-stated', '["m:1"]'), '^pointer 1: must be',
               'a pointer that is not an object is refused');
SELECT matches(ember.check_evidence('s1', 'user-stated', jsonb_build_array(jsonb_build_object('message_id',
                                                                                              :m_user::text))),
               '^pointer 1: message_id must be a positive integer', 'a message id given as a string is refused');
SELECT matches(ember.check_evidence('s1', 'user-stated', '[{"message_id": 1.5}]'),
               'message_id must be a positive integer', 'a fractional message id is refused');
SELECT matches(ember.check_evidence('s1', 'user-stated', '[{"message_id": -3}]'),
               'message_id must be a positive integer', 'a negative message id is refused');
SELECT matches(ember.check_evidence('s1', 'user-stated', '[{"message_id": 1e30}]'),
               'message_id must be a positive integer', 'a message id beyond bigint is refused');
SELECT matches(ember.check_evidence('s1', 'observed-outcome', '[{"generation_id": "yesterday"}]'),
               '^pointer 1: generation_id must be a uuid', 'a generation id that is not a uuid is refused');
SELECT matches(ember.check_evidence('s1', 'user-stated', pg_temp.msg(:m_user) || '[{"message_id": "x"}]'),
               '^pointer 2: ', 'the reason names the offending pointer');
SELECT matches(ember.check_evidence('s1', 'user-stated', '[{"message_id": 999999999}]'),
               '^pointer 1 \(message 999999999\): no such row', 'a pointer to a missing message is refused');
SELECT matches(ember.check_evidence('s1', 'observed-outcome', pg_temp.gen(gen_random_uuid())),
               ': no such row', 'a pointer to a missing generation is refused');
SELECT matches(ember.check_evidence('s1', 'user-decided', pg_temp.msg(:m_user)), '^unknown evidence kind "user-decided"',
               'an unknown kind is refused');
SELECT is(ember.check_evidence('s1', NULL, pg_temp.msg(:m_user)), 'evidence kind is missing',
          'a missing kind is refused');
SELECT is(ember.check_evidence('nope', 'user-stated', pg_temp.msg(:m_user)), 'unknown thread "nope"',
          'an unknown thread is refused');

-- user-stated: a human user message.
SELECT is(ember.check_evidence('s1', 'user-stated', pg_temp.msg(:m_user)), NULL,
          'user-stated: a human user message is evidence');
SELECT matches(ember.check_evidence('s1', 'user-stated', pg_temp.msg(:m_conclusion)),
               'must be a human user message', 'user-stated: an assistant message is not');
SELECT matches(ember.check_evidence('s1', 'user-stated', pg_temp.msg(:m_from_main)),
               'must be a human user message', 'user-stated: a user-role row written by main is not');
SELECT matches(ember.check_evidence('s1', 'user-stated', pg_temp.gen(:'g_s1')),
               'must be a human user message', 'user-stated: a generation is not');
SELECT matches(ember.check_evidence('s1', 'user-stated', pg_temp.msg(:m_user, :m_conclusion)),
               '^pointer 2 .*must be a human user message',
               'user-stated: every pointer must fit, one good pointer does not launder another');
SELECT is(ember.check_evidence('s1', 'user-stated', pg_temp.msg(:m_question)), NULL,
          'user-stated: the check accepts a question (the quality view flags it)');

-- A question is not a decision: the helper the evidence-quality view uses.
SELECT ok(ember.is_question('Should we use Postgres?'), 'a question is a question');
SELECT ok(ember.is_question('Postgres? Or SQLite?  '), 'two questions are a question');
SELECT ok(ember.is_question('要用 Postgres 吗？'), 'a full-width question mark counts');
SELECT ok(NOT ember.is_question('I prefer tea.'), 'a statement is not a question');
SELECT ok(NOT ember.is_question('Do we use Postgres? Yes, we do.'), 'a question answered in the message is a decision');
SELECT ok(NOT ember.is_question('用 Postgres。'), 'a full-width statement is not a question');
SELECT ok(NOT ember.is_question(''), 'empty text is not a question');
SELECT ok(NOT ember.is_question(NULL), 'no text is not a question');

-- user-accepted: a conclusion and a later human message accepting it, both.
SELECT is(ember.check_evidence('s1', 'user-accepted', pg_temp.msg(:m_conclusion, :m_accept)), NULL,
          'user-accepted: conclusion plus later human acceptance is evidence');
SELECT matches(ember.check_evidence('s1', 'user-accepted', pg_temp.msg(:m_conclusion)),
               'needs a human user message', 'user-accepted: a conclusion alone is not (silence is not acceptance)');
SELECT matches(ember.check_evidence('s1', 'user-accepted', pg_temp.msg(:m_accept)),
               'needs the conclusion', 'user-accepted: an acceptance alone is not');
SELECT matches(ember.check_evidence('s1', 'user-accepted', pg_temp.msg(:m_conclusion, :m_user)),
               'after the conclusion', 'user-accepted: a human message before the conclusion does not accept it');
SELECT matches(ember.check_evidence(NULL, 'user-accepted', pg_temp.msg(:m_conclusion, :m_s2_accept), false),
               'in the same thread', 'user-accepted: the acceptance must be in the conclusion''s thread');
SELECT is(ember.check_evidence(NULL, 'user-accepted', pg_temp.msg(:m_s2_conclusion, :m_s2_accept), false), NULL,
          'user-accepted: the steward mode accepts a pair in any one thread');
SELECT matches(ember.check_evidence('s1', 'user-accepted', pg_temp.msg(:m_conclusion, :m_accept, :m_tool_ok)),
               'must be a conclusion', 'user-accepted: a tool result is neither half');

-- tool-verified: a tool result with status ok.
SELECT is(ember.check_evidence('s1', 'tool-verified', pg_temp.msg(:m_tool_ok)), NULL,
          'tool-verified: an ok tool result is evidence');
SELECT matches(ember.check_evidence('s1', 'tool-verified', pg_temp.msg(:m_tool_err)),
               'tool result with status ok', 'tool-verified: a failed tool result is not');
SELECT matches(ember.check_evidence('s1', 'tool-verified', pg_temp.msg(:m_user)),
               'tool result with status ok', 'tool-verified: a user message is not');
SELECT matches(ember.check_evidence('s1', 'tool-verified', pg_temp.gen(:'g_s1')),
               'tool result with status ok', 'tool-verified: a generation is not');

-- observed-outcome: an ok tool result, or a whole generation.
SELECT is(ember.check_evidence('s1', 'observed-outcome', pg_temp.msg(:m_tool_ok)), NULL,
          'observed-outcome: an ok tool result is evidence');
SELECT is(ember.check_evidence('s1', 'observed-outcome', pg_temp.gen(:'g_s1') || pg_temp.msg(:m_tool_ok)), NULL,
          'observed-outcome: a generation is evidence');
SELECT matches(ember.check_evidence('s1', 'observed-outcome', pg_temp.msg(:m_tool_err)),
               'observed-outcome evidence must be', 'observed-outcome: a failed tool result is not');
SELECT matches(ember.check_evidence('s1', 'observed-outcome', pg_temp.msg(:m_conclusion)),
               'observed-outcome evidence must be', 'observed-outcome: an assistant message is not');

-- Shadow mode (the default): every pointer and its lineage in the proposal's own thread.
SELECT matches(ember.check_evidence('s1', 'user-stated', pg_temp.msg(:m_s2_user)),
               '^pointer 1 \(message \d+\): not in thread "s1"', 'shadow: a message of another thread is refused');
SELECT matches(ember.check_evidence('s1', 'observed-outcome', pg_temp.gen(:'g_s2')),
               'not in thread "s1"', 'shadow: a generation of another thread is refused');
SELECT matches(ember.check_evidence('s1', 'tool-verified', pg_temp.msg(:m_relayed)),
               'not in thread "s1"', 'shadow: a row of this thread relayed from another thread is refused (lineage)');
SELECT (ember.copy_messages('default', 's2', ARRAY[:m_s2_user]::bigint [], 's1'))[1] AS m_copied \gset
SELECT matches(ember.check_evidence('s1', 'user-stated', pg_temp.msg(:m_copied)),
               'not in thread "s1"', 'shadow: a row copied into this thread from another is refused (lineage)');
SELECT (ember.copy_messages('default', 's1', ARRAY[:m_copied]::bigint [], 'main'))[1] AS m_copy_of_copy \gset
SELECT is((SELECT copied_from FROM ember.messages WHERE id = :m_copy_of_copy), :m_s2_user::bigint,
          'a copy of a copy remembers the first original');
SELECT is(ember.check_evidence(NULL, 'tool-verified', pg_temp.msg(:m_relayed), false), NULL,
          'steward mode: the relayed row is evidence');
SELECT is(ember.check_evidence('s1', 'user-stated', pg_temp.msg(:m_s2_user), false), NULL,
          'steward mode: a message of another thread is evidence');
SELECT unalike(ember.check_evidence('s1', 'user-stated', pg_temp.msg(:m_vault)), '%vault%',
              'a reason never names the thread it points into');

-- Isolation, in both modes.
SELECT matches(ember.check_evidence(NULL, 'user-stated', pg_temp.msg(:m_vault), false),
               'in an isolated thread', 'steward mode: a message of an isolated thread is refused');
SELECT matches(ember.check_evidence('vault', 'user-stated', pg_temp.msg(:m_vault)),
               'is isolated', 'shadow: a proposal about an isolated thread is refused');


-- One definition of an id (issue 8, item 2): a plain JSON integer; 396.0 is not one.
SELECT matches(ember.evidence_shape_error(format('[{"message_id": %s.0}]', :m_user)::jsonb),
               'must be a positive integer', 'an id written N.0 is refused by the shape check');
SELECT is(ember.check_evidence('s1', 'user-stated', format('[{"message_id": %s.0}]', :m_user)::jsonb, false),
          format('pointer 1: message_id must be a positive integer, got %s.0', :m_user),
          'and never reaches a cast (no raw 22P02)');
SELECT matches(ember.evidence_shape_error('[{"message_id": 99999999999999999999}]'),
               'must be a positive integer', 'an id beyond bigint is refused, not cast');
SELECT matches(ember.evidence_shape_error('[{"message_id": "5"}]'), 'must be a positive integer', 'a string id is refused');
SELECT ok(ember.jsonb_is_count('4e2') AND NOT ember.jsonb_is_count('100.0') AND NOT ember.jsonb_is_count('-1')
          AND NOT ember.jsonb_is_count('1.5') AND ember.jsonb_is_count('0'),
          'a count is a plain non-negative integer (jsonb stores 4e2 as 400)');

-- A repeated pointer (issue 8, item 7).
SELECT is(ember.evidence_shape_error(pg_temp.msg(:m_user, :m_question, :m_user)),
          format('pointer 3 repeats pointer 1 (message %s)', :m_user), 'a pointer listed twice is refused, naming both');
SELECT is(ember.evidence_shape_error(jsonb_build_array(jsonb_build_object('generation_id', upper(:'g_s1')),
                                                       jsonb_build_object('generation_id', :'g_s1'))),
          format('pointer 2 repeats pointer 1 (generation %s)', :'g_s1'), 'a generation listed twice, in any case, too');

-- Evidence limited to what the model saw: evidence_seen_error, shared with the steward.
SELECT is(ember.evidence_seen_error(pg_temp.msg(:m_user, :m_accept), ARRAY[:m_user, :m_accept]::bigint[], '{}'), NULL,
          'pointers inside the seen set are fine');
SELECT is(ember.evidence_seen_error(pg_temp.msg(:m_user, :m_accept), ARRAY[:m_user]::bigint[], '{}'),
          format('pointer 2 (message %s): not a row or generation this run''s model read', :m_accept),
          'a pointer outside the seen rows is named');
SELECT matches(ember.evidence_seen_error(pg_temp.gen(:'g_s1'), ARRAY[:m_user]::bigint[], '{}'),
               'pointer 1 \(generation', 'a generation not read is refused');
SELECT is(ember.evidence_seen_error(pg_temp.gen(:'g_s1'), '{}', ARRAY[:'g_s1'::uuid]), NULL, 'a generation read is fine');
SELECT matches(ember.check_evidence('s1', 'user-stated', pg_temp.msg(:m_user), true, ARRAY[:m_question]::bigint[]),
               'not a row or generation this run', 'check_evidence applies the seen sets when given');

-- user-accepted pairs every cited conclusion with an explicit human reply (issue 8, item 3).
SELECT ember.append_message('default', 's1', 'assistant', 'Conclusion A: tea at four.') AS ua_a \gset
SELECT ember.append_message('default', 's1', 'user', 'Yes, agreed.') AS ua_yes \gset
SELECT ember.append_message('default', 's1', 'assistant', 'Conclusion B: and coffee at nine.') AS ua_b \gset
SELECT ember.append_message('default', 's1', 'assistant', 'Conclusion C: biscuits.') AS ua_c \gset
SELECT ember.append_message('default', 's1', 'user', 'Fine.') AS ua_fine \gset
SELECT is(ember.check_evidence('s1', 'user-accepted', pg_temp.msg(:ua_a, :ua_yes)), NULL, 'A then its acceptance is evidence');
SELECT is(ember.check_evidence('s1', 'user-accepted', pg_temp.msg(:ua_a, :ua_yes, :ua_b)),
          format('pointer 3 (message %s): user-accepted evidence needs a human user message, in the same thread and '
                 'after the conclusion but before the next assistant message, that accepts it', :ua_b),
          'a later conclusion the user never answered is not accepted by the earlier yes, and is named');
SELECT matches(ember.check_evidence('s1', 'user-accepted', pg_temp.msg(:ua_b, :ua_fine)), 'pointer 1 .*needs a human',
               'a reply after a later conclusion answers that one, not B');
SELECT is(ember.check_evidence('s1', 'user-accepted', pg_temp.msg(:ua_c, :ua_fine)), NULL, 'C and its reply are evidence');
SELECT matches(ember.check_evidence('s1', 'user-accepted', pg_temp.msg(:ua_a, :ua_yes, :ua_fine)),
               'pointer 3 .*accepts no cited conclusion', 'a human message that accepts no cited conclusion is named');
SELECT is(ember.check_evidence('s1', 'user-accepted', pg_temp.msg(:ua_a, :ua_yes, :ua_c, :ua_fine)), NULL,
          'two conclusions, each with its own acceptance, are evidence');

SELECT * FROM finish();
ROLLBACK;
