"""The provider's own clock in the text report and the TUI turn detail: each stage that has a
report shows it beside the rest of its measured span; a run without any shows nothing new."""

from __future__ import annotations

from tests.tui.helpers import make_turn, text_of
from voicelat.core.base.turn import Turn
from voicelat.core.measure.events import ProviderTiming, RequestSent, TextSent
from voicelat.core.measure.recorder import TurnRecorder
from voicelat.core.summaries.summary import summarize
from voicelat.report.text import provider_clock, provider_lines, summary_table
from voicelat.tui.render import turn_detail

MS = 1_000_000


def _turn(i: int, llm_ms: float) -> Turn:
    rec = TurnRecorder(index=i, fixture="f", t0_ns=0)
    rec.on_event("llm", RequestSent(100 * MS))
    rec.on_event("llm", ProviderTiming(100 * MS + 130 * MS, "llama.timings", llm_ms, 100 * MS))
    rec.on_event("tts", TextSent(300 * MS, "Hi."))
    rec.on_event("tts", ProviderTiming(345 * MS, "cartesia.step_time", 43.4))
    return rec.finish()


def test_a_turns_line_adds_up_per_stage_and_names_the_field() -> None:
    assert provider_clock(_turn(0, 128.4)) == (
        "llm 128 + 1.6 of 130 ms (llama.timings); tts 43 + 1.6 of 45 ms (cartesia.step_time)"
    )
    assert provider_clock(TurnRecorder(index=0, fixture="f", t0_ns=0).finish()) == ""


def _ok(i: int, llm_ms: float) -> Turn:
    """A complete turn (on the critical path) carrying the recorder's split figures."""
    split = _turn(i, llm_ms)
    figures = {**make_turn(i).figures, **split.figures}
    return make_turn(i, figures=figures, extra=dict(split.extra))


def test_the_summary_shows_reported_rest_and_span_at_p50_and_p90() -> None:
    turns = [_ok(i, ms) for i, ms in enumerate((120.0, 125.0, 128.0))]
    s = summarize(turns, run={}, pipeline={}, fixtures=[], stages={})
    lines = provider_lines(s)
    assert lines[0].startswith("Provider's own clock: what the provider reported, the rest")
    assert lines[1] == (
        "  llm reported P50 125 P90 127 ms · rest P50 5.0 P90 9.0 ms · span P50 130 P90 130 ms"
        " (n=3)"
    )
    assert lines[2].startswith("  tts reported P50 43 P90 43 ms · rest P50 1.6")
    table = summary_table(s)
    assert "Provider's own clock" in table
    # Between the waterfall bands and the counts.
    assert table.index("Waterfall at P90") < table.index("Provider's") < table.index("turns:")


def test_a_run_without_provider_reports_prints_no_such_lines() -> None:
    s = summarize([make_turn(0)], run={}, pipeline={}, fixtures=[], stages={})
    assert provider_lines(s) == []
    assert "Provider" not in summary_table(s)


def test_the_tui_turn_detail_has_a_provider_clock_line_only_when_reported() -> None:
    text = text_of(turn_detail(_ok(0, 128.4), {}, 50), width=140)
    assert "provider clock  llm 128 + 1.6 of 130 ms (llama.timings); tts 43 + 1.6" in text
    assert "provider clock" not in text_of(turn_detail(make_turn(1), {}, 50), width=140)
