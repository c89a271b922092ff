"""Price, quality and goodput beside latency in a comparison (pure functions of
``comparison.json``): the table shared by text, Markdown and HTML, and the latency x cost and
latency x quality fronts drawn as SVG (the Pareto front: combinations no other one beats on
both axes)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from voicelat.core.judge.cost import fmt_money
from voicelat.core.judge.goodput import pareto_front

_W, _H, _PAD = 560.0, 300.0, 52.0


def _scores(c: Mapping[str, Any]) -> Mapping[str, Any]:
    s = c.get("scores")
    return s if isinstance(s, Mapping) else {}


def has_scores(doc: Mapping[str, Any]) -> bool:
    """Whether any combination was priced or scored (the section is left out otherwise)."""
    return any("cost" in _scores(c) or "quality" in _scores(c) for c in doc.get("combinations", []))


def _e2e_ms(c: Mapping[str, Any]) -> float | None:
    e = (c.get("e2e") or {}).get("p50")
    return None if not e or e.get("ns") is None else float(e["ns"]) / 1e6


def scores_rows(doc: Mapping[str, Any]) -> list[list[str]]:
    """Goodput, cost per turn and minute, reply WER, truncations and DNSMOS per combination
    (and PLCMOS when any combination was scored with it: runs under packet loss)."""
    plc = any(
        (_scores(c).get("quality") or {}).get("plcmos") is not None
        for c in doc.get("combinations", [])
    )
    rows = [
        [
            "combination",
            "goodput",
            "e2e P50 ms",
            "cost/turn",
            "cost/min",
            "reply WER",
            "truncated",
            "DNSMOS",
            *(["PLCMOS"] if plc else []),
        ]
    ]
    for c in doc.get("combinations", []):
        s = _scores(c)
        g, cost, q = s.get("goodput") or {}, s.get("cost") or {}, s.get("quality") or {}
        share = g.get("share")
        crit = ", ".join(g.get("criteria") or []) or "no criteria"
        cur = str(cost.get("currency") or "")
        e2e = _e2e_ms(c)
        rows.append(
            [
                str(c.get("name", "")),
                "-" if share is None else f"{share:.0%} ({crit})",
                "-" if e2e is None else f"{e2e:.0f}",
                fmt_money(cost.get("per_turn"), cur) if cost else "-",
                fmt_money(cost.get("per_minute"), cur) if cost else "-",
                "-" if q.get("wer") is None else f"{q['wer']:.1%}",
                "-" if q.get("truncated") is None else str(q["truncated"]),
                "-" if q.get("dnsmos_ovrl") is None else f"{q['dnsmos_ovrl']:.2f}",
                *([] if not plc else ["-" if q.get("plcmos") is None else f"{q['plcmos']:.2f}"]),
            ]
        )
    return rows


def cost_notes(doc: Mapping[str, Any]) -> list[str]:
    """What a cost column leaves out, per combination: the stages without a price (their
    share is not in the figure) and the measures no turn reported (the turns left empty)."""
    out: list[str] = []
    for c in doc.get("combinations", []):
        cost = _scores(c).get("cost") or {}
        unpriced, missing = cost.get("unpriced") or [], cost.get("missing") or []
        if unpriced:
            out.append(f"{c.get('name', '')}: cost leaves out, not priced: {', '.join(unpriced)}")
        if missing:
            out.append(f"{c.get('name', '')}: cost left empty where {'; '.join(missing)}")
    return out


def front_points(doc: Mapping[str, Any], axis: str) -> dict[str, tuple[float, float]]:
    """(e2e P50 ms, y) per combination; y is the cost per turn (``cost``), the reply WER
    (``wer``) or 5 - DNSMOS OVRL (``mos``, so lower is better on both axes)."""
    out: dict[str, tuple[float, float]] = {}
    for c in doc.get("combinations", []):
        s, x = _scores(c), _e2e_ms(c)
        if x is None:
            continue
        if axis == "cost":
            y = (s.get("cost") or {}).get("per_turn")
        elif axis == "wer":
            y = (s.get("quality") or {}).get("wer")
        else:
            mos = (s.get("quality") or {}).get("dnsmos_ovrl")
            y = None if mos is None else 5.0 - float(mos)
        if isinstance(y, int | float):
            out[str(c.get("name", ""))] = (x, float(y))
    return out


def _scale(lo: float, hi: float, a: float, b: float) -> Any:
    span = hi - lo or 1.0
    return lambda v: a + (v - lo) / span * (b - a)


def front_svg(points: Mapping[str, tuple[float, float]], *, y_label: str, title: str) -> str:
    """A scatter of the combinations, the Pareto front joined and its points filled."""
    if not points:
        return ""
    front = pareto_front(points)
    xs, ys = [p[0] for p in points.values()], [p[1] for p in points.values()]
    x = _scale(min(xs) * 0.95, max(xs) * 1.05, _PAD, _W - 12)
    y = _scale(0.0, max(ys) * 1.15 or 1.0, _H - _PAD, 12)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="front" width="{_W:.0f}" '
        f'height="{_H:.0f}" role="img" aria-label="{escape(title)}">',
        f"<title>{escape(title)}</title>",
        f'<line x1="{_PAD}" y1="{_H - _PAD}" x2="{_W - 12}" y2="{_H - _PAD}" stroke="#444"/>',
        f'<line x1="{_PAD}" y1="12" x2="{_PAD}" y2="{_H - _PAD}" stroke="#444"/>',
        f'<text x="{_W / 2:.0f}" y="{_H - 14:.0f}" text-anchor="middle" font-size="12">'
        "e2e P50 (ms), lower is better</text>",
        f'<text x="14" y="{_H / 2:.0f}" font-size="12" transform="rotate(-90 14 {_H / 2:.0f})" '
        f'text-anchor="middle">{escape(y_label)}</text>',
    ]
    for v in (min(xs), max(xs)):
        parts.append(
            f'<text x="{x(v):.1f}" y="{_H - _PAD + 14:.0f}" text-anchor="middle" '
            f'font-size="10">{v:.0f}</text>'
        )
    if len(front) > 1:
        path = " ".join(f"{x(points[n][0]):.1f},{y(points[n][1]):.1f}" for n in front)
        parts.append(f'<polyline class="pareto" points="{path}" fill="none" stroke="#1b7837"/>')
    for name, (px, py) in points.items():
        on = name in front
        parts.append(
            f'<circle cx="{x(px):.1f}" cy="{y(py):.1f}" r="5" data-name="{escape(name)}" '
            f'data-front="{str(on).lower()}" fill="{"#1b7837" if on else "#fff"}" '
            f'stroke="#1b7837"><title>{escape(name)}: {px:.0f} ms, {py:.4g}</title></circle>'
            f'<text x="{x(px) + 7:.1f}" y="{y(py) - 6:.1f}" font-size="10">{escape(name)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def fronts_html(doc: Mapping[str, Any], table: Any) -> str:
    """The comparison page's price-and-quality section (``table`` renders ``scores_rows``)."""
    if not has_scores(doc):
        return ""
    pics: Sequence[tuple[str, str, str]] = (
        ("cost", "cost per turn", "Latency x cost"),
        ("wer", "reply WER", "Latency x intelligibility"),
        ("mos", "5 - DNSMOS OVRL", "Latency x sound (DNSMOS)"),
    )
    svgs = "".join(
        f"<h3>{escape(t)}</h3>" + front_svg(front_points(doc, a), y_label=y, title=t)
        for a, y, t in pics
        if front_points(doc, a)
    )
    return (
        "<h2>Price, quality and goodput</h2><p><small>Goodput: the share of measured turns "
        "within the budget's e2e limit and intelligible (reply WER at most the threshold) and "
        "under the cost ceiling, each criterion where its figures exist. Filled points joined by "
        "the line are the Pareto front: no other combination is both faster and cheaper (or "
        "better scored). DNSMOS is a model's opinion, not listeners'.</small></p>"
        + str(table(scores_rows(doc)))
        + "".join(f"<p><small>{escape(n)}</small></p>" for n in cost_notes(doc))
        + svgs
    )


__all__ = ["cost_notes", "front_points", "front_svg", "fronts_html", "has_scores", "scores_rows"]
