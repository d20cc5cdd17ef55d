-- Limits on input that PostgreSQL would otherwise refuse late and cryptically (a text key too long
-- for its btree index: "index row requires ... bytes") or not at all (a message of any size).
-- Settings, so an operator can move them; functions/991_input_guards.sql enforces them. 128 is
-- also the longest identifier the thread-id and tool-name rules (EM018) accept.
INSERT INTO ember.settings (key, value, description) VALUES
('max_key_chars', '128', 'longest id or name a text key may have (thread ids, categories, tool call ids, models)'),
('max_message_bytes', '1048576', 'largest message content, in bytes of UTF-8');
