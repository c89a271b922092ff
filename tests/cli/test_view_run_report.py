"""``voicelat run`` leaves ``report.html`` (its pictures) beside its results: a real run of
three turns against ``voicelat serve openai`` on loopback, read back with an XML parser."""

from __future__ import annotations

import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from tests.cli.emulated_run import popen, run_args, serving
from tests.helpers import ROOT
from tests.tui.helpers import SAVED_RUN
from voicelat.cli.main import main
from voicelat.engine.runner import RunOutcome
from voicelat.files.results import load_run

SVG = "{http://www.w3.org/2000/svg}"


@pytest.mark.e2e
def test_a_run_writes_its_report_with_every_picture(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with serving() as (url, _proc):
        proc = popen("run", *run_args(tmp_path, url, out, turns=2))
        _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    page = (out / "report.html").read_text()
    svgs = {
        root.get("class"): root
        for root in (ET.fromstring(s) for s in re.findall(r"<svg.*?</svg>", page, re.S))
    }
    assert {"waterfall", "histogram", "timeline"} <= set(svgs)
    bins = [r for r in svgs["histogram"].iter(SVG + "rect") if r.get("class") == "bin"]
    assert sum(int(b.get("data-count", "0")) for b in bins) == 2  # the two turns
    dots = [c for c in svgs["timeline"].iter(SVG + "circle") if c.get("class") == "turn"]
    assert sorted(int(c.get("data-index", "")) for c in dots) == [0, 1]
    # The emulator answers every fixture's manifest transcript: nothing misheard.
    assert "WER 0.0%" in page
    assert "Traceback" not in stderr and "<script" not in page


def test_ci_leaves_the_report_beside_its_gate_reports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``voicelat ci`` measuring a run writes its report.html too (the measuring replaced by
    the saved run, so this needs no server)."""

    def fake_execute_run(request: Any, *a: Any, **k: Any):  # type: ignore[no-untyped-def]
        out_dir = request.out_dir
        shutil.copytree(SAVED_RUN, out_dir, dirs_exist_ok=True)
        run = load_run(out_dir)
        return RunOutcome(out_dir, list(run.turns), run.summary)

    monkeypatch.setattr("voicelat.engine.job.execute_run", fake_execute_run)
    out = tmp_path / "ci"
    main(["ci", "-p", str(ROOT / "pipelines" / "emulated-openai.toml"), "-o", str(out)])
    capsys.readouterr()
    page = (out / "report.html").read_text()
    assert 'class="histogram"' in page and (out / "report.md").exists()
