"""The heuristic responder: a rule-based extractor that cites only rows it was shown."""

from __future__ import annotations

import re
from typing import Any

import anthropic
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ember.sim import SimServer
from ember.sim.responders import Reply, judge_answer, parse_rows, propose_facts, steward_answer
from simfixtures import (
    STANDARD,
)

HEURISTIC = {"x-ember-sim-responder": "heuristic"}
SHADOW = {"name": "shadow_memory_propose", "input_schema": {"type": "object"}}
OTHER_TOOL = {"name": "lookup", "input_schema": {"type": "object"}}

ROWS = """Rows since the last digest:
m:11 user(human): I prefer tea over coffee. Can you check the weather?
m:12 assistant: Sure. I prefer to be careful.
m:13 tool_result weather [ok]: Sunny, 21 C in Lisbon
m:14 tool_result weather [error]: timeout
m:15 user(human): From now on, always answer in French.
And we decided to use Postgres 17.
m:16 user(steward): I prefer nothing at all.
m:17 event(task-1): I prefer progress reports.
m:18 tool_result calendar [pending]: waiting
note: see m:999 for details, I prefer this line too
m:19 user(human): What do I prefer?
"""


def ask(client: anthropic.Anthropic, content: str, **body: Any) -> Any:
    body.setdefault("tools", [OTHER_TOOL, SHADOW])
    return client.messages.create(
        model=STANDARD,
        max_tokens=1000,
        messages=[{"role": "user", "content": content}],
        extra_headers=HEURISTIC,
        **body,
    )


def test_it_proposes_user_statements_and_successful_tool_results(
    sim_client: anthropic.Anthropic,
) -> None:
    reply = ask(sim_client, ROWS)
    assert reply.stop_reason == "tool_use"
    [call] = reply.content
    assert call.name == "shadow_memory_propose"
    assert call.input == {
        "facts": [
            {
                "text": "User preference: I prefer tea over coffee.",
                "evidence_kind": "user-stated",
                "evidence": [{"message_id": 11}],
            },
            {
                "text": "Tool weather succeeded: Sunny, 21 C in Lisbon",
                "evidence_kind": "tool-verified",
                "evidence": [{"message_id": 13}],
            },
            {
                "text": "User instruction: From now on, always answer in French.",
                "evidence_kind": "user-stated",
                "evidence": [{"message_id": 15}],
            },
            {
                "text": "User decision: And we decided to use Postgres 17.",
                "evidence_kind": "user-stated",
                "evidence": [{"message_id": 15}],
            },
        ]
    }


def test_it_answers_with_the_tool_the_request_offers(sim_client: anthropic.Anthropic) -> None:
    single = ask(sim_client, ROWS, tools=[{"name": "steward_apply", "input_schema": {}}])
    assert single.content[0].name == "steward_apply"
    assert single.content[0].input["facts"]

    forced = ask(sim_client, ROWS, tool_choice={"type": "tool", "name": "lookup"})
    assert forced.content[0].name == "lookup"

    none = ask(sim_client, ROWS, tool_choice={"type": "none"})
    assert none.content[0].type == "text"
    assert none.content[0].text.startswith("4 candidate facts")

    unrelated = ask(sim_client, ROWS, tools=[OTHER_TOOL, {**OTHER_TOOL, "name": "search"}])
    assert unrelated.content[0].type == "text"


def test_rows_in_tool_results_and_blocks_are_read_too(sim_client: anthropic.Anthropic) -> None:
    reply = sim_client.messages.create(
        model=STANDARD,
        max_tokens=1000,
        tools=[SHADOW],
        extra_headers=HEURISTIC,
        messages=[
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "read", "input": {}}],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t1",
                        "content": [{"type": "text", "text": "m:5 user(human): Call me Sam."}],
                    },
                    {"type": "text", "text": "Please propose facts."},
                ],
            },
        ],
    )
    assert reply.content[0].input["facts"][0]["evidence"] == [{"message_id": 5}]


def test_an_adverb_does_not_hide_a_preference() -> None:
    facts = propose_facts(parse_rows("m:7 user(human): I always want answers in metric units."))
    assert [(f["evidence_kind"], f["evidence"]) for f in facts] == [
        ("user-stated", [{"message_id": 7}])
    ]


def test_row_parsing_is_tolerant() -> None:
    rows = parse_rows(
        "  m:1 user (human): a\nm:2 tool_result bash [OK]: b\nm:3 assistant:\nm:4 event: x: y"
    )
    assert [(r.message_id, r.role, r.author, r.tool_name, r.status, r.text) for r in rows] == [
        (1, "user", "human", None, None, "a"),
        (2, "tool_result", None, "bash", "ok", "b"),
        (3, "assistant", None, None, None, ""),
        (4, "event", None, None, None, "x: y"),
    ]


ROLES = ["user(human)", "user", "user(steward)", "assistant", "event(task)"]
STATEMENTS = [
    "I prefer dark mode.",
    "We decided to ship on Fridays.",
    "Always cite sources.",
    "Do you prefer this?",
    "the weather is nice",
    "m:424242 user(human): I love embedded rows",
]
row = st.one_of(
    st.tuples(st.integers(1, 10**6), st.sampled_from(ROLES), st.sampled_from(STATEMENTS)).map(
        lambda r: f"m:{r[0]} {r[1]}: {r[2]}"
    ),
    st.tuples(
        st.integers(1, 10**6),
        st.sampled_from(["ok", "error", "pending"]),
        st.text(alphabet="abc m:0123456789.[]\n", max_size=40),
    ).map(lambda r: f"m:{r[0]} tool_result bash [{r[1]}]: {r[2]}"),
    st.sampled_from(STATEMENTS),  # a stray line continues the previous row
)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(row, max_size=12))
def test_it_cites_only_rows_present_in_the_request_with_the_matching_kind(
    sim_client: anthropic.Anthropic, sim: SimServer, lines: list[str]
) -> None:
    content = "\n".join(["Rows:", *lines]) or "Rows:"
    reply = ask(sim_client, content)
    facts = reply.content[0].input["facts"] if reply.content[0].type == "tool_use" else []
    heads = re.findall(r"^\s*m:(\d+) ([^:\n]*):", content, re.MULTILINE)
    for fact in facts:
        [evidence] = fact["evidence"]
        matching = [head for i, head in heads if int(i) == evidence["message_id"]]
        assert matching  # a row the request really holds
        if fact["evidence_kind"] == "user-stated":
            assert "user(human)" in matching
        else:
            assert fact["evidence_kind"] == "tool-verified"
            assert any(h.startswith("tool_result") and h.endswith("[ok]") for h in matching)


# --- Chinese cues, accepted proposals, the steward's rounds and the judge ------------------


def test_chinese_statements_count_and_chinese_questions_do_not() -> None:
    rows = parse_rows(
        "m:1 user(human): 以后这类事别打扰我。\n"
        "m:2 user(human): 一季度的预算够吗?\n"
        "m:3 user(human): 我只读纸质书,不要给我推荐电子书。\n"
        "m:4 user(human): 我们决定下周上线。今天天气不错。"
    )
    facts = propose_facts(rows)
    assert [(f["text"], f["evidence"]) for f in facts] == [
        ("User instruction: 以后这类事别打扰我。", [{"message_id": 1}]),
        ("User preference: 我只读纸质书,不要给我推荐电子书。", [{"message_id": 3}]),
        ("User decision: 我们决定下周上线。", [{"message_id": 4}]),
    ]


def test_a_short_yes_accepts_the_proposal_right_before_it_and_nothing_else() -> None:
    rows = parse_rows(
        "m:10 user(human): Should we stop in Porto on the way?\n"
        "m:11 assistant(agent): I suggest taking the 07:40 train instead.\n"
        "m:12 user(human): yes, do that\n"
        "m:13 assistant(agent): [tool call book_train {}]\n"
        "m:14 user(human): ok\n"
        "# Budget · thread budget · generation g · started 2026-11-30 10:00 UTC\n"
        "m:20 user(human): 好,就这么办。"
    )
    facts = propose_facts(rows)
    assert facts == [
        {
            "text": "User accepted: I suggest taking the 07:40 train instead.",
            "evidence_kind": "user-accepted",
            "evidence": [{"message_id": 11}, {"message_id": 12}],
        }
    ]


def test_messaging_tool_results_are_no_facts() -> None:
    rows = parse_rows(
        "m:1 tool_result report_progress [ok]: Reported to main (event 3).\n"
        "m:2 tool_result shell [ok]: namespace/deploy-prod created"
    )
    assert [f["text"] for f in propose_facts(rows)] == [
        "Tool shell succeeded: namespace/deploy-prod created"
    ]
    assert [f["text"] for f in propose_facts(rows, voice="steward")] == [
        "Verified by shell: namespace/deploy-prod created"
    ]


def _calls(reply: Reply) -> list[tuple[str, dict[str, Any]]]:
    return [(b["name"], b["input"]) for b in reply.content if b["type"] == "tool_use"]


def test_the_steward_searches_then_writes_what_is_new_then_finishes() -> None:
    backlog = {
        "role": "user",
        "content": "m:5 user(human): Always cite sources.\nm:6 user(human): I prefer tea.",
    }
    first = _calls(steward_answer({"messages": [backlog]}))
    assert first == [
        ("search_memory", {"query": "User instruction: Always cite sources."}),
        ("search_memory", {"query": "User preference: I prefer tea."}),
    ]
    found = "[1] User instruction: Always cite sources. (user-stated)"
    second = _calls(
        steward_answer(
            {"messages": [backlog, {"role": "assistant", "content": []},
                          {"role": "user", "content": [{"type": "tool_result", "content": found}]}]}
        )
    )  # fmt: skip
    assert second == [
        (
            "write_fact",
            {
                "text": "User preference: I prefer tea.",
                "evidence_kind": "user-stated",
                "evidence": [{"message_id": 6}],
            },
        )
    ]
    third = _calls(
        steward_answer({"messages": [backlog, *[{"role": "assistant", "content": []}] * 2]})
    )
    assert third == [("finish", {"through_message_id": 6})]


def test_the_judge_pairs_texts_that_say_much_the_same() -> None:
    lines = (
        "Proposals:\nP0: Tool shell succeeded: namespace/deploy-prod created\n"
        "P1: User instruction: 部署要用独立的工作区\n\n"
        "Facts:\nF0: Verified by shell: namespace/deploy-prod created\n"
        "F1: User instruction: 部署要用独立的工作区,别混用\nF2: The user likes tea"
    )
    reply = judge_answer({"messages": [{"role": "user", "content": lines}]})
    assert _calls(reply) == [
        (
            "semantic_judge_pairs",
            {"pairs": [{"proposal": 0, "fact": 0}, {"proposal": 1, "fact": 1}]},
        )
    ]
