"""Fuzzing the split: any spans (names, parents, cycles, times, attributes) give None or a split
whose milestones are known names and whose figures are finite; nothing raises."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from tests.fuzzing import LONG, SHORT
from voicelat.core.traces.agent_trace import SPLIT_MILESTONES, AgentSpan, split_from_spans

_IDS = st.sampled_from(["a", "b", "c", "d", "e"])
_ATTR_VALUE = st.one_of(
    st.booleans(), st.integers(-(2**63), 2**63), st.floats(), st.text(max_size=5)
)
_ATTRS = st.dictionaries(
    st.sampled_from(
        [
            "metrics.ttfb",
            "gen_ai.operation.name",
            "gen_ai.response.time_to_first_chunk",
            "stt.incomplete",
            "tts.interrupted",
            "turn.user_bot_latency_seconds",
            "x",
        ]
    ),
    st.one_of(
        _ATTR_VALUE,
        st.sampled_from(
            ["chat", "invoke_agent", "speech_to_text", "text_to_speech", "user_speech"]
        ),
    ),
    max_size=4,
)


@st.composite
def _span(draw: st.DrawFn) -> AgentSpan:
    start = draw(st.integers(-(10**12), 10**12))
    return AgentSpan(
        name=draw(
            st.sampled_from(
                ["turn", "stt", "llm", "tts", "conversation", "user_speech", "chat x", ""]
            )
        ),
        start_ns=start,
        end_ns=start + draw(st.integers(-(10**9), 10**10)),
        trace_id=draw(st.sampled_from(["t1", "t2"])),
        span_id=draw(_IDS),
        parent_id=draw(st.none() | _IDS),
        attributes=draw(_ATTRS),
    )


def check_split(spans: list[AgentSpan], lo: int, width: int, mapping: str) -> None:
    split = split_from_spans(spans, (lo, lo + width), mapping)
    if split is None:
        return
    assert set(split.milestones) <= set(SPLIT_MILESTONES)
    assert all(isinstance(v, int) for v in split.milestones.values())
    assert all(math.isfinite(v) and v >= 0 for v in split.reported.values())
    assert len(set(split.flags)) == len(split.flags)


_ARGS = (
    st.lists(_span(), max_size=12),
    st.integers(-(10**12), 10**12),
    st.integers(0, 10**12),
    st.sampled_from(["pipecat", "genai"]),
)


@SHORT
@given(*_ARGS)
def test_split_never_raises(spans: list[AgentSpan], lo: int, width: int, mapping: str) -> None:
    check_split(spans, lo, width, mapping)


@LONG
@given(*_ARGS)
def test_split_never_raises_long(spans: list[AgentSpan], lo: int, width: int, mapping: str) -> None:
    check_split(spans, lo, width, mapping)
