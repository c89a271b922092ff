"""Fixed-length framing and levels.

Levels are dBFS relative to int16 full scale (32768): a full-scale square wave is 0 dBFS, a
full-scale sine about -3 dBFS, digital silence ``-inf``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from voicelat.audio.wav import PCM
from voicelat.core.base.errors import AudioError

FULL_SCALE = 32768.0
_FULL_SCALE_DB = 20.0 * math.log10(FULL_SCALE)


def frame_samples(rate: int, frame_ms: int = 20) -> int:
    """Samples in one ``frame_ms`` frame at ``rate`` (it must be a whole number of samples)."""
    if frame_ms <= 0 or rate <= 0:
        raise AudioError(f"invalid framing {frame_ms} ms at {rate} Hz: both must be positive")
    if (rate * frame_ms) % 1000:
        # A fractional frame would make the pacer drift against the audio it sends.
        raise AudioError(
            f"a {frame_ms} ms frame is not a whole number of samples at {rate} Hz; "
            "resample to 8/16/22.05/24/44.1/48 kHz or pick another frame length"
        )
    return rate * frame_ms // 1000


def frames(pcm: PCM, frame_ms: int = 20) -> list[bytes]:
    """Split ``pcm`` into ``frame_ms`` frames of int16 bytes; the last one is zero-padded."""
    size = frame_samples(pcm.rate, frame_ms) * 2
    data = pcm.samples
    out = [data[i : i + size] for i in range(0, len(data), size)]
    if out and len(out[-1]) < size:
        out[-1] = out[-1] + bytes(size - len(out[-1]))
    return out


def rms_dbfs(samples: npt.NDArray[Any]) -> float:
    """RMS level in dBFS of samples in int16 units (any dtype); ``-inf`` for silence or none."""
    x = np.asarray(samples, dtype=np.float64).reshape(-1)
    if x.size == 0:
        return -math.inf
    mean_square = float(np.dot(x, x)) / x.size
    if mean_square <= 0.0:
        return -math.inf
    return 10.0 * math.log10(mean_square) - _FULL_SCALE_DB


def bytes_dbfs(frame: bytes) -> float:
    """:func:`rms_dbfs` of int16 little-endian bytes (a trailing odd byte is ignored)."""
    return rms_dbfs(np.frombuffer(frame, dtype="<i2", count=len(frame) // 2))
