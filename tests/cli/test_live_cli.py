"""The live command's glue: options forwarded to the TUI's measuring child, the late
speech_end announcement, the push-to-talk key in the TUI, the graceful-stop signal."""

from __future__ import annotations

import queue
import sys
import time
from typing import Any

import pytest

from voicelat.cli.live_terminal import SpeechEndAnnouncer
from voicelat.cli.live_tui import _app_class, _child_class, forwarded_options
from voicelat.cli.main import build_parser
from voicelat.core.base.plan import PlannedTurn
from voicelat.tui.app import VoicelatApp
from voicelat.tui.live import ChildRun, live_model
from voicelat.tui.model import RunEvent


def _parse(*argv: str) -> Any:
    return build_parser().parse_args(["live", *argv])


def test_every_live_option_reaches_the_measuring_child() -> None:
    args = _parse(
        "--ptt",
        "--no-barge-in",
        "--record",
        "--warmup=2",
        "--turns=3",
        "--input-device=USB mic",
        "--output-device=-1",
        "--input-rate=48000",
        "--latency=0.05",
        "--pipeline=pipelines/local.toml",
        "--out=runs/x",
        "--tui",
    )
    words = forwarded_options(args)
    assert "--out=runs/x" not in words and "--tui" not in words
    again = _parse(*words)
    for key, value in vars(args).items():
        if key not in ("out", "tui", "func"):
            assert getattr(again, key) == value, key
    assert forwarded_options(_parse()) == []  # defaults are not repeated


class _Inner:
    """Like the TUI's JSON-lines observer: a speech_end per fixture, calls recorded."""

    def __init__(self) -> None:
        self.speech_end_ns: dict[str, int | None] = {}
        self.calls: list[tuple[Any, ...]] = []

    def turn_started(self, planned: PlannedTurn, total: int) -> None:
        self.calls.append(("turn_started", planned.index, self.speech_end_ns.get(planned.fixture)))

    def milestone(self, index: int, name: str, t_rel_ns: int) -> None:
        self.calls.append(("milestone", index, name))

    def turn_finished(self, turn: Any, total: int) -> None:
        self.calls.append(("turn_finished",))


class _Session:
    def speech_end_rel_ns(self, index: int) -> int | None:
        return 1_700_000_000


def test_a_turn_is_announced_again_with_its_speech_end_before_its_endpoint() -> None:
    inner = _Inner()
    obs = SpeechEndAnnouncer(inner, _Session())  # type: ignore[arg-type]
    planned = PlannedTurn(0, "live-0001", 0, False)
    obs.turn_started(planned, 1)
    obs.milestone(0, "endpoint", 2_200_000_000)
    obs.milestone(0, "stt_final", 2_600_000_000)
    assert inner.calls == [
        ("turn_started", 0, None),
        ("turn_started", 0, 1_700_000_000),
        ("milestone", 0, "endpoint"),
        ("milestone", 0, "stt_final"),
    ]


class _Run:
    def __init__(self) -> None:
        self.events: queue.SimpleQueue[RunEvent] = queue.SimpleQueue()
        self.presses = 0
        self.finished = False

    def start(self) -> None:
        return None

    def request_stop(self) -> None:
        self.finished = True

    def press(self) -> None:
        self.presses += 1

    @property
    def done(self) -> bool:
        return self.finished


class _Pipeline:
    name = "local"
    budget: dict[str, Any] = {}  # noqa: RUF012

    class turn:
        pacer_lag_limit_ms = 10.0


async def test_space_is_the_push_to_talk_key_in_the_tui_only_with_ptt(tmp_path: Any) -> None:
    run = _Run()
    app = _app_class(VoicelatApp, True)(live_model(_Pipeline(), tmp_path, 0), controller=run)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("space")
        await pilot.press("space")
        await pilot.pause()
    assert run.presses == 2
    assert _app_class(VoicelatApp, False) is VoicelatApp


def test_the_childs_stop_is_sigusr2_and_its_talk_key_sigusr1() -> None:
    # A stand-in child that reports the signals it gets (the real child is tests/live's).
    code = (
        "import signal, sys, time\n"
        "signal.signal(signal.SIGUSR1, lambda *a: print('USR1', flush=True))\n"
        "signal.signal(signal.SIGUSR2, lambda *a: sys.exit(0))\n"
        "print('ready', flush=True)\n"
        "time.sleep(30)\n"
    )
    child = _child_class(ChildRun)([sys.executable, "-c", code])
    child.start()
    deadline = time.monotonic() + 20
    while child.bad_lines < 1:  # "ready" (not an event: counted and skipped)
        assert time.monotonic() < deadline
        time.sleep(0.02)
    child.press()
    while child.bad_lines < 2:  # "USR1"
        assert time.monotonic() < deadline
        time.sleep(0.02)
    child.request_stop()
    assert child.wait(20)
    assert child.exit_code == 0 and child.status == "complete"


@pytest.mark.e2e
def test_bad_counts_and_rates_are_usage_errors_before_any_device_is_touched() -> None:
    from tests.helpers import voicelat

    for args, message in (
        (["--turns", "0"], "--turns/-n: 0 must be at least 1"),
        (["--input-rate", "-5"], "--input-rate: -5 cannot be negative"),
        (["--latency", "soon"], "'soon' is not low, high or a number of seconds"),
    ):
        proc = voicelat("live", *args, timeout=60)
        assert proc.returncode == 2
        (line,) = proc.stderr.strip().splitlines()
        assert message in line
