"""``voicelat live``: microphone in, speaker out, every turn measured (``voicelat devices``
lists the devices: ``cli/devices.py``; ``live --tui`` is ``cli/live_tui.py``).

It needs PortAudio (``pip install 'voicelat[live]'`` plus the system library); every device
problem is one line and exit code 2, and says that ``voicelat run`` replays fixtures without
any device. Bad input is refused before any server starts.

Keys: ``q`` stops (finished turns are kept, the summary is written, devices closed and the
servers this command started stopped); with ``--ptt``, space (or Enter without the TUI)
toggles talking. Without the TUI the keys are read from stdin.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from voicelat.cli.live_args import add_live_arguments
from voicelat.cli.live_terminal import Keys, LivePrinter, SpeechEndAnnouncer
from voicelat.core.base.errors import EXIT_OK
from voicelat.core.summaries.run_summary import RunSummary
from voicelat.engine.progress import stderr_progress as _info

if TYPE_CHECKING:
    from voicelat.engine.live import LiveSession

__all__ = ["add_live_arguments", "add_parser", "cmd_live"]


def add_parser(subparsers: Any) -> None:
    """Register ``live`` on the ``voicelat`` command's subparsers."""
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


# -- live -----------------------------------------------------------------------------------
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
            from voicelat.cli.live_tui import run_tui

            return run_tui(args, pipeline, out_dir, ptt)
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
    keys = Keys(session, ptt)
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
