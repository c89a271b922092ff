"""``voicelat run`` leaves ``report.html`` (its pictures) beside its results: a real run of
three turns against ``voicelat serve openai`` on loopback, read back with an XML parser."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

from tests.cli.emulated_run import popen, run_args, serving

SVG = "{http://www.w3.org/2000/svg}"


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
