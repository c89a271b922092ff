"""The turn detail explains a tts_done listed before tts_first_audible (issue 18)."""

from __future__ import annotations

from tests.tui.helpers import make_turn, saved_model, text_of
from voicelat.tui.render import turn_detail

NOTE = "tts_first_audible is when its sample plays"


def test_a_tts_faster_than_real_time_gets_a_note_under_the_milestones() -> None:
    turn = saved_model().turns[2]  # piper sent all its audio before the first sample played
    assert turn.milestones["tts_done"] < turn.milestones["tts_first_audible"]
    text = " ".join(text_of(turn_detail(turn, {}, 50), width=110).split())
    assert NOTE in text


def test_no_note_when_the_audio_was_still_arriving() -> None:
    turn = make_turn(1)  # no tts_done at all
    assert NOTE not in " ".join(text_of(turn_detail(turn, {}, 50), width=110).split())
