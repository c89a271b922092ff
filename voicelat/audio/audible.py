"""Which samples of a stream are audible: runs of loud windows, found as the audio is fed.

A barge-in is timed to the agent's *last audible* sample, and a backchannel's false barge-in
is a pause in the agent's audible speech (``core/calls/bargein.py``): the sink keeps, per reply,
the runs of ``window_ms`` windows above the onset threshold (the same level as the onset
detector's), in sample indexes of the fed stream; the sink turns them into play times.
"""

from __future__ import annotations

import numpy as np

from voicelat.audio.frames import FULL_SCALE

__all__ = ["AudibleRuns"]


class AudibleRuns:
    """Runs ``[first, end)`` of audible samples in a stream of int16 mono bytes."""

    def __init__(self, rate: int, threshold_dbfs: float = -40.0, window_ms: int = 10) -> None:
        self.window = max(1, rate * window_ms // 1000)
        level = FULL_SCALE * 10.0 ** (threshold_dbfs / 20.0)
        self._mean_square = level * level
        self._pending = bytearray()
        self._done = 0  # samples in the windows already judged
        self.runs: list[list[int]] = []

    def feed(self, pcm: bytes) -> None:
        """Judge the complete windows of ``pcm`` (appended to what came before)."""
        self._pending += pcm
        wbytes = self.window * 2
        n = len(self._pending) // wbytes
        if n == 0:
            return
        x = np.frombuffer(bytes(self._pending[: n * wbytes]), dtype="<i2").astype(np.float64)
        loud = np.einsum("ij,ij->i", x.reshape(n, self.window), x.reshape(n, self.window))
        hits = np.flatnonzero(loud / self.window > self._mean_square)
        del self._pending[: n * wbytes]
        for w in hits.tolist():
            first = self._done + w * self.window
            if self.runs and self.runs[-1][1] == first:
                self.runs[-1][1] = first + self.window
            else:
                self.runs.append([first, first + self.window])
        self._done += n * self.window

    def clipped(self, played: int) -> list[tuple[int, int]]:
        """The runs within the first ``played`` samples (what actually played)."""
        out = []
        for first, end in self.runs:
            if first >= played:
                break
            out.append((first, min(end, played)))
        return out
