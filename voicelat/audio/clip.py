"""A rendered line made into a fixture-like clip: trimmed, padded, its speech bounds measured.

A TTS's audio starts and ends wherever the engine likes (silence, a breath, nothing). A
simulated caller's line becomes a clip laid out like a bundled fixture: resampled to
:data:`CLIP_RATE`, the TTS's own silence cut at the onset rule (:mod:`voicelat.audio.onset`:
10 ms windows above -40 dBFS, forwards and backwards), a short faded pre-roll kept, then
``lead_ms`` of digital silence before the speech and ``trail_ms`` after it (enough for a VAD's
hangover), and the bounds measured again on the final layout with the same rule the engine
and ``voicelat fixtures annotate`` apply. The result is deterministic: the same audio in
gives the same bytes out. CPU work: call it off the measuring loop (a thread).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from voicelat.audio.onset import first_audible_sample
from voicelat.audio.resample import resample
from voicelat.audio.wav import PCM

__all__ = ["CLIP_RATE", "Clip", "shape_clip"]

#: The rate a caller clip is stored at (the bundled fixtures' rate).
CLIP_RATE = 16000
#: Material kept before the detected onset and after the detected end (faded), as the
#: bundled fixtures keep it: a consonant's soft start stays in the clip.
_EDGE_MS = 40


@dataclass(frozen=True)
class Clip:
    """A shaped clip and where its speech lies (ms from its first sample)."""

    pcm: PCM
    speech_start_ms: int
    speech_end_ms: int


def _bounds(pcm: PCM) -> tuple[int, int] | None:
    """(first, last + 1) audible sample by the onset rule; None: nothing audible."""
    first = first_audible_sample(pcm)
    if first is None:
        return None
    backwards = PCM(pcm.to_array()[::-1].tobytes(), pcm.rate)
    last = first_audible_sample(backwards)
    assert last is not None  # audible forwards, so backwards too
    return first, pcm.n_samples - last


def shape_clip(pcm: PCM, *, lead_ms: int = 400, trail_ms: int = 1000) -> Clip | None:
    """``pcm`` (any rate) as a caller clip at :data:`CLIP_RATE`; None when nothing in it is
    audible (an all-silent render)."""
    pcm = resample(pcm, CLIP_RATE) if pcm.rate != CLIP_RATE else pcm
    found = _bounds(pcm)
    if found is None:
        return None
    first, end = found
    x = pcm.to_array().astype(np.float64)
    edge = CLIP_RATE * _EDGE_MS // 1000
    a, b = max(0, first - edge), min(len(x), end + edge)
    seg = x[a:b].copy()
    n_in, n_out = first - a, b - end
    if n_in:
        seg[:n_in] *= 0.5 - 0.5 * np.cos(np.pi * np.arange(n_in) / n_in)
    if n_out:
        seg[len(seg) - n_out :] *= 0.5 + 0.5 * np.cos(np.pi * (np.arange(n_out) + 1) / n_out)
    lead = max(0, CLIP_RATE * lead_ms // 1000 - n_in)
    trail = max(0, CLIP_RATE * trail_ms // 1000 - n_out)
    body = np.concatenate([np.zeros(lead), seg, np.zeros(trail)])
    out = PCM(np.clip(np.round(body), -32768, 32767).astype("<i2").tobytes(), CLIP_RATE)
    measured = _bounds(out)
    if measured is None:  # the fade took the only audible window away
        return None
    start, stop = measured
    return Clip(out, start * 1000 // CLIP_RATE, -(-stop * 1000 // CLIP_RATE))
