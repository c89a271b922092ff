"""JUnit XML for CI systems: one test case per budget line and per regression check.

A failed check's ``<failure message=...>`` is its one-line message, which names the metric, the
percentile, the measured value and the limit (e.g. ``e2e P90 1590 ms > limit 1400 ms (n=14 warm
turns)``); the element's text adds the run's P50/P90 waterfall so the CI page shows where the
time went. Test case names are stable (``e2e P90``), so CI history lines up across runs even
when a limit changes.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping

from voicelat.core.judge.budget import Check
from voicelat.core.judge.gate import GateResult, headline_text, waterfall_lines
from voicelat.core.summaries.run_summary import RunSummary, SummaryLike

#: JUnit suites, in report order, with the ``type`` a failure of each carries.
SUITES: dict[str, str] = {
    "sample": "SampleTooSmall",
    "budget": "BudgetExceeded",
    "regression": "Regression",
}


def _properties(parent: ET.Element, summary: RunSummary, extra: Mapping[str, str]) -> None:
    props = ET.SubElement(parent, "properties")
    values = {
        "pipeline": str(summary.pipeline.get("name", "")),
        "pipeline_sha256": str(summary.pipeline.get("sha256", "")),
        "fixture_set_sha256": str(summary.extra.get("fixture_set_sha256", "")),
        **extra,
    }
    for k, v in values.items():
        if v:
            ET.SubElement(props, "property", name=k, value=v)


def _testcase(suite: ET.Element, check: Check, detail: str) -> None:
    case = ET.SubElement(
        suite, "testcase", classname=f"voicelat.{check.suite}", name=check.name, time="0"
    )
    if check.passed:
        ET.SubElement(case, "system-out").text = check.message
    else:
        failure = ET.SubElement(
            case, "failure", message=check.message, type=SUITES.get(check.suite, "Failure")
        )
        failure.text = f"{check.message}\n{detail}"


def junit_xml(result: GateResult) -> str:
    """The gate's verdict as a JUnit ``<testsuites>`` document (UTF-8 text)."""
    summary = result.summary
    detail = "\n".join([headline_text(summary), *waterfall_lines(summary)])
    duration = summary.run.duration_s or 0
    failures = len(result.failures)
    root = ET.Element(
        "testsuites",
        name="voicelat",
        tests=str(len(result.checks)),
        failures=str(failures),
        errors="0",
        time=f"{float(duration):.3f}",
    )
    extra = {
        "run_dir": result.run_dir or "",
        "baseline": result.baseline or "",
        "budget": result.budget_source,
    }
    for suite_name in SUITES:
        checks = result.suite(suite_name)
        if not checks:
            continue
        suite = ET.SubElement(
            root,
            "testsuite",
            name=f"voicelat.{suite_name}",
            tests=str(len(checks)),
            failures=str(sum(not c.passed for c in checks)),
            errors="0",
            skipped="0",
            time="0",
        )
        _properties(suite, summary, extra)
        for check in checks:
            _testcase(suite, check, detail)
    return _serialize(root)


def junit_error_xml(message: str, *, summary: SummaryLike | None = None) -> str:
    """A JUnit document with one ``<error>``: the gate could not run (exit 3)."""
    root = ET.Element("testsuites", name="voicelat", tests="1", failures="0", errors="1", time="0")
    suite = ET.SubElement(
        root,
        "testsuite",
        name="voicelat.infrastructure",
        tests="1",
        failures="0",
        errors="1",
        skipped="0",
        time="0",
    )
    # An empty document is no summary: nothing to say about the run.
    if isinstance(summary, RunSummary) or summary:
        _properties(suite, RunSummary.coerce(summary), {})
    case = ET.SubElement(
        suite, "testcase", classname="voicelat.infrastructure", name="run", time="0"
    )
    ET.SubElement(case, "error", message=message, type="InfrastructureFailure").text = message
    return _serialize(root)


def _serialize(root: ET.Element) -> str:
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
