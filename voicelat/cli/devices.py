"""``voicelat devices``: the audio input and output devices ``voicelat live`` can use.

It needs PortAudio (``pip install 'voicelat[live]'`` plus the system library); no device is one
line and exit code 2.
"""

from __future__ import annotations

import argparse
from typing import Any

from voicelat.core.base.errors import EXIT_OK, AudioError

__all__ = ["add_parser", "cmd_devices"]


def add_parser(subparsers: Any) -> None:
    """Register ``devices`` on the ``voicelat`` command's subparsers."""
    devices: argparse.ArgumentParser = subparsers.add_parser(
        "devices",
        help="list the audio input and output devices (for `voicelat live`)",
        description="List PortAudio's input and output devices with their default rates; "
        "* marks the defaults. Exit code 2 when there is none.",
    )
    devices.set_defaults(func=cmd_devices)


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
