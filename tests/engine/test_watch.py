"""The watch's span buffer and watcher on plain-integer spans (engine/watch.py): a turn is taken
once its container and ancestors arrived or it settled; re-sent spans count once; the cap drops
the least recently fed trace and counts it; the rolling window lets old turns go."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from voicelat.core.traces.agent_trace import AgentSpan
from voicelat.engine.watch import SpanBuffer, Watcher, WatchReceiver

MS = 1_000_000


def span(
    name: str, sid: str, parent: str | None, a: int, b: int, trace: str, **kw: Any
) -> AgentSpan:
    return AgentSpan(name, a * MS, b * MS, trace, sid, parent, kw)


def call(trace: str, with_conversation: bool = True) -> list[AgentSpan]:
    """A Pipecat turn (e2e 1661 ms with the conversation's stated 0.2 s hangover)."""
    out = [
        span("stt", f"{trace}s", f"{trace}t", 200, 2000, trace, **{"metrics.ttfb": 0.5}),
        span("llm", f"{trace}l", f"{trace}t", 2001, 3000, trace, **{"metrics.ttfb": 0.3}),
        span("tts", f"{trace}x", f"{trace}t", 3001, 3500, trace, **{"metrics.ttfb": 0.15}),
        span(
            "turn",
            f"{trace}t",
            f"{trace}c",
            0,
            6000,
            trace,
            **{"conversation.id": trace, "turn.user_bot_latency_seconds": 1.661},
        ),
    ]
    if with_conversation:
        out.append(
            span(
                "conversation", f"{trace}c", None, 0, 9000, trace, **{"voicelat.vad_stop_secs": 0.2}
            )
        )
    return out


def test_a_turn_waits_for_its_ancestors_or_settles() -> None:
    buf = SpanBuffer(max_spans=100)
    buf.add(call("a", with_conversation=False), now=0.0)
    assert buf.ready(now=1.0, settle_s=5.0) == []  # its conversation span has not come
    ((spans, ids),) = buf.ready(now=5.0, settle_s=5.0)
    assert ids == {"at"} and len(spans) == 4
    assert buf.ready(now=6.0, settle_s=5.0) == []  # taken once
    buf.add(call("b"), now=7.0)
    ((_, ids),) = buf.ready(now=7.0, settle_s=5.0)  # whole: taken at once
    assert ids == {"bt"}


def test_resent_spans_count_once_and_the_cap_drops_and_counts() -> None:
    buf = SpanBuffer(max_spans=12)
    buf.add(call("a"), now=0.0)
    buf.add(call("a"), now=0.1)  # an exporter's retry
    assert buf.duplicate_spans == 5 and buf.count == 5
    buf.add(call("b"), now=0.2)
    buf.add(call("c"), now=0.3)  # 15 > 12: "a", fed least recently, goes with its turn
    assert buf.dropped_spans == 5 and buf.dropped_turns == 1 and buf.count == 10
    assert sorted(ids.pop() for _, ids in buf.ready(now=0.4, settle_s=5.0)) == ["bt", "ct"]


def test_the_watcher_takes_turns_keeps_a_window_and_writes_a_period(tmp_path: Path) -> None:
    rx = WatchReceiver(port=0)
    watcher = Watcher(rx, tmp_path, window_s=10.0, settle_s=5.0)
    rx.buffer.add(call("a"), now=0.0)
    rx.buffer.add(call("b"), now=0.0)
    assert watcher.tick(now=1.0) == 2
    summary = watcher.window_summary()
    assert summary.e2e.n == 2 and summary.e2e.p50 == 1661 * MS
    assert summary.segments["endpointing"].p50 == 200 * MS
    path = watcher.flush("period")
    assert path is not None and (path / "turns.jsonl").read_text().count("\n") == 2
    assert watcher.flush("period") is None  # nothing new: no empty directory
    assert watcher.tick(now=20.0) == 0 and watcher.window_summary().e2e.n == 0  # out of window
    assert watcher.counters()["turns"] == 2
