"""The results viewer on an import of the example Pipecat bot's real spans (docs/PRODUCTION.md):
the traced segments in the waterfall, every turn listed, a turn's detail with the agent's
milestones."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import DataTable

from tests.tui.test_app import SIZE, _text
from voicelat.cli.main import main
from voicelat.files.results import load_run
from voicelat.tui.app import VoicelatApp
from voicelat.tui.model import RunModel

DATA = Path(__file__).resolve().parents[1] / "data" / "traces"


async def test_the_viewer_shows_an_import_of_real_traces(tmp_path: Path) -> None:
    out = tmp_path / "run"
    files = [str(p) for p in sorted(DATA.glob("pipecat-*"))]
    assert main(["import", *files, "--out", str(out)]) == 0
    app = VoicelatApp(RunModel.from_loaded(load_run(out)))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert app.query_one("#turns", DataTable).row_count == 6
        waterfall = _text(app, "#waterfall")
        assert "tts_ttfb" in waterfall and "transport" in waterfall
        await pilot.press("enter")
        await pilot.pause()
        detail = _text(app, "#detail-body")
        # The agent's own milestones, from t=0 (its end of speech) to its first audio out.
        assert "agent_tts_first_byte" in detail and "first_audio" in detail
