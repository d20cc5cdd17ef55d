-- Time on facts (issue 25, item 2): besides when Ember learned and changed a fact (recorded time,
-- fact_history), when the fact was true as far as its evidence says (valid time). The rules are
-- in functions/099_fact_valid_time.sql.

-- valid_from: when the fact became true, by default the time of its earliest evidence (the human
-- message that stated it, the tool result that verified it, the generation's start); valid_until:
-- when it stopped being true, NULL while it still is. A superseded fact is one a newer fact
-- contradicts: its validity is closed and superseded_by names the fact that closed it. It stays
-- in history and explain, and is true for its interval ("what was true at T" still finds it).
ALTER TABLE ember.facts
ADD COLUMN valid_from timestamptz,
ADD COLUMN valid_until timestamptz,
ADD COLUMN superseded_by bigint REFERENCES ember.facts (id),
DROP CONSTRAINT facts_status_check,
ADD CONSTRAINT facts_status_check CHECK (status IN ('active', 'merged', 'retired', 'superseded')),
ADD CONSTRAINT facts_valid_interval CHECK (valid_until IS NULL OR valid_until >= valid_from),
ADD CONSTRAINT facts_superseded_is_closed CHECK (
    status <> 'superseded' OR (superseded_by IS NOT NULL AND valid_until IS NOT NULL)
);

CREATE INDEX facts_superseded_by ON ember.facts (superseded_by) WHERE superseded_by IS NOT NULL;

-- Each change of a fact's validity is a history row. validity holds the interval after the
-- change and before it: {"from", "until", "was_from", "was_until"}, so facts_as_of can tell what
-- Ember believed about a fact's validity at any recorded time.
ALTER TABLE ember.fact_history
ADD COLUMN validity jsonb,
DROP CONSTRAINT fact_history_change_check,
ADD CONSTRAINT fact_history_change_check CHECK (
    change IN (
        'written', 'merged', 'retired', 'evidence-shrunk', 're-embedded', 'forgotten', 'confirmed',
        'superseded', 'validity-changed'
    )
);

-- Facts written before this migration: valid from their earliest evidence, else from when they
-- were written. No history row: this is their first validity, as a new fact's would be.
UPDATE ember.facts AS f
SET valid_from = coalesce((
    SELECT min(coalesce(m.created_at, g.started_at))
    FROM ember.fact_evidence AS e
    LEFT JOIN ember.messages AS m ON e.message_id = m.id
    LEFT JOIN ember.generations AS g ON e.generation_id = g.id
    WHERE e.fact_id = f.id
), f.created_at);
