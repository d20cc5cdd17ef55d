"""The SQLSTATEs of Ember's own refusals that Python code tells apart, named as docs/errors.md
names them (tests/test_sqlstates.py checks every constant against that table).

Compare `exc.sqlstate` with these, never with a literal: a code written twice can drift.
"""

from __future__ import annotations

from typing import Final

LEASE_MISMATCH: Final = "EM041"
LEASE_EXPIRED: Final = "EM042"
RUN_NOT_RUNNING: Final = "EM043"
LEASE_NOT_HELD: Final = "EM051"
UNKNOWN_STEWARD_RUN: Final = "EM061"
STEWARD_LEASE_MISMATCH: Final = "EM062"
STEWARD_LEASE_EXPIRED: Final = "EM063"
STEWARD_RUN_NOT_RUNNING: Final = "EM064"
INVALID_EMBEDDING: Final = "EM067"
NOT_FOR_THE_ANALYST: Final = "EM074"
UNKNOWN_ID: Final = "EM095"
INVALID_MODEL_ENTRY: Final = "EM100"
UNKNOWN_CONSOLIDATION_RUN: Final = "EM131"
CONSOLIDATION_LEASE_TOKEN: Final = "EM132"
CONSOLIDATION_LEASE_EXPIRED: Final = "EM133"
CONSOLIDATION_RUN_NOT_RUNNING: Final = "EM134"
INVALID_PROMPT_DIGEST: Final = "EM140"

# A submit refused because the run is no longer this worker's to finish: nothing to retry.
SHADOW_RUN_LOST: Final = (LEASE_MISMATCH, LEASE_EXPIRED, RUN_NOT_RUNNING)
# A steward write refused for the same reason: the run was taken over, expired or finished.
STEWARD_RUN_LOST: Final = (
    UNKNOWN_STEWARD_RUN,
    STEWARD_LEASE_MISMATCH,
    STEWARD_LEASE_EXPIRED,
    STEWARD_RUN_NOT_RUNNING,
)
# A consolidation submit refused because the run is no longer this worker's to finish.
CONSOLIDATION_RUN_LOST: Final = (
    UNKNOWN_CONSOLIDATION_RUN,
    CONSOLIDATION_LEASE_TOKEN,
    CONSOLIDATION_LEASE_EXPIRED,
    CONSOLIDATION_RUN_NOT_RUNNING,
)
