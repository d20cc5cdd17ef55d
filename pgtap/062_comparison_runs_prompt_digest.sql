BEGIN;
SELECT plan(4);

-- The analyst sees which prompt text each run was sent with: comparison_run_list (function and
-- view) carries prompt_sha256, so runs group by prompt version.

SELECT ember.text_version('Judge, version one.') AS v1 \gset
SELECT ember.text_version('Judge, version two.') AS v2 \gset
CREATE FUNCTION pg_temp.judge(p_digest text, p_at timestamptz) RETURNS bigint LANGUAGE sql AS $$
    SELECT (ember.submit_judge_run(jsonb_build_object(
        'categories', '[]'::jsonb, 'model', 'claude-haiku-4-5', 'proposal_ids', '[]'::jsonb, 'fact_ids', '[]'::jsonb,
        'pairs', '[]'::jsonb, 'status', 'completed', 'started_at', p_at, 'finished_at', p_at + interval '1 second',
        'latency_ms', 1000, 'prompt_sha256', p_digest
    )) ->> 'judge_run_id')::bigint
$$;
SELECT pg_temp.judge(:'v1', '2030-01-01 10:00+00');
SELECT pg_temp.judge(:'v1', '2030-01-01 10:05+00');
SELECT pg_temp.judge(:'v2', '2030-01-01 10:10+00');
SELECT pg_temp.judge(NULL, '2030-01-01 10:15+00');

SELECT col_type_is('ember', 'comparison_run_list', 'prompt_sha256', 'text',
                   'the run list view has a prompt_sha256 column');

SET LOCAL ROLE ember_analyst;
SELECT results_eq(
    $$SELECT prompt_sha256, count(*)::int FROM ember.comparison_run_list WHERE path = 'judge'
      GROUP BY prompt_sha256 ORDER BY count(*) DESC, prompt_sha256 NULLS LAST$$,
    format($$VALUES (%L::text, 2), (%L::text, 1), (NULL::text, 1)$$, :'v1', :'v2'),
    'the analyst groups runs by the prompt text they were sent with'
);
SELECT results_eq(
    $$SELECT prompt_sha256 FROM ember.comparison_run_list('2030-01-01 10:08+00', '2030-01-01 10:12+00')$$,
    format($$VALUES (%L::text)$$, :'v2'),
    'the windowed run list carries the digest too'
);
RESET ROLE;
SELECT is((SELECT prompt_sha256 FROM ember.comparison_runs WHERE path = 'judge' ORDER BY started_at LIMIT 1), :'v1',
          'comparison_runs, under every cost and latency figure, carries the digest');

SELECT * FROM finish();
ROLLBACK;
