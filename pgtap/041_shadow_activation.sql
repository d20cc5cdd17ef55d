BEGIN;
SELECT plan(23);

SELECT ember.create_thread('default', 'main', 'main');
SELECT ember.create_thread('default', 'a', 'side');
SELECT ember.create_thread('default', 'b', 'side');
SELECT ember.create_thread('default', 'vault', 'side', NULL, NULL, 'isolated');
SELECT ember.ensure_steward_thread('default');

-- a: two generations; the steward digested the first two rows of the first one.
SELECT ember.append_message('default', 'a', 'user', 'a1 ' || i) FROM generate_series(1, 4) AS i;
SELECT ember.start_generation('default', 'a');
SELECT ember.append_message('default', 'a', 'user', 'a2 ' || i) FROM generate_series(1, 2) AS i;
UPDATE ember.messages SET episode_id = '00000000-0000-0000-0000-000000000001'
WHERE content IN ('a1 1', 'a1 2');
-- b: history the steward never touched.
SELECT ember.append_message('default', 'b', 'user', 'b old ' || i) FROM generate_series(1, 3) AS i;
SELECT ember.append_message('default', t, 'user', 'hi') FROM unnest(ARRAY['main', 'vault']) AS t;
SELECT ember.append_steward_record('default', 'user', 'hi');

CREATE FUNCTION pg_temp.gen(p_thread text, p_ordinal int) RETURNS uuid
LANGUAGE sql AS $$ SELECT id FROM ember.generations WHERE thread_id = p_thread AND ordinal = p_ordinal $$;
CREATE FUNCTION pg_temp.seq(p_content text) RETURNS bigint
LANGUAGE sql AS $$ SELECT seq FROM ember.messages WHERE content = p_content $$;

SELECT ember.shadow_memory_changed('default', t, 'task-ended') FROM unnest(ARRAY['a', 'b']) AS t;
SELECT is((SELECT count(*)::int FROM ember.shadow_ready()), 0, 'before activation nothing is ready');

SELECT is(ember.shadow_activate('2026-01-01 09:00+00') ->> 'cursors_created', '3',
          'activation creates one cursor per generation of each open side or task thread');
SELECT is((SELECT through_seq FROM ember.shadow_activation), (SELECT max(seq) FROM ember.messages),
          'the watermark is the global max(seq) at activation');
SELECT is((SELECT array_agg(DISTINCT thread_id ORDER BY thread_id) FROM ember.shadow_cursors), ARRAY['a', 'b'],
          'main, the steward and isolated threads get no cursor');

-- Property 1: inherit the steward's digested position, without touching episode_id.
SELECT is((SELECT initialization FROM ember.shadow_cursors WHERE generation_id = pg_temp.gen('a', 1)), 'steward',
          'a thread the steward digested is initialized from the steward');
SELECT is(ember.shadow_read_position('default', 'a', pg_temp.gen('a', 1)), pg_temp.seq('a1 2'),
          'its baseline is the generation''s highest digested seq: digested rows are not read again');
SELECT is(ember.shadow_read_position('default', 'a', pg_temp.gen('a', 2)), 0::bigint,
          'a generation with nothing digested is left to shadow whole');
SELECT results_eq($$SELECT from_seq, through_seq FROM ember.shadow_ready() WHERE thread_id = 'a'$$,
                  $$SELECT pg_temp.seq('a1 2'), pg_temp.seq('a1 4')$$,
                  'shadow reads the undigested backlog of the first generation first');
SELECT is((SELECT array_agg(content ORDER BY seq) FROM ember.messages WHERE episode_id IS NOT NULL),
          ARRAY['a1 1', 'a1 2'], 'activation does not touch episode_id');

-- Property 2: without digestion, existing history is skipped; rows after activation are read.
SELECT is((SELECT initialization FROM ember.shadow_cursors WHERE thread_id = 'b'), 'enabled',
          'a thread the steward never digested is initialized at the watermark');
SELECT is(ember.shadow_read_position('default', 'b', pg_temp.gen('b', 1)), pg_temp.seq('b old 3'),
          'its baseline is its highest seq at or below the watermark');
SELECT ok(NOT EXISTS (SELECT 1 FROM ember.shadow_ready() WHERE thread_id = 'b'),
          'with no new rows there is nothing to read');
SELECT ember.append_message('default', 'b', 'user', 'b new');
SELECT ember.shadow_memory_changed('default', 'b', 'task-ended');  -- the user's message withdrew the earlier offer
SELECT results_eq($$SELECT from_seq, through_seq FROM ember.shadow_ready() WHERE thread_id = 'b'$$,
                  $$SELECT pg_temp.seq('b old 3'), pg_temp.seq('b new')$$,
                  'a row after activation is read, and only it');

-- Property 3: independent after initialization.
UPDATE ember.messages SET episode_id = '00000000-0000-0000-0000-000000000002'
WHERE thread_id IN ('a', 'b') AND episode_id IS NULL;
SELECT ember.create_thread('default', 'late', 'task');
SELECT ember.append_message('default', 'late', 'user', 'late row');
CREATE TEMP TABLE before_rerun AS SELECT * FROM ember.shadow_cursors;
SELECT is(ember.shadow_activate('2026-02-01 09:00+00') ->> 'cursors_created', '1',
          'activating again initializes only threads without a cursor');
SELECT set_eq($$SELECT thread_id, generation_id, baseline_seq, initialization FROM ember.shadow_cursors
                WHERE thread_id IN ('a', 'b')$$,
              $$SELECT thread_id, generation_id, baseline_seq, initialization FROM before_rerun$$,
              'activating again changes no baseline, though the steward digested further');
SELECT results_eq($$SELECT through_seq, activated_at FROM ember.shadow_activation$$,
                  $$SELECT (SELECT through_seq FROM ember.shadow_activation), '2026-01-01 09:00+00'::timestamptz$$,
                  'the watermark is written once, ever');
SELECT is(ember.shadow_read_position('default', 'b', pg_temp.gen('b', 1)), pg_temp.seq('b old 3'),
          'the read position does not follow the steward');
SELECT is(ember.shadow_read_position('default', 'late', pg_temp.gen('late', 1)), 0::bigint,
          'a thread created after activation is read from its start');
SELECT ember.create_thread('default', 'later', 'task');
SELECT ember.append_message('default', 'later', 'user', 'later row 1');
SELECT ember.append_message('default', 'later', 'assistant', 'later row 2');
UPDATE ember.messages SET episode_id = '00000000-0000-0000-0000-000000000004' WHERE content = 'later row 1';
SELECT ember.shadow_activate('2026-03-01 09:00+00');
SELECT is(ember.shadow_read_position('default', 'later', pg_temp.gen('later', 1)), 0::bigint,
          'a thread born after activation and digested by the steward is still read from its start, '
          || 'even after activating again');
SELECT is((SELECT initialization FROM ember.shadow_cursors WHERE thread_id = 'later'), 'enabled',
          'its cursor never inherits digestion that happened after the watermark');

SELECT ember.start_generation('default', 'b');
SELECT ember.append_message('default', 'b', 'user', 'b third');
UPDATE ember.messages SET episode_id = '00000000-0000-0000-0000-000000000003' WHERE content = 'b third';
SELECT ember.shadow_activate('2026-03-01 09:00+00');
SELECT is(ember.shadow_read_position('default', 'b', pg_temp.gen('b', 2)), 0::bigint,
          'a generation started later reads from its own start, not from the steward''s position, '
          || 'even after activating again');

-- Only shadow's own completed runs move the read position.
INSERT INTO ember.shadow_runs (thread_id, generation_id, path, model, status, from_seq, through_seq,
                               started_at, finished_at, worker, lease_token, lease_expires_at)
VALUES ('b', pg_temp.gen('b', 1), 'cold', 'claude-haiku-4-5', 'failed', 0, pg_temp.seq('b new'),
        now(), now(), 'w', gen_random_uuid(), now());
SELECT is(ember.shadow_read_position('default', 'b', pg_temp.gen('b', 1)), pg_temp.seq('b old 3'),
          'a failed run does not move the read position');
UPDATE ember.shadow_runs SET status = 'completed' WHERE thread_id = 'b';
SELECT is(ember.shadow_read_position('default', 'b', pg_temp.gen('b', 1)), pg_temp.seq('b new'),
          'a completed run moves the read position to its through_seq');

SELECT * FROM finish();
ROLLBACK;
