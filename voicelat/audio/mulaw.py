"""G.711 mu-law <-> 16-bit PCM, as Twilio Media Streams carries audio (``audio/x-mulaw``).

Two lookup tables built once with numpy (256 entries to decode, 65536 to encode), bit-exact
with CPython's ``audioop`` (the same G.711 reference algorithm: 14-bit input, bias 33, clip
8159). Why not ``audioop``: it is deprecated since 3.11 and removed in 3.13, and the
``audioop-lts`` backport would be one more binary dependency for two table lookups.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["mulaw_to_pcm16", "pcm16_to_mulaw"]


def _decode_table() -> npt.NDArray[np.int16]:
    u = ~np.arange(256, dtype=np.int32) & 0xFF
    t = (((u & 0x0F) << 3) + 0x84) << ((u & 0x70) >> 4)
    return np.where(u & 0x80, 0x84 - t, t - 0x84).astype(np.int16)


def _encode_table() -> npt.NDArray[np.uint8]:
    # Index: the int16 sample's bit pattern as uint16 (so a sample indexes with .view(uint16)).
    samples = np.arange(65536, dtype=np.uint16).view(np.int16).astype(np.int32)
    pcm = samples >> 2  # the 14-bit value G.711 works on (arithmetic shift, as audioop)
    negative = pcm < 0
    mag = np.minimum(np.where(negative, -pcm, pcm), 8159) + 33
    seg_end = np.array([0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF, 0x1FFF], dtype=np.int32)
    seg = np.searchsorted(seg_end, mag, side="left")
    mask = np.where(negative, 0x7F, 0xFF)
    shift = np.minimum(seg, 7) + 1
    uval = (np.minimum(seg, 7) << 4) | ((mag >> shift) & 0x0F)
    out = np.where(seg >= 8, 0x7F ^ mask, uval ^ mask)
    return out.astype(np.uint8)


_DECODE = _decode_table()
_ENCODE = _encode_table()


def mulaw_to_pcm16(data: bytes) -> bytes:
    """mu-law bytes (one per sample) as 16-bit little-endian PCM."""
    out: bytes = _DECODE[np.frombuffer(data, dtype=np.uint8)].astype("<i2").tobytes()
    return out


def pcm16_to_mulaw(pcm: bytes) -> bytes:
    """16-bit little-endian PCM as mu-law bytes (one per sample)."""
    out: bytes = _ENCODE[np.frombuffer(pcm, dtype="<u2")].tobytes()
    return out
