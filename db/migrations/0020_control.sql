-- Main's control plane (seed 001 sections 4 and 7): which identity and which tools each thread's
-- turn gets, the per-thread event queue with its safe-point rule, and main's actions on side
-- chats. The rules are in functions/070_identity.sql, 071_events.sql and 072_side_chat.sql.

INSERT INTO ember.settings (key, value, description) VALUES
('inspect_reply_chars', '1500', 'characters of a side chat''s last reply that side_chat_inspect shows'),
('inspect_tool_calls', '12', 'most recent tool calls that side_chat_inspect shows'),
('inspect_result_chars', '200', 'characters of each tool result that side_chat_inspect shows'),
('inspect_paths', '50', 'most recently written file paths that side_chat_inspect shows');

-- The tool registry: the tool surface of each kind of thread. `resident` tools are in the tools
-- list of every turn from the first one and are never named as unavailable at turn start (a
-- changed tools list misses the whole prompt cache, seed 000 section 2.1); `per-turn` tools are
-- the host's to withhold for a turn. A file tool writes the file named by its input's `path`:
-- side_chat_inspect lists those paths. `offered_isolated` is false for a tool whose only effect
-- reaches other threads or shadow, neither of which an isolated thread ever reaches.
CREATE TABLE ember.tools (
    name text PRIMARY KEY CHECK (name ~ '^[a-z][a-z0-9_]*$'),
    position integer NOT NULL UNIQUE,
    kinds text[] NOT NULL CHECK (
        cardinality(kinds) > 0 AND kinds <@ ARRAY['main', 'side', 'task', 'steward']
    ),
    availability text NOT NULL CHECK (availability IN ('resident', 'per-turn')),
    file_tool boolean NOT NULL DEFAULT FALSE,
    offered_isolated boolean NOT NULL DEFAULT TRUE,
    description text NOT NULL CHECK (btrim(description) <> '')
);

-- The seed's table (main: the board, watching and the two side-chat tools; the steward: its own
-- tools only; an ordinary side chat: report_progress and the shadow tool, both resident), plus
-- the base tools every agent thread but the steward shares. A host with other tools registers
-- them. The steward's tools carry the names its model is given (worker/ember/tools.py:
-- write_fact, merge_facts, retire_fact, search_memory, finish, in that order; the seed's
-- steward_* prefix is the family, not the name); search_memory is one tool with one rule for
-- every viewer, so main and the chats have it too, and the steward's surface is its own by kind.
INSERT INTO ember.tools (name, position, kinds, availability, file_tool, offered_isolated, description) VALUES
('read_file', 10, '{main,side,task}', 'per-turn', FALSE, TRUE, 'read a file of the workspace'),
('write_file', 20, '{main,side,task}', 'per-turn', TRUE, TRUE, 'write a whole file of the workspace'),
('edit_file', 30, '{main,side,task}', 'per-turn', TRUE, TRUE, 'replace text in a file of the workspace'),
('shell', 40, '{main,side,task}', 'per-turn', FALSE, TRUE, 'run a shell command, in the background if long'),
('read_thread', 60, '{main,side,task}', 'per-turn', FALSE, TRUE, 'read recent rows of another thread'),
('ask_user_question', 70, '{main,side,task}', 'per-turn', FALSE, TRUE, 'ask the person and wait for the answer'),
('progress_board', 100, '{main}', 'per-turn', FALSE, TRUE, 'the latest progress report of every side chat'),
('watch_thread', 110, '{main}', 'per-turn', FALSE, TRUE, 'be woken when a thread reports or ends'),
('side_chat_message', 120, '{main}', 'per-turn', FALSE, TRUE, 'nudge, correct or stop a side chat'),
('side_chat_inspect', 130, '{main}', 'per-turn', FALSE, TRUE, 'a small scene of a side chat, not its transcript'),
('report_progress', 200, '{side,task}', 'resident', FALSE, FALSE, 'report progress to main'),
(
    'shadow_memory_propose', 210, '{side,task}', 'resident', FALSE, FALSE,
    'propose facts worth remembering; accepted only in a shadow turn'
),
('write_fact', 300, '{steward}', 'resident', FALSE, TRUE, 'write a fact with its evidence'),
('merge_facts', 310, '{steward}', 'resident', FALSE, TRUE, 'replace facts by one merged fact'),
('retire_fact', 320, '{steward}', 'resident', FALSE, TRUE, 'retire a fact, with the reason'),
(
    'search_memory', 330, '{main,side,task,steward}', 'resident', FALSE, TRUE,
    'search long-term memory: the facts the viewer''s model may read'
),
('finish', 340, '{steward}', 'resident', FALSE, TRUE, 'mark the rows this wake digested');

-- Identity prompt documents. A hot document is re-read by the host every turn that uses it; the
-- host passes what it read (or the failure) to turn_identity, which keeps the last good text and
-- falls back to `builtin` only when the document was never read.
CREATE TABLE ember.identity_documents (
    file text PRIMARY KEY,
    hot boolean NOT NULL,
    builtin text CHECK (builtin IS NULL OR btrim(builtin) <> ''),
    last_good_version text,
    last_read_at timestamptz,
    last_error text,
    last_error_at timestamptz,
    CHECK (NOT hot OR builtin IS NOT NULL)
);

-- Every distinct text of a document that was ever read, by the sha256 of its bytes. A segment
-- names a version, so a frozen segment's text stays retrievable after the document changes.
CREATE TABLE ember.identity_versions (
    file text NOT NULL REFERENCES ember.identity_documents (file),
    version text NOT NULL CHECK (version ~ '^[0-9a-f]{64}$'),
    text text NOT NULL,
    first_read_at timestamptz NOT NULL,
    PRIMARY KEY (file, version)
);

ALTER TABLE ember.identity_documents ADD FOREIGN KEY (file, last_good_version)
REFERENCES ember.identity_versions (file, version);

INSERT INTO ember.identity_documents (file, hot, builtin) VALUES
('prompts/system.md', FALSE, NULL),
('prompts/steward.md', FALSE, NULL),
(
    'prompts/main.md', TRUE,
    'You are working in Main, the front desk: the person talks to you here while side chats work '
    || 'on their topics. Read their progress reports, not their transcripts; judge whether work is '
    || 'done by inspecting the scene, not by the report; answer the person briefly.'
);

-- Context segments: a run of turns of one generation that used the same identity text. A new
-- identity version opens a new segment; a segment is never changed, so each generation records
-- every identity version it used, in order.
CREATE TABLE ember.identity_segments (
    thread_id text NOT NULL,
    generation_id uuid NOT NULL,
    ordinal integer NOT NULL CHECK (ordinal > 0),
    identity_version text NOT NULL CHECK (identity_version ~ '^[0-9a-f]{64}$'),
    -- [{file, version, source}] as turn_identity resolved them when the segment opened.
    parts jsonb NOT NULL,
    opened_at timestamptz NOT NULL,
    PRIMARY KEY (generation_id, ordinal),
    FOREIGN KEY (generation_id, thread_id) REFERENCES ember.generations (id, thread_id)
);

CREATE INDEX identity_segments_thread ON ember.identity_segments (thread_id);

-- The per-thread event queue. Each event is a message row of the receiving thread, written when
-- the event is queued (so its labels are stamped and its flow checked at the moment its content
-- is written); delivered_at says when the host took it into the thread's context.
CREATE TABLE ember.thread_events (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    thread_id text NOT NULL REFERENCES ember.threads (id),
    source text NOT NULL CHECK (source IN ('shell-watch', 'thread-event')),
    kind text NOT NULL CHECK (kind IN ('shell-exit', 'main-message', 'progress-report', 'task-result')),
    message_id bigint NOT NULL UNIQUE REFERENCES ember.messages (id),
    from_thread text REFERENCES ember.threads (id),
    -- The tool call that sent it (side_chat_message, report_progress): replays find it here.
    tool_call_id text CHECK (tool_call_id <> ''),
    created_at timestamptz NOT NULL,
    delivered_at timestamptz,
    CONSTRAINT shell_events_are_shell_exits CHECK ((source = 'shell-watch') = (kind = 'shell-exit')),
    CONSTRAINT thread_events_have_a_sender CHECK ((source = 'thread-event') = (from_thread IS NOT NULL))
);

CREATE INDEX thread_events_undelivered ON ember.thread_events (thread_id, id) WHERE delivered_at IS NULL;
CREATE INDEX thread_events_from ON ember.thread_events (from_thread, kind, id);
CREATE UNIQUE INDEX thread_events_one_per_call ON ember.thread_events (from_thread, kind, tool_call_id)
WHERE tool_call_id IS NOT NULL;

-- Main's actions on side chats: one row per side_chat_message tool call, with the text that went
-- back to main as the tool result, so a replayed call returns it unchanged.
CREATE TABLE ember.main_actions (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- The side chat acted on (the distribution key) and main, which acted.
    thread_id text NOT NULL REFERENCES ember.threads (id),
    main_thread text NOT NULL REFERENCES ember.threads (id),
    tool_call_id text NOT NULL UNIQUE CHECK (tool_call_id <> ''),
    intent text NOT NULL CHECK (intent IN ('nudge', 'correct', 'stop')),
    message text NOT NULL,
    event_id bigint NOT NULL UNIQUE REFERENCES ember.thread_events (id),
    result text NOT NULL,
    created_at timestamptz NOT NULL
);

CREATE INDEX main_actions_thread ON ember.main_actions (thread_id, id);

-- side_chat_inspect finds each tool call's result by its id; without this it would scan the
-- whole thread once per call (5 s for a thread of 3,000 calls).
CREATE INDEX messages_tool_results ON ember.messages (thread_id, tool_call_id, seq)
WHERE role = 'tool_result';
