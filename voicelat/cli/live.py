"""``voicelat live`` (microphone in, speaker out, every turn measured) and ``voicelat devices``.

Both need PortAudio (``pip install 'voicelat[live]'`` plus the system library); every device
problem is one line and exit code 2, and says that ``voicelat run`` replays fixtures without
any device. Bad input is refused before any server starts.

Keys: ``q`` stops (finished turns are kept, the summary is written, devices closed and the
servers this command started stopped); with ``--ptt``, space (or Enter without the TUI)
toggles talking. Without the TUI the keys are read from stdin.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from voicelat.core.errors import EXIT_INTERRUPTED, EXIT_OK, AudioError, VoicelatError
from voicelat.core.plan import PlannedTurn
from voicelat.core.run_summary import RunSummary
from voicelat.core.turn import Turn
from voicelat.engine.progress import stderr_progress as _info

if TYPE_CHECKING:
    from voicelat.engine.live import LiveSession

__all__ = ["SpeechEndAnnouncer", "add_live_arguments", "add_parser", "cmd_devices", "cmd_live"]


def _latency(value: str) -> str | float:
    if value in ("low", "high"):
        return value
    try:
        seconds = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not low, high or a number of seconds"
        ) from None
    if not 0 < seconds < 2:
        raise argparse.ArgumentTypeError(f"{value} s is not a device latency (0 < s < 2)")
    return seconds


def _count(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not an integer") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"{value} cannot be negative")
    return n


def _positive(value: str) -> int:
    n = _count(value)
    if n < 1:
        raise argparse.ArgumentTypeError(f"{value} must be at least 1")
    return n


def add_live_arguments(live: argparse.ArgumentParser) -> None:
    """The options of ``voicelat live`` (also rebuilt to forward them to the TUI's child)."""
    live.add_argument(
        "--pipeline", "-p", type=Path, help="pipeline TOML file (default: the embedded local stack)"
    )
    live.add_argument(
        "--input-device",
        metavar="D",
        help="microphone: index or part of the name (see `voicelat devices`; default: the default)",
    )
    live.add_argument(
        "--output-device",
        metavar="D",
        help="speaker: index or part of the name (see `voicelat devices`; default: the default)",
    )
    live.add_argument(
        "--input-rate",
        type=_positive,
        metavar="HZ",
        help="capture rate (default: the input device's default rate; resampled for STT)",
    )
    live.add_argument(
        "--latency",
        type=_latency,
        default="low",
        metavar="low|high|SEC",
        help="PortAudio latency asked of both devices (default low; what they grant is recorded)",
    )
    live.add_argument(
        "--tui",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="show the live terminal UI (default: when stdout is a terminal)",
    )
    live.add_argument(
        "--ptt",
        action="store_true",
        help="push-to-talk instead of the VAD: space (Enter without the TUI) starts talking, "
        "the next press ends the turn",
    )
    live.add_argument(
        "--no-barge-in",
        dest="barge_in",
        action="store_false",
        help="speech during a reply does not interrupt it (for a speaker without echo "
        "cancellation: the microphone would hear the reply)",
    )
    live.add_argument(
        "--record",
        action="store_true",
        help="save every turn's input (RUN_DIR/recorded, with a fixtures manifest for "
        "`voicelat run --fixtures`) and reply audio (RUN_DIR/audio)",
    )
    live.add_argument(
        "--warmup",
        "-w",
        type=_count,
        default=1,
        help="first turns that warm the servers up, kept apart from the headline (default 1)",
    )
    live.add_argument(
        "--turns", "-n", type=_positive, help="stop after this many finished turns (default: q)"
    )
    live.add_argument(
        "--out", "-o", type=Path, help="results directory (default: runs/<time>-<pipeline>-live)"
    )
    # Internal: `live --tui` measures in a child process with this flag (voicelat.tui.protocol).
    live.add_argument("--events", choices=("jsonl",), default=None, help=argparse.SUPPRESS)


def add_parser(subparsers: Any) -> None:
    """Register ``live`` and ``devices`` on the ``voicelat`` command's subparsers."""
    live: argparse.ArgumentParser = subparsers.add_parser(
        "live",
        help="profile a live conversation: microphone in, the reply through the speaker",
        description=(
            "Talk to the pipeline: each turn is cut by the VAD (or push-to-talk), runs "
            "STT -> LLM -> TTS, plays through the speaker and is measured like a fixture turn "
            "(speech_end and the endpoint from the VAD, output_first_audible including the "
            "device's output latency). Speaking over a reply interrupts it (barge-in); such "
            "turns are kept apart from the headline numbers. q stops; finished turns are kept. "
            "Needs PortAudio: `voicelat run` replays fixtures without any device."
        ),
    )
    add_live_arguments(live)
    live.set_defaults(func=cmd_live)

    devices: argparse.ArgumentParser = subparsers.add_parser(
        "devices",
        help="list the audio input and output devices (for `voicelat live`)",
        description="List PortAudio's input and output devices with their default rates; "
        "* marks the defaults. Exit code 2 when there is none.",
    )
    devices.set_defaults(func=cmd_devices)


# -- devices --------------------------------------------------------------------------------
def cmd_devices(args: argparse.Namespace) -> int:
    """Print the devices ``--input-device`` / ``--output-device`` can name."""
    from voicelat.audio.device import NO_DEVICE_HINT, list_devices, load_sounddevice

    devices = list_devices(load_sounddevice())
    if not devices:
        raise AudioError(
            f"no audio devices: PortAudio finds none on this machine (no sound card?); {NO_DEVICE_HINT}"
        )
    width = max(len(d.name) for d in devices)
    for kind in ("input", "output"):
        print(f"{kind} devices:")
        found = [d for d in devices if d.has(kind)]
        if not found:
            print("  (none)")
        for d in found:
            default = d.default_input if kind == "input" else d.default_output
            channels = d.max_input_channels if kind == "input" else d.max_output_channels
            print(
                f"  {'*' if default else ' '} {d.index:>3}  {d.name:<{width}}  "
                f"{d.default_samplerate:>6} Hz  {channels:>3} ch  {d.hostapi}"
            )
    print("* default; pick with --input-device / --output-device (an index or part of a name)")
    return EXIT_OK


# -- live -----------------------------------------------------------------------------------
class LivePrinter:
    """The observer without the TUI: a line per turn on stdout, progress on stderr."""

    def __init__(self, ptt: bool) -> None:
        self.ptt = ptt

    def turn_started(self, planned: PlannedTurn, total: int) -> None:
        what = "talking" if self.ptt else "speech heard"
        _info(f"turn {planned.index + 1}: {what} ...")

    def milestone(self, index: int, name: str, t_rel_ns: int) -> None:
        return None

    def turn_finished(self, turn: Turn, total: int) -> None:
        from voicelat.report.text import turn_line

        print(turn_line(turn, total), flush=True)


class _Keys:
    """Keys from stdin without the TUI: q stops, space/Enter is push-to-talk.

    A terminal is put in cbreak mode (keys arrive without Enter; Ctrl-C still interrupts)
    and restored on exit; a pipe works too (tests drive a session through it).
    """

    def __init__(self, session: LiveSession, ptt: bool) -> None:
        self.session = session
        self.ptt = ptt
        self._fd: int | None = None
        self._saved: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def install(self) -> None:
        """On the session's loop, once it listens."""
        try:
            fd = sys.stdin.fileno()
        except (AttributeError, OSError, ValueError):
            return
        if os.isatty(fd):
            import termios
            import tty

            with contextlib.suppress(termios.error):
                self._saved = termios.tcgetattr(fd)
                tty.setcbreak(fd)
        loop = asyncio.get_running_loop()
        try:
            loop.add_reader(fd, self._read)
        except (OSError, ValueError, NotImplementedError):
            return  # a regular file or /dev/null: no keys, q is Ctrl-C
        self._fd, self._loop = fd, loop

    def _read(self) -> None:
        assert self._fd is not None and self._loop is not None
        try:
            data = os.read(self._fd, 256)
        except OSError:
            data = b""
        if not data:
            self._loop.remove_reader(self._fd)
            return
        for ch in data.decode("utf-8", "ignore"):
            if ch in "qQ":
                self.session.request_stop()
            elif ch in " \r\n" and self.ptt:
                self.session.press()

    def restore(self) -> None:
        """Give the terminal back as it was."""
        if self._saved is not None:
            import termios

            with contextlib.suppress(termios.error, OSError):
                termios.tcsetattr(sys.stdin.fileno(), termios.TCSADRAIN, self._saved)
            self._saved = None


def cmd_live(args: argparse.Namespace) -> int:
    """Set everything up (refusing bad input before any server starts), then run the session."""
    from voicelat.engine.job import default_out_dir, with_stack_urls
    from voicelat.engine.stageset import StageSet
    from voicelat.files.pipeline import default_pipeline_path, load_pipeline
    from voicelat.files.results import check_out_dir

    pipeline = load_pipeline(args.pipeline or default_pipeline_path())
    devices = _open_devices(args)
    out_dir = args.out or default_out_dir(pipeline, "live")
    check_out_dir(out_dir)
    pipeline = with_stack_urls(pipeline, _info)
    # Stage options are checked now, not after the stack's start-up.
    stt_rate = StageSet.from_pipeline(pipeline).input_rate
    ptt = bool(args.ptt)
    _info(
        f"pipeline {pipeline.name}; microphone {devices.mic.label} at {devices.rate} Hz "
        f"(STT {stt_rate} Hz), speaker {devices.speaker.label}; results -> {out_dir}"
    )
    events = getattr(args, "events", None)
    if not events:
        from voicelat.cli.tui_child import want_tui

        if want_tui(args):
            # Measured in a child process, as `run --tui`: the UI cannot delay a timestamp.
            return _run_tui(args, pipeline, out_dir, ptt)
    session = _session(args, pipeline, out_dir, devices, stt_rate)
    _signals(session)
    if events:
        # The measuring child of `live --tui`: observer calls go out as JSON lines on stdout;
        # the keys come as signals (its stdin is not the terminal).
        from voicelat.tui.protocol import event_stream, recorded_argv

        session.runner.argv = recorded_argv(sys.argv)
        with event_stream([], out_dir) as observer:
            session.observer = session.runner.observer = SpeechEndAnnouncer(observer, session)
            _run(session, pipeline, out_dir)
        return EXIT_OK
    session.observer = session.runner.observer = LivePrinter(ptt)
    keys = _Keys(session, ptt)
    session.on_listening(keys.install)
    try:
        outcome = _run(session, pipeline, out_dir)
    finally:
        keys.restore()
    from voicelat.report.text import summary_table

    print()
    print(summary_table(outcome.summary, str(out_dir)))
    _after(outcome, out_dir)
    return EXIT_OK


@dataclass(frozen=True)
class _Devices:
    """The devices ``live`` was asked for, checked (not yet capturing)."""

    sd: Any
    mic: Any
    speaker: Any
    rate: int
    output: Any


def _open_devices(args: argparse.Namespace) -> _Devices:
    """Resolve and check the microphone and the speaker: any problem is one line, exit 2."""
    from voicelat.audio.device import (
        OutputDevice,
        check_rate,
        list_devices,
        load_sounddevice,
        resolve_device,
    )

    sd = load_sounddevice()
    devices = list_devices(sd)
    mic = resolve_device(devices, args.input_device, "input")
    speaker = resolve_device(devices, args.output_device, "output")
    rate = args.input_rate or mic.default_samplerate
    check_rate(sd, mic, rate, "input")
    output = OutputDevice(sd, speaker, latency=args.latency)
    output.validate()
    return _Devices(sd, mic, speaker, rate, output)


def _session(
    args: argparse.Namespace, pipeline: Any, out_dir: Path, devices: _Devices, stt_rate: int
) -> LiveSession:
    from voicelat.audio.device import InputDevice
    from voicelat.engine.live import DeviceInput, DeviceOutput, LiveOptions, LiveSession

    mic = InputDevice(devices.sd, devices.mic, devices.rate, latency=args.latency)
    session = LiveSession(
        pipeline,
        out_dir,
        DeviceInput(mic, stt_rate),
        DeviceOutput(devices.output),
        options=LiveOptions(
            ptt=bool(args.ptt),
            barge_in=bool(args.barge_in),
            warmup=args.warmup,
            record=bool(args.record),
            turns=args.turns,
        ),
        argv=sys.argv,
    )
    talk = (
        "press space (or Enter) to talk, again to end the turn"
        if args.ptt
        else "speak; a pause ends the turn"
    )
    session.on_listening(lambda: _info(f"listening: {talk}; q or Ctrl-C stops"))
    return session


def _signals(session: LiveSession) -> None:
    """SIGUSR1 is the push-to-talk key and SIGUSR2 a graceful stop (q): how the TUI process
    reaches its measuring child. Installed before the stack starts, so an early q is not the
    signal's default action (which would kill the session before it wrote anything)."""
    signal.signal(signal.SIGUSR1, lambda *_: session.press())
    signal.signal(signal.SIGUSR2, lambda *_: session.request_stop())


def _run(session: LiveSession, pipeline: Any, out_dir: Path) -> Any:
    from voicelat.engine.job import stack_for

    with stack_for(pipeline) as stack_info:
        session.runner.stack_info = stack_info
        try:
            return asyncio.run(session.run())
        except KeyboardInterrupt:
            _info(
                f"interrupted: {len(session.turns)} finished turn(s) kept, summary written "
                f"to {out_dir}"
            )
            raise


def _after(outcome: Any, out_dir: Path) -> None:
    if outcome.recorded:
        _info(
            f"recorded {len(outcome.recorded)} turn(s) as fixtures in {out_dir / 'recorded'}: "
            f"replay them with `voicelat run --fixtures {out_dir / 'recorded'}`"
        )
    if outcome.turns and RunSummary.coerce(outcome.summary).counts.headline == 0:
        _info(
            "note: no turn in the headline (warm-up, cold, failed and interrupted turns are "
            "kept apart); talk a little longer"
        )


def forwarded_options(args: argparse.Namespace) -> list[str]:
    """The ``live`` options in ``args`` that differ from their defaults, as words for the
    measuring child (rebuilt from :func:`add_live_arguments`, so none is forgotten)."""
    probe = argparse.ArgumentParser(add_help=False)
    add_live_arguments(probe)
    words: list[str] = []
    for action in probe._actions:
        if not action.option_strings or action.dest in ("tui", "events", "out", "help"):
            continue
        value = getattr(args, action.dest, action.default)
        if value is None or value == action.default:
            continue
        opt = next(o for o in action.option_strings if o.startswith("--"))
        if action.nargs == 0:  # store_true / store_false
            words.append(opt)
        else:
            words.append(f"{opt}={value}")
    return words


def _run_tui(args: argparse.Namespace, pipeline: Any, out_dir: Path, ptt: bool) -> int:
    """The TUI here, the session in a child process (``live --no-tui --events jsonl``)."""
    import json

    from voicelat.files.results import load_run
    from voicelat.tui.app import VoicelatApp
    from voicelat.tui.live import ChildRun, live_model
    from voicelat.tui.protocol import ARGV_ENV, EVENTS_FORMAT

    command = [
        sys.executable,
        "-m",
        "voicelat",
        "live",
        "--no-tui",
        "--events",
        EVENTS_FORMAT,
        *forwarded_options(args),
        f"--out={out_dir}",
    ]
    env = {**os.environ, ARGV_ENV: json.dumps(list(sys.argv))}
    child = _child_class(ChildRun)(command, env=env)
    model = live_model(pipeline, out_dir, 0)
    model.planned = None
    app = _app_class(VoicelatApp, ptt)(model, controller=child)
    try:
        app.run()
    finally:
        # However the app ended (q, a crash), the child stops cleanly before this returns.
        child.stop_and_wait()
    summary: dict[str, Any] | None = None
    with contextlib.suppress(VoicelatError):
        summary = load_run(out_dir).summary
    if summary is not None:
        from voicelat.report.text import summary_table

        print(summary_table(summary, str(out_dir)))
        if (out_dir / "recorded" / "manifest.json").exists():
            _info(
                f"recorded fixtures: replay with `voicelat run --fixtures {out_dir / 'recorded'}`"
            )
    if child.status == "interrupted":
        _info(f"interrupted: finished turns kept, summary written to {out_dir}")
        return EXIT_INTERRUPTED
    if child.status == "failed":
        raise VoicelatError(
            child.message or "the measuring process failed", exit_code=child.exit_code
        )
    return EXIT_OK


def _child_class(base: Any) -> Any:
    """``ChildRun`` for a live session: q is a graceful stop (SIGUSR2: the session ends as it
    does with q in a terminal, exit 0), the push-to-talk key is SIGUSR1. A second stop (the
    user insists, or Ctrl-C while waiting) is SIGINT, as for ``run``."""

    class LiveChild(base):  # type: ignore[misc]
        def request_stop(self) -> None:
            if not getattr(self, "stop_sent", False):
                self._send(signal.SIGUSR2)
                self.stop_sent = True

        def press(self) -> None:
            self._send(signal.SIGUSR1)

        def _send(self, sig: int) -> None:
            proc = self.proc
            if proc is None or self.done or proc.poll() is not None:
                return
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(sig)

    return LiveChild


def _app_class(base: Any, ptt: bool) -> Any:
    """The run TUI, plus the push-to-talk key when asked for."""
    if not ptt:
        return base
    from textual.binding import Binding

    # Textual finds a relative CSS_PATH beside the module that defines the class: this one
    # lives here, so point at the base app's stylesheet explicitly.
    css = Path(sys.modules[base.__module__].__file__ or ".").parent / str(base.CSS_PATH)

    class LiveApp(base):  # type: ignore[misc]
        CSS_PATH = str(css)
        BINDINGS: ClassVar[list[Any]] = [
            *base.BINDINGS,
            Binding("space", "talk", "Talk (push-to-talk)", priority=True),
        ]

        def action_talk(self) -> None:
            """Push-to-talk: start talking, or end the turn."""
            self.controller.press()

    return LiveApp


class SpeechEndAnnouncer:
    """An observer wrapper for the TUI's event stream: a live turn's ``speech_end`` (the
    live timeline's zero) is known only at its endpoint, so the turn is announced again
    then, with it, just before the endpoint milestone (the first one a turn reports)."""

    def __init__(self, inner: Any, session: LiveSession) -> None:
        self.inner = inner
        self.session = session
        self._planned: dict[int, tuple[PlannedTurn, int]] = {}

    def turn_started(self, planned: PlannedTurn, total: int) -> None:
        self._planned[planned.index] = (planned, total)
        self.inner.turn_started(planned, total)

    def milestone(self, index: int, name: str, t_rel_ns: int) -> None:
        if name == "endpoint" and index in self._planned:
            end = self.session.speech_end_rel_ns(index)
            ends = getattr(self.inner, "speech_end_ns", None)
            if end is not None and isinstance(ends, dict):
                planned, total = self._planned[index]
                ends[planned.fixture] = end
                self.inner.turn_started(planned, total)
        self.inner.milestone(index, name, t_rel_ns)

    def turn_finished(self, turn: Turn, total: int) -> None:
        self._planned.pop(turn.index, None)
        self.inner.turn_finished(turn, total)
