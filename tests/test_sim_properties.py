"""Properties over random prefixes and edits, checked against an independent count.

The oracle knows nothing of keys or breakpoints: it counts estimated tokens of
the text blocks and finds the longest run of leading blocks an edit left alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import anthropic
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ember.sim import ManualClock, SimServer
from ember.tokens import estimate_tokens
from simfixtures import (
    CC,
    CC_1H,
    STANDARD,
    TINY_MODELS,
    usage_of,
)

# Letters, spaces, accents and an emoji: code points, not bytes, are what count. A short
# random pattern repeated makes blocks long enough (up to 90 tokens) to pass the minimum.
# Whitespace-only text, and a final assistant message ending in whitespace, are 400s
# as in the API, so every text starts and ends with a letter.
blocks_text = st.builds(
    lambda letter, pattern, times: (letter + pattern) * times + letter,
    st.sampled_from("abcdefghij"),
    st.text(alphabet="abcdefghij é\u0301🙂", max_size=11),
    st.integers(1, 30),
)


@dataclass
class Prompt:
    texts: list[str]
    markers: dict[int, dict[str, str]]  # block index -> cache_control
    automatic: bool

    def body(self) -> dict[str, Any]:
        messages = []
        for i, value in enumerate(self.texts):
            block: dict[str, Any] = {"type": "text", "text": value}
            if i in self.markers:
                block["cache_control"] = self.markers[i]
            messages.append({"role": ("user", "assistant")[i % 2], "content": [block]})
        body: dict[str, Any] = {"model": STANDARD, "max_tokens": 10, "messages": messages}
        if self.automatic:
            body["cache_control"] = CC
        return body

    def total(self) -> int:
        return sum(estimate_tokens(t) for t in self.texts)


@st.composite
def prompts(draw: st.DrawFn, texts: list[str] | None = None) -> Prompt:
    if texts is None:
        texts = draw(st.lists(blocks_text, min_size=1, max_size=10))
    automatic = draw(st.booleans())
    marked = draw(
        st.lists(st.integers(0, len(texts) - 1), max_size=3 if automatic else 4, unique=True)
    )
    # 1h markers must come first; a prefix of the marked blocks gets them.
    ordered = sorted(marked)
    long_lived = draw(st.integers(0, len(ordered)))
    markers = {i: (CC_1H if n < long_lived else CC) for n, i in enumerate(ordered)}
    if automatic and len(texts) - 1 in markers:
        # The automatic marker lands on the last block: a different explicit TTL there is a 400.
        markers[len(texts) - 1] = CC
    return Prompt(texts, markers, automatic)


@st.composite
def edits(draw: st.DrawFn) -> tuple[Prompt, Prompt]:
    before = draw(prompts())
    texts = list(before.texts)
    kind = draw(st.sampled_from(["change", "append", "truncate", "same", "replace"]))
    if kind == "change":
        k = draw(st.integers(0, len(texts) - 1))
        at = draw(st.integers(0, len(texts[k]) - 1))
        replacement = draw(st.sampled_from("xyz#"))
        texts[k] = texts[k][:at] + replacement + texts[k][at + 1 :]
    elif kind == "append":
        texts += draw(st.lists(blocks_text, min_size=1, max_size=25))
    elif kind == "truncate":
        texts = texts[: draw(st.integers(1, len(texts)))]
    elif kind == "replace":
        texts = draw(st.lists(blocks_text, min_size=1, max_size=10))
    return before, draw(prompts(texts))


def unchanged_prefix_tokens(before: list[str], after: list[str]) -> int:
    tokens = 0
    for old, new in zip(before, after, strict=False):
        if old != new:
            break
        tokens += estimate_tokens(new)
    return tokens


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(edits())
def test_reads_never_exceed_the_unchanged_prefix_and_usage_adds_up(
    sim_client: anthropic.Anthropic, sim: SimServer, case: tuple[Prompt, Prompt]
) -> None:
    sim.reset(clock=ManualClock(), models=TINY_MODELS)  # a fresh cache for every example
    before, after = case

    first = usage_of(sim_client.messages.create(**before.body()))
    assert first[0] == 0  # nothing to read in an empty cache
    assert first[4] == before.total()

    second = usage_of(sim_client.messages.create(**after.body()))
    read, _, _, _, total = second
    assert total == after.total()
    assert read <= unchanged_prefix_tokens(before.texts, after.texts)
    assert read <= first[1] + first[2]  # only what the first request wrote can be read


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(prompts())
def test_an_identical_request_reads_exactly_what_the_first_one_wrote(
    sim_client: anthropic.Anthropic, sim: SimServer, prompt: Prompt
) -> None:
    sim.reset(clock=ManualClock(), models=TINY_MODELS)
    first = usage_of(sim_client.messages.create(**prompt.body()))
    second = usage_of(sim_client.messages.create(**prompt.body()))
    assert second[0] == first[1] + first[2]
    assert second[4] == first[4] == prompt.total()
    counted = sim_client.messages.count_tokens(
        model=STANDARD, messages=prompt.body()["messages"]
    ).input_tokens
    assert counted == prompt.total()
