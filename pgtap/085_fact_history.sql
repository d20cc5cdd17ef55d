BEGIN;
SELECT plan(17);

CREATE FUNCTION pg_temp.fact(p_text text, p_at timestamptz, VARIADIC p_ids bigint []) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_id bigint;
BEGIN
    INSERT INTO ember.facts (text, evidence_kind, created_at, updated_at)
    VALUES (p_text, 'user-stated', p_at, p_at)
    RETURNING id INTO v_id;
    INSERT INTO ember.fact_evidence (fact_id, ordinal, message_id)
    SELECT v_id, o, i FROM unnest(p_ids) WITH ORDINALITY AS x (i, o);
    RETURN v_id;
END;
$$;
CREATE FUNCTION pg_temp.believed(p_at timestamptz) RETURNS text [] LANGUAGE sql AS $$
    SELECT coalesce(array_agg(coalesce(text, '(forgotten #' || fact_id || ')') ORDER BY fact_id), '{}')
    FROM ember.facts_as_of(p_at)
$$;

SELECT ember.create_thread('default', 's1', 'side', 'Topic');
SELECT ember.append_message('default', 's1', 'user', 'I like tea.') AS m_tea \gset
SELECT ember.append_message('default', 's1', 'user', 'Mostly green tea.') AS m_green \gset
SELECT ember.append_message('default', 's1', 'user', 'I run on Sundays.') AS m_run \gset

-- 09:00 two facts; 10:00 merged into a third; 11:00 the merge retired, a new fact written;
-- 11:30 that one re-embedded; 12:00 its source forgotten.
SELECT pg_temp.fact('Likes tea', '2030-01-01 09:00+00', :m_tea) AS f1 \gset
SELECT pg_temp.fact('Likes green tea', '2030-01-01 09:00+00', :m_green) AS f2 \gset
SELECT pg_temp.fact('Likes tea, mostly green', '2030-01-01 10:00+00', :m_tea, :m_green) AS f3 \gset
UPDATE ember.facts SET status = 'merged', merged_into = :f3, updated_at = '2030-01-01 10:00+00' WHERE id IN (:f1, :f2);
UPDATE ember.facts SET status = 'retired', retired_reason = 'no longer true', updated_at = '2030-01-01 11:00+00'
WHERE id = :f3;
SELECT pg_temp.fact('Runs on Sundays', '2030-01-01 11:00+00', :m_run) AS f4 \gset
SELECT set_config('ember.run', '42', true) IS NOT NULL AS set_run \gset
UPDATE ember.facts SET embedding = array_fill(0.5::real, ARRAY[coalesce(
    (SELECT nullif(atttypmod, -1) FROM pg_attribute WHERE attrelid = 'ember.facts'::regclass AND attname = 'embedding'), 3
)])::vector, updated_at = '2030-01-01 11:30+00'
WHERE id = :f4;
SELECT set_config('ember.run', '', true) IS NOT NULL AS unset_run \gset

SELECT is(pg_temp.believed('2030-01-01 08:59+00'), '{}'::text [], 'before anything was written, nothing was believed');
SELECT is(pg_temp.believed('2030-01-01 09:30+00'), ARRAY['Likes tea', 'Likes green tea'], 'at 09:30, the two facts');
SELECT is(pg_temp.believed('2030-01-01 10:30+00'), ARRAY['Likes tea, mostly green'], 'at 10:30, the merge in their place');
SELECT is(pg_temp.believed('2030-01-01 11:10+00'), ARRAY['Runs on Sundays'], 'at 11:10, the retired merge is gone');
SELECT is((SELECT array_agg(change ORDER BY id) FROM ember.fact_history WHERE fact_id = :f4),
          ARRAY['written', 're-embedded'], 'a re-embedding is a history row');
SELECT is((SELECT run_id FROM ember.fact_history WHERE fact_id = :f4 AND change = 're-embedded'), 42::bigint,
          'with the run the transaction named in ember.run');
SELECT is((SELECT merged_into FROM ember.fact_history WHERE fact_id = :f1 AND change = 'merged'), :f3::bigint,
          'a merge records its target');
SELECT is((SELECT retired_reason FROM ember.fact_history WHERE fact_id = :f3 AND change = 'retired'), 'no longer true',
          'a retirement records its reason');

SELECT ember.forget_messages('default', ARRAY[:m_run], 'asked', '2030-01-01 12:00+00') IS NOT NULL AS forgot \gset
SELECT is(pg_temp.believed('2030-01-01 11:59+00'), ARRAY['(forgotten #' || :f4 || ')'],
          'at 11:59 the fact was believed, but its text is not recoverable from history');
SELECT is((SELECT evidence FROM ember.facts_as_of('2030-01-01 11:59+00')),
          jsonb_build_array(jsonb_build_object('message_id', :m_run)), 'its evidence then is still answered');
SELECT is(pg_temp.believed('2030-01-01 12:01+00'), '{}'::text [], 'after the forget, nothing');
SELECT is((SELECT array_agg(change ORDER BY id) FROM ember.fact_history WHERE fact_id = :f4),
          ARRAY['written', 're-embedded', 'evidence-shrunk', 'forgotten'],
          'the history keeps that it existed and why it went');
SELECT ok((SELECT forgetting_id IS NOT NULL AND at = '2030-01-01 12:00+00' FROM ember.fact_history
           WHERE fact_id = :f4 AND change = 'forgotten'), 'with the forget call that caused it, and when');

-- Append-only, and texts fixed.
SELECT throws_ok('UPDATE ember.fact_history SET status = ''active''', 'EM098', NULL, 'history rows are never updated');
SELECT throws_ok('DELETE FROM ember.fact_history', 'EM098', NULL, 'history rows are never deleted');
SELECT throws_ok(format('UPDATE ember.facts SET text = %L WHERE id = %s', 'Likes coffee', :f1), 'EM098', NULL,
                 'a fact''s text never changes');
SELECT throws_ok(format('INSERT INTO ember.fact_evidence (fact_id, ordinal, message_id) VALUES (%s, 9, %s)', :f1, :m_run),
                 'EM099', NULL, 'no new pointer may name a forgotten row');

SELECT * FROM finish();
ROLLBACK;
