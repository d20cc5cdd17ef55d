BEGIN;
SELECT plan(25);

-- The user says at 09:00 that they live in Berlin; the fact is written at 12:00 (recorded). On
-- day 2 at 09:00 they say they moved to Lisbon; at 14:00 that fact is written and the Berlin
-- fact is closed: it was true until the move (valid), Ember learned so at 14:00 (recorded).

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
CREATE FUNCTION pg_temp.texts(p_at timestamptz, p_axis text) RETURNS text [] LANGUAGE sql AS $$
    SELECT coalesce(array_agg(text ORDER BY fact_id), '{}') FROM ember.facts_as_of(p_at, p_axis)
$$;

SELECT ember.create_thread('default', 's1', 'side', 'Home', p_now => '2030-06-01 08:00+00');
SELECT ember.append_message('default', 's1', 'user', 'I live in Berlin.', p_now => '2030-06-01 09:00+00') AS m_berlin \gset
SELECT pg_temp.fact('The user lives in Berlin.', '2030-06-01 12:00+00', :m_berlin) AS f_berlin \gset

SELECT is((SELECT valid_from FROM ember.facts WHERE id = :f_berlin), '2030-06-01 09:00+00'::timestamptz,
          'a fact is valid from its evidence''s time, not from when it was written');
SELECT is((SELECT valid_until FROM ember.facts WHERE id = :f_berlin), NULL, 'and open while it holds');
SELECT is((SELECT validity FROM ember.fact_history WHERE fact_id = :f_berlin), NULL,
          'its first validity adds no history row beyond its write');

-- Recorded time: the fact was believed from 12:00, not from 09:00.
SELECT is(pg_temp.texts('2030-06-01 10:00+00', 'recorded'), '{}'::text [],
          'recorded axis: at 10:00 Ember believed nothing yet');
SELECT is(pg_temp.texts('2030-06-01 10:00+00', 'valid'), ARRAY['The user lives in Berlin.'],
          'valid axis: at 10:00 it was true, by what Ember knows now');
SELECT is(pg_temp.texts('2030-06-01 13:00+00', 'recorded'), ARRAY['The user lives in Berlin.'],
          'recorded axis: at 13:00 Ember believed it');

SELECT ember.append_message('default', 's1', 'user', 'I moved to Lisbon.', p_now => '2030-06-02 09:00+00') AS m_lisbon \gset
SELECT pg_temp.fact('The user lives in Lisbon.', '2030-06-02 14:00+00', :m_lisbon) AS f_lisbon \gset

-- Refusals.
SELECT throws_ok(format('SELECT ember.set_fact_validity(%s, NULL, %L, %L, %L)', :f_berlin,
                        '2030-05-01 00:00+00', 'moved', '2030-06-02 14:00+00'),
                 'EM124', NULL, 'an interval that ends before it starts is refused');
SELECT throws_ok(format('SELECT ember.set_fact_validity(%s, NULL, %L, %L)', :f_berlin, '2030-06-02 09:00+00', ' '),
                 'EM124', NULL, 'a change of validity needs a reason');
SELECT throws_ok('SELECT ember.set_fact_validity(-1, NULL, NULL, ''x'')', 'EM095', NULL, 'an unknown fact is EM095');
SELECT throws_ok('SELECT * FROM ember.facts_as_of(now(), ''sideways'')', 'EM125', NULL,
                 'an unknown axis is refused');
SELECT throws_ok(format('UPDATE ember.facts SET status = %L, superseded_by = %s WHERE id = %s', 'superseded',
                        :f_lisbon, :f_berlin),
                 '23514', NULL, 'a superseded fact must have its validity closed: the database refuses it open');

-- Closed at the move, learned at 14:00; then superseded by the Lisbon fact.
UPDATE ember.facts SET status = 'superseded', superseded_by = :f_lisbon, valid_until = '2030-06-02 09:00+00',
    updated_at = '2030-06-02 14:00+00'
WHERE id = :f_berlin;
SELECT is((SELECT (change, status, detail IS NULL)::text FROM ember.fact_history
           WHERE fact_id = :f_berlin ORDER BY id DESC LIMIT 1), ('superseded', 'superseded', true)::text,
          'a supersede is a history row');
SELECT is((SELECT validity FROM ember.fact_history WHERE fact_id = :f_berlin AND change = 'superseded'),
          jsonb_build_object('from', '2030-06-01T09:00:00+00:00', 'until', '2030-06-02T09:00:00+00:00',
                             'was_from', '2030-06-01T09:00:00+00:00', 'was_until', NULL,
                             'superseded_by', :f_lisbon),
          'with the interval before and after, and the fact that closed it');

SELECT is(pg_temp.texts('2030-06-02 13:00+00', 'recorded'), ARRAY['The user lives in Berlin.'],
          'recorded axis: at 13:00 on day 2 Ember still believed Berlin');
SELECT is((SELECT valid_until FROM ember.facts_as_of('2030-06-02 13:00+00', 'recorded')), NULL,
          'and believed it open: the closing came later');
SELECT is(pg_temp.texts('2030-06-02 15:00+00', 'recorded'), ARRAY['The user lives in Lisbon.'],
          'recorded axis: after 14:00 Ember believes Lisbon only');
SELECT is(pg_temp.texts('2030-06-01 18:00+00', 'valid'), ARRAY['The user lives in Berlin.'],
          'valid axis: on day 1 the user lived in Berlin, by what Ember knows now');
SELECT is(pg_temp.texts('2030-06-02 10:00+00', 'valid'), ARRAY['The user lives in Lisbon.'],
          'valid axis: after the move, in Lisbon, though Ember learned it only at 14:00');
SELECT is((SELECT (valid_until, status)::text FROM ember.facts_as_of('2030-06-01 18:00+00', 'valid')),
          ('2030-06-02 09:00+00'::timestamptz, 'superseded')::text, 'the valid axis gives the interval and status');

-- An explicit correction of validity, with its reason in history.
SELECT ember.set_fact_validity(:f_lisbon, '2030-06-01 20:00+00', NULL, 'the user said they moved the evening before',
                               '2030-06-03 10:00+00');
SELECT is((SELECT (change, detail)::text FROM ember.fact_history WHERE fact_id = :f_lisbon ORDER BY id DESC LIMIT 1),
          ('validity-changed', 'the user said they moved the evening before')::text,
          'a correction is a validity-changed row with its reason');
SELECT is((SELECT valid_from FROM ember.facts_as_of('2030-06-02 15:00+00', 'recorded')),
          '2030-06-02 09:00+00'::timestamptz, 'recorded axis: before the correction, Ember had the old start');
SELECT is((SELECT valid_from FROM ember.facts_as_of('2030-06-03 11:00+00', 'recorded')),
          '2030-06-01 20:00+00'::timestamptz, 'and after it, the new one');
SELECT throws_ok(format('SELECT ember.set_fact_validity(%s, NULL, NULL, %L)', :f_berlin, 'reopen'), 'EM124', NULL,
                 'a superseded fact''s validity cannot be reopened');

-- Lisbon's earlier start closed Berlin there too: what was true at a moment is never both.
SELECT is((SELECT ember.explain_fact(:f_berlin) -> 'valid'),
          jsonb_build_object('from', '2030-06-01T09:00:00+00:00', 'until', '2030-06-01T20:00:00+00:00',
                             'superseded_by', :f_lisbon),
          'explain_fact shows the valid axis, closed where its successor now starts');
SELECT is((SELECT ember.explain_fact(:f_berlin) -> 'recorded' ->> 'written_at')::timestamptz,
          '2030-06-01 12:00+00'::timestamptz, 'and the recorded one');

SELECT * FROM finish();
ROLLBACK;
