"""A rule-based stand-in for the memory steward's model, for tests, benchmarks and the demo.

Not a language model. It drives the steward's tools the way a careful steward would, in two
rounds: first it searches memory and writes a fact for every statement the heuristic extractor
finds in the backlog rows (`propose_facts`), then it finishes through the last row it was shown.
A request that offers the shadow tool or the consolidation tool is answered by the heuristic
responder, so one server can serve a worker running all three pipelines.
"""

from __future__ import annotations

from typing import Any

from .responders import Heuristic, Outcome, Reply, SimRequest, new_tool_use_id, parse_rows
from .responders import propose_facts as _propose_facts

SHADOW_TOOL = "shadow_memory_propose"
CONSOLIDATION_TOOL = "consolidate_facts"


def _call(name: str, tool_input: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": new_tool_use_id(), "name": name, "input": tool_input}


class StewardStandIn:
    name = "steward"

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self._heuristic = Heuristic()

    async def respond(self, request: SimRequest) -> Outcome:
        if SHADOW_TOOL in request.tool_names or CONSOLIDATION_TOOL in request.tool_names:
            return await self._heuristic.respond(request)
        self.requests.append(request.body)
        first = request.body["messages"][0]["content"]
        blocks = [first] if isinstance(first, str) else [b.get("text", "") for b in first]
        rows = [row for text in blocks for row in parse_rows(str(text))]
        if not rows:
            return Reply.text("There is no backlog row to digest in this request.")
        if len(request.body["messages"]) == 1:
            calls = [_call("search_memory", {"query": "preferences and decisions"})]
            calls += [_call("write_fact", fact) for fact in _propose_facts(rows)]
            return Reply(calls, stop_reason="tool_use")
        last = max(row.message_id for row in rows)
        return Reply([_call("finish", {"through_message_id": last})], stop_reason="tool_use")
