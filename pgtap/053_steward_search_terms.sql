-- search_memory's text side: CJK by partial words, NFKC, mixed script, questions matched by their
-- rare words, a common word bounded to ranking, visibility inside the candidate lists.
BEGIN;
SELECT plan(20);

SELECT ember.define_category('health');
SELECT ember.create_thread('default', 'doc', 'side', 'Doctor', 'health', 'open', NULL, '2026-12-01 09:00Z');
SELECT ember.create_thread('default', 'plain', 'side', 'Plain', NULL, 'open', NULL, '2026-12-01 09:00Z');
SELECT ember.create_thread('default', 'reader', 'side', 'Untagged reader', NULL, 'open', 'claude-sonnet-4-5', '2026-12-01 09:00Z');

CREATE FUNCTION pg_temp.fact(p_text text, p_labels text[] DEFAULT '{}', p_sources text[] DEFAULT '{}')
RETURNS bigint LANGUAGE sql AS $$
    INSERT INTO ember.facts (text, evidence_kind, categories, source_threads)
    VALUES (p_text, 'user-stated', p_labels, p_sources) RETURNING id
$$;
CREATE FUNCTION pg_temp.found(p_viewer text, p_query text, p_limit int DEFAULT 5) RETURNS text[] LANGUAGE sql AS $$
    SELECT coalesce(array_agg(s.text ORDER BY s.score DESC, s.fact_id), '{}')
    FROM ember.search_memory('default', p_viewer, p_query, NULL, p_limit) AS s
$$;

SELECT pg_temp.fact('我喜欢用中文写周报。');
SELECT pg_temp.fact('管家一次唤醒至多读 4 代、约 8 万 token 的他人原文。');
SELECT pg_temp.fact('The user prefers tea over coffee.');
SELECT pg_temp.fact('The archive runs on PostgreSQL with pgvector.');
SELECT pg_temp.fact('The user''s daughter Mia starts school in September.');
SELECT pg_temp.fact('用户在东京出差时用ＡＢＣ银行的卡。');
SELECT pg_temp.fact('The user is allergic to penicillin.', '{health}', '{doc}');
SELECT pg_temp.fact('The user flies Lufthansa to Tokyo.', '{}', '{plain}');

SELECT is(pg_temp.found('human', '周报'), '{我喜欢用中文写周报。}', 'a two-character word finds the Chinese sentence it is part of');
SELECT is(pg_temp.found('human', '中文'), '{我喜欢用中文写周报。}', 'and so does another');
SELECT is(pg_temp.found('human', '中文写周报'), '{我喜欢用中文写周报。}', 'and a longer run of it');
SELECT is(pg_temp.found('human', '唤醒'), '{管家一次唤醒至多读 4 代、约 8 万 token 的他人原文。}',
          'a word in a sentence that mixes scripts is found');
SELECT is(pg_temp.found('human', 'token 原文'), '{管家一次唤醒至多读 4 代、约 8 万 token 的他人原文。}',
          'by its Latin and its Chinese words together');
SELECT is(pg_temp.found('human', '周'), '{我喜欢用中文写周报。}', 'one character finds it too');
SELECT is(pg_temp.found('human', 'abc银行'), '{用户在东京出差时用ＡＢＣ银行的卡。}',
          'full-width letters match ordinary ones (NFKC), in the fact and in the query');
SELECT is(pg_temp.found('human', '我用什么语言写周报?'), '{我喜欢用中文写周报。}',
          'a Chinese question is matched by what it is about, not by its question words');
SELECT is(ember.search_query_terms('我用什么写周报?'), '{写周,周报,我用}', 'the question word 什么 is not a term');
SELECT is(pg_temp.found('human', 'Which database does the archive run on?'), '{"The archive runs on PostgreSQL with pgvector."}',
          'an English question finds the fact without every word of it appearing');
SELECT is((pg_temp.found('human', 'When does Mia start school?', 1))[1], 'The user''s daughter Mia starts school in September.',
          'the fact holding most of the question''s words comes first');
SELECT is(pg_temp.found('human', 'What is the the of?'), '{}', 'a question of stop words only matches nothing');
SELECT is(pg_temp.found('human', 'The user prefers tea over coffee.'), ARRAY['The user prefers tea over coffee.'] || ARRAY(
              SELECT s.text FROM ember.search_memory('default', 'human', 'The user prefers tea over coffee.', NULL, 5) AS s OFFSET 1),
          'a fact''s own text finds it first');

-- Visibility inside the candidate lists.
SELECT is(pg_temp.found('reader', 'penicillin'), '{}', 'a labelled fact is hidden from an untagged viewer');
UPDATE ember.threads SET seal_tier = 'isolated' WHERE id = 'plain';
SELECT is(pg_temp.found('human', 'Lufthansa 东京'), '{用户在东京出差时用ＡＢＣ银行的卡。}',
          'a fact derived from a thread sealed since is never returned, and does not take a place in the list');

-- A common word ranks but does not choose the candidates; alone, it reads the newest facts only.
UPDATE ember.settings SET value = '3' WHERE key = 'search_common_facts';
UPDATE ember.settings SET value = '4' WHERE key = 'search_recent_window';
SELECT pg_temp.fact('Common word number ' || i || '.') FROM generate_series(1, 12) AS i;
SELECT pg_temp.fact('A rare zebra and a common word.');
ANALYZE ember.facts;
SELECT cmp_ok((SELECT holding FROM ember.search_term_weights('{common}')), '>', 3::double precision,
              'the statistics count a word in most facts as common');
SELECT is((pg_temp.found('human', 'rare common', 1))[1], 'A rare zebra and a common word.',
          'the rare word chooses the candidates and the common one adds to the rank');
SELECT ok(pg_temp.found('human', 'common number', 10) <@ ARRAY(
              SELECT f.text FROM ember.facts AS f WHERE f.status = 'active' ORDER BY f.id DESC LIMIT 4),
          'a query of common words alone is matched against the newest facts of the window');
SELECT cmp_ok(cardinality(pg_temp.found('human', 'common number', 10)), '>', 0, 'and finds them there');

SELECT ok(pg_get_functiondef('ember.search_memory(text, text, text, vector, integer)'::regprocedure) !~* '\mEXECUTE\M',
          'search_memory is static SQL: nothing is planned from a string per call');

SELECT * FROM finish();
ROLLBACK;
