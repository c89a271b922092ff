"""``voicelat live`` and ``voicelat devices`` on real PortAudio, real ALSA, no sound card.

Every test runs the command in a subprocess (so PortAudio reads the ALSA configuration the
test wrote, fresh) against :class:`tests.live.rig.AlsaRig`: a FIFO-fed microphone paced in
real time by the rig, and a FIFO-drained speaker. ALSA's file and null devices are not paced
on their own (LOCAL_ENGINES.md); the rig's writer and reader are what make the stream run
at real-time speed, so the live path under test is the one a sound card drives: PortAudio
callbacks every 20 ms, nothing in voicelat told it is being tested.

The rig knows when each sample was "spoken" and when the speaker played, on the same
system-wide monotonic clock as the measuring process, so milestones are checked against
that ground truth, not only for presence.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np
import pytest

from tests.helpers import ROOT, read_turns, voicelat, wer
from tests.live.rig import NO_DEVICE_ASOUNDRC, AlsaRig
from voicelat.audio import load_for_stage
from voicelat.files.fixtures import default_fixtures_dir, load_fixtures

try:  # the module imports PortAudio: without the system library these tests cannot run
    import sounddevice  # noqa: F401
except (ImportError, OSError) as exc:  # pragma: no cover - depends on the machine
    pytest.skip(f"PortAudio is not usable here ({exc})", allow_module_level=True)

NS_PER_MS = 1_000_000
MIC_RATE = 44100

#: The milestones a live turn on the local stack produces (Whisper sends no partials).
LIVE_MILESTONES = [
    "speech_start",
    "speech_end",
    "endpoint",
    "stt_final",
    "llm_request",
    "llm_first_token",
    "llm_first_speakable",
    "llm_done",
    "tts_request",
    "tts_first_byte",
    "tts_first_audible",
    "tts_done",
    "output_first_audible",
]


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[AlsaRig]:
    with AlsaRig(tmp_path / "rig", mic_rate=MIC_RATE) as r:
        yield r


def _fixture(fid: str) -> tuple[Any, np.ndarray]:
    """A bundled fixture and its samples at the rig's microphone rate."""
    fx = next(f for f in load_fixtures(default_fixtures_dir()) if f.id == fid)
    pcm = load_for_stage(fx.path, MIC_RATE)
    return fx, np.frombuffer(pcm.samples, dtype="<i2").copy()


class Live:
    """``voicelat live`` in a subprocess, with its stdin as the key channel."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "voicelat", "live", "--no-tui", *args],
            # A session of its own, as the TUI starts its child: no stray terminal signals.
            start_new_session=True,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **env},
            cwd=ROOT,
        )
        self.err: list[str] = []
        self.out: list[str] = []
        self._threads = [
            threading.Thread(target=self._read, args=(self.proc.stderr, self.err), daemon=True),
            threading.Thread(target=self._read, args=(self.proc.stdout, self.out), daemon=True),
        ]
        for t in self._threads:
            t.start()

    @staticmethod
    def _read(stream: IO[str] | None, lines: list[str]) -> None:
        assert stream is not None
        for line in stream:
            lines.append(line.rstrip("\n"))

    def wait_for(self, text: str, timeout: float = 240) -> None:
        deadline = time.monotonic() + timeout
        while not any(text in line for line in self.err):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(
                    f"never printed {text!r} (exit {self.proc.poll()}):\n" + "\n".join(self.err)
                )
            time.sleep(0.05)

    def wait_for_out(self, text: str, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while not any(text in line for line in self.out):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(
                    f"never printed {text!r} on stdout (exit {self.proc.poll()}):\n"
                    + "\n".join(self.err)
                )
            time.sleep(0.05)

    def signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def key(self, keys: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(keys)
        self.proc.stdin.flush()

    def finish(self, timeout: float = 120) -> int:
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            # What the child said is the only clue to where it hung: show it.
            self.proc.send_signal(signal.SIGINT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(10)
            raise AssertionError(
                f"still running after {timeout:.0f} s; its stderr:\n{self.stderr}\n"
                f"its stdout:\n" + "\n".join(self.out[-40:])
            ) from None
        for t in self._threads:
            t.join(5)
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    @property
    def stderr(self) -> str:
        return "\n".join(self.err)


def _stack_env(local_stack: dict[str, Any], rig: AlsaRig) -> dict[str, str]:
    # The rig's HOME hides the model cache: point the stack at it explicitly.
    cache = str(local_stack["config"].cache_dir)
    return {**local_stack["env"], **rig.env, "VOICELAT_CACHE": cache}


# -- no device, no library, bad choices: one line, exit 2, no traceback ------------------------
def test_no_audio_device_at_all_is_one_line_pointing_to_voicelat_run(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".asoundrc").write_text(NO_DEVICE_ASOUNDRC)
    env = {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")}
    live = voicelat("live", "--no-tui", env=env, timeout=60)
    assert live.returncode == 2, live.stderr
    lines = live.stderr.strip().splitlines()
    assert lines == [lines[-1]] and lines[0].startswith("voicelat: error: no audio input device")
    assert "`voicelat run`" in lines[0] and "--input-device" in lines[0]
    devices = voicelat("devices", env=env, timeout=60)
    assert devices.returncode == 2
    assert devices.stderr.strip().startswith("voicelat: error: no audio devices")
    assert "Traceback" not in live.stderr + devices.stderr


def test_without_the_portaudio_library_it_says_what_to_install() -> None:
    # The real sounddevice, on a system where the library lookup finds nothing.
    code = (
        "import ctypes.util, sys\n"
        "ctypes.util.find_library = lambda name: None\n"
        "from voicelat.cli.main import main\n"
        "sys.exit(main(['live', '--no-tui']))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert "cannot load the PortAudio library" in line
    assert "apt-get install libportaudio2" in line and "`voicelat run`" in line


def test_devices_lists_the_rig_with_its_default_rate(rig: AlsaRig) -> None:
    proc = voicelat("devices", env=rig.env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    inputs, outputs = out.split("output devices:")
    assert "default" in inputs and f"{MIC_RATE} Hz" in inputs
    assert "default" in outputs
    assert any(line.lstrip().startswith("*") and "default" in line for line in inputs.splitlines())


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--input-device", "no-such-mic"], "no input device matches 'no-such-mic'"),
        (["--output-device", "99"], "there is no audio device #99"),
        (["--input-rate", "1"], "refuses 1 Hz"),
    ],
)
def test_a_bad_device_choice_is_one_line_before_anything_starts(
    rig: AlsaRig, tmp_path: Path, args: list[str], message: str
) -> None:
    t0 = time.monotonic()
    proc = voicelat("live", "--no-tui", "--out", str(tmp_path / "o"), *args, env=rig.env)
    assert proc.returncode == 2
    assert message in proc.stderr and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("voicelat: error:")
    assert not (tmp_path / "o").exists()  # refused before any result or server
    assert time.monotonic() - t0 < 30


# -- real turns through the local stack -----------------------------------------------------------
@pytest.mark.e2e
@pytest.mark.stack
def test_a_live_turn_lands_in_the_results_and_its_recording_replays(
    local_stack: dict[str, Any], rig: AlsaRig, tmp_path: Path
) -> None:
    fx, samples = _fixture("weather_paris")
    out = tmp_path / "live"
    live = Live(["--warmup", "0", "--record", "--out", str(out)], _stack_env(local_stack, rig))
    try:
        live.wait_for("listening")
        time.sleep(0.5)  # the microphone's first buffers are silence, as in a quiet room
        truth = rig.say(samples)
        live.wait_for_out("live-0001", timeout=120)  # the turn's line
        live.key("q")  # q on stdin: a graceful stop
        code = live.finish(timeout=60)
    finally:
        live.kill()
    assert code == 0, live.stderr
    assert rig.dropped_speech == 0
    assert "Traceback" not in live.stderr
    (turn,) = read_turns(out)
    assert not turn["failed"], turn["failure"]
    m = turn["milestones_ns"]
    # Shown when the test fails (and with -s): the turn against the rig's ground truth.
    end = m["speech_end"]
    print({k: round((v - end) / NS_PER_MS, 1) for k, v in m.items()}, turn["figures"])
    print(
        "truth: speech_end at",
        (truth["start_ns"] + fx.speech_end_ms * NS_PER_MS - turn["t0_ns"] - end) / NS_PER_MS,
        "ms from the measured one",
    )
    assert [k for k in LIVE_MILESTONES if k not in m] == []
    t0 = turn["t0_ns"]
    spoken_end = truth["start_ns"] + fx.speech_end_ms * NS_PER_MS
    spoken_start = truth["start_ns"] + fx.speech_start_ms * NS_PER_MS
    # VAD offsets against the annotation, on the one clock both processes share: the energy
    # VAD's 20 ms frames and a -40 dBFS threshold put them within ~100 ms of the annotated ones.
    assert abs(t0 + m["speech_end"] - spoken_end) < 150 * NS_PER_MS, (m, truth)
    assert abs(t0 + m["speech_start"] - spoken_start) < 150 * NS_PER_MS, (m, truth)
    # The endpoint waits out the hangover (500 ms in pipelines/local.toml), in 20 ms frames.
    assert 480 * NS_PER_MS <= turn["segments_ns"]["endpointing"] <= 620 * NS_PER_MS
    assert sum(turn["segments_ns"].values()) == turn["e2e_ns"]
    figures = turn["figures"]
    assert figures["output_latency_ns"] > 0 and figures["input_latency_ns"] > 0
    # output_first_audible includes the device's output latency after the TTS's first audio
    assert m["output_first_audible"] - m["tts_first_audible"] >= figures["output_latency_ns"]
    # ... and the speaker really played the reply, no earlier than that
    heard = rig.first_played_above(after_ns=t0 + m["tts_first_byte"])
    assert heard is not None
    assert -30 * NS_PER_MS <= heard - (t0 + m["output_first_audible"]) < 400 * NS_PER_MS
    assert wer(fx.text, turn["transcript"]) <= 0.35, turn["transcript"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["run"]["status"] == "complete" and summary["counts"]["turns"] == 1
    assert summary["live"]["input"]["capture_rate"] == MIC_RATE
    assert summary["live"]["input"]["stt_rate"] == 16000
    assert summary["live"]["output"]["playback_rate"] == 22050  # the voice's rate, no resampling

    # --record: the input as a fixture, the reply as audio, a manifest `run` replays
    (fixture,) = load_fixtures(out / "recorded")
    assert fixture.id == turn["fixture"] and fixture.text == turn["transcript"]
    assert fixture.speech_end_ms == m["speech_end"] // NS_PER_MS
    assert (out / "audio" / f"turn-0000-{fixture.id}.wav").stat().st_size > 10_000
    replay = voicelat(
        "run",
        "--no-tui",
        "--fixtures",
        str(out / "recorded"),
        "--warmup",
        "0",
        "--out",
        str(tmp_path / "replay"),
        env=local_stack["env"],
    )
    assert replay.returncode == 0, replay.stderr[-2000:]
    (again,) = read_turns(tmp_path / "replay")
    assert not again["failed"], again["failure"]
    assert wer(fx.text, again["transcript"]) <= 0.35


@pytest.mark.e2e
@pytest.mark.stack
def test_talking_over_the_reply_interrupts_it_and_keeps_it_apart(
    local_stack: dict[str, Any], rig: AlsaRig, tmp_path: Path
) -> None:
    _, first = _fixture("timer_ten_minutes")
    _, second = _fixture("call_mom")
    out = tmp_path / "live"
    live = Live(["--turns", "2", "--warmup", "0", "--out", str(out)], _stack_env(local_stack, rig))
    try:
        live.wait_for("listening")
        truth = rig.say(first)
        rig.wait_said(truth)
        # Barge in as soon as the reply is heard.
        deadline = time.monotonic() + 60
        while rig.first_played_above(after_ns=truth["end_ns"]) is None:
            assert time.monotonic() < deadline, live.stderr
            time.sleep(0.02)
        barge = rig.say(second)
        code = live.finish(timeout=120)
    finally:
        live.kill()
    assert code == 0, live.stderr
    one, two = sorted(read_turns(out), key=lambda t: t["index"])
    assert "interrupted" in one["flags"]
    # the reply was audible before the user spoke over it: a measured e2e, just not a headline one
    assert one["e2e_ns"] is not None and not one["failed"]
    # the speaker went quiet soon after the barge-in speech began (VAD onset + one buffer),
    # and stayed quiet until the second reply
    spoken = barge["start_ns"] + 350 * NS_PER_MS  # the clip's speech starts ~350 ms in
    second_reply = two["t0_ns"] + two["milestones_ns"]["output_first_audible"]
    assert (
        rig.first_played_above(
            after_ns=spoken + 500 * NS_PER_MS, before_ns=second_reply - 50 * NS_PER_MS
        )
        is None
    )
    assert not two["failed"], two["failure"]
    assert "interrupted" not in two["flags"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["counts"]["interrupted"] == 1
    assert summary["counts"]["headline"] <= 1  # turn one never counts (turn two may be cold)


@pytest.mark.e2e
@pytest.mark.stack
def test_a_microphone_that_stops_mid_session_ends_it_cleanly(
    local_stack: dict[str, Any], rig: AlsaRig, tmp_path: Path
) -> None:
    out = tmp_path / "live"
    live = Live(["--out", str(out)], _stack_env(local_stack, rig))
    try:
        live.wait_for("listening")
        rig.stall.set()  # the device stops delivering (an unplugged USB microphone stalls so)
        code = live.finish(timeout=60)
    finally:
        live.kill()
    assert code == 2
    last = live.err[-1]
    assert last.startswith("voicelat: error: input device") and "stopped delivering audio" in last
    assert "saved in" in last and "Traceback" not in live.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["run"]["status"] == "failed"
    assert "stopped delivering audio" in summary["live"]["error"]


@pytest.mark.e2e
@pytest.mark.stack
def test_the_tui_child_streams_events_and_takes_push_to_talk_as_signals(
    local_stack: dict[str, Any], rig: AlsaRig, tmp_path: Path
) -> None:
    """``live --tui`` measures in a child (``live --no-tui --events jsonl``): its observer
    calls are JSON lines on stdout and the TUI's keys reach it as signals (SIGUSR1 is the
    push-to-talk key). This is that child, driven as the TUI drives it."""
    fx, samples = _fixture("book_table")
    out = tmp_path / "live"
    args = ["--events", "jsonl", "--ptt", "--turns", "1", "--warmup", "0", "--out", str(out)]
    live = Live(args, _stack_env(local_stack, rig))
    try:
        live.wait_for("listening")
        live.signal(signal.SIGUSR1)  # press: talk
        truth = rig.say(samples)
        rig.wait_said(truth)
        live.signal(signal.SIGUSR1)  # press again: the turn is over
        code = live.finish(timeout=120)
    finally:
        live.kill()
    assert code == 0, live.stderr
    events = [json.loads(line) for line in live.out if line.strip()]
    kinds = [e["event"] for e in events]
    assert kinds[0] == "turn_started" and kinds[-2:] == ["turn_finished", "summary"]
    # announced again at the endpoint, once speech_end (the timeline's zero) is known
    starts = [e for e in events if e["event"] == "turn_started"]
    assert [s["speech_end_ns"] is None for s in starts] == [True, False]
    after = kinds[kinds.index("turn_started", 1) + 1]
    assert after == "milestone" and events[kinds.index("turn_started", 1) + 1]["name"] == "endpoint"
    turn = events[kinds.index("turn_finished")]["turn"]
    assert not turn["failed"], turn["failure"]
    assert starts[1]["speech_end_ns"] == turn["milestones_ns"]["speech_end"]
    # push-to-talk: speech_end is the VAD's, the endpoint the second press, which came when
    # the clip (with its trailing silence) had been said
    m = turn["milestones_ns"]
    spoken_end = truth["start_ns"] + fx.speech_end_ms * NS_PER_MS
    assert abs(turn["t0_ns"] + m["speech_end"] - spoken_end) < 150 * NS_PER_MS
    released = truth["end_ns"] - (turn["t0_ns"] + m["endpoint"])
    assert -20 * NS_PER_MS < released < 200 * NS_PER_MS
    assert json.loads((out / "summary.json").read_text())["live"]["ptt"] is True


@pytest.mark.stack
def test_an_unpaced_file_or_null_device_is_refused_not_measured(
    local_stack: dict[str, Any], tmp_path: Path
) -> None:
    """ALSA's file and null devices deliver and take audio as fast as they are asked:
    timestamps from them would be nonsense, so live mode stops with one line."""
    with AlsaRig(tmp_path / "rig", paced=False) as unpaced:
        out = tmp_path / "live"
        live = Live(["--out", str(out)], _stack_env(local_stack, unpaced))
        try:
            code = live.finish(timeout=120)
        finally:
            live.kill()
    assert code == 2, live.stderr
    last = live.err[-1]
    assert last.startswith("voicelat: error: input device") and "faster than real time" in last
    assert "Traceback" not in live.stderr
    assert json.loads((out / "summary.json").read_text())["run"]["status"] == "failed"


@pytest.mark.e2e
@pytest.mark.stack
def test_an_unpaced_speaker_is_refused_at_the_first_reply(
    local_stack: dict[str, Any], tmp_path: Path
) -> None:
    _, samples = _fixture("call_mom")
    with AlsaRig(tmp_path / "rig", mic_rate=MIC_RATE, null_speaker=True) as rig:
        out = tmp_path / "live"
        live = Live(["--out", str(out)], _stack_env(local_stack, rig))
        try:
            live.wait_for("listening")
            rig.say(samples)
            code = live.finish(timeout=120)
        finally:
            live.kill()
    assert code == 2, live.stderr
    last = live.err[-1]
    assert last.startswith("voicelat: error: output device") and "faster than real time" in last
    assert "Traceback" not in live.stderr
