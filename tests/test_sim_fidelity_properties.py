"""A property over random request pairs: no cache read from a prefix the rules invalidated.

The second request is the first with changes drawn from a grammar (content, markers,
TTLs, tools, thinking, effort, images, settings). The oracle knows only the rules'
levels: which region of the prompt (tools, system, messages before some index) each
change leaves valid. Whatever the simulator reads must come from that region.
"""

from __future__ import annotations

import copy
from typing import Any

import anthropic
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ember.sim import ManualClock, SimServer
from simfixtures import CC, CC_1H, STANDARD, text, words
from simmedia import image_block, png
from test_sim_fidelity import FIDELITY_MODELS, THINKING_FIRST, TOOL

# A read may come from positions ranked below the bound: (0, _) tools, (1, _) system,
# (2, i) message i.
NOTHING = (0, 0)
TOOLS = (1, 0)
SYSTEM = (2, 0)
EVERYTHING = (3, 0)


def rank(where: str) -> tuple[int, int]:
    head, _, rest = where.partition(".")
    if head == "tools":
        return (0, 0)
    if head == "system":
        return (1, 0)
    return (2, int(rest.split(".")[0]))


def invalidated_from(change: str, model: str, k: int) -> tuple[int, int]:
    """The first region a change invalidates, by the documented levels."""
    thinking_first = model == THINKING_FIRST
    return {
        "content": (2, k),
        "image size": (2, 0),
        "add image": SYSTEM,  # adding an image changes the message-level settings
        "markers": EVERYTHING,
        "ttl": EVERYTHING,
        "append": EVERYTHING,
        "default effort": EVERYTHING,
        "tools": NOTHING,
        "format": NOTHING,
        "beta": NOTHING,
        "speed": TOOLS,
        "tool_choice": SYSTEM,
        "thinking": NOTHING if thinking_first else SYSTEM,
        "effort": NOTHING if thinking_first else SYSTEM,
    }[change]


CHANGES = [
    "content",
    "image size",
    "add image",
    "markers",
    "ttl",
    "append",
    "default effort",
    "tools",
    "format",
    "beta",
    "speed",
    "tool_choice",
    "thinking",
    "effort",
]


def build(spec: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """A request body and its headers from a plain description."""
    ttl = CC_1H if spec["ttl"] == "1h" else CC
    messages = []
    for i, words_text in enumerate(spec["texts"]):
        blocks: list[dict[str, Any]] = []
        if i == 0 and spec["image"] is not None:
            blocks.append(image_block(png(*spec["image"])))
        if i in spec["images_added"]:
            blocks.append(image_block(png(64, 64)))
        block = text(words_text)
        if i == spec["marked"]:
            block["cache_control"] = ttl
        blocks.append(block)
        messages.append({"role": ("user", "assistant")[i % 2], "content": blocks})
    tool = {**TOOL, "description": spec["tool_description"]}
    if spec["tool_marker"]:
        tool["cache_control"] = ttl
    body: dict[str, Any] = {
        "model": spec["model"],
        "max_tokens": 4000,
        "tools": [tool],
        "system": [text(words("system prompt", 50), ttl)],
        "messages": messages,
    }
    if spec["automatic"]:
        body["cache_control"] = ttl
    body.update(spec["settings"])
    headers = {"anthropic-beta": spec["beta"]} if spec["beta"] else {}
    return body, headers


@st.composite
def request_specs(draw: st.DrawFn) -> dict[str, Any]:
    n = draw(st.integers(1, 6))
    # Each ends in a letter: a final assistant message ending in whitespace is a 400.
    texts = [
        words(f"m{i} {draw(st.integers(0, 9))}", draw(st.integers(8, 40))).rstrip() + "."
        for i in range(n)
    ]
    last_user = n - 1 if n % 2 == 1 else n - 2
    return {
        "model": draw(st.sampled_from([STANDARD, THINKING_FIRST])),
        "texts": texts,
        "image": draw(st.none() | st.tuples(st.integers(20, 2000), st.integers(20, 2000))),
        "images_added": set(),
        "marked": draw(st.none() | st.integers(0, n - 1)),
        "tool_marker": draw(st.booleans()),
        "automatic": draw(st.booleans()),
        "ttl": draw(st.sampled_from(["5m", "1h"])),
        "tool_description": "Looks things up.",
        "settings": {},
        "beta": None,
        "last_user": last_user,
    }


def apply(draw: st.DrawFn, spec: dict[str, Any], change: str) -> tuple[dict[str, Any], int]:
    """The spec with one change; the message index a content change touched."""
    spec = copy.deepcopy(spec)
    n = len(spec["texts"])
    k = draw(st.integers(0, n - 1))
    if change == "content":
        spec["texts"][k] = spec["texts"][k][:-1] + "#"
    elif change == "image size":
        if spec["image"] is None:
            spec["image"] = (100, 100)
        else:
            spec["image"] = (spec["image"][0] + 750, spec["image"][1])
        k = 0
    elif change == "add image":
        spec["images_added"].add(spec["last_user"])
    elif change == "markers":
        spec["marked"] = draw(st.none() | st.integers(0, n - 1))
        spec["automatic"] = not spec["automatic"]
    elif change == "ttl":
        spec["ttl"] = "5m" if spec["ttl"] == "1h" else "1h"
    elif change == "append":
        spec["texts"] += [words("appended a", 20) + ".", words("appended b", 20) + "."]
        spec["last_user"] = len(spec["texts"]) - 1 if len(spec["texts"]) % 2 else n
    elif change == "default effort":
        # Spelling out the default is no change only where nothing else was set: written
        # over an earlier "effort" change it would undo that change behind the oracle's back.
        spec["settings"].setdefault("output_config", {}).setdefault("effort", "high")
    elif change == "tools":
        spec["tool_description"] = "Looks other things up."
    elif change == "format":
        fmt = {"type": "json_schema", "schema": {"type": "object"}}
        spec["settings"].setdefault("output_config", {})["format"] = fmt
    elif change == "beta":
        spec["beta"] = "some-beta-2026-01-01"
    elif change == "speed":
        spec["settings"]["speed"] = "fast"
    elif change == "tool_choice":
        spec["settings"]["tool_choice"] = {"type": "none"}
    elif change == "thinking":
        spec["settings"]["thinking"] = {"type": "adaptive"}
    elif change == "effort":
        spec["settings"].setdefault("output_config", {})["effort"] = "low"
    return spec, k


@st.composite
def request_pairs(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any], tuple[int, int]]:
    first = draw(request_specs())
    second = first
    bound = EVERYTHING
    for change in draw(st.lists(st.sampled_from(CHANGES), min_size=1, max_size=3)):
        second, k = apply(draw, second, change)
        bound = min(bound, invalidated_from(change, first["model"], k))
    return first, second, bound


@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(request_pairs())
def test_no_read_from_a_prefix_the_rules_invalidated(
    sim_client: anthropic.Anthropic,
    sim: SimServer,
    pair: tuple[dict[str, Any], dict[str, Any], tuple[int, int]],
) -> None:
    sim.reset(clock=ManualClock(), models=FIDELITY_MODELS)
    first, second, bound = pair
    for spec in (first, second):
        body, headers = build(spec)
        sim_client.messages.create(**body, extra_headers=headers)
    cache = sim.requests[-1].cache
    read_from = cache["read_from"]
    if read_from is not None:
        assert rank(read_from) < bound, (read_from, bound)
    if bound == NOTHING:
        assert sim.requests[-1].usage["cache_read_input_tokens"] == 0
