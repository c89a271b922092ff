"""The measuring child process: its command line, reading its pipes, stopping it, exit codes.

Most tests replay a recorded event stream through a tiny stand-in child
(``tests/tui/replay_child.py``), which starts in milliseconds; one runs the real
``voicelat run --events jsonl`` child against the OpenAI emulator (offline, a few seconds).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from voicelat.cli.main import build_parser, main
from voicelat.cli.run import add_run_arguments
from voicelat.cli.tui_child import child_command, want_tui
from voicelat.core.base.errors import EXIT_INTERRUPTED, EXIT_OK, VoicelatError
from voicelat.files.pipeline import Endpointing, Pipeline, TurnConfig
from voicelat.files.results import load_run
from voicelat.tui.app import VoicelatApp
from voicelat.tui.live import NICE_ENV, ChildRun, run_with_tui, tui_nice
from voicelat.tui.model import RunEnded, RunEvent, SetupLine, TurnFinished, TurnStarted
from voicelat.tui.protocol import decode

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
REPLAY = HERE / "replay_child.py"
#: A recorded ``voicelat run --events jsonl`` stream: 2 turns of the emulated pipeline.
EVENTS = HERE / "data" / "events.jsonl"
SIZE = (120, 40)


def replay(*extra: str, events: Path = EVENTS) -> list[str]:
    """The stand-in child's command line."""
    return [sys.executable, str(REPLAY), str(events), *extra]


@pytest.fixture(autouse=True)
def _keep_pytest_priority(monkeypatch: pytest.MonkeyPatch) -> None:
    """run_with_tui lowers its own process's CPU priority: not pytest's, for the whole session
    (and every server started after it)."""
    monkeypatch.setenv(NICE_ENV, "0")


def _drain(run: ChildRun) -> list[RunEvent]:
    out: list[RunEvent] = []
    while not run.events.empty():
        out.append(run.events.get_nowait())
    return out


def _finished(run: ChildRun, timeout: float = 30) -> list[RunEvent]:
    """Everything the child reported, once it has exited."""
    assert run.wait(timeout), "the child did not finish"
    return _drain(run)


# -- which options reach the child ----------------------------------------------------------------
def test_want_tui_follows_the_flags_then_the_terminal() -> None:
    assert want_tui(argparse.Namespace(tui=True), stdout_isatty=False)
    assert not want_tui(argparse.Namespace(tui=False), stdout_isatty=True)
    assert want_tui(argparse.Namespace(tui=None), stdout_isatty=True)
    assert not want_tui(argparse.Namespace(tui=None), stdout_isatty=False)
    assert not want_tui(argparse.Namespace(), stdout_isatty=False)


def test_every_run_option_reaches_the_child_unchanged() -> None:
    parser = build_parser()
    argv = ["run", "--tui", "-p", "my pipe.toml", "-f", "fx", "-n", "3", "-r", "2", "-w", "0"]
    argv += ["--save-audio", "-o", "somewhere", "--scenario", "scenarios/short.toml"]
    argv += ["--rate", "2.5", "--arrival", "constant", "--arrival-seed", "7"]
    argv += ["--otlp-endpoint", "http://127.0.0.1:4318", "--metrics-port", "9464"]
    argv += ["--metrics-linger", "2.5", "--workers", "2", "--ray", "127.0.0.1:6390"]
    argv += ["--calibrate", "full", "--frozen", "rec", "--caller-cache", "cache"]
    argv += ["--network", "4g", "--scenario", "scenarios/short.toml", "--region", "eu-west"]
    args = parser.parse_args(argv)
    # Every run option is set to a non-default value above: an option added to
    # add_run_arguments fails this until it is added here (and so checked to be forwarded).
    # --concurrency excludes --rate (one load at a time): it is checked on its own below.
    probe = argparse.ArgumentParser(add_help=False)
    add_run_arguments(probe)
    unset = [
        a.dest
        for a in probe._actions
        if a.dest not in ("tui", "events", "concurrency") and getattr(args, a.dest) == a.default
    ]
    assert not unset, f"set {unset} in this test's argv"
    closed = parser.parse_args(["run", "--tui", "--concurrency", "4"])
    assert (
        parser.parse_args(child_command(closed, Path("o"), add_run_arguments)[3:]).concurrency == 4
    )
    cmd = child_command(args, Path("runs/x"), add_run_arguments)
    assert cmd[:7] == [sys.executable, "-m", "voicelat", "run", "--no-tui", "--events", "jsonl"]
    child = parser.parse_args(cmd[3:])
    for key, value in vars(args).items():
        if key not in ("tui", "events", "out"):
            assert getattr(child, key) == value, key
    assert child.tui is False and child.events == "jsonl" and child.out == Path("runs/x")


def test_defaults_are_left_to_the_child_and_odd_values_stay_values() -> None:
    parser = build_parser()
    args = parser.parse_args(["run", "--tui"])
    assert child_command(args, Path("o"), add_run_arguments)[7:] == ["--out=o"]
    args.fixtures = Path("-starts-with-a-dash")
    child = parser.parse_args(child_command(args, Path("o"), add_run_arguments)[3:])
    assert child.fixtures == Path("-starts-with-a-dash")


# -- reading the child ----------------------------------------------------------------------------
def test_a_replayed_run_reaches_the_queue_in_order_with_its_stderr_as_setup_lines() -> None:
    run = ChildRun(replay("--stderr", "embedded stack ready in 0.1 s"))
    run.start()
    events = _finished(run)
    expected = [decode(line) for line in EVENTS.read_bytes().splitlines()]
    assert events[0] == SetupLine("embedded stack ready in 0.1 s")
    assert events[1:-1] == expected
    assert sum(isinstance(e, TurnFinished) for e in events) == 2
    assert events[-1] == RunEnded("complete", None)
    assert run.status == "complete" and run.exit_code == EXIT_OK and run.bad_lines == 0


def test_lines_that_are_not_events_are_counted_and_skipped(tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    lines = EVENTS.read_text().splitlines()
    events.write_text("\n".join([lines[0], "a stray print", *lines[1:]]) + "\n")
    run = ChildRun(replay(events=events))
    run.start()
    got = _finished(run)
    assert run.bad_lines == 1
    assert isinstance(got[0], TurnStarted) and isinstance(got[-1], RunEnded)


def test_a_child_that_fails_gives_its_one_line_error_and_exit_code() -> None:
    run = ChildRun(
        replay(
            "--stderr",
            "embedded stack: checking / starting servers ...",
            "--stderr",
            "voicelat: error: embedded stack: llm did not become ready",
            "--exit",
            "3",
            events=Path("/dev/null"),
        )
    )
    run.start()
    events = _finished(run)
    assert events[-1] == RunEnded("failed", "embedded stack: llm did not become ready")
    assert run.exit_code == 3


def test_a_crash_shows_its_last_line_and_never_its_traceback() -> None:
    run = ChildRun(replay("--traceback"))
    run.start()
    events = _finished(run)
    shown = [e.text for e in events if isinstance(e, SetupLine)]
    assert not any("Traceback" in line or 'File "' in line for line in shown), shown
    assert run.status == "failed" and run.exit_code == 1
    assert run.message == (
        "the measuring process failed (exit 1): RuntimeError: replay child crashed on purpose; "
        "run with --no-tui for the details"
    )


def test_a_child_killed_by_a_signal_says_so() -> None:
    run = ChildRun(replay("--kill"))
    run.start()
    _finished(run)
    assert run.message == "the measuring process was killed by SIGKILL"
    assert run.exit_code == 128 + 9


def test_a_child_that_cannot_start_is_a_failed_run_not_a_crash(tmp_path: Path) -> None:
    run = ChildRun([str(tmp_path / "no-such-python")])
    run.start()
    events = _finished(run, 5)
    assert isinstance(events[-1], RunEnded) and events[-1].status == "failed"
    assert str(events[-1].message).startswith("cannot start the measuring process")
    assert run.exit_code == 3
    run.request_stop()  # nothing to stop: no error


def test_stopping_sends_sigint_once_and_the_child_keeps_its_results(tmp_path: Path) -> None:
    out = tmp_path / "out"
    run = ChildRun(replay("--hang", "--out", str(out)))
    run.start()
    deadline = time.monotonic() + 30
    while not any(isinstance(e, TurnFinished) for e in list(_drain(run))):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    run.request_stop()
    run.request_stop()  # a second q must not interrupt the child's clean-up
    events = _finished(run)
    assert "replay child: got SIGINT" in run.stderr_tail
    assert list(run.stderr_tail).count("replay child: got SIGINT") == 1
    assert events[-1] == RunEnded(
        "interrupted", "stopped; finished turns and the summary are saved"
    )
    assert run.exit_code == EXIT_INTERRUPTED
    assert run.summary_path == out / "summary.json" and run.summary_path.exists()


def test_the_runs_end_brings_the_error_bar_of_the_summary_the_child_wrote(tmp_path: Path) -> None:
    """The child announces its summary; at its exit the RunEnded carries that summary's
    ``instrument`` section (the percentiles pane's error bar), and none when it has none."""
    out = tmp_path / "out"
    run = ChildRun(replay("--out", str(out)))
    run.start()
    end = _finished(run)[-1]
    assert isinstance(end, RunEnded) and end.status == "complete"
    assert end.instrument is None  # the saved run's summary predates the section
    section = {"status": "calibrated", "error_p50_ns": 300_000, "error_p99_ns": 900_000}
    summary = json.loads((out / "summary.json").read_text())
    (out / "summary.json").write_text(json.dumps(summary | {"instrument": section}))
    assert run._instrument() == section
    (out / "summary.json").write_text("{not json")
    assert run._instrument() is None


def test_the_tui_process_steps_back_once_the_child_runs() -> None:
    # In a process of its own: a niceness cannot be lowered again without privileges.
    code = (
        "import os, sys\n"
        "from voicelat.tui.live import ChildRun\n"
        "before = os.nice(0)\n"
        "run = ChildRun([sys.executable, '-c', 'import os, sys; print(os.nice(0), file=sys.stderr)'],"
        " nice=7)\n"
        "run.start(); assert run.wait(30)\n"
        "print(before, os.nice(0), run.stderr_tail[-1])\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    before, after, child = map(int, proc.stdout.split())
    assert after == min(before + 7, 19) and child == before, proc.stderr


def test_the_tuis_niceness_can_be_set_or_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(NICE_ENV)
    assert tui_nice() == 10
    monkeypatch.setenv(NICE_ENV, "0")
    assert tui_nice() == 0
    monkeypatch.setenv(NICE_ENV, "lots")
    assert tui_nice() == 10


# -- run_with_tui: the app in front of a child ------------------------------------------------------
def _pilot(press: str, after_turns: int | None, seen: list[VoicelatApp]) -> Callable[..., None]:
    """Replaces App.run: drives the real app with Pilot, presses ``press`` after some turns
    (``None``: once the app shows the run ended), then waits for the app to close itself."""

    def run(self: VoicelatApp) -> None:
        async def drive() -> None:
            async with self.run_test(size=SIZE) as pilot:
                controller = self.controller
                assert controller is not None
                deadline = time.monotonic() + 60
                while not (
                    # the end as the app shows it: its RunEnded drained into the model
                    not self.model.running
                    if after_turns is None
                    else len(self.model.turns) >= after_turns
                ):
                    assert time.monotonic() < deadline, "no turn reached the app"
                    await pilot.pause(0.05)
                await pilot.press(press)
                while self.is_running:
                    assert time.monotonic() < deadline, "the app did not close"
                    await pilot.pause(0.05)

        seen.append(self)
        asyncio.run(drive())

    return run


def _pipeline() -> Pipeline:
    return Pipeline(
        name="fake",
        path=None,
        sha256="",
        stack=None,
        stt={"stage": "fake"},
        llm={"stage": "fake"},
        tts={"stage": "fake"},
        endpointing=Endpointing(hangover_ms=100),
        turn=TurnConfig(timeout_s=5),
        budget={"e2e": {"p50_ms": 2000}},
    )


def _tui(tmp_path: Path, command: list[str]) -> int:
    return run_with_tui(_pipeline(), tmp_path / "out", planned=2, command=command)


@pytest.mark.parametrize("key", ["q", "ctrl+c"])
def test_a_key_in_the_app_stops_the_child_and_its_exit_code_is_returned(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    key: str,
) -> None:
    seen: list[VoicelatApp] = []
    monkeypatch.setattr(VoicelatApp, "run", _pilot(key, after_turns=1, seen=seen))
    code = _tui(tmp_path, replay("--delay", "0.05", "--hang", "--out", str(tmp_path / "out")))
    assert code == EXIT_INTERRUPTED
    (app,) = seen
    child = app.controller
    assert isinstance(child, ChildRun) and child.stop_sent
    assert "replay child: got SIGINT" in child.stderr_tail
    assert app.model.status == "interrupted" and len(app.model.turns) >= 1
    out, err = capsys.readouterr()
    assert "Per-segment percentiles" in out  # the summary table, once the screen is gone
    assert "interrupted: finished turns kept" in err and "Traceback" not in err


def test_a_completed_run_exits_0_after_q(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: list[VoicelatApp] = []
    monkeypatch.setattr(VoicelatApp, "run", _pilot("q", after_turns=None, seen=seen))
    code = _tui(
        tmp_path, replay("--stderr", "embedded stack ready", "--out", str(tmp_path / "out"))
    )
    assert code == EXIT_OK
    (app,) = seen
    assert app.model.status == "complete" and [t.index for t in app.model.turns] == [0, 1]
    assert "embedded stack ready" in app.model.setup_log  # start-up progress reached the app
    assert isinstance(app.controller, ChildRun) and not app.controller.stop_sent
    assert "Per-segment percentiles" in capsys.readouterr().out


def test_a_failed_child_ends_in_its_one_line_error_with_its_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: list[VoicelatApp] = []
    monkeypatch.setattr(VoicelatApp, "run", _pilot("q", after_turns=None, seen=seen))
    command = replay("--stderr", "voicelat: error: every turn failed (2)", "--exit", "3")
    # what a run that failed before its first turn leaves: a summary of no turns
    out = tmp_path / "out"
    out.mkdir()
    summary = json.loads((HERE / "data" / "run" / "summary.json").read_text())
    summary["counts"]["turns"] = 0
    (out / "summary.json").write_text(json.dumps(summary))
    (out / "turns.jsonl").write_text("")
    with pytest.raises(VoicelatError) as raised:
        _tui(tmp_path, command)
    assert str(raised.value) == "every turn failed (2)" and raised.value.exit_code == 3
    assert "Per-segment percentiles" not in capsys.readouterr().out  # no turn: no table
    assert seen[0].model.status == "failed"
    assert seen[0].model.message == "every turn failed (2)"  # on the status line too


def test_an_app_that_dies_still_stops_the_child(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def crash(self: VoicelatApp) -> None:
        assert self.controller is not None
        self.controller.start()
        self.controller.events.get(timeout=30)  # the child is up and replaying
        raise RuntimeError("the app broke")

    monkeypatch.setattr(VoicelatApp, "run", crash)
    command = replay("--hang", "--out", str(tmp_path / "out"))
    with pytest.raises(RuntimeError, match="the app broke"):
        _tui(tmp_path, command)
    # the child was interrupted and waited for: it wrote its results before we got here
    assert (tmp_path / "out" / "summary.json").exists()


# -- the real child, against the OpenAI emulator -------------------------------------------------
@pytest.fixture(scope="module")
def emulated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    """`voicelat serve openai` with quick replies, a pipeline at it, one short fixture."""
    d = tmp_path_factory.mktemp("emulated")
    profile = d / "quick.toml"
    profile.write_text(
        "seed = 1\n[openai.latency]\nheaders = 5\nttft = 20\ntoken = 5\nstt_first = 20\n"
        'stt_final = 30\ntts_first_audio = 20\ntts_chunk = 5\n[openai.content]\nreply = "Done."\n'
    )
    serve = subprocess.Popen(
        [sys.executable, "-m", "voicelat", "serve", "openai", "--port", "0", "--profile", profile],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=ROOT,
    )
    try:
        assert serve.stdout is not None
        first = serve.stdout.readline().split()  # "openai http://127.0.0.1:PORT/v1"
        assert first[:1] == ["openai"], first
        pipe = (ROOT / "pipelines" / "emulated-openai.toml").read_text()
        pipeline = d / "emulated.toml"
        pipeline.write_text(pipe.replace("http://127.0.0.1:8401/v1", first[1]))
        fixtures = d / "fx"
        fixtures.mkdir()
        manifest = json.loads((ROOT / "fixtures" / "manifest.json").read_text())
        manifest["fixtures"] = [f for f in manifest["fixtures"] if f["id"] == "kitchen_lights"]
        (fixtures / "manifest.json").write_text(json.dumps(manifest))
        (fixtures / "kitchen_lights.wav").write_bytes(
            (ROOT / "fixtures" / "kitchen_lights.wav").read_bytes()
        )
        yield {"pipeline": pipeline, "fixtures": fixtures}
    finally:
        serve.terminate()
        serve.wait(10)


@pytest.mark.e2e
def test_run_tui_measures_in_a_child_and_q_stops_it_with_its_results(
    emulated: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("VOICELAT_EMULATOR_KEY", "anything")
    monkeypatch.chdir(ROOT)  # the child runs `python -m voicelat` where the user is
    seen: list[VoicelatApp] = []
    monkeypatch.setattr(VoicelatApp, "run", _pilot("q", after_turns=1, seen=seen))
    out = tmp_path / "out"
    argv = ["run", "--tui", "-p", str(emulated["pipeline"]), "-f", str(emulated["fixtures"])]
    argv += ["--turns", "20", "--warmup", "0", "--out", str(out)]
    assert main(argv) == EXIT_INTERRUPTED
    (app,) = seen
    saved = load_run(out)
    assert saved.summary is not None and saved.summary["run"]["status"] == "interrupted"
    assert 1 <= len(saved.turns) < 20
    # the app got exactly the turns the child wrote, field for field
    assert app.model.turns == list(saved.turns)
    # the summary records the user's command, not the child's `--events jsonl` one
    assert saved.summary["run"]["argv"] == sys.argv
    _, err = capsys.readouterr()
    assert "interrupted: finished turns kept" in err and "Traceback" not in err
