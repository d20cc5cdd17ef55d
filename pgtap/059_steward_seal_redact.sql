BEGIN;
SELECT plan(5);

-- A thread sealed after the steward read it: the steward's record no longer holds its words.
SELECT ember.create_thread('default', 'main', 'main', NULL, NULL, 'open', 'claude-haiku-4-5', '2026-12-01 09:00Z');
SELECT ember.ensure_steward_thread('default', '2026-12-01 09:00Z');
SELECT ember.create_thread('default', 'doc', 'side', NULL, NULL, 'open', NULL, '2026-12-01 09:00Z');
SELECT ember.create_thread('default', 'plain', 'side', NULL, NULL, 'open', NULL, '2026-12-01 09:00Z');
SELECT ember.append_message('default', 'doc', 'user', 'My diagnosis is Zebrafluenza.', p_now => '2026-12-01 09:10Z') AS m_doc \gset
SELECT ember.append_message('default', 'plain', 'user', 'I prefer green tea.', p_now => '2026-12-01 09:11Z') AS m_tea \gset
SELECT ember.claim_steward_run('w', '5 minutes', '2026-12-01 10:00Z') AS plan \gset
SELECT ember.steward_step('default', (:'plan'::jsonb ->> 'run_id')::bigint, (:'plan'::jsonb ->> 'lease_token')::uuid,
    jsonb_build_object('content', jsonb_build_array(jsonb_build_object('type', 'tool_use', 'id', 'w1',
        'name', 'write_fact', 'input', jsonb_build_object('text', 'The diagnosis is Zebrafluenza.',
            'evidence_kind', 'user-stated', 'evidence', jsonb_build_array(jsonb_build_object('message_id', :m_doc)))))),
    '{}', 10, '2026-12-01 10:01Z');

SELECT ok((SELECT bool_or(content LIKE '%Zebrafluenza%') FROM ember.messages WHERE thread_id = 'memory-steward'),
          'the steward''s record quotes the thread it read');
SELECT ember.seal_thread('default', 'doc');
SELECT is((SELECT count(*)::int FROM ember.messages
           WHERE thread_id = 'memory-steward' AND (content LIKE '%Zebrafluenza%' OR blocks::text LIKE '%Zebrafluenza%')),
          0, 'after the seal, no row of the steward''s record holds the sealed thread''s words');
SELECT ok((SELECT bool_or(content LIKE '%m:' || :m_doc || ' [sealed]%') FROM ember.messages
           WHERE thread_id = 'memory-steward'), 'its line in the pages says it was sealed');
SELECT ok((SELECT bool_or(content LIKE '%I prefer green tea.%') FROM ember.messages WHERE thread_id = 'memory-steward'),
          'the other thread''s row is left as it was');
SELECT is((SELECT count(*)::int FROM ember.messages WHERE thread_id = 'doc' AND content = 'My diagnosis is Zebrafluenza.'),
          1, 'and the sealed thread keeps its own rows');

SELECT * FROM finish();
ROLLBACK;
