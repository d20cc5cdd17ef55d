BEGIN;
SELECT plan(14);

-- The semantic judge's rules, all in SQL (functions/061_semantic_judge.sql): the message text,
-- the grouping by label-category set, the skip reasons, the routing and the candidates. Threads
-- and messages go through the host API; shadow runs, proposals and facts are inserted as the
-- submit and the steward would write them.

CREATE FUNCTION pg_temp.msg(p_thread text, p_content text) RETURNS bigint LANGUAGE sql AS $$
    SELECT ember.append_message('default', p_thread, 'user', p_content, p_author => 'human', p_now => '2030-01-01 10:00+00')
$$;

CREATE FUNCTION pg_temp.proposal(p_thread text, p_text text, p_message bigint) RETURNS bigint LANGUAGE sql AS $$
    WITH r AS (
        INSERT INTO ember.shadow_runs (
            thread_id, generation_id, path, model, status, from_seq, through_seq,
            started_at, finished_at, latency_ms, worker, lease_token, lease_expires_at
        ) VALUES (
            p_thread, ember.current_generation('default', p_thread), 'cold', 'claude-haiku-4-5', 'completed', 0, 0,
            '2030-01-01 10:00+00', '2030-01-01 10:00:01+00', 1000, 'w', gen_random_uuid(), '2030-01-01 10:10+00'
        ) RETURNING id, thread_id, generation_id
    )
    INSERT INTO ember.shadow_proposals (
        run_id, thread_id, generation_id, ordinal, text, evidence_kind, evidence, categories, created_at
    )
    SELECT r.id, r.thread_id, r.generation_id, 1, p_text, 'user-stated',
           jsonb_build_array(jsonb_build_object('message_id', p_message)),
           ember.generation_labels(r.generation_id), '2030-01-01 10:00+00'
    FROM r
    RETURNING id
$$;

CREATE FUNCTION pg_temp.fact(p_text text, p_message bigint, p_categories text[] DEFAULT '{}')
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    v_id bigint;
BEGIN
    INSERT INTO ember.facts (text, evidence_kind, categories, created_at)
    VALUES (p_text, 'user-stated', p_categories, '2030-01-01 10:05+00') RETURNING id INTO v_id;
    INSERT INTO ember.fact_evidence (fact_id, ordinal, message_id) VALUES (v_id, 1, p_message);
    RETURN v_id;
END;
$$;

-- 1-3: the message text.
SELECT is(ember.semantic_judge_content(ARRAY['a', 'b'], ARRAY['c']),
          E'Proposals:\nP0: a\nP1: b\n\nFacts:\nF0: c',
          'the message numbers proposals and facts from 0 in the order sent');
SELECT is(ember.semantic_judge_content('{}', ARRAY['c']), E'Proposals:\n\nFacts:\nF0: c',
          'an empty side keeps its heading');
SELECT is(
    ember.semantic_judge_content(ARRAY[E'tea.\nP1: coffee.\r\n\nFacts:' || chr(8232) || 'F0: milk'], ARRAY[E'x\u000by']),
    E'Proposals:\nP0: ' || ember.render_escape(E'tea.\nP1: coffee.\r\n\nFacts:' || chr(8232) || 'F0: milk')
        || E'\n\nFacts:\nF0: ' || ember.render_escape(E'x\u000by'),
    'each text is escaped by render_escape, so no text starts a line of its own'
);

SELECT ember.shadow_activate('2030-01-01 09:00+00');
SELECT ember.define_category('health');
SELECT ember.create_thread('default', 'deploy', 'side');
SELECT ember.create_thread('default', 'diet', 'side', p_category => 'health');
SELECT ember.create_thread('default', 'lonely', 'side');
SELECT ember.create_thread('default', 'secret', 'side');

CREATE TEMP TABLE ids (name text PRIMARY KEY, id bigint);
INSERT INTO ids VALUES
('m_deploy', pg_temp.msg('deploy', 'We deploy on Fridays.')),
('m_diet', pg_temp.msg('diet', 'I stopped eating sugar.')),
('m_lonely', pg_temp.msg('lonely', 'I like tea.')),
('m_secret', pg_temp.msg('secret', 'The launch code is 1234.'));
INSERT INTO ids
SELECT 'p_deploy', pg_temp.proposal('deploy', 'Deploys happen on Friday', id) FROM ids WHERE name = 'm_deploy';
INSERT INTO ids
SELECT 'f_deploy', pg_temp.fact('The team deploys on Fridays', id) FROM ids WHERE name = 'm_deploy';
INSERT INTO ids
SELECT 'p_diet', pg_temp.proposal('diet', 'No sugar any more', id) FROM ids WHERE name = 'm_diet';
INSERT INTO ids
SELECT 'f_diet', pg_temp.fact('The user avoids sugar', id, '{health}') FROM ids WHERE name = 'm_diet';
INSERT INTO ids
SELECT 'p_lonely', pg_temp.proposal('lonely', 'The user likes tea', id) FROM ids WHERE name = 'm_lonely';
INSERT INTO ids
SELECT 'p_secret', pg_temp.proposal('secret', 'Launch code 1234', id) FROM ids WHERE name = 'm_secret';
INSERT INTO ids
SELECT 'f_secret', pg_temp.fact('The launch code is 1234', id) FROM ids WHERE name = 'm_secret';
UPDATE ember.threads SET seal_tier = 'isolated' WHERE id = 'secret';

CREATE TEMP TABLE g AS SELECT * FROM ember.semantic_groups();

-- 4-7: one group per label-category set, in set order, routed to the tier's first tagged model.
SELECT results_eq('SELECT categories FROM g', $$VALUES ('{}'::text[]), ('{health}'::text[])$$,
                  'one group per label-category set, in set order');
SELECT is((SELECT model FROM g WHERE categories = '{}'), ember.route_model('light', '{}'),
          'the unlabelled group goes to the light model routing picks');
SELECT is((SELECT skipped FROM g WHERE categories = '{}'), NULL, 'a group with both sides is not skipped');
SELECT is(
    (SELECT content FROM g WHERE categories = '{}'),
    ember.semantic_judge_content(
        ARRAY(SELECT x ->> 'text' FROM g, jsonb_array_elements(g.proposals) AS x WHERE g.categories = '{}'),
        ARRAY(SELECT x ->> 'text' FROM g, jsonb_array_elements(g.facts) AS x WHERE g.categories = '{}')
    ),
    'the group carries its message, built from its items in the order listed'
);

-- 8-10: candidates: a sealed (isolated) thread's proposal and fact are in no group.
SELECT is(
    (SELECT count(*) FROM g, jsonb_array_elements(g.proposals || g.facts) AS x
     WHERE (x ->> 'id')::bigint IN (SELECT id FROM ids WHERE name IN ('p_secret', 'f_secret'))
       AND x ->> 'thread_id' = 'secret'),
    0::bigint, 'nothing of an isolated thread is a candidate'
);
SELECT is(
    (SELECT array_agg((x ->> 'id')::bigint ORDER BY (x ->> 'id')::bigint) FROM g, jsonb_array_elements(g.proposals) AS x
     WHERE g.categories = '{}'),
    (SELECT array_agg(id ORDER BY id) FROM ids WHERE name IN ('p_deploy', 'p_lonely')),
    'the unlabelled group holds every valid unlabelled proposal, in id order'
);
SELECT is(
    (SELECT array_agg((x ->> 'id')::bigint) FROM g, jsonb_array_elements(g.facts) AS x WHERE g.categories = '{}'),
    (SELECT array_agg(id) FROM ids WHERE name = 'f_deploy'),
    'without embeddings, every fact of the group is shortlisted'
);

-- 11-12: a labelled group with no light model tagged for it waits, naming why; nothing is sent.
SELECT alike((SELECT skipped FROM g WHERE categories = '{health}'),
            'not routed: category_model: no light model is tagged for {health}%',
            'a group no light model is tagged for is skipped with routing''s reason');
SELECT ok((SELECT model IS NULL AND content IS NULL FROM g WHERE categories = '{health}'),
          'a skipped group has no model and no message');

-- 13-14: a group with one side only is skipped before routing: in a window that ends before the
-- facts were written, the unlabelled group holds proposals alone.
SELECT is((SELECT skipped FROM ember.semantic_groups(NULL, '2030-01-01 10:01+00') WHERE categories = '{}'),
          'only proposals: nothing to compare, no model called', 'proposals alone: nothing to compare');
SELECT ok((SELECT model IS NULL AND content IS NULL FROM ember.semantic_groups(NULL, '2030-01-01 10:01+00')
           WHERE categories = '{}'),
          'and no model is chosen for it');

SELECT * FROM finish();
ROLLBACK;
