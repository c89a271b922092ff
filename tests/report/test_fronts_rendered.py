"""The comparison page's latency x cost and latency x quality fronts as a browser draws them:
headless Chromium lays out the page (its DOM after layout, with every point's and label's box
read back by a probe script) and paints it (a screenshot whose pixels are read at each point).
A broken render fails here where a string check would pass: a point off where its data puts it,
a label that takes no room, a front point not filled, an SVG that never draws.

Skips when no Chromium is installed (``apt-get install chromium``)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from voicelat.report.comparison_html import comparison_html

MS = 1_000_000
_BROWSER = next(
    (p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None
)
pytestmark = pytest.mark.skipif(_BROWSER is None, reason="no chromium installed")

# The figure's frame (report/fronts.py draws 560 x 300 with a 52 px margin): restated here,
# so the expected positions below are computed from the data alone, not by the code under test.
W, H, PAD = 560.0, 300.0, 52.0


def _combo(name: str, rank: int, e2e_ms: float, cost: float, wer: float, mos: float) -> Any:
    return {
        "name": name,
        "status": "ok",
        "rank": rank,
        "n": 8,
        "e2e": {"p50": {"ns": int(e2e_ms * MS)}},
        "scores": {
            "goodput": {"share": 0.5, "criteria": ["e2e <= 1500 ms"]},
            "cost": {"currency": "USD", "per_turn": cost, "per_minute": cost * 6},
            "quality": {"wer": wer, "truncated": 0, "dnsmos_ovrl": mos},
        },
    }


DOC = {
    "name": "fronts",
    "combinations": [
        # fast but dear, slow but cheap, and one beaten on every axis (off every front)
        _combo("fast-dear", 1, 600.0, 0.004, 0.05, 3.4),
        _combo("slow-cheap", 2, 1200.0, 0.001, 0.02, 3.5),
        _combo("beaten", 3, 1400.0, 0.005, 0.30, 2.5),
    ],
}
FRONT = {"fast-dear", "slow-cheap"}

PROBE = """<pre id="probe"></pre><script>
const out = [];
for (const svg of document.querySelectorAll("svg.front")) {
  const box = svg.getBoundingClientRect();
  const rel = (r) => ({x: r.left - box.left, y: r.top - box.top, w: r.width, h: r.height,
                       px: r.left + r.width / 2 + scrollX, py: r.top + r.height / 2 + scrollY});
  const fig = {title: svg.getAttribute("aria-label"), w: box.width, h: box.height,
               points: [], labels: [], axis: []};
  for (const c of svg.querySelectorAll("circle")) {
    fig.points.push({name: c.dataset.name, front: c.dataset.front === "true",
                     ...rel(c.getBoundingClientRect())});
  }
  for (const t of svg.querySelectorAll(":scope > text")) {
    fig.labels.push({text: t.textContent, ...rel(t.getBoundingClientRect())});
  }
  const line = svg.querySelector("polyline.pareto");
  fig.pareto = line ? Array.from(line.points, (p) => [p.x, p.y]) : [];
  out.push(fig);
}
document.getElementById("probe").textContent =
  JSON.stringify({figures: out, height: document.documentElement.scrollHeight});
</script>"""


def _chromium(*args: str, profile: Path) -> str:
    assert _BROWSER is not None
    done = subprocess.run(
        [
            _BROWSER,
            "--headless",
            "--no-sandbox",  # CI runs as root
            "--disable-gpu",
            "--hide-scrollbars",
            "--force-device-scale-factor=1",
            f"--user-data-dir={profile}",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def _expected(values: Mapping[str, tuple[float, float]]) -> dict[str, tuple[float, float]]:
    """Where each point belongs: x from e2e over [0.95 min, 1.05 max], y from 0 up to 1.15 max
    (SVG y grows downwards: a larger value is higher up, a smaller y)."""
    xs, ys = [v[0] for v in values.values()], [v[1] for v in values.values()]
    lo, hi, top = min(xs) * 0.95, max(xs) * 1.05, max(ys) * 1.15
    return {
        n: (PAD + (x - lo) / (hi - lo) * (W - 12 - PAD), (H - PAD) - y / top * (H - PAD - 12))
        for n, (x, y) in values.items()
    }


def _data(axis: str) -> dict[str, tuple[float, float]]:
    out = {}
    for c in DOC["combinations"]:
        q, e2e = c["scores"]["quality"], c["e2e"]["p50"]["ns"] / MS
        y = {"cost": c["scores"]["cost"]["per_turn"], "wer": q["wer"], "mos": 5 - q["dnsmos_ovrl"]}
        out[c["name"]] = (e2e, float(y[axis]))
    return out


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Any]:
    from PIL import Image

    tmp = tmp_path_factory.mktemp("fronts")
    page = tmp / "compare.html"
    page.write_text(comparison_html(DOC).replace("</body>", PROBE + "</body>"))
    dom = _chromium("--window-size=1200,900", "--dump-dom", page.as_uri(), profile=tmp / "p1")
    found = re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S)
    assert found and found.group(1), "the probe never ran: the page did not load"
    probe = json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    shot = tmp / "compare.png"
    size = f"--window-size=1200,{int(probe['height']) + 20}"
    _chromium(size, f"--screenshot={shot}", page.as_uri(), profile=tmp / "p2")
    return probe, Image.open(shot).convert("RGB")


AXES = {
    "Latency x cost": "cost",
    "Latency x intelligibility": "wer",
    "Latency x sound (DNSMOS)": "mos",
}


def test_three_fronts_are_laid_out_at_their_size(rendered: tuple[dict[str, Any], Any]) -> None:
    probe, _ = rendered
    assert [f["title"] for f in probe["figures"]] == list(AXES)
    for fig in probe["figures"]:
        assert (fig["w"], fig["h"]) == (W, H), fig["title"]


def test_every_point_is_where_its_data_puts_it(rendered: tuple[dict[str, Any], Any]) -> None:
    probe, _ = rendered
    for fig in probe["figures"]:
        want = _expected(_data(AXES[fig["title"]]))
        got = {p["name"]: p for p in fig["points"]}
        assert set(got) == set(want), fig["title"]
        for name, (x, y) in want.items():
            p = got[name]
            # The circle's box as laid out (r = 5, so 10 px wide) centred on its value.
            assert p["w"] == pytest.approx(10, abs=1) and p["h"] == pytest.approx(10, abs=1)
            assert p["x"] + p["w"] / 2 == pytest.approx(x, abs=1.0), (fig["title"], name)
            assert p["y"] + p["h"] / 2 == pytest.approx(y, abs=1.0), (fig["title"], name)
            assert p["front"] is (name in FRONT), (fig["title"], name)
        # The front's line joins exactly the front's points, in order of latency.
        front = sorted((want[n] for n in FRONT), key=lambda v: v[0])
        assert len(fig["pareto"]) == len(front)
        for (px, py), (x, y) in zip(fig["pareto"], front, strict=True):
            assert (px, py) == (pytest.approx(x, abs=0.1), pytest.approx(y, abs=0.1))


def test_labels_take_room_beside_their_points(rendered: tuple[dict[str, Any], Any]) -> None:
    probe, _ = rendered
    for fig in probe["figures"]:
        labels = {t["text"]: t for t in fig["labels"]}
        assert "e2e P50 (ms), lower is better" in labels
        assert {"600", "1400"} <= set(labels)  # the x range's ends
        for text in labels.values():
            assert text["w"] > 5 and text["h"] > 5, text  # drawn, in a font, not collapsed
        for p in fig["points"]:
            label = labels[p["name"]]
            # Just right of and above its circle (x + 7, y - 6), inside the figure.
            assert 0 < label["x"] - (p["x"] + p["w"] / 2) < 12, (fig["title"], p["name"])
            assert label["y"] < p["y"] + p["h"] / 2, (fig["title"], p["name"])
            assert label["x"] + label["w"] <= W + 60  # a long name may overhang a little


def test_front_points_are_painted_filled_and_the_others_hollow(
    rendered: tuple[dict[str, Any], Any],
) -> None:
    probe, image = rendered
    green = (0x1B, 0x78, 0x37)
    for fig in probe["figures"]:
        for p in fig["points"]:
            pixel = image.getpixel((round(p["px"]), round(p["py"])))
            close = max(abs(a - b) for a, b in zip(pixel, green, strict=True)) < 40
            if p["front"]:
                assert close, (fig["title"], p["name"], pixel)
            else:
                assert min(pixel) > 230, (fig["title"], p["name"], pixel)  # white inside
                # Its green ring (stroke 1 px at r = 5, anti-aliased: the darkest pixel across it).
                ring = [image.getpixel((round(p["px"] + dx), round(p["py"]))) for dx in (4, 5, 6)]
                dist = min(max(abs(a - b) for a, b in zip(px, green, strict=True)) for px in ring)
                assert dist < 90, (fig["title"], p["name"], ring)
