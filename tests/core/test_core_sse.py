"""SSEDecoder: WHATWG framing, any line ending, any byte split, events stamped on arrival."""

from __future__ import annotations

import random

import pytest

from voicelat.core.measure.sse import SSEDecoder, SSEEvent

STREAM = (
    b": keep-alive comment\n"
    b"event: message\n"
    b"id: 7\n"
    b'data: {"choices":[{"delta":{"role":"assistant"}}]}\n'
    b"\n"
    b"data: first line\n"
    b"data:second line\n"
    b"data:  two spaces\n"
    b"\n"
    b"retry: 100\n"
    b"unknownfield: x\n"
    b"data\n"
    b"\n"
    b"\n"
    b"event: ignored because no data\n"
    b"\n"
    b"data: [DONE]\n"
    b"\n"
)

EXPECTED = [
    ("message", "7", '{"choices":[{"delta":{"role":"assistant"}}]}'),
    ("", "7", "first line\nsecond line\n two spaces"),
    ("", "7", ""),
    ("", "7", "[DONE]"),
]


def decode_all(pieces: list[bytes]) -> list[SSEEvent]:
    dec = SSEDecoder()
    out: list[SSEEvent] = []
    for i, piece in enumerate(pieces):
        out.extend(dec.feed(piece, i))
    return out


def shape(events: list[SSEEvent]) -> list[tuple[str, str, str]]:
    return [(e.event, e.id, e.data) for e in events]


@pytest.mark.parametrize("eol", [b"\n", b"\r\n", b"\r"])
def test_line_endings(eol: bytes) -> None:
    stream = STREAM.replace(b"\n", eol)
    assert shape(decode_all([stream])) == EXPECTED


@pytest.mark.parametrize("eol", [b"\n", b"\r\n", b"\r"])
def test_byte_by_byte_gives_the_same_events(eol: bytes) -> None:
    stream = STREAM.replace(b"\n", eol)
    pieces = [stream[i : i + 1] for i in range(len(stream))]
    assert shape(decode_all(pieces)) == EXPECTED


@pytest.mark.parametrize("seed", range(25))
def test_arbitrary_splits_give_the_same_events(seed: int) -> None:
    rng = random.Random(seed)
    eol = rng.choice([b"\n", b"\r\n", b"\r"])
    stream = STREAM.replace(b"\n", eol)
    cuts = sorted(rng.sample(range(1, len(stream)), rng.randint(1, 30)))
    pieces = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
    assert b"".join(pieces) == stream
    assert shape(decode_all(pieces)) == EXPECTED


def test_mixed_line_endings() -> None:
    events = decode_all([b"data: a\r\ndata: b\rdata: c\n\r\n", b"data: d\r\r"])
    assert [e.data for e in events] == ["a\nb\nc", "d"]


def test_crlf_split_between_cr_and_lf_does_not_make_an_empty_line() -> None:
    dec = SSEDecoder()
    assert dec.feed(b"data: a\r", 1) == []
    assert dec.feed(b"\ndata: b\r", 2) == []  # the \n belongs to the \r before it
    events = dec.feed(b"\n\r\n", 3)
    assert [(e.data, e.t_ns) for e in events] == [("a\nb", 3)]


def test_event_is_stamped_with_the_chunk_that_completed_it() -> None:
    dec = SSEDecoder()
    assert dec.feed(b"data: hel", 100) == []
    assert dec.feed(b"lo\n", 200) == []
    first = dec.feed(b"\ndata: wor", 300)
    assert first == [SSEEvent(300, "hello")]
    second = dec.feed(b"ld\n\ndata: x\n\n", 400)
    assert [(e.t_ns, e.data) for e in second] == [(400, "world"), (400, "x")]


def test_event_completed_by_a_trailing_cr_is_stamped_at_that_chunk() -> None:
    dec = SSEDecoder()
    assert dec.feed(b"data: a\r", 10) == []
    assert [e.t_ns for e in dec.feed(b"\r", 20)] == [20]
    assert dec.feed(b"\n", 30) == []  # the LF of that CRLF is not a new blank line


def test_comments_only_produce_nothing() -> None:
    assert decode_all([b": ping\n\n: ping\n\n"]) == []


def test_event_type_resets_after_dispatch_but_id_persists() -> None:
    events = decode_all([b"event: a\nid: 1\ndata: x\n\ndata: y\n\n"])
    assert shape(events) == [("a", "1", "x"), ("", "1", "y")]


def test_incomplete_event_is_not_dispatched() -> None:
    assert decode_all([b"data: never finished\n"]) == []


def test_utf8_split_inside_a_character() -> None:
    data = "data: héllo ☃\n\n".encode()
    cut = data.index("☃".encode()) + 1
    events = decode_all([data[:cut], data[cut:]])
    assert [e.data for e in events] == ["héllo ☃"]
