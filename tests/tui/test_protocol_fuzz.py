"""Fuzzing the TUI's event decoder: any line (bytes, JSON of any shape, the right keys with the
wrong types, Infinity, huge integers) decodes to an event or to None, never an exception; a
decoded event folds into the model without an exception."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tests.fuzzing import LONG, SHORT
from voicelat.tui.model import RunModel
from voicelat.tui.protocol import decode

_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=10),
)
_JSON = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=5)
    ),
    max_leaves=20,
)
_KEYS = ["index", "fixture", "total", "warmup", "speech_end_ns", "name", "t_rel_ns", "seen_ns",
         "turn", "path"]
_EVENT = st.fixed_dictionaries(
    {"event": st.sampled_from(["turn_started", "milestone", "turn_finished", "summary", "x"])},
    optional={k: _JSON for k in _KEYS},
)


def check_line(line: bytes | str) -> None:
    event = decode(line)
    if event is not None:
        RunModel(results_path=None).apply(event)


def _dump(obj: Any) -> str:
    return json.dumps(obj)  # NaN/Infinity are written as JSON extensions, like Python reads


@SHORT
@given(st.one_of(st.binary(max_size=64), _EVENT.map(_dump), _JSON.map(_dump)))
def test_tui_decoder_never_raises(line: bytes | str) -> None:
    check_line(line)


@LONG
@given(st.one_of(st.binary(max_size=64), _EVENT.map(_dump), _JSON.map(_dump)))
def test_tui_decoder_never_raises_long(line: bytes | str) -> None:
    check_line(line)
