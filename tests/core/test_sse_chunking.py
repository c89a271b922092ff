"""The SSE decoder gives the same events however the bytes are split, and looks at each byte
once (a long event fed in small reads is linear, not quadratic)."""

from __future__ import annotations

import random

from voicelat.core.measure.sse import SSEDecoder, SSEEvent

STREAM = (
    b": keep-alive\r\n"
    b'event: delta\r\ndata: {"a": 1}\r\n\r\n'
    b"data: line one\ndata: line two\n\n"
    b"id: 7\rdata: cr only\r\r"
    b"data: caf\xc3\xa9 \xe2\x82\xac\n\n"
    b"data: [DONE]\n\n"
)


def _decode(pieces: list[bytes]) -> list[tuple[str, str, str]]:
    dec = SSEDecoder()
    out: list[SSEEvent] = []
    for i, p in enumerate(pieces):
        out += dec.feed(p, i)
    return [(e.data, e.event, e.id) for e in out]


def _split(data: bytes, rng: random.Random) -> list[bytes]:
    cuts = sorted(rng.sample(range(1, len(data)), rng.randint(0, min(12, len(data) - 1))))
    return [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]


def test_every_split_gives_the_same_events() -> None:
    whole = _decode([STREAM])
    assert whole == [
        ('{"a": 1}', "delta", ""),
        ("line one\nline two", "", ""),
        ("cr only", "", "7"),
        ("café €", "", "7"),
        ("[DONE]", "", "7"),
    ]
    rng = random.Random(11)
    for _ in range(500):
        assert _decode(_split(STREAM, rng)) == whole
    assert _decode([bytes([b]) for b in STREAM]) == whole  # one byte at a time


def test_crlf_split_between_reads_is_one_line_end() -> None:
    assert _decode([b"data: x\r", b"\n\r", b"\n"]) == [("x", "", "")]
    assert _decode([b"data: x\r", b"\r"]) == [("x", "", "")]


def test_event_is_stamped_with_the_read_that_completed_it() -> None:
    dec = SSEDecoder()
    assert dec.feed(b"data: he", 10) == []
    assert dec.feed(b"llo\n", 20) == []
    assert dec.feed(b"\n", 30) == [SSEEvent(30, "hello")]


def test_a_long_event_in_small_reads_keeps_its_pieces_unjoined_until_its_end() -> None:
    # The unfinished line is held as pieces, not re-concatenated per read: what made a 1 MB
    # event in 4 KiB reads quadratic (bench/sse.py measures the time).
    dec = SSEDecoder()
    payload = b"x" * (1 << 20)
    reads = [b"data: "] + [payload[i : i + 4096] for i in range(0, len(payload), 4096)]
    for r in reads:
        assert dec.feed(r, 1) == []
    assert len(dec._partial) == len(reads)
    (event,) = dec.feed(b"\n\n", 2)
    assert len(event.data) == 1 << 20 and dec._partial == []
