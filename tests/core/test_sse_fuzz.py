"""Fuzzing the SSE decoder: any bytes in any split decode to the same events as in one read, and
nothing raises (the quadratic cost is bench/sse.py's to measure)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tests.fuzzing import LONG, SHORT
from voicelat.core.measure.sse import SSEDecoder

# Bytes rich in what SSE cares about: line ends of the three kinds, field names, colons.
_PIECES = st.sampled_from(
    [b"\n", b"\r", b"\r\n", b"data:", b"data: ", b"event:", b"id:", b"retry:", b":", b" ", b"x"]
)
_STREAM = st.lists(st.one_of(_PIECES, st.binary(max_size=8)), max_size=40).map(b"".join)


def _events(chunks: list[bytes]) -> list[tuple[str, str, str]]:
    dec = SSEDecoder()
    out = []
    for i, chunk in enumerate(chunks):
        out += [(e.event, e.data, e.id) for e in dec.feed(chunk, i)]
    return out


def check_split_invariance(stream: bytes, cuts: list[int]) -> None:
    points = sorted({c % (len(stream) + 1) for c in cuts})
    chunks = [stream[a:b] for a, b in zip([0, *points], [*points, len(stream)], strict=True)]
    assert _events(chunks) == _events([stream])


@SHORT
@given(_STREAM, st.lists(st.integers(min_value=0), max_size=10))
def test_sse_split_invariance(stream: bytes, cuts: list[int]) -> None:
    check_split_invariance(stream, cuts)


@LONG
@given(_STREAM, st.lists(st.integers(min_value=0), max_size=10))
def test_sse_split_invariance_long(stream: bytes, cuts: list[int]) -> None:
    check_split_invariance(stream, cuts)
