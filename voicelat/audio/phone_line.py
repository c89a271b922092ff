"""A telephone leg's audio: down to 8 kHz, G.711 mu-law, lost 20 ms frames concealed, back up.

:class:`StreamResampler` is ``audio/resample.py``'s Kaiser-windowed sinc (the same kernel:
flat to ~0.8 of the lower Nyquist, at least 75 dB down from ~0.975 of it) run as a stream:
each chunk gives out every output sample whose kernel window the input already covers, and
:meth:`StreamResampler.flush` the rest. Chunk by chunk and then flushed it equals
:func:`~voicelat.audio.resample.resample_array` over the whole input. Its cost is the
*lookahead*: an output sample needs ``k`` input samples past it (~4.5 ms of audio whatever the
rates, ``ZERO_CROSSINGS / (2 x ROLLOFF x lower Nyquist)``), so a stream paced at real time
comes out that much later.

:class:`PhoneTranscoder` is the leg: ``rate -> 8 kHz`` (the carrier's band), mu-law encode and
decode (``audio/mulaw.py``: the quantisation a G.711 call hears), then the carrier's packet
loss on 20 ms frames (160 samples) with **concealment by repetition**: a lost frame is the last
received frame played again; a second lost frame in a row is silence (a repeated frame
repeated again buzzes; G.711 Appendix I also fades out and mutes a long loss), then
``8 kHz -> rate`` for the sink. Its added latency, :attr:`PhoneTranscoder.lookahead_ns`, is
the two resamplers' lookahead (~9 ms).

:func:`conceal_frames` is the same concealment on a list of frames (the caller's leg, whose
20 ms frames are already cut).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from voicelat.audio.mulaw import mulaw_to_pcm16, pcm16_to_mulaw
from voicelat.audio.resample import KAISER_BETA, ROLLOFF, ZERO_CROSSINGS
from voicelat.audio.wav import PCM

__all__ = [
    "PHONE_FRAME_SAMPLES",
    "PHONE_RATE",
    "PhoneTranscoder",
    "StreamResampler",
    "conceal_frames",
    "transcode",
]

NS_PER_S = 1_000_000_000
#: The carrier's sample rate (G.711).
PHONE_RATE = 8000
#: One 20 ms G.711 frame (an RTP packet's payload).
PHONE_FRAME_SAMPLES = 160

F64 = npt.NDArray[np.float64]
#: Up to this many phases a class of outputs is one correlation each (else: a gather).
_FEW_PHASES = 8


class StreamResampler:
    """``rate_in -> rate_out``, chunk by chunk (see the module docstring)."""

    def __init__(self, rate_in: int, rate_out: int) -> None:
        g = math.gcd(rate_in, rate_out)
        self.rate_in, self.rate_out = rate_in, rate_out
        self._up, self._down = rate_out // g, rate_in // g
        fc = 0.5 * min(1.0, self._up / self._down) * ROLLOFF
        half = ZERO_CROSSINGS / (2.0 * fc)
        self._k = k = math.ceil(half)
        self._taps = np.arange(-k + 1, k + 1, dtype=np.int64)
        # Every phase m * down % up occurs (gcd(up, down) = 1): tabulate them all, once.
        dist = np.arange(self._up, dtype=np.float64)[:, None] / self._up - self._taps[None, :]
        r = dist / half
        window = np.i0(KAISER_BETA * np.sqrt(np.clip(1.0 - r * r, 0.0, None))) / np.i0(KAISER_BETA)
        table = 2.0 * fc * np.sinc(2.0 * fc * dist) * np.where(np.abs(r) <= 1.0, window, 0.0)
        self._table: F64 = table / table.sum(axis=1, keepdims=True)
        # Input from absolute index ``_start`` on (the first k are the left zero padding).
        self._buf: F64 = np.zeros(k)
        self._start = -k
        self._n_in = 0
        self._m = 0  # the next output sample

    @property
    def lookahead_ns(self) -> int:
        """How far past an output sample's time the input must reach before it comes out."""
        return self._k * NS_PER_S // self.rate_in

    def feed(self, x: npt.ArrayLike) -> F64:
        """The output samples ``x`` (more input) completes."""
        chunk = np.asarray(x, dtype=np.float64)
        self._buf = np.concatenate([self._buf, chunk])
        self._n_in += int(chunk.shape[0])
        last = self._n_in - 1 - self._k  # the highest base whose window is covered
        if last < 0:
            return np.zeros(0)
        return self._emit((last * self._up + self._up - 1) // self._down + 1)

    def flush(self) -> F64:
        """The rest, the input's end padded with silence (as ``resample_array`` pads it)."""
        self._buf = np.concatenate([self._buf, np.zeros(self._k + 1)])
        n_out = (2 * self._n_in * self._up + self._down) // (2 * self._down)
        return self._emit(n_out)

    def _emit(self, m_end: int) -> F64:
        if m_end <= self._m:
            return np.zeros(0)
        if self._up <= _FEW_PHASES:
            y = self._by_phase(self._m, m_end)
        else:
            m = np.arange(self._m, m_end, dtype=np.int64)
            num = m * self._down
            base, phase = num // self._up, num % self._up
            idx = (base - self._start)[:, None] + self._taps[None, :]
            y = np.einsum("ij,ij->i", self._buf[idx], self._table[phase])
        self._m = m_end
        # Keep only what the next output's window can reach.
        keep = (m_end * self._down) // self._up - self._k + 1
        if keep > self._start:
            self._buf = self._buf[keep - self._start :]
            self._start = keep
        return y

    def _by_phase(self, m0: int, m1: int) -> F64:
        """Outputs ``m0 .. m1 - 1``, one correlation per phase: the outputs ``m = r + q x up``
        share a phase and step ``down`` input samples apart, so each class is one C loop
        (``np.correlate``), 4x cheaper than gathering every window (a 20 ms chunk at 24 kHz
        costs ~40 us each way)."""
        up, down, width = self._up, self._down, 2 * self._k
        y = np.empty(m1 - m0)
        for r in range(up):
            first = m0 + (r - m0) % up
            if first >= m1:
                continue
            count = (m1 - 1 - first) // up + 1
            base, phase = divmod(first * down, up)
            s = base - self._start - self._k + 1
            span = self._buf[s : s + (count - 1) * down + width]
            y[first - m0 :: up] = np.correlate(span, self._table[phase], "valid")[::down]
        return y


def _int16(y: F64) -> npt.NDArray[np.int16]:
    return np.clip(np.rint(y), -32768, 32767).astype(np.int16)


class PhoneTranscoder:
    """16-bit PCM at ``rate`` through a G.711 leg and back to ``rate``, streaming.

    ``lost(j)``: whether the leg loses 20 ms frame ``j`` of the stream (None: no loss). The
    counts say what happened: ``frames`` begun, ``lost`` (``repeated`` + ``silenced``)."""

    def __init__(self, rate: int, lost: Callable[[int], bool] | None = None) -> None:
        self.rate = rate
        self._down = StreamResampler(rate, PHONE_RATE) if rate != PHONE_RATE else None
        self._up = StreamResampler(PHONE_RATE, rate) if rate != PHONE_RATE else None
        self._lost = lost
        self._odd = b""
        self._pos = 0  # 8 kHz samples through the loss stage so far
        self._prev = np.zeros(PHONE_FRAME_SAMPLES, dtype=np.int16)  # the last received frame
        self._cur = np.zeros(PHONE_FRAME_SAMPLES, dtype=np.int16)
        self._fate = "ok"  # of the frame under way: ok, repeat or silence
        self.frames = 0
        self.repeated = 0
        self.silenced = 0

    @property
    def lost(self) -> int:
        """Frames the leg lost (each concealed)."""
        return self.repeated + self.silenced

    @property
    def lookahead_ns(self) -> int:
        """The transcoding's own added latency: its two resamplers' lookahead."""
        return sum(r.lookahead_ns for r in (self._down, self._up) if r is not None)

    def feed(self, pcm: bytes) -> bytes:
        """The leg's output that ``pcm`` (more input) completes."""
        data = self._odd + pcm if self._odd else pcm
        cut = len(data) - len(data) % 2
        self._odd = data[cut:]
        x = np.frombuffer(data[:cut], dtype="<i2")
        narrow = self._down.feed(x) if self._down is not None else x.astype(np.float64)
        return self._out(narrow)

    def flush(self) -> bytes:
        """The rest (the end of the stream)."""
        narrow = self._down.flush() if self._down is not None else np.zeros(0)
        out = self._out(narrow)
        if self._up is not None:
            out += _int16(self._up.flush()).astype("<i2").tobytes()
        return out

    def _out(self, narrow: F64) -> bytes:
        heard = self._conceal(
            mulaw_to_pcm16(pcm16_to_mulaw(_int16(narrow).astype("<i2").tobytes()))
        )
        if self._up is None:
            return heard.astype("<i2").tobytes()
        return _int16(self._up.feed(heard)).astype("<i2").tobytes()

    def _conceal(self, decoded: bytes) -> npt.NDArray[np.int16]:
        x = np.frombuffer(decoded, dtype="<i2").astype(np.int16)
        if self._lost is None:
            self._pos += int(x.shape[0])
            return x
        out = x.copy()
        i, n = 0, int(x.shape[0])
        while i < n:
            off = self._pos % PHONE_FRAME_SAMPLES
            if off == 0:
                self._begin(self._pos // PHONE_FRAME_SAMPLES)
            take = min(n - i, PHONE_FRAME_SAMPLES - off)
            seg = slice(i, i + take)
            self._cur[off : off + take] = x[seg]
            if self._fate == "repeat":
                out[seg] = self._prev[off : off + take]
            elif self._fate == "silence":
                out[seg] = 0
            i += take
            self._pos += take
            if self._pos % PHONE_FRAME_SAMPLES == 0 and self._fate == "ok":
                self._prev = self._cur.copy()
        return out

    def _begin(self, j: int) -> None:
        assert self._lost is not None
        self.frames += 1
        if not self._lost(j):
            self._fate = "ok"
        elif self._fate == "ok":
            self._fate = "repeat"
            self.repeated += 1
        else:
            self._fate = "silence"
            self.silenced += 1


def transcode(pcm: PCM) -> PCM:
    """A whole recording through the leg without loss, as long as it was (a fixture, before
    any timing starts)."""
    tx = PhoneTranscoder(pcm.rate)
    out = tx.feed(pcm.samples) + tx.flush()
    n = 2 * pcm.n_samples
    out = out[:n] + bytes(max(0, n - len(out)))
    return PCM(out, pcm.rate)


def conceal_frames(frames: Sequence[bytes], lost: Sequence[bool]) -> list[bytes]:
    """``frames`` with each lost one concealed as :class:`PhoneTranscoder` does: the last
    received frame once, then silence."""
    out: list[bytes] = []
    prev_lost = False
    last_ok = bytes(len(frames[0])) if frames else b""
    for frame, gone in zip(frames, lost, strict=True):
        if not gone:
            out.append(frame)
            last_ok = frame
        else:
            out.append(bytes(len(frame)) if prev_lost else last_ok)
        prev_lost = gone
    return out
