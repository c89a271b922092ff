"""``voicelat ci`` end to end on run directories written from literal turns (no servers).

Each test writes real ``turns.jsonl`` / ``summary.json`` files and drives the real argparse
wiring (``voicelat.cli.main.main``), checking exit codes, the one-line errors and the reports.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from voicelat.cli.main import main
from voicelat.core.base.contract import SEGMENTS
from voicelat.core.base.turn import Turn
from voicelat.core.summaries.summary import build_summary
from voicelat.files.results import SCHEMA_VERSION, TurnsWriter, write_summary

MS = 1_000_000
ROOT = Path(__file__).resolve().parents[2]
GENEROUS = "[budget]\nmin_turns = 3\n[budget.e2e]\np50_ms = 5000\np90_ms = 8000\n"
IMPOSSIBLE = "[budget]\nmin_turns = 3\n[budget.e2e]\np50_ms = 1\n"


def make_turns(n: int = 10, *, seed: int = 1, stt_shift_ms: int = 0, fail: int = 0) -> list[Turn]:
    rng = random.Random(seed)
    out = [Turn(0, "f0", 0, {}, {s: 50 * MS for s in SEGMENTS}, 8 * 50 * MS, warmup=True)]
    for i in range(1, n + 1):
        if i <= fail:
            out.append(
                Turn(
                    i,
                    "f1",
                    0,
                    {},
                    {},
                    None,
                    failed=True,
                    failure_stage="stt",
                    failure_reason="connection refused",
                )
            )
            continue
        seg = {s: rng.randint(5, 60) * MS for s in SEGMENTS}
        seg["endpointing"] = 500 * MS
        seg["stt"] = (300 + stt_shift_ms + rng.randint(-20, 20)) * MS
        out.append(Turn(i, f"f{i % 3}", 0, {}, seg, sum(seg.values())))
    return out


def write_run(
    path: Path,
    turns: list[Turn],
    *,
    name: str = "local",
    sha: str = "a" * 64,
    fixtures: str = "f" * 64,
    budget: dict[str, Any] | None = None,
    **extra: Any,
) -> Path:
    writer = TurnsWriter(path)
    for t in turns:
        writer.write(t)
    writer.close()
    summary = build_summary(
        turns,
        run={"status": "complete", "duration_s": 1.0},
        pipeline={"name": name, "sha256": sha},
        fixtures=[],
        stages={},
        budget=budget,
    )
    write_summary(path, summary | {"fixture_set_sha256": fixtures} | extra)
    return path


@pytest.fixture
def run_a(tmp_path: Path) -> Path:
    return write_run(tmp_path / "a", make_turns())


def budget_file(tmp_path: Path, text: str) -> Path:
    f = tmp_path / "budget.toml"
    f.write_text(text)
    return f


def ci(capsys: pytest.CaptureFixture[str], *argv: object) -> tuple[int, str, str]:
    rc = main(["ci", *map(str, argv)])
    out, err = capsys.readouterr()
    return rc, out, err


def test_generous_budget_passes_and_writes_every_report(
    tmp_path: Path, run_a: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    step = tmp_path / "step_summary.md"
    step.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step))
    rc, out, _ = ci(
        capsys,
        "--results",
        run_a,
        "--budget",
        budget_file(tmp_path, GENEROUS),
        "--junit",
        tmp_path / "out" / "j.xml",
        "--markdown",
        tmp_path / "out" / "r.md",
    )
    assert rc == 0
    assert out.splitlines()[-1] == "GATE PASSED: 4 checks"
    for name in ("junit.xml", "report.md", "gate.json"):
        assert (run_a / name).exists(), name
    assert (tmp_path / "out" / "j.xml").read_text() == (run_a / "junit.xml").read_text()
    assert (tmp_path / "out" / "r.md").read_text() == (run_a / "report.md").read_text()
    appended = step.read_text()
    assert appended.startswith("earlier step\n### voicelat latency gate: ✅ passed")
    gate = json.loads((run_a / "gate.json").read_text())
    assert gate["passed"] is True and gate["exit_code"] == 0
    assert ET.parse(run_a / "junit.xml").getroot().get("failures") == "0"


def test_impossible_budget_exits_1_with_a_junit_failure(
    tmp_path: Path, run_a: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out, _ = ci(capsys, "--results", run_a, "--budget", budget_file(tmp_path, IMPOSSIBLE))
    assert rc == 1
    assert "GATE FAILED: 1 of 3 checks failed: e2e P50 " in out
    (case,) = [
        c for c in ET.parse(run_a / "junit.xml").iter("testcase") if c.get("name") == "e2e P50"
    ]
    failure = case.find("failure")
    assert failure is not None
    message = failure.get("message", "")
    assert message.startswith("e2e P50 ") and message.endswith(" ms > limit 1 ms (n=10 warm turns)")


def test_untrusted_inconclusive_exits_4_on_a_run_that_blames_its_machine(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The run's trust section (as ``voicelat run`` writes it on a loaded machine) turns a
    broken latency budget into exit 4 when asked; without the flag it stays exit 1."""
    reason = {"code": "machine_inflated", "message": "the machine inflated the figures: x"}
    trust = {"trustworthy": False, "reasons": [reason], "checks": {}, "thresholds": {}}
    run = write_run(tmp_path / "r", make_turns(), trust=trust)
    impossible = budget_file(tmp_path, IMPOSSIBLE)
    rc, out, _ = ci(capsys, "--results", run, "--budget", impossible)
    assert rc == 1 and "distrust: the machine inflated the figures: x" in out
    assert json.loads((run / "gate.json").read_text())["verdict"] == "failed"
    rc, out, _ = ci(capsys, "--results", run, "--budget", impossible, "--untrusted", "inconclusive")
    assert rc == 4
    assert out.splitlines()[-1].startswith("GATE INCONCLUSIVE: 1 of 3 checks failed")
    gate = json.loads((run / "gate.json").read_text())
    assert gate["verdict"] == "inconclusive" and gate["exit_code"] == 4
    assert gate["distrust"] == [reason]
    assert (run / "report.md").read_text().startswith("### voicelat latency gate: ⚠️ inconclusive")
    with pytest.raises(SystemExit) as exc:
        main(["ci", "--untrusted", "ignore"])
    assert exc.value.code == 2 and "invalid choice: 'ignore'" in capsys.readouterr().err


def test_the_runs_own_budget_applies_without_budget_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = write_run(tmp_path / "r", make_turns(), budget={"min_turns": 3, "e2e": {"p90_ms": 2}})
    rc, out, _ = ci(capsys, "--results", run)
    assert rc == 1
    assert "budget ([budget] recorded in" in out
    assert "FAIL  e2e P90" in out


def test_same_run_as_baseline_is_not_significant(
    tmp_path: Path, run_a: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out, _ = ci(
        capsys, "--results", run_a, "--baseline", run_a, "--budget", budget_file(tmp_path, GENEROUS)
    )
    assert rc == 0
    rows = [ln for ln in out.splitlines() if ln.startswith("  ok    ")]
    assert len(rows) == 18
    assert all(ln.endswith("not significant") for ln in rows)


def test_slower_run_is_a_regression_against_the_baseline(
    tmp_path: Path, run_a: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    slow = write_run(tmp_path / "slow", make_turns(seed=2, stt_shift_ms=150))
    rc, out, _ = ci(
        capsys,
        "--results",
        slow,
        "--baseline",
        run_a / "summary.json",
        "--budget",
        budget_file(tmp_path, GENEROUS),
    )
    assert rc == 1
    fails = [ln for ln in out.splitlines() if ln.startswith("  FAIL")]
    assert any("e2e P50" in ln for ln in fails)
    assert any("stt P90" in ln for ln in fails)
    assert not any("endpointing" in ln for ln in fails)
    regression = [
        c
        for c in ET.parse(slow / "junit.xml").iter("testcase")
        if c.get("classname") == "voicelat.regression" and c.find("failure") is not None
    ]
    assert {c.get("name") for c in regression} >= {"e2e P50", "stt P50", "stt P90"}
    # A wider tolerance turns the same data into a pass.
    rc, _, _ = ci(
        capsys,
        "--results",
        slow,
        "--baseline",
        run_a,
        "--budget",
        budget_file(tmp_path, GENEROUS),
        "--tolerance-ms",
        "400",
    )
    assert rc == 0


def test_too_few_warm_turns_is_exit_1_not_a_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = write_run(tmp_path / "r", make_turns(n=2))
    rc, out, _ = ci(capsys, "--results", run, "--budget", budget_file(tmp_path, GENEROUS))
    assert rc == 1
    assert "FAIL  sample too small: 2 warm turns < min_turns 3" in out


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        (
            {"name": "cloud"},
            "is of pipeline 'cloud', this run of 'local': compare runs of one pipeline, or pass --force",
        ),
        ({"fixtures": "0" * 64}, "was measured on another fixture set"),
    ],
)
def test_incomparable_baseline_is_refused_unless_forced(
    tmp_path: Path,
    run_a: Path,
    capsys: pytest.CaptureFixture[str],
    kwargs: dict[str, Any],
    fragment: str,
) -> None:
    other = write_run(tmp_path / "other", make_turns(seed=3), **kwargs)
    budget = budget_file(tmp_path, GENEROUS)
    rc, out, err = ci(capsys, "--results", run_a, "--baseline", other, "--budget", budget)
    assert rc == 2
    assert out == ""
    assert err.startswith("voicelat: error: baseline ") and fragment in err
    assert err.count("\n") == 1
    assert not (run_a / "junit.xml").exists()  # refused before gating anything
    rc, out, _ = ci(capsys, "--results", run_a, "--baseline", other, "--budget", budget, "--force")
    assert rc == 0
    assert "note: forced: baseline " in out


def test_baseline_of_newer_schema_is_refused(
    tmp_path: Path, run_a: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    newer = write_run(tmp_path / "newer", make_turns(), schema_version=SCHEMA_VERSION + 1)
    rc, _, err = ci(capsys, "--results", run_a, "--baseline", newer, "--force")
    assert rc == 2
    assert f"uses results schema {SCHEMA_VERSION + 1}" in err


def test_baseline_errors_are_one_line(
    tmp_path: Path, run_a: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, _, err = ci(capsys, "--results", run_a, "--baseline", tmp_path / "nope")
    assert rc == 2 and err.startswith("voicelat: error: baseline: no results at ")
    only_summary = tmp_path / "only"
    only_summary.mkdir()
    (only_summary / "summary.json").write_text((run_a / "summary.json").read_text())
    rc, _, err = ci(capsys, "--results", run_a, "--baseline", only_summary)
    assert rc == 2 and "has no turns.jsonl" in err


def test_bad_budget_key_lists_the_valid_ones(
    tmp_path: Path, run_a: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out, err = ci(
        capsys, "--results", run_a, "--budget", budget_file(tmp_path, "[budget.ttft]\np90_ms = 1\n")
    )
    assert rc == 2 and out == ""
    assert ":1: [budget] ttft is not a known key" in err
    assert "valid keys: agent_response, aggregation, barge_in_stop, cost_per_turn, dead_air_max, e2e" in err


def test_every_measured_turn_failed_is_exit_3_with_a_junit_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = write_run(tmp_path / "r", make_turns(n=3, fail=3))
    rc, _, err = ci(capsys, "--results", run)
    assert rc == 3
    assert err.strip() == (
        "voicelat: error: every measured turn failed (3); first reason: stt: connection refused"
    )
    (error,) = list(ET.parse(run / "junit.xml").iter("error"))
    assert "every measured turn failed" in error.get("message", "")


def test_failed_turns_count_against_the_failure_rate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = write_run(tmp_path / "r", make_turns(n=10, fail=2))
    rc, out, _ = ci(capsys, "--results", run, "--budget", budget_file(tmp_path, GENEROUS))
    assert rc == 1
    assert "FAIL  failure rate 2/11 turns (18.2%) > limit 0.0% (max_failure_rate)" in out


def test_save_baseline_only_when_the_gate_passes(
    tmp_path: Path, run_a: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dest = tmp_path / "baseline"
    rc, _, _ = ci(
        capsys,
        "--results",
        run_a,
        "--budget",
        budget_file(tmp_path, IMPOSSIBLE),
        "--save-baseline",
        dest,
    )
    assert rc == 1 and not dest.exists()
    rc, _, _ = ci(
        capsys,
        "--results",
        run_a,
        "--budget",
        budget_file(tmp_path, GENEROUS),
        "--save-baseline",
        dest,
    )
    assert rc == 0
    assert (dest / "turns.jsonl").read_bytes() == (run_a / "turns.jsonl").read_bytes()
    assert (dest / "summary.json").read_bytes() == (run_a / "summary.json").read_bytes()
    # The saved baseline is usable as one.
    rc, out, _ = ci(
        capsys, "--results", run_a, "--baseline", dest, "--budget", budget_file(tmp_path, GENEROUS)
    )
    assert rc == 0 and "not significant" in out


def test_baseline_save_command(
    tmp_path: Path, run_a: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dest = tmp_path / "b"
    assert main(["baseline", "save", str(run_a), str(dest)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"baseline saved: {dest} (10 warm turns; e2e P50 ")
    assert sorted(p.name for p in dest.iterdir()) == ["summary.json", "turns.jsonl"]
    junk = tmp_path / "junk"
    junk.mkdir()
    (junk / "notes.txt").write_text("mine")
    assert main(["baseline", "save", str(run_a), str(junk)]) == 2
    assert "not a baseline directory" in capsys.readouterr().err


def test_results_mode_rejects_run_options(run_a: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = ci(capsys, "--results", run_a, "--turns", "3")
    assert rc == 2
    assert "--turns does not apply with --results" in err


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["ci", "--confidence", "2"])
    assert exc.value.code == 2
    assert "must be within 0.5..1" in capsys.readouterr().err


def test_unreachable_servers_exit_3_without_traceback(tmp_path: Path) -> None:
    """A real subprocess and a real refused connection: the infrastructure exit code."""
    with socket_port() as port:
        pass  # closed again: nothing listens there now
    pipeline = tmp_path / "down.toml"
    pipeline.write_text(
        (ROOT / "pipelines" / "local.toml")
        .read_text()
        .replace('stack = "local"', "")
        .replace('stage = "wyoming-stt"', f'stage = "wyoming-stt"\nurl = "tcp://127.0.0.1:{port}"')
        .replace('stage = "wyoming-tts"', f'stage = "wyoming-tts"\nurl = "tcp://127.0.0.1:{port}"')
        .replace('stage = "openai"', f'stage = "openai"\nbase_url = "http://127.0.0.1:{port}/v1"')
    )
    out_dir = tmp_path / "run"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "voicelat",
            "ci",
            "--pipeline",
            str(pipeline),
            "--out",
            str(out_dir),
            "--junit",
            str(tmp_path / "j.xml"),
            "--turns",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode == 3, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    assert proc.stderr.splitlines()[-1].startswith("voicelat: error: ")
    root = ET.parse(tmp_path / "j.xml").getroot()
    assert root.get("errors") == "1"


class socket_port:
    """A loopback port that was free a moment ago."""

    def __enter__(self) -> int:
        import socket

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        port: int = self.sock.getsockname()[1]
        return port

    def __exit__(self, *exc: object) -> None:
        self.sock.close()
