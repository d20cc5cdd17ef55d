-- Two per-model thinking properties the prompt cache and the API depend on. Both drift
-- between model generations, so they live in the registry, not in code; the simulator's
-- worker/ember/sim/models.json carries the same values and a test keeps them equal.
--
-- thinking_before_system: the model renders its thinking configuration (mode, budget,
-- effort) ahead of the system prompt, so changing any of them invalidates the cached
-- tools and system too, not only the messages. Set for the adaptive-only generation
-- (Opus 4.7, 4.8). Marking a model that does not do this only costs the simulator
-- extra misses; leaving out one that does would report hits the API never gives.
--
-- adaptive_thinking_only: the model rejects thinking.type 'enabled' (a fixed
-- budget_tokens) with a 400 and takes only adaptive thinking.
ALTER TABLE ember.models
ADD COLUMN thinking_before_system boolean NOT NULL DEFAULT FALSE,
ADD COLUMN adaptive_thinking_only boolean NOT NULL DEFAULT FALSE;

COMMENT ON COLUMN ember.models.thinking_before_system IS
'A thinking or effort change invalidates cached tools and system, not only messages.';
COMMENT ON COLUMN ember.models.adaptive_thinking_only IS
'thinking.type enabled (a fixed budget) is refused with a 400; only adaptive is taken.';

UPDATE ember.models
SET
    thinking_before_system = TRUE,
    adaptive_thinking_only = TRUE
WHERE id IN ('claude-opus-4-7', 'claude-opus-4-8');
