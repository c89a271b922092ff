"""G.711 mu-law tables: bit-exact with CPython's audioop (while 3.11 still ships it)."""

from __future__ import annotations

import warnings

import numpy as np

from voicelat.audio.mulaw import mulaw_to_pcm16, pcm16_to_mulaw


def test_encode_and_decode_match_audioop_for_every_value() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import audioop

    every = np.arange(-32768, 32768, dtype="<i2").tobytes()
    assert pcm16_to_mulaw(every) == audioop.lin2ulaw(every, 2)
    codes = bytes(range(256))
    assert mulaw_to_pcm16(codes) == audioop.ulaw2lin(codes, 2)


def test_known_codes_and_round_trip() -> None:
    # Silence is 0xFF; the loudest positive code is 0x80 (32124), negative 0x00 (-32124).
    assert pcm16_to_mulaw(b"\x00\x00") == b"\xff"
    assert np.frombuffer(mulaw_to_pcm16(b"\x80\x00"), "<i2").tolist() == [32124, -32124]
    tone = (np.sin(np.arange(160) / 5) * 12000).astype("<i2")
    back = np.frombuffer(mulaw_to_pcm16(pcm16_to_mulaw(tone.tobytes())), "<i2")
    assert len(back) == 160 and np.max(np.abs(back.astype(int) - tone)) < 12000 * 0.04
