-- A copied row (fork, clone, quote) remembers the row it was copied from: its lineage leaves its
-- thread, so shadow evidence may not cite it as the thread's own (design.md invariant 2).
-- Always the first original, never a copy of a copy, so one hop finds the source.
ALTER TABLE ember.messages ADD COLUMN copied_from bigint REFERENCES ember.messages (id);
