"""The endpointing screen driven with Pilot: curve drawn, front and grid filled, q quits."""

from __future__ import annotations

from textual.widgets import DataTable, Static

from voicelat.core.measure.endpointing import Config, ConfigScore
from voicelat.report.endpointing import TradeOff, curve_text
from voicelat.tui.endpointing import EndpointingApp

MS = 1_000_000


def _s(name: str, hang: int, p50_ms: int, cut: int) -> ConfigScore:
    return ConfigScore(Config(name, 0.5, hang), 10, p50_ms * MS, p50_ms * MS, cut, cut, cut, 0)


TRADE = TradeOff(
    (_s("energy", 300, 300, 6), _s("silero", 800, 860, 1), _s("webrtc", 500, 700, 8)),
    0.1,
    10,
    8,
    12,
    50.0,
    2.0,
)


def test_curve_text_marks_front_and_others() -> None:
    text = curve_text(TRADE.scores, width=10, height=4)
    rows = text.splitlines()
    assert rows[0].startswith("  860 |") and rows[0][7 + 1] == "*"  # silero: 10%, top
    assert "w" in text and "".join(rows[:5]).count("*") == 2
    assert curve_text([]) == "(no configuration found an endpoint)"


async def test_endpointing_screen() -> None:
    app = EndpointingApp(TRADE)
    async with app.run_test(size=(120, 50)) as pilot:
        front = app.query_one("#front", DataTable)
        grid = app.query_one("#grid", DataTable)
        assert [front.get_row_at(i)[0] for i in range(front.row_count)] == [
            "energy thr=0.5 hang=300ms",
            "silero thr=0.5 hang=800ms",
        ]
        assert grid.row_count == 3
        title = str(app.query_one("#title", Static).render())
        assert "silero thr=0.5 hang=800ms" in title
        await pilot.press("q")
    assert app.return_code == 0


def _wire_trade() -> TradeOff:
    from voicelat.core.base.turn import Turn
    from voicelat.core.measure.endpointing_runs import run_point

    summary = {
        "pipeline": {"endpointing": {"mode": "provider"}, "stt": {"stage": "deepgram-stt"}},
        "stages": {"stt": {"stage": "deepgram-stt", "endpointing": 300}},
        "fixtures": [
            {
                "id": "a",
                "speech_start_ms": 400,
                "speech_end_ms": 3000,
                "pauses": [{"start_ms": 1500, "end_ms": 2200}],
            }
        ],
    }
    turns = [Turn(i, "a", 0, {"endpoint": e * MS}, {}, None) for i, e in ((0, 1900), (1, 3420))]
    point = run_point("runs/dg", summary, turns)
    return TradeOff((*TRADE.scores, point.score), 0.1, 10, 8, 12, 50.0, 2.0, (point,))


async def test_endpointing_screen_marks_recorded_runs() -> None:
    app = EndpointingApp(_wire_trade())
    async with app.run_test(size=(140, 60)) as pilot:
        grid = app.query_one("#grid", DataTable)
        last = grid.get_row_at(grid.row_count - 1)
        assert last[0] == "deepgram endpointing=300 (wire)" and last[-1] == "on the wire"
        assert grid.get_row_at(0)[-1] == "offline replay"
        runs = str(app.query_one("#runs", Static).render())
        assert (
            "1/2 turns cut" in runs and "turn 0 a: end-of-turn at 1.900 s, inside the pause" in runs
        )
        await pilot.press("q")
