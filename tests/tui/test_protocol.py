"""The JSON-lines event stream between the measuring child and the TUI (voicelat.tui.protocol)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.tui.helpers import MS, make_turn
from voicelat.core.base.plan import PlannedTurn
from voicelat.core.measure.clock import FakeClock
from voicelat.core.summaries.run_summary import SCHEMA_VERSION
from voicelat.tui.model import (
    MilestoneSeen,
    RunEvent,
    RunModel,
    TurnFinished,
    TurnStarted,
)
from voicelat.tui.protocol import (
    ARGV_ENV,
    JsonlObserver,
    QuietStderr,
    SummaryWritten,
    decode,
    recorded_argv,
)

ROOT = Path(__file__).resolve().parents[2]


class Recorder(io.RawIOBase):
    """A stream that keeps what is written and which thread wrote it; can be held shut."""

    def __init__(self) -> None:
        super().__init__()
        self.data = bytearray()
        self.writers: set[threading.Thread] = set()
        self.gate = threading.Event()
        self.gate.set()

    def writable(self) -> bool:
        return True

    def write(self, b: bytes) -> int:  # type: ignore[override]
        self.gate.wait(10)
        self.writers.add(threading.current_thread())
        self.data += b
        return len(b)

    def lines(self) -> list[bytes]:
        return bytes(self.data).splitlines()


def _calls(observer: JsonlObserver) -> None:
    """A short run as the runner reports it: a turn with live milestones, then the next."""
    first = make_turn(0, {"llm_ttft": 300}, fixture="alpha", warmup=True)
    observer.turn_started(PlannedTurn(0, "alpha", 0, True), 2)
    for name in ("endpoint", "stt_final", "llm_first_token"):
        observer.milestone(0, name, first.milestones[name])
    observer.turn_finished(first, 2)
    observer.turn_started(PlannedTurn(1, "beta", 0, False), 2)
    observer.milestone(1, "endpoint", 2500 * MS)


def _direct(clock: int) -> list[RunEvent]:
    """The same run as the events the in-process observer used to queue."""
    first = make_turn(0, {"llm_ttft": 300}, fixture="alpha", warmup=True)
    return [
        TurnStarted(0, "alpha", 2, True, 2000 * MS),
        *(
            MilestoneSeen(0, name, first.milestones[name], clock)
            for name in ("endpoint", "stt_final", "llm_first_token")
        ),
        TurnFinished(first, 2),
        TurnStarted(1, "beta", 2, False, None),
        MilestoneSeen(1, "endpoint", 2500 * MS, clock),
    ]


def _model() -> RunModel:
    return RunModel(results_path=Path("out"), planned=2, live_mode=True)


def test_observer_lines_rebuild_the_same_model_as_direct_events() -> None:
    stream = Recorder()
    clock = 123_456 * MS
    observer = JsonlObserver(stream, {"alpha": 2000, "beta": None}, clock=FakeClock(clock))
    _calls(observer)
    observer.summary(Path("out/summary.json"))
    observer.close()
    decoded = [decode(line) for line in stream.lines()]
    assert decoded[-1] == SummaryWritten(Path("out/summary.json"))
    events = decoded[:-1]
    assert events == _direct(clock)  # every field survives the trip, the Turn included
    via_lines, direct = _model(), _model()
    for e in events:
        assert e is not None and not isinstance(e, SummaryWritten)
        via_lines.apply(e)
    for e in _direct(clock):
        direct.apply(e)
    assert via_lines == direct
    assert via_lines.live is not None and via_lines.live.milestones == {"endpoint": 2500 * MS}
    assert via_lines.turns[0].warmup and via_lines.turns[0].e2e_ns == 370 * MS


def test_each_line_is_one_json_object_with_its_event_name() -> None:
    stream = Recorder()
    observer = JsonlObserver(stream, {"alpha": 2000}, clock=FakeClock(7))
    _calls(observer)
    observer.close()
    objects = [json.loads(line) for line in stream.lines()]
    assert [o["event"] for o in objects] == [
        "turn_started",
        "milestone",
        "milestone",
        "milestone",
        "turn_finished",
        "turn_started",
        "milestone",
    ]
    assert objects[0] == {
        "event": "turn_started",
        "index": 0,
        "fixture": "alpha",
        "warmup": True,
        "total": 2,
        "speech_end_ns": 2000 * MS,
    }
    assert objects[4]["turn"]["schema_version"] == SCHEMA_VERSION  # the turns.jsonl form


def test_observer_calls_only_enqueue_and_a_stalled_reader_never_blocks_them() -> None:
    stream = Recorder()
    stream.gate.clear()  # the reader stalls: every write blocks
    observer = JsonlObserver(stream, {}, clock=FakeClock(0))
    t0 = time.perf_counter()
    for i in range(1000):
        observer.milestone(i, "endpoint", i)
    turn = make_turn(0)
    for _ in range(100):
        observer.turn_finished(turn, 1)
    elapsed = time.perf_counter() - t0
    # No encoding, no I/O on the caller's thread: 1100 calls in well under a second even on
    # a loaded machine (an inline encode + blocked write would never return at all).
    assert elapsed < 0.5, elapsed
    assert not stream.data
    stream.gate.set()
    observer.close()
    assert len(stream.lines()) == 1100
    assert stream.writers and threading.current_thread() not in stream.writers


def test_a_vanished_reader_is_reported_once_and_later_events_are_dropped() -> None:
    read_fd, write_fd = os.pipe()
    os.close(read_fd)  # the TUI process is gone
    broken: list[str] = []
    stream = os.fdopen(write_fd, "wb")
    observer = JsonlObserver(stream, {}, on_broken=lambda: broken.append("x"))
    for i in range(5):
        observer.milestone(i, "endpoint", i)
    observer.close()
    assert observer.broken and broken == ["x"]
    with contextlib.suppress(BrokenPipeError):
        stream.close()  # what is still buffered has nowhere to go


@pytest.mark.parametrize(
    "line",
    [
        b"",
        b"not json at all",
        b"[1, 2]",
        b'{"event": "something_newer", "x": 1}',
        b'{"event": "milestone", "index": 0}',
        b'{"event": "turn_finished", "total": 1, "turn": {"index": 0}}',
        b'{"event": "turn_started", "index": "zero", "fixture": "a", "warmup": false, "total": 1}',
    ],
)
def test_what_is_not_an_event_decodes_to_none(line: bytes) -> None:
    assert decode(line) is None


def test_the_recorded_command_line_is_the_tuis_when_it_started_the_child(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(ARGV_ENV, raising=False)
    assert recorded_argv(["child"]) == ["child"]
    monkeypatch.setenv(ARGV_ENV, json.dumps(["voicelat", "run", "--tui"]))
    assert recorded_argv(["child"]) == ["voicelat", "run", "--tui"]
    monkeypatch.setenv(ARGV_ENV, "{broken")
    assert recorded_argv(["child"]) == ["child"]


def test_claimed_stdout_carries_only_events_and_stray_prints_go_to_stderr() -> None:
    code = (
        "import os\n"
        "from voicelat.tui.protocol import claim_stdout\n"
        "s = claim_stdout()\n"
        "print('a stray print', flush=True)\n"
        "os.write(1, b'C-level write\\n')\n"
        's.write(b\'{"event": "x"}\\n\'); s.flush()\n'
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, timeout=60, cwd=ROOT, check=True
    )
    assert proc.stdout == b'{"event": "x"}\n'
    assert b"a stray print" in proc.stderr and b"C-level write" in proc.stderr


def test_quiet_stderr_drops_writes_to_a_broken_pipe() -> None:
    read_fd, write_fd = os.pipe()
    os.close(read_fd)
    with os.fdopen(write_fd, "w") as broken:
        quiet = QuietStderr(broken)
        assert quiet.write("stopping the servers this run started: llm\n" * 10_000) > 0
        quiet.flush()  # no BrokenPipeError: the clean-up goes on
        assert not quiet.isatty() and quiet.fileno() == write_fd
