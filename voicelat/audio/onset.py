"""First-audible-sample detection, streaming over arbitrary chunks.

Rule (deterministic, independent of how the stream is chunked):

1. The stream is cut into consecutive windows of ``window_ms`` (``rate * window_ms // 1000``
   samples, at least 1) counted from the first sample fed.
2. The first window whose RMS is strictly above ``threshold_dbfs`` (dBFS re 32768) is the
   audible window.
3. The onset is the first sample in that window whose absolute value is strictly above the
   threshold's own amplitude, ``32768 * 10 ** (threshold_dbfs / 20)`` (327.68, i.e. 1 % of full
   scale, at -40 dBFS). Such a sample always exists: a window's peak is at least its RMS.

So the answer is never earlier than the audible window and at most one window late for a hard
onset. Detection needs the whole window, so it can come up to one window after the sample
arrived; :meth:`OnsetDetector.flush` judges a final partial window at the end of a stream.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from voicelat.audio.frames import FULL_SCALE
from voicelat.audio.wav import PCM


class OnsetDetector:
    """Streaming onset detector; the rate comes from the constructor or the first :meth:`feed`."""

    def __init__(
        self, threshold_dbfs: float = -40.0, window_ms: int = 10, *, rate: int | None = None
    ) -> None:
        if window_ms <= 0:
            raise ValueError("window_ms must be positive")
        self.threshold_dbfs = threshold_dbfs
        self.window_ms = window_ms
        self.level = FULL_SCALE * 10.0 ** (threshold_dbfs / 20.0)
        self._mean_square = self.level * self.level
        self.rate: int | None = None
        self.window = 0
        if rate is not None:
            self._set_rate(rate)
        self._pending = bytearray()  # bytes of the incomplete window (and a split sample)
        self._done_samples = 0  # samples in the complete windows already judged
        self.onset: int | None = None

    def _set_rate(self, rate: int) -> None:
        if rate <= 0:
            raise ValueError(f"invalid sample rate {rate}")
        self.rate = rate
        self.window = max(1, rate * self.window_ms // 1000)

    def feed(self, pcm_bytes: bytes, rate: int | None = None) -> int | None:
        """Add int16 mono bytes; returns the onset sample index once found (and from then on)."""
        if self.onset is not None:
            return self.onset
        if self.rate is None:
            if rate is None:
                raise ValueError("OnsetDetector needs the sample rate (constructor or first feed)")
            self._set_rate(rate)
        elif rate is not None and rate != self.rate:
            raise ValueError(f"sample rate changed from {self.rate} to {rate} Hz mid-stream")
        self._pending += pcm_bytes
        wbytes = self.window * 2
        n_win = len(self._pending) // wbytes
        if n_win == 0:
            return None
        block = np.frombuffer(bytes(self._pending[: n_win * wbytes]), dtype="<i2")
        x = block.astype(np.float64).reshape(n_win, self.window)
        hits = np.flatnonzero(np.einsum("ij,ij->i", x, x) / self.window > self._mean_square)
        if hits.size:
            w = int(hits[0])
            self.onset = self._done_samples + w * self.window + self._first_loud(x[w])
            self._pending.clear()
            return self.onset
        del self._pending[: n_win * wbytes]
        self._done_samples += n_win * self.window
        return None

    def flush(self) -> int | None:
        """End of stream: judge the partial window left over (over the samples it has)."""
        if self.onset is not None or len(self._pending) < 2:
            return self.onset
        x = np.frombuffer(bytes(self._pending), dtype="<i2", count=len(self._pending) // 2)
        xf = x.astype(np.float64)
        if float(np.dot(xf, xf)) / xf.size > self._mean_square:
            self.onset = self._done_samples + self._first_loud(xf)
        return self.onset

    def _first_loud(self, x: npt.NDArray[np.float64]) -> int:
        return int(np.argmax(np.abs(x) > self.level))


def first_audible_sample(
    pcm: PCM, threshold_dbfs: float = -40.0, window_ms: int = 10
) -> int | None:
    """The onset (see the module rule) of a whole buffer, or None when nothing is audible."""
    det = OnsetDetector(threshold_dbfs, window_ms, rate=pcm.rate)
    found = det.feed(pcm.samples)
    return found if found is not None else det.flush()
