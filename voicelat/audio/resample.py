"""Band-limited sample-rate conversion with numpy only (Kaiser-windowed sinc, polyphase).

Each output sample is a weighted sum of the input samples around its position, the weights
being a low-pass sinc cut below the lower of the two Nyquist frequencies, shaped by a Kaiser
window. The kernel is tabulated once per phase (``rate_out / gcd`` phases at most), so the work
is about ``2 * half_width`` multiply-adds per output sample, vectorized over the whole buffer.

Design (cutoff ``ROLLOFF`` = 0.9 of the lower Nyquist, ``ZERO_CROSSINGS`` = 32, Kaiser
beta 8.6): pass band flat within 0.01 dB up to ~0.8 of the lower Nyquist (6.5 kHz when going
to 16 kHz; 7 kHz is down 1.6 dB), at least 75 dB of attenuation from ~0.975 of the lower
Nyquist up (7.8 kHz when going to 16 kHz), so content above the output Nyquist does not fold
back into the band. The kernel is short (~2 ms when going to
16 kHz) and symmetric: it adds no delay and only ~1 ms of pre-ringing before an onset, which
keeps onset timing honest. Resampling happens when fixtures are loaded, never per frame.
"""

from __future__ import annotations

import math
import os

import numpy as np
import numpy.typing as npt

from voicelat.audio.wav import PCM, read_wav
from voicelat.core.base.errors import AudioError

ROLLOFF = 0.9
ZERO_CROSSINGS = 32
KAISER_BETA = 8.6


#: The longest input a turn is read from (one utterance; a fixture is seconds long). Checked
#: before resampling, which allocates the output and its float copy at once.
MAX_INPUT_S = 600


def load_for_stage(path: str | os.PathLike[str], rate: int) -> PCM:
    """Read a WAV file and resample it to the ``rate`` a stage expects (before timing starts)."""
    # Here rather than in wav.py: reading is below resampling, so wav.py needs nothing of this
    # module (the two used to import each other).
    pcm = read_wav(path)
    seconds = pcm.n_samples / pcm.rate
    if seconds > MAX_INPUT_S:
        raise AudioError(
            f"{os.fspath(path)} is {seconds:.0f} s long, more than the {MAX_INPUT_S} s one turn "
            "may take: cut it to the utterance (or check its header's sample rate)"
        )
    return resample(pcm, rate)


def resample(pcm: PCM, rate: int) -> PCM:
    """Convert ``pcm`` to ``rate`` Hz; the same object comes back when the rates are equal.

    The output has ``round(n * rate / pcm.rate)`` samples and keeps the time of every event:
    output sample ``m`` sits at input time ``m * pcm.rate / rate``.
    """
    if not isinstance(rate, int) or rate <= 0:
        raise AudioError(f"invalid target sample rate {rate!r}: it must be a positive integer (Hz)")
    if rate == pcm.rate:
        return pcm
    y = resample_array(pcm.to_array().astype(np.float64), pcm.rate, rate)
    return PCM(np.clip(np.rint(y), -32768, 32767).astype("<i2").tobytes(), rate)


def resample_array(
    x: npt.NDArray[np.float64], rate_in: int, rate_out: int
) -> npt.NDArray[np.float64]:
    """Resample a 1-D float array from ``rate_in`` to ``rate_out`` (same units in and out)."""
    if rate_in <= 0 or rate_out <= 0:
        raise AudioError(
            f"invalid sample rates {rate_in} -> {rate_out}: both must be positive (Hz)"
        )
    g = math.gcd(rate_in, rate_out)
    up, down = rate_out // g, rate_in // g
    n_in = int(x.shape[0])
    n_out = (2 * n_in * up + down) // (2 * down)  # round half up, in integers
    if n_in == 0 or n_out == 0:
        return np.zeros(n_out, dtype=np.float64)
    if up == down:
        return x.astype(np.float64, copy=True)

    fc = 0.5 * min(1.0, up / down) * ROLLOFF  # cutoff in cycles per input sample
    half = ZERO_CROSSINGS / (2.0 * fc)  # kernel half-width in input samples
    k = math.ceil(half)

    # Output m sits at input position m*down/up = base + phase/up.
    num = np.arange(n_out, dtype=np.int64) * down
    base = num // up
    phase = num % up
    # Only the phases that occur are tabulated, so odd rate pairs cannot blow up memory.
    phases, which = np.unique(phase, return_inverse=True)
    taps = np.arange(-k + 1, k + 1, dtype=np.int64)
    dist = phases[:, None].astype(np.float64) / up - taps[None, :]
    table = 2.0 * fc * np.sinc(2.0 * fc * dist) * _kaiser(dist / half)
    # Unit gain at DC for every phase: no phase-dependent ripple on steady signals.
    table /= table.sum(axis=1, keepdims=True)

    padded = np.concatenate([np.zeros(k), x.astype(np.float64), np.zeros(k + 1)])
    idx = base + k
    y = np.zeros(n_out, dtype=np.float64)
    which = which.reshape(-1)
    for col, j in enumerate(taps):
        y += table[which, col] * padded[idx + j]
    return y


def _kaiser(r: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Kaiser window at relative positions ``r`` (|r| <= 1 inside, 0 outside)."""
    inside = np.clip(1.0 - r * r, 0.0, None)
    w: npt.NDArray[np.float64] = np.i0(KAISER_BETA * np.sqrt(inside)) / np.i0(KAISER_BETA)
    return np.where(np.abs(r) <= 1.0, w, 0.0)
