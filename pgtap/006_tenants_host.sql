BEGIN;
SELECT plan(33);

-- The host's thread writes take the tenant first (functions/015_host.sql, 016, 019, 022, 081,
-- 090): two people with the same thread ids, categories and words, written through the same
-- calls, each see and change their own rows only. The one-tenant guard (006_tenants.sql) is
-- lifted for this transaction, as it will be once every function takes the tenant.

ALTER TABLE ember.tenants DISABLE TRIGGER tenants_hold_one;

SELECT results_eq(
    $$SELECT tenant, changed FROM ember.create_tenant('acme')$$,
    $$VALUES ('acme', true)$$,
    'create_tenant creates a new tenant and says so'
);
SELECT results_eq(
    $$SELECT tenant, changed FROM ember.create_tenant('acme')$$,
    $$VALUES ('acme', false)$$,
    'and a second call changes nothing'
);
SELECT throws_ok(
    $$SELECT * FROM ember.create_tenant('has space')$$,
    'EM151', 'tenant name "has space" is not an identifier',
    'a malformed tenant name is refused by name'
);
SELECT throws_ok(
    $$SELECT ember.create_thread('nobody', 'trip', 'side')$$,
    'EM151', 'unknown tenant "nobody"',
    'a thread for an unknown tenant is refused by name'
);

-- The same set-up for both people: main, the steward's thread, a side thread trip.
SELECT is(
    (SELECT count(*)::int FROM ember.setup(p.t, '{}', 'main', 'claude-sonnet-4-6') AS s
     WHERE s.step = 'main' AND s.changed),
    1, 'setup creates main for ' || p.t
)
FROM (VALUES ('default'), ('acme')) AS p (t);
SELECT is(
    (SELECT count(*)::int FROM ember.threads WHERE kind IN ('main', 'steward')),
    4, 'each tenant has its own main and steward thread'
);
SELECT ember.create_thread(p.t, 'trip', 'side', 'a trip of ' || p.t)
FROM (VALUES ('default'), ('acme')) AS p (t);
SELECT ember.append_message('default', 'trip', 'user', 'I prefer tea.');
SELECT ember.append_message('acme', 'trip', 'user', 'I prefer coffee.');
SELECT ember.append_messages('acme', 'trip', '[{"role": "assistant", "content": "Noted: coffee."}]');

SELECT results_eq(
    $$SELECT tenant_id, string_agg(content, ' | ' ORDER BY seq) FROM ember.messages
      WHERE thread_id = 'trip' GROUP BY tenant_id ORDER BY tenant_id$$,
    $$VALUES ('acme', 'I prefer coffee. | Noted: coffee.'), ('default', 'I prefer tea.')$$,
    'appends to trip land in the trip of the tenant named'
);
SELECT is(
    (SELECT count(*)::int FROM ember.messages AS m
     INNER JOIN ember.generations AS g ON g.id = m.generation_id
     WHERE g.tenant_id <> m.tenant_id OR g.thread_id <> m.thread_id),
    0, 'every row is in a generation of its own tenant''s thread'
);

-- Generations, status, model, seal: one tenant's call moves its own thread only.
SELECT ember.start_generation('acme', 'trip');
SELECT results_eq(
    $$SELECT tenant_id, count(*)::int FROM ember.generations WHERE thread_id = 'trip'
      GROUP BY tenant_id ORDER BY tenant_id$$,
    $$VALUES ('acme', 2), ('default', 1)$$,
    'start_generation opens a generation of the named tenant''s trip only'
);
SELECT ember.set_thread_status('acme', 'trip', 'ended');
SELECT results_eq(
    $$SELECT tenant_id, status FROM ember.threads WHERE id = 'trip' ORDER BY tenant_id$$,
    $$VALUES ('acme', 'ended'), ('default', 'active')$$,
    'set_thread_status changes the named tenant''s thread only'
);
SELECT ember.set_thread_model('default', 'trip', 'claude-haiku-4-5');
SELECT results_eq(
    $$SELECT tenant_id, model FROM ember.threads WHERE id = 'trip' ORDER BY tenant_id$$,
    $$VALUES ('acme', NULL::text), ('default', 'claude-haiku-4-5')$$,
    'set_thread_model pins the named tenant''s thread only'
);
SELECT ok(ember.seal_thread('acme', 'trip'), 'acme seals its trip');
SELECT results_eq(
    $$SELECT tenant_id, seal_tier FROM ember.threads WHERE id = 'trip' ORDER BY tenant_id$$,
    $$VALUES ('acme', 'isolated'), ('default', 'open')$$,
    'the seal is on acme''s trip only'
);
SELECT ok(
    ember.is_isolated('acme', 'trip') AND NOT ember.is_isolated('default', 'trip'),
    'is_isolated answers per tenant'
);

-- Turn state and prefixes: kept per tenant.
SELECT ember.turn_started('default', 'trip');
SELECT results_eq(
    $$SELECT tenant_id, turn_running FROM ember.shadow_thread_state WHERE thread_id = 'trip' ORDER BY tenant_id$$,
    $$VALUES ('acme', false), ('default', true)$$,
    'turn_started records the turn of the named tenant''s thread only'
);
SELECT ok(
    ember.note_prefix('default', 'trip', '{"model": "claude-haiku-4-5"}', '{}'),
    'note_prefix stores default''s prefix'
);
SELECT ok(
    NOT ember.note_prefix('acme', 'trip', '{"model": "claude-haiku-4-5"}', '{}'),
    'and refuses it for acme''s isolated trip, which shadow never reads'
);
SELECT is(
    (SELECT string_agg(tenant_id, ',') FROM ember.shadow_prefixes WHERE thread_id = 'trip'),
    'default', 'one prefix, of default''s trip'
);

-- Copies stay within the tenant: a message id of another tenant is not a row of its thread.
SELECT ember.create_thread('acme', 'notes', 'side');
SELECT throws_ok(
    format(
        $$SELECT ember.copy_messages('acme', 'trip', ARRAY[%s], 'notes')$$,
        (SELECT id FROM ember.messages WHERE tenant_id = 'default' AND thread_id = 'trip')
    ),
    'EM026', NULL,
    'copy_messages refuses another tenant''s message id as not a row of the thread'
);
SELECT ember.create_thread('default', 'plan', 'side');
SELECT throws_ok(
    $$SELECT ember.append_message('acme', 'notes', 'user', 'x', p_from_thread => 'plan')$$,
    'EM001', NULL,
    'a from_thread that is another tenant''s thread only is unknown'
);

-- What a viewer reads: the same words, the same fact text, in both tenants' diary; each
-- tenant's reads find its own only, and another tenant's ids are refused as unknown.
SELECT ember.create_thread(p.t, 'diary', 'side') FROM (VALUES ('default'), ('acme')) AS p (t);
SELECT ember.append_message('default', 'diary', 'user', 'I like green tea.') AS m_d \gset
SELECT ember.append_message('acme', 'diary', 'user', 'I like green tea.') AS m_a \gset
INSERT INTO ember.facts (tenant_id, text, evidence_kind, source_threads, created_at, updated_at)
VALUES ('default', 'The user likes green tea.', 'user-stated', '{diary}', now(), now())
RETURNING id AS f_d \gset
INSERT INTO ember.fact_evidence (tenant_id, fact_id, ordinal, message_id) VALUES ('default', :f_d, 1, :m_d);
INSERT INTO ember.facts (tenant_id, text, evidence_kind, source_threads, created_at, updated_at)
VALUES ('acme', 'The user likes green tea.', 'user-stated', '{diary}', now(), now())
RETURNING id AS f_a \gset
INSERT INTO ember.fact_evidence (tenant_id, fact_id, ordinal, message_id) VALUES ('acme', :f_a, 1, :m_a);

SELECT is(
    ARRAY(SELECT fact_id FROM ember.search_memory('acme', 'human', 'green tea')),
    ARRAY[:f_a]::bigint [],
    'search_memory for acme finds acme''s fact only'
);
SELECT is(
    ARRAY(SELECT fact_id FROM ember.search_memory('default', 'human', 'green tea')),
    ARRAY[:f_d]::bigint [],
    'and for default, default''s only'
);
SELECT is(
    ARRAY(SELECT fact_id FROM ember.recent_facts('acme', 'human')),
    ARRAY[:f_a]::bigint [],
    'recent_facts for acme lists acme''s facts only'
);
SELECT throws_ok(
    format('SELECT ember.explain_fact_as(%L, %L, %s)', 'acme', 'human', :f_d),
    'EM095', NULL,
    'explain_fact_as refuses another tenant''s fact id as no such fact'
);
SELECT throws_ok(
    format('SELECT ember.forget_fact(%L, %L, %s, %L)', 'acme', 'human', :f_d, 'not mine'),
    'EM095', NULL,
    'forget_fact refuses another tenant''s fact id'
);
SELECT is(
    (SELECT status FROM ember.facts WHERE tenant_id = 'default' AND id = :f_d), 'active',
    'and default''s fact is untouched'
);
SELECT is(
    ARRAY(SELECT id FROM ember.read_thread('acme', 'human', 'diary')),
    ARRAY[:m_a]::bigint [],
    'read_thread for acme reads acme''s diary only'
);
SELECT ok(
    NOT EXISTS (SELECT 1 FROM ember.list_threads('acme', 'human') WHERE id = 'plan'),
    'list_threads for acme does not list default''s plan'
);
SELECT throws_ok(
    $$SELECT * FROM ember.search_memory('acme', 'plan', 'green tea')$$,
    'EM029', NULL,
    'another tenant''s thread is no viewer of this one'
);

-- Forgetting: one tenant's forget erases its own rows, and another tenant's ids are unknown.
SELECT throws_ok(
    format('SELECT ember.forget_messages(%L, ARRAY[%s], %L)', 'acme', :m_d, 'not mine'),
    'EM095', NULL,
    'forget_messages refuses another tenant''s message id as no such message'
);
SELECT ember.forget_thread('acme', 'diary', 'the user asked');
SELECT results_eq(
    $$SELECT tenant_id, erased_by IS NOT NULL FROM ember.messages WHERE thread_id = 'diary' ORDER BY tenant_id$$,
    $$VALUES ('acme', true), ('default', false)$$,
    'forget_thread erases the named tenant''s diary only'
);
SELECT results_eq(
    format('SELECT tenant_id, status, text IS NOT NULL FROM ember.facts WHERE id IN (%s, %s) ORDER BY tenant_id',
           :f_a, :f_d),
    $$VALUES ('acme', 'retired', false), ('default', 'active', true)$$,
    'and retires the fact resting on it, not the other tenant''s fact of the same text'
);

SELECT * FROM finish();
ROLLBACK;
