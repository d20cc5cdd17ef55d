BEGIN;
SELECT plan(11);

SELECT ember.create_thread('default', 's', 'side');
SELECT ember.shadow_activate();

-- Key order (top level and nested), whitespace of every kind, escapes, non-ASCII text, a duplicate
-- key: everything jsonb would normalize away.
CREATE TEMP TABLE original AS SELECT
    format(E'{ "tools" :[ {"name":"shadow_memory_propose", "input_schema": {"type":"object","properties":{"z":{},"a":{}}}}],\n'
           || E'\t"model":"claude-sonnet-4-6",  "system": "caf\\u00e9 café 🔥 %s",\r\n'
           || E'  "messages":[{"role":"user","content":"hi","content":"dup"}],"max_tokens":1024.0 }  \n',
           repeat('pad ', 5000)) AS request,
    E'{"id":"msg_1","content":[{"type":"thinking","thinking":"…","signature":"EqQBCgIYAhIM+/==" },\n'
    || E'{"type":"tool_use","id":"tu_1","name":"ask_user_question","input":{"q":"tea?","b":1,"a":2}}],"stop_reason":"tool_use"}'
    AS response;

SELECT col_type_is('ember', 'shadow_prefixes', 'request', 'text', 'the request is stored as text, never jsonb');
SELECT col_type_is('ember', 'shadow_prefixes', 'response', 'text', 'the response is stored as text, never jsonb');

SELECT ember.note_prefix('default', 's', request, response) FROM original;

SELECT is((SELECT p.request FROM ember.shadow_prefixes AS p), (SELECT request FROM original),
          'the request reads back as the same text');
SELECT is((SELECT convert_to(p.request, 'UTF8') FROM ember.shadow_prefixes AS p),
          (SELECT convert_to(request, 'UTF8') FROM original),
          'the request reads back as the same bytes: key order, whitespace, escapes and duplicates included');
SELECT is((SELECT convert_to(p.response, 'UTF8') FROM ember.shadow_prefixes AS p),
          (SELECT convert_to(response, 'UTF8') FROM original),
          'the response reads back as the same bytes, thinking signature included');
SELECT is((SELECT md5(p.request) || md5(p.response) FROM ember.shadow_prefixes AS p),
          (SELECT md5(request) || md5(response) FROM original), 'and the same digests');
SELECT isnt((SELECT request::jsonb::text FROM original), (SELECT request FROM original),
            'jsonb would have changed those bytes (the reason the column is text)');
SELECT is((SELECT model FROM ember.shadow_prefixes), 'claude-sonnet-4-6', 'the model is read from the request');

-- Through a hot claim, the plan hands the worker the same bytes.
SELECT ember.append_message('default', 's', 'assistant', 'row');
SELECT ember.shadow_memory_changed('default', 's', 'waiting-user');
SELECT ember.claim_shadow_run('w', '5 minutes') AS plan \gset
SELECT is(:'plan'::jsonb ->> 'path', 'hot', 'the claim takes the hot path');
SELECT is(convert_to(:'plan'::jsonb ->> 'request', 'UTF8'), (SELECT convert_to(request, 'UTF8') FROM original),
          'the hot plan''s request is the original bytes');
SELECT is(convert_to(:'plan'::jsonb ->> 'response', 'UTF8'), (SELECT convert_to(response, 'UTF8') FROM original),
          'the hot plan''s response is the original bytes');

SELECT * FROM finish();
ROLLBACK;
