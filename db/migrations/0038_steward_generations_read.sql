-- The steward's generations leave the unread set: shadow never reads the steward's record, and
-- the write path now counts its rows read as they are written (functions/080_write_state.sql);
-- the generations written before are caught up once here.
UPDATE ember.generation_progress AS p SET read_seq = p.last_seq
WHERE p.thread_id = 'memory-steward' AND p.unread;
