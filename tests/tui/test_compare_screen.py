"""The compare screen (voicelat.tui.compare) driven with Pilot: both tables filled, q quits."""

from __future__ import annotations

from textual.widgets import DataTable

from voicelat.core.judge.ranking import CombinationSample, rank_combinations
from voicelat.tui.compare import CompareApp

MS = 1_000_000


def _doc() -> dict[str, object]:
    samples = [
        CombinationSample("fast", [{"e2e": v * MS, "stt": 80 * MS} for v in (800, 850, 900)], 3, 0),
        CombinationSample(
            "slow", [{"e2e": v * MS, "stt": 300 * MS} for v in (1500, 1550, 1600)], 3, 0
        ),
        CombinationSample("dead", [], 3, 3, failure="tts: connection refused"),
    ]
    combos = [r.to_json() | {"run_dir": r.name} for r in rank_combinations(samples, resamples=200)]
    return {"name": "demo", "statistics": {"rank_by": "p50"}, "combinations": combos}


async def test_compare_screen_shows_the_ranking_and_segments() -> None:
    app = CompareApp(_doc())
    async with app.run_test(size=(140, 40)) as pilot:
        ranking = app.query_one("#ranking", DataTable)
        segments = app.query_one("#segments", DataTable)
        rows = [ranking.get_row_at(i) for i in range(ranking.row_count)]
        assert [r[1] for r in rows] == ["fast", "slow", "dead"]
        assert rows[0][5] == "best"
        assert rows[1][5].startswith("+700 ms [")  # significant: every slow turn is slower
        assert "FAILED: tts: connection refused" in rows[2][4]
        # Failed combinations have no segments to show.
        assert segments.row_count == 2
        assert segments.get_row_at(0)[2] == "80 / 80"
        assert segments.get_row_at(1)[0] == "slow"
        await pilot.press("q")
    assert app.return_code == 0
