"""The comparison ranking as terminal text and as Markdown (pure functions of ``comparison.json``).

Both render the same two tables: the ranking (e2e P50/P90 with CIs, the difference to the best
and whether it is significant, failure rate, n) and the per-segment P50/P90 table, labelled as
not additive.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from voicelat.core.base.contract import display_segments
from voicelat.core.base.display import NS_PER_MS as NS_PER_MS
from voicelat.core.base.display import fmt_ms

#: Short column names for the segment table (the full names are in the metric contract).
SEGMENT_SHORT: dict[str, str] = {
    "endpointing": "endpoint",
    "stt": "stt",
    "handoff": "handoff",
    "llm_ttft": "llm_ttft",
    "aggregation": "aggregate",
    "tts_ttfb": "tts_ttfb",
    "model": "model",
    "agent_response": "agent",
    "transport": "transport",
    "leading_silence": "silence",
    "playout": "playout",
}


def e2e_cell(combo: Mapping[str, Any], p: int) -> str:
    """``812 [790, 840]`` (ms, with the bootstrap CI when there is one)."""
    e = (combo.get("e2e") or {}).get(f"p{p}")
    if not e:
        return "-"
    if e.get("ci_low_ns") is None:
        return f"{fmt_ms(e['ns'])} [n too small]"
    return f"{fmt_ms(e['ns'])} [{fmt_ms(e['ci_low_ns'])}, {fmt_ms(e['ci_high_ns'])}]"


def vs_cell(combo: Mapping[str, Any], p: int) -> str:
    """The difference to the best with its CI, ``not significant``, or ``best``."""
    if combo.get("rank") == 1:
        return "best"
    v = (combo.get("vs_best") or {}).get(f"p{p}")
    if not v:
        return "-"
    verdict = str(v["verdict"])
    if v.get("significant") and v.get("resolvable", True):
        return verdict
    # Say the estimate even when it is not significant, so "how big might it be" is visible.
    return f"{verdict} ({fmt_ms(v['diff_ns'], sign=True, unit=' ms')})"


#: After a combination's name when its run was measured on a machine it distrusts (in words
#: too, below the table: a mark that is not only a colour survives NO_COLOR and a pipe).
UNTRUSTED_MARK = " (!)"


def untrusted(doc: Mapping[str, Any]) -> list[tuple[str, list[str]]]:
    """``(name, reasons)`` of each combination whose run said its figures may not be trusted
    (its summary's ``trust`` section, kept per combination in ``comparison.json``)."""
    out: list[tuple[str, list[str]]] = []
    for c in doc.get("combinations", []):
        trust = c.get("trust")
        if isinstance(trust, Mapping) and trust.get("trustworthy") is False:
            out.append((str(c["name"]), [str(r) for r in trust.get("reasons") or []]))
    return out


def trust_lines(doc: Mapping[str, Any]) -> list[str]:
    """One line per distrusted combination, naming why (empty when every run trusts itself)."""
    return [
        f"{UNTRUSTED_MARK.strip()} {name}: NOT trustworthy, ran on a distrusted machine: "
        + ("; ".join(reasons) if reasons else "see its summary.json")
        for name, reasons in untrusted(doc)
    ]


def _named(combo: Mapping[str, Any]) -> str:
    trust = combo.get("trust")
    bad = isinstance(trust, Mapping) and trust.get("trustworthy") is False
    return str(combo["name"]) + (UNTRUSTED_MARK if bad else "")


def _fail(combo: Mapping[str, Any]) -> str:
    rate = combo.get("failure_rate")
    return "-" if rate is None else f"{rate:.0%}"


def _rank(combo: Mapping[str, Any]) -> str:
    return "-" if combo.get("rank") is None else str(combo["rank"])


def ranking_rows(doc: Mapping[str, Any]) -> list[list[str]]:
    """The ranking table's cells (header first); shared by text and Markdown."""
    rows = [
        [
            "#",
            "combination",
            "n",
            "failed",
            "e2e P50 ms [95% CI]",
            "P50 vs best",
            "e2e P90 ms [95% CI]",
            "P90 vs best",
        ]
    ]
    for c in doc.get("combinations", []):
        if c.get("status") != "ok":
            reason = c.get("failure") or c.get("status")
            rows.append(
                [
                    _rank(c),
                    _named(c),
                    str(c.get("n", 0)),
                    _fail(c),
                    f"{str(c.get('status')).upper()}: {reason}",
                    "",
                    "",
                    "",
                ]
            )
            continue
        rows.append(
            [
                _rank(c),
                _named(c),
                str(c["n"]),
                _fail(c),
                e2e_cell(c, 50),
                vs_cell(c, 50),
                e2e_cell(c, 90),
                vs_cell(c, 90),
            ]
        )
    if any(c.get("region") for c in doc.get("combinations", [])):  # runs from several regions
        for row, c in zip(rows, [{"region": "region"}, *doc["combinations"]], strict=True):
            row.insert(2, str(c.get("region") or "-"))
    return rows


def segment_rows(doc: Mapping[str, Any]) -> list[list[str]]:
    """Per-segment ``P50 / P90`` ms per combination (header first)."""
    combos = doc.get("combinations", [])
    shown = display_segments(
        frozenset(s for c in combos for s, d in (c.get("segments") or {}).items() if d)
    )
    rows = [["combination", *(SEGMENT_SHORT.get(s, s) for s in shown)]]
    for c in combos:
        if c.get("status") != "ok":
            continue
        segs = c.get("segments") or {}
        cells = []
        for s in shown:
            d = segs.get(s)
            cells.append("-" if not d else f"{fmt_ms(d.get('p50'))} / {fmt_ms(d.get('p90'))}")
        rows.append([str(c["name"]), *cells])
    return rows


def _stats_line(doc: Mapping[str, Any]) -> str:
    st = doc.get("statistics") or {}
    level = float(st.get("level", 0.95))
    return (
        f"ranked by {_rank_by_text(str(st.get('rank_by', 'p50')))}; n = warm measured turns; "
        f"{level:.0%} percentile-bootstrap CIs ({st.get('resamples', '?')} resamples, "
        f"seed {st.get('seed', '?')}); 'vs best' = this minus #1, significant when its CI "
        f"excludes 0; fewer than {st.get('min_turns', '?')} turns: not tested"
    )


#: ``--rank-by`` in words (the e2e percentiles read "e2e P50", "e2e P90").
_RANK_BY_TEXT = {
    "barge_in_stop": "barge-in stop at the ear P50 (then e2e P50; without one: last)",
    "false_barge_in": "false barge-in rate (then e2e P50; without backchannels: last)",
}


def _rank_by_text(rank_by: str) -> str:
    return _RANK_BY_TEXT.get(rank_by, f"e2e {rank_by.upper()}")


def barge_in_rows(doc: Mapping[str, Any]) -> list[list[str]]:
    """A whole-call comparison's interruptions per combination (empty when no combination
    met an overlay): the stop at the ear, how many stopped, the false barge-in rate."""
    combos = [c for c in doc.get("combinations", []) if isinstance(c.get("barge_in"), Mapping)]
    if not combos:
        return []
    rows = [
        [
            "combination",
            "stopped",
            "stop at the ear P50 / P90 ms",
            "never stopped",
            "false barge-ins",
            "false barge-in rate",
        ]
    ]
    for c in combos:
        b = c["barge_in"]
        rate = b.get("false_barge_in_rate")
        stop = (
            "-"
            if b.get("stop_p50_ns") is None
            else f"{fmt_ms(b['stop_p50_ns'])} / {fmt_ms(b.get('stop_p90_ns'))}"
        )
        rows.append(
            [
                str(c["name"]),
                f"{b.get('stopped', 0)}/{b.get('interrupts', 0)}",
                stop,
                str(b.get("never_stopped", 0)),
                f"{b.get('false_barge_ins', 0)}/{b.get('backchannels', 0)}" + _by_kind(b),
                "-" if rate is None else f"{rate:.0%}",
            ]
        )
    return rows


def _by_kind(b: Mapping[str, Any]) -> str:
    """`` (backchannel 9/9, noise 3/3)`` when both kinds were met (which one it stopped on)."""
    kinds = b.get("by_kind") or {}
    if len(kinds) < 2:
        return ""
    return (
        " (" + ", ".join(f"{k} {v.get('false', 0)}/{v.get('n', 0)}" for k, v in kinds.items()) + ")"
    )


BARGE_IN_TITLE = (
    "Barge-in: interruptions stopped, the stop at the ear (onset to the last audible sample), "
    "and false barge-ins (stopped or paused on a backchannel or noise)"
)


def _schedule_line(doc: Mapping[str, Any]) -> str:
    sc = doc.get("schedule") or {}
    fx = doc.get("fixtures") or {}
    calls = doc.get("calls") or {}
    if calls:
        n = max((int(c.get("n") or 0) for c in calls.values()), default=0)
        return (
            f"{len(doc.get('combinations', []))} combinations x {n} call(s) "
            f"({fx.get('count', '?')} fixtures), interleaved per call; "
            f"{sc.get('measured_per_combination', '?')} turn(s) per combination"
        )
    return (
        f"{len(doc.get('combinations', []))} combinations x {fx.get('count', '?')} fixtures, "
        f"interleaved per fixture; {sc.get('warmup', 0)} warm-up turn(s) per combination "
        f"excluded; {sc.get('measured_per_combination', '?')} measured turn(s) per combination"
    )


def _table_text(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = []
    for k, r in enumerate(rows):
        out.append("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(r)).rstrip())
        if k == 0:
            out.append("  ".join("-" * w for w in widths))
    return out


def _scores_text(doc: Mapping[str, Any], table: Any, bullet: str | None = None) -> list[str]:
    """The price, quality and goodput table (report/fronts.py), when anything was scored."""
    from voicelat.report.fronts import cost_notes, has_scores, scores_rows

    if not has_scores(doc):
        return []
    return [
        "",
        "Price, quality and goodput (goodput: turns meeting every criterion listed)",
        *table(scores_rows(doc)),
        # Markdown: the notes as a list after a blank line (a line right after a table
        # would read as one more row).
        *([""] if bullet is not None and cost_notes(doc) else []),
        *(f"{bullet or ''}{note}" for note in cost_notes(doc)),
    ]


def comparison_text(doc: Mapping[str, Any]) -> str:
    """The ranking and segment tables for the terminal."""
    lines = [f"Comparison {doc.get('name', '')}: {_schedule_line(doc)}"]
    lines.append(_stats_line(doc))
    lines.append("")
    lines.extend(_table_text(ranking_rows(doc)))
    lines.extend(trust_lines(doc))
    lines.extend(_scores_text(doc, _table_text))
    seg = segment_rows(doc)
    if len(seg) > 1:
        lines.append("")
        lines.append("Per-segment P50 / P90 ms (each on its own: percentiles do not add up to e2e)")
        lines.extend(_table_text(seg))
    calls = call_rows(doc)
    if calls:
        lines.append("")
        lines.append(
            "Calls: the greeting, turn 1 and the later turns (e2e P50 / P90 ms, n), dead air P90"
        )
        lines.extend(_table_text(calls))
    barge = barge_in_rows(doc)
    if barge:
        lines += ["", BARGE_IN_TITLE, *_table_text(barge)]
    if doc.get("excluded"):
        lines.append("")
        lines.append(f"excluded by the matrix: {', '.join(doc['excluded'])}")
    return "\n".join(lines)


def call_rows(doc: Mapping[str, Any]) -> list[list[str]]:
    """A comparison of calls: each combination's greeting, turn 1, later turns and dead air
    (empty for single turns)."""
    calls = doc.get("calls") or {}
    if not calls:
        return []

    def cell(d: Mapping[str, Any] | None) -> str:
        if not d or not d.get("n"):
            return "-"
        return f"{fmt_ms(d.get('p50'))} / {fmt_ms(d.get('p90'))} (n={d['n']})"

    rows = [["combination", "calls", "greeting", "turn 1", "later turns", "dead air P90"]]
    for name, c in calls.items():
        air = (c.get("dead_air_max") or {}).get("p90")
        rows.append(
            [
                str(name),
                f"{c.get('completed', 0)}/{c.get('n', 0)}",
                cell(c.get("greeting")),
                cell(c.get("e2e_first_turn")),
                cell(c.get("e2e_later_turns")),
                fmt_ms(air),
            ]
        )
    return rows


def _md_escape(cell: str) -> str:
    return cell.replace("|", "\\|")


def _table_md(rows: Sequence[Sequence[str]]) -> list[str]:
    out = ["| " + " | ".join(_md_escape(c) for c in rows[0]) + " |"]
    out.append("|" + "|".join("---" for _ in rows[0]) + "|")
    for r in rows[1:]:
        out.append("| " + " | ".join(_md_escape(c) for c in r) + " |")
    return out


def comparison_markdown(doc: Mapping[str, Any]) -> str:
    """``comparison.md``: the same tables as the terminal, plus where each run's results are."""
    lines = [f"# voicelat comparison: {doc.get('name', '')}", ""]
    if doc.get("description"):
        lines += [str(doc["description"]), ""]
    lines += [_schedule_line(doc) + ".", "", _stats_line(doc) + ".", ""]
    lines += ["## Ranking", "", *_table_md(ranking_rows(doc)), ""]
    if untrusted(doc):
        lines += ["## Trust", "", *(f"- {line}" for line in trust_lines(doc)), ""]
    scored = _scores_text(doc, _table_md, bullet="- ")
    if scored:
        lines += ["## Price, quality and goodput", *scored, ""]
    seg = segment_rows(doc)
    if len(seg) > 1:
        lines += [
            "## Segments",
            "",
            "P50 / P90 ms of each segment on its own: percentiles do not add up to the e2e column.",
            "",
            *_table_md(seg),
            "",
        ]
    calls = call_rows(doc)
    if calls:
        lines += ["## Calls", "", *_table_md(calls), ""]
    barge = barge_in_rows(doc)
    if barge:
        lines += ["## Barge-in", "", BARGE_IN_TITLE + ".", "", *_table_md(barge), ""]
    lines += ["## Runs", ""]
    for c in doc.get("combinations", []):
        stages = c.get("stages") or {}
        engines = ", ".join(
            f"{k}: {v.get('stage', '?')}"
            + (f" {v['engine_version']}" if v.get("engine_version") else "")
            for k, v in stages.items()
            if isinstance(v, Mapping)
        )
        lines.append(
            f"- **{c['name']}**: `{c.get('run_dir', '')}/`" + (f" ({engines})" if engines else "")
        )
    if doc.get("excluded"):
        lines += ["", f"Excluded by the matrix: {', '.join(doc['excluded'])}."]
    lines.append("")
    return "\n".join(lines)


__all__ = [
    "BARGE_IN_TITLE",
    "UNTRUSTED_MARK",
    "barge_in_rows",
    "call_rows",
    "comparison_markdown",
    "comparison_text",
    "e2e_cell",
    "ranking_rows",
    "segment_rows",
    "trust_lines",
    "untrusted",
    "vs_cell",
]
