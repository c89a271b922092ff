"""Issue #30: an agent turn whose trace states no VAD hangover says so, and the summary counts
such turns with one line in the text report (plain turns, no I/O)."""

from __future__ import annotations

from voicelat.core.base.turn import HANGOVER_UNSTATED, Turn
from voicelat.core.summaries.run_summary import RunSummary
from voicelat.core.summaries.streaming_summary import SummaryAccumulator
from voicelat.core.summaries.summary import counts
from voicelat.report.text import summary_table

MS = 1_000_000


def _turn(i: int, *flags: str) -> Turn:
    return Turn(i, "f", 0, {}, {"endpointing": 100 * MS}, 100 * MS, flags=flags)


def test_the_summary_counts_turns_with_an_unstated_hangover_and_says_what_it_means() -> None:
    turns = [_turn(0, HANGOVER_UNSTATED), _turn(1), _turn(2, HANGOVER_UNSTATED, "pacer_lag")]
    assert counts(turns)["hangover_unstated"] == 2
    doc = SummaryAccumulator.of(turns).finish(run={}, pipeline={}, fixtures=[], stages={})
    assert doc["counts"]["hangover_unstated"] == 2
    s = RunSummary.from_json(doc)
    assert s.counts.hangover_unstated == 2
    text = summary_table(s)
    assert "2 agent turn(s) whose trace states no VAD hangover: it is counted in stt" in text
    # Runs without such turns keep their counts as they were.
    assert "hangover_unstated" not in counts([_turn(0)])
    assert (
        "hangover_unstated"
        not in SummaryAccumulator.of([_turn(0)]).finish(
            run={}, pipeline={}, fixtures=[], stages={}
        )["counts"]
    )
