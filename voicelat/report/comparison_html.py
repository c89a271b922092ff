"""``report.html``: the comparison as one self-contained page with an SVG waterfall per combination.

Pure functions of the ``comparison.json`` document. The page needs no script, font or stylesheet
from anywhere: it opens from the run directory, offline.

Each waterfall shows a percentile band (DESIGN §2): the mean composition of the turns whose e2e
rank lies around the percentile, so its bars sum exactly to the band's mean e2e, and the exact
interpolated percentile is a marker on the same axis. All waterfalls share one time axis, so
bar lengths compare across combinations.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from voicelat.core.base.display import NS_PER_MS as NS_PER_MS
from voicelat.core.base.display import fmt_ms
from voicelat.core.base.palette import SEGMENT_COLOURS as SEGMENT_COLOURS
from voicelat.core.base.palette import ordered_segments, segment_colour
from voicelat.core.base.turn import Turn
from voicelat.report.chartdata import (
    Accuracy,
    accuracy,
    accuracy_text,
    fixture_rows,
    headline_e2e,
    histogram,
    percentile_marks,
    turn_points,
)
from voicelat.report.comparison import (
    BARGE_IN_TITLE,
    barge_in_rows,
    call_rows,
    comparison_text,
    ranking_rows,
    segment_rows,
    trust_lines,
)
from voicelat.report.fronts import fronts_html
from voicelat.report.svg import (
    PICTURE_CSS,
    Frame,
    combos_svg,
    fixture_table_html,
    histogram_svg,
    legend_html,
    spread_svg,
    timeline_svg,
)

LABEL_W = 120.0
CHART_W = 400.0
_VALUE_W = 70.0
_ROW_H = 18.0
_TOP = 26.0


def _nice_step(max_ns: float) -> float:
    """A tick step (ns) giving 4-8 ticks: 1, 2 or 5 times a power of ten, in ms."""
    max_ms = max(max_ns / NS_PER_MS, 1.0)
    raw = max_ms / 6
    mag = 10.0 ** math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        if raw <= m * mag:
            return float(m * mag * NS_PER_MS)
    return float(10 * mag * NS_PER_MS)


def waterfall_svg(band: Mapping[str, Any], *, p: int, scale_ns: float, title: str = "") -> str:
    """One percentile band as an SVG waterfall.

    ``band`` is a summary's ``waterfall.pNN`` entry (``segments_ns`` summing to ``mean_e2e_ns``,
    ``e2e_percentile_ns``, ``band_n``, ``n``). ``scale_ns`` is the shared axis length.
    """
    segs: Mapping[str, int] = band.get("segments_ns") or {}
    mean = int(band["mean_e2e_ns"])
    exact = int(band["e2e_percentile_ns"])
    scale = max(float(scale_ns), float(mean), float(exact), 1.0)
    # A speech-to-speech band has the S2S path's segments (``model``), a cascade band the
    # cascade's: each waterfall shows the bars that sum to its e2e.
    shown = ordered_segments(segs)
    rows = len(shown) + 1
    height = _TOP + rows * _ROW_H + 26
    width = LABEL_W + CHART_W + _VALUE_W

    def x(ns: float) -> float:
        return LABEL_W + ns / scale * CHART_W

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="waterfall" width="{width:.0f}" '
        f'height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}" '
        f'data-percentile="{p}" data-mean-ns="{mean}" data-exact-ns="{exact}" '
        f'role="img" aria-label="{escape(title or f"P{p} waterfall")}">',
        f"<title>{escape(title or f'P{p} waterfall')}: bars sum to {fmt_ms(mean)} ms "
        f"(mean of {band.get('band_n', '?')} turn(s) around P{p}); exact P{p} "
        f"{fmt_ms(exact)} ms</title>",
        f'<text x="4" y="14" class="head">P{p}: mean of {escape(str(band.get("band_n", "?")))} '
        f"turn(s) of {escape(str(band.get('n', '?')))} around P{p}</text>",
    ]
    start = 0
    for i, s in enumerate(shown):
        dur = int(segs.get(s, 0))
        y = _TOP + i * _ROW_H
        w = max(dur, 0) / scale * CHART_W
        parts.append(
            f'<text x="4" y="{y + 13:.1f}" class="lbl">{escape(s)}</text>'
            f'<rect class="seg" data-segment="{escape(s)}" data-ns="{dur}" '
            f'x="{x(start):.2f}" y="{y + 3:.1f}" width="{w:.2f}" height="{_ROW_H - 6:.1f}" '
            f'fill="{segment_colour(s)}"><title>{escape(s)} {fmt_ms(dur, decimals=1)} ms</title></rect>'
            f'<text x="{LABEL_W + CHART_W + 6:.1f}" y="{y + 13:.1f}" class="val">'
            f"{fmt_ms(dur)} ms</text>"
        )
        start += max(dur, 0)
    y = _TOP + len(shown) * _ROW_H
    parts.append(
        f'<text x="4" y="{y + 13:.1f}" class="lbl total-lbl">e2e (mean)</text>'
        f'<rect class="total" data-ns="{mean}" x="{x(0):.2f}" y="{y + 3:.1f}" '
        f'width="{mean / scale * CHART_W:.2f}" height="{_ROW_H - 6:.1f}" fill="#444444"/>'
        f'<text x="{LABEL_W + CHART_W + 6:.1f}" y="{y + 13:.1f}" class="val">'
        f"{fmt_ms(mean)} ms</text>"
    )
    # The exact percentile of e2e, on the same axis as the bars.
    mx = x(exact)
    parts.append(
        f'<line class="pctl" data-ns="{exact}" x1="{mx:.2f}" x2="{mx:.2f}" y1="{_TOP - 2:.1f}" '
        f'y2="{y + _ROW_H:.1f}" stroke="#000" stroke-dasharray="4 2" stroke-width="1.5"/>'
        f'<text x="{min(mx + 3, LABEL_W + CHART_W - 90):.1f}" y="{_TOP - 6:.1f}" class="mark">'
        f"exact P{p} {fmt_ms(exact)} ms</text>"
    )
    # Axis.
    axis_y = y + _ROW_H + 4
    step = _nice_step(scale)
    t = 0.0
    parts.append(
        f'<line x1="{LABEL_W:.1f}" x2="{LABEL_W + CHART_W:.1f}" y1="{axis_y:.1f}" '
        f'y2="{axis_y:.1f}" stroke="#888"/>'
    )
    while t <= scale + 1:
        tx = x(t)
        parts.append(
            f'<line x1="{tx:.2f}" x2="{tx:.2f}" y1="{axis_y:.1f}" y2="{axis_y + 4:.1f}" '
            f'stroke="#888"/><text x="{tx:.2f}" y="{axis_y + 15:.1f}" class="tick" '
            f'text-anchor="middle">{fmt_ms(t)}</text>'
        )
        t += step
    parts.append("</svg>")
    return "".join(parts)


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em;color:#222;max-width:80em}
table{border-collapse:collapse;margin:1em 0;font-variant-numeric:tabular-nums}
th,td{border:1px solid #ccc;padding:.3em .6em;text-align:right;white-space:nowrap}
th{background:#f3f3f3}td:first-child,th:first-child,td:nth-child(2),th:nth-child(2){text-align:left}
.pair{display:flex;flex-wrap:wrap;gap:1.5em}
tr.failed td{color:#a00}tr.best td{font-weight:600}
.sig{color:#a00}.ns{color:#777}
.combo{margin:1.5em 0;border-top:1px solid #ddd;padding-top:.5em}
.waterfall text{font-size:11px;font-family:system-ui,sans-serif}
.waterfall .head{font-weight:600}.waterfall .mark{font-size:10px}
small{color:#666}
"""


def _table_html(rows: list[list[str]], classes: list[str] | None = None) -> str:
    head = "".join(f"<th>{escape(c)}</th>" for c in rows[0])
    body = []
    for i, r in enumerate(rows[1:]):
        cls = f' class="{classes[i]}"' if classes and classes[i] else ""
        cells = []
        for c in r:
            kind = (
                "ns"
                if c.startswith("not significant")
                else ("sig" if c[:1] in "+-" and "ms" in c else "")
            )
            cells.append(
                f'<td class="{kind}">{escape(c)}</td>' if kind else f"<td>{escape(c)}</td>"
            )
        body.append(f"<tr{cls}>{''.join(cells)}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def shared_scale_ns(doc: Mapping[str, Any]) -> float:
    """The longest bar or marker over every combination's waterfalls: one axis for all."""
    scale = 1.0
    for c in doc.get("combinations", []):
        for band in (c.get("waterfall") or {}).values():
            scale = max(scale, float(band["mean_e2e_ns"]), float(band["e2e_percentile_ns"]))
    return scale


def _stages_desc(c: Mapping[str, Any]) -> str:
    stages = c.get("stages") or {}
    return "; ".join(
        f"{escape(k)}: {escape(str(v.get('stage', '?')))}"
        + (f" {escape(str(v['engine_version']))}" if v.get("engine_version") else "")
        + (
            f" {escape(str(v['server']))} {escape(str(v.get('server_version') or ''))}"
            if v.get("server")
            else ""
        )
        for k, v in stages.items()
        if isinstance(v, Mapping)
    )


def _combo_pictures(turns: Sequence[Turn] | None) -> str:
    """A combination's own e2e distribution, e2e over its turns and its per-fixture table."""
    if not turns:
        return ""
    values = headline_e2e(turns)
    marks = percentile_marks(values)
    small = Frame(width=460, height=180)
    return (
        '<div class="pair">'
        + histogram_svg(histogram(values), marks, title="e2e distribution", frame=small)
        + timeline_svg(turn_points(turns), marks, title="e2e over the run", frame=small)
        + "</div><details><summary>per fixture</summary>"
        + fixture_table_html(fixture_rows(turns))
        + "</details>"
    )


def _combo_section(
    c: Mapping[str, Any], scale: float, turns: Sequence[Turn] | None, acc: Accuracy | None
) -> str:
    head = f"<h3>{escape(str(c.get('rank') or '-'))}. {escape(str(c['name']))}</h3>"
    if c.get("status") != "ok":
        return (
            f'<div class="combo">{head}<p class="sig">{escape(str(c.get("status")).upper())}: '
            f"{escape(str(c.get('failure') or ''))}</p></div>"
        )
    svgs = "".join(
        waterfall_svg(band, p=int(key[1:]), scale_ns=scale, title=f"{c['name']} {key.upper()}")
        for key, band in sorted((c.get("waterfall") or {}).items())
        if key in ("p50", "p90")
    )
    wer = f"<p><small>{escape(accuracy_text(acc))}</small></p>" if acc is not None else ""
    return (
        f'<div class="combo">{head}<p><small>{_stages_desc(c)}; results in '
        f"<code>{escape(str(c.get('run_dir', '')))}/</code></small></p>{wer}"
        f'<div class="pair">{svgs}</div>{_combo_pictures(turns)}</div>'
    )


def accuracy_rows(
    combos: Sequence[Mapping[str, Any]], accs: Mapping[str, Accuracy]
) -> list[list[str]]:
    """Latency beside transcript accuracy, one row per combination in rank order."""
    rows = [["#", "combination", "e2e P50 ms", "e2e P90 ms", "WER", "exact turns", "words"]]
    for c in combos:
        e2e = c.get("e2e") or {}
        a = accs.get(str(c.get("name")))
        wer = None if a is None else a.wer
        scored = (
            ["-", "-", "-"]
            if a is None or wer is None
            else [f"{wer:.1%}", f"{a.exact}/{a.turns}", str(a.words)]
        )
        rows.append(
            [
                str(c.get("rank") or "-"),
                str(c.get("name")),
                fmt_ms((e2e.get("p50") or {}).get("ns")),
                fmt_ms((e2e.get("p90") or {}).get("ns")),
                *scored,
            ]
        )
    return rows


def comparison_html(
    doc: Mapping[str, Any], runs: Mapping[str, Sequence[Turn]] | None = None
) -> str:
    """The whole report page; ``runs`` (combination name -> its turns) adds each one's
    distribution, e2e over its turns, per-fixture table and transcript accuracy."""
    runs = runs or {}
    name = str(doc.get("name", ""))
    combos = list(doc.get("combinations", []))
    classes = [
        "failed" if c.get("status") != "ok" else ("best" if c.get("rank") == 1 else "")
        for c in combos
    ]
    scale = shared_scale_ns(doc)
    accs = {n: accuracy(ts) for n, ts in runs.items()}
    scored = any(a.wer is not None for a in accs.values())
    sections = [
        _combo_section(c, scale, runs.get(str(c["name"])), accs.get(str(c["name"]))) for c in combos
    ]
    text = comparison_text(doc).splitlines()
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>voicelat comparison: {escape(name)}</title><style>{_CSS}{PICTURE_CSS}</style>"
        f"</head><body><h1>voicelat comparison: {escape(name)}</h1>"
        + (f"<p>{escape(str(doc['description']))}</p>" if doc.get("description") else "")
        + f"<p><small>{escape(str(doc.get('created', '')))}; {escape(text[0])}</small></p>"
        f"<p><small>{escape(text[1])}</small></p>"
        "<h2>Ranking</h2>"
        + _table_html(ranking_rows(doc), classes)
        + "".join(f'<p class="warn">{escape(line)}</p>' for line in trust_lines(doc))
        + fronts_html(doc, _table_html)
        + _calls_html(doc)
        + legend_html(_segments_of(combos))
        + "<h2>Every combination at P50</h2><p><small>The P50 band's mean composition per "
        "combination, in rank order (bars sum to the band's mean e2e); the black tick is the "
        "exact P50.</small></p>"
        + combos_svg(combos, accs)
        + (
            "<h2>Every turn of every combination</h2><p><small>One tick per headline turn on "
            "one e2e axis; the box spans P50 to P90, the black mark is P99.</small></p>"
            + spread_svg(combos, {n: headline_e2e(ts) for n, ts in runs.items()})
            if runs
            else ""
        )
        + (
            "<h2>Accuracy beside latency</h2><p><small>WER: word errors over reference words "
            "of the measured turns whose fixture has a transcript.</small></p>"
            + _table_html(accuracy_rows(combos, accs))
            if scored
            else ""
        )
        + "<h2>Segments</h2><p><small>P50 / P90 ms of each segment on its own: percentiles do not "
        "add up to e2e (the waterfalls below do).</small></p>"
        + _table_html(segment_rows(doc))
        + "<h2>Waterfalls at P50 and P90</h2><p><small>Each waterfall is the mean composition of "
        "the turns ranked around the percentile: its bars sum to that band's mean e2e; the "
        "dashed line is the exact (interpolated) percentile of e2e. One time axis (ms) for all."
        "</small></p>" + "".join(sections) + "</body></html>\n"
    )


__all__ = [
    "SEGMENT_COLOURS",
    "accuracy_rows",
    "comparison_html",
    "shared_scale_ns",
    "waterfall_svg",
]


def _calls_html(doc: Mapping[str, Any]) -> str:
    """A whole-call comparison's call figures and interruptions (nothing for single turns)."""
    calls, barge = call_rows(doc), barge_in_rows(doc)
    out = ""
    if calls:
        out += (
            "<h2>Calls</h2><p><small>The greeting, turn 1 and the later turns (e2e P50 / P90 ms, "
            "n), dead air P90.</small></p>" + _table_html(calls)
        )
    if barge:
        out += f"<h2>Barge-in</h2><p><small>{escape(BARGE_IN_TITLE)}.</small></p>"
        out += _table_html(barge)
    return out


def _segments_of(combos: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """The segments the combinations' summaries hold data for (cascade, S2S or both)."""
    return ordered_segments(
        [
            *(s for c in combos for s, d in (c.get("segments") or {}).items() if d),
            *(
                s
                for c in combos
                for b in (c.get("waterfall") or {}).values()
                for s, v in (b.get("segments_ns") or {}).items()
                if v
            ),
        ]
    )
