BEGIN;
SELECT plan(7);

-- No fact may cite an isolated thread, whatever writes fact_evidence (design.md invariant 1).
SELECT ember.create_thread('default', 'main', 'main');
SELECT ember.create_thread('default', 'plain', 'side');
SELECT ember.create_thread('default', 'vault', 'side', 'Private', NULL, 'isolated');
SELECT ember.append_message('default', 'plain', 'user', 'I prefer tea.') AS tea \gset
SELECT ember.append_message('default', 'vault', 'user', 'my secret diagnosis') AS secret \gset
INSERT INTO ember.facts (text, evidence_kind) VALUES ('The user prefers tea.', 'user-stated'),
                                                     ('The user has a secret diagnosis.', 'user-stated');
SELECT id AS tea_fact FROM ember.facts WHERE text = 'The user prefers tea.' \gset
SELECT id AS secret_fact FROM ember.facts WHERE text = 'The user has a secret diagnosis.' \gset

SELECT lives_ok(format('INSERT INTO ember.fact_evidence (fact_id, ordinal, message_id) VALUES (%s, 1, %s)', :tea_fact, :tea),
                'a pointer into an open thread is kept');
SELECT throws_ok(format('INSERT INTO ember.fact_evidence (fact_id, ordinal, message_id) VALUES (%s, 1, %s)', :secret_fact, :secret),
                 'EM115', NULL, 'a pointer to a row of an isolated thread is refused, even written by hand');
SELECT throws_ok(format('INSERT INTO ember.fact_evidence (fact_id, ordinal, generation_id) VALUES (%s, 1, %L)',
                        :secret_fact, (SELECT generation_id FROM ember.messages WHERE id = :secret)),
                 'EM115', NULL, 'so is a pointer to its generation');
SELECT throws_ok(format('UPDATE ember.fact_evidence SET message_id = %s WHERE fact_id = %s', :secret, :tea_fact),
                 'EM115', NULL, 'and moving a pointer there');
SELECT is((SELECT count(*)::int FROM ember.search_memory('default', 'human', 'secret diagnosis') AS s
           JOIN ember.fact_evidence AS e ON e.fact_id = s.fact_id), 0,
          'so search_memory never returns a fact citing it');

-- The transaction flags Ember's functions set give a role without table privileges nothing.
SET ROLE ember_host;
SELECT set_config('ember.inserting_message', 'on', true);
SELECT throws_ok($$INSERT INTO ember.messages (seq, thread_id, generation_id, role, content)
                   VALUES (1, 'plain', gen_random_uuid(), 'user', 'forged')$$,
                 '42501', NULL, 'ember_host with ember.inserting_message set still cannot insert a message');
SELECT set_config('ember.erasing', 'on', true);
SELECT throws_ok($$DELETE FROM ember.messages WHERE id = 1$$, '42501', NULL,
                 'nor, with ember.erasing set, delete one');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
