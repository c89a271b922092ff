"""The live segmenter on literal audio: when turns start, where frames go, barge-in, push-to-talk.

Each character of a pattern is one 20 ms frame at 16 kHz: ``.`` digital silence, ``#`` a
300 Hz tone at -10 dBFS (well above the -40 dBFS threshold).
"""

from __future__ import annotations

import math

import numpy as np

from voicelat.audio.device import LiveFrame
from voicelat.engine.live import EndInput, Segmenter, StartTurn, ToTurn
from voicelat.files.pipeline import Endpointing

RATE = 16000
FS = RATE // 50
MS = 1_000_000
_TONE = (0.3 * 32767 * np.sin(2 * math.pi * 300 * np.arange(FS) / RATE)).astype("<i2").tobytes()
_SILENCE = bytes(2 * FS)


class Mic:
    """Hands out frames with consecutive indexes and capture times, like the assembler."""

    def __init__(self) -> None:
        self.index = 0

    def frames(self, pattern: str) -> list[LiveFrame]:
        out = []
        for ch in pattern:
            pcm = _TONE if ch == "#" else _SILENCE
            t = self.index * 20 * MS
            out.append(LiveFrame(self.index, pcm, t, t + 20 * MS))
            self.index += 1
        return out


def feed(seg: Segmenter, frames: list[LiveFrame]) -> list[object]:
    actions: list[object] = []
    for f in frames:
        actions += seg.feed(f)
    return actions


def ep() -> Endpointing:
    return Endpointing(hangover_ms=200, threshold_dbfs=-40, min_speech_ms=100)


def test_speech_starts_a_turn_with_the_audio_before_its_onset() -> None:
    seg, mic = Segmenter(ep()), Mic()
    assert feed(seg, mic.frames("." * 30)) == []
    assert seg.state == "idle"
    actions = feed(seg, mic.frames("#" * 5))  # 100 ms of speech confirms the onset
    (start,) = actions
    assert isinstance(start, StartTurn) and not start.barge_in
    # 300 ms of pre-roll before the first voiced frame (#30), up to the frame that confirmed it
    assert [f.index for f in start.frames] == list(range(15, 35))
    assert seg.state == "listening"
    # from now on every frame belongs to the turn, silence included (its VAD endpoints it)
    rest = feed(seg, mic.frames("##...."))
    assert all(isinstance(a, ToTurn) and a.turn_id == start.turn_id for a in rest)
    assert len(rest) == 6


def test_a_click_does_not_start_a_turn_and_a_short_dip_does_not_split_one() -> None:
    seg, mic = Segmenter(ep()), Mic()
    assert feed(seg, mic.frames("..#....##......")) == []  # blips shorter than 100 ms
    (start,) = feed(seg, mic.frames("##.###"))  # a dip shorter than min_speech inside a word
    assert isinstance(start, StartTurn)
    assert start.frames[-1].index == mic.index - 1


def test_speech_over_the_reply_is_a_barge_in_and_starts_the_next_turn() -> None:
    seg, mic = Segmenter(ep()), Mic()
    (first,) = feed(seg, mic.frames("....#####"))
    assert isinstance(first, StartTurn)
    seg.heard(first.turn_id)  # the turn endpointed: it is being answered
    assert seg.state == "replying"
    assert feed(seg, mic.frames("......")) == []
    (barge,) = feed(seg, mic.frames("#####"))
    assert isinstance(barge, StartTurn) and barge.barge_in
    assert barge.turn_id == first.turn_id + 1
    # the pre-roll of the barge-in reaches back before its onset, into the reply's silence
    assert barge.frames[0].index < mic.index - 5
    # the interrupted turn ending late changes nothing for the new one
    seg.heard(first.turn_id)
    seg.replied(first.turn_id)
    assert seg.state == "listening"


def test_without_barge_in_speech_over_the_reply_is_ignored_until_it_ends() -> None:
    seg, mic = Segmenter(ep(), barge_in=False), Mic()
    (first,) = feed(seg, mic.frames("#####"))
    assert isinstance(first, StartTurn)
    seg.heard(first.turn_id)
    assert feed(seg, mic.frames("##########")) == []  # the speaker's echo, say
    seg.replied(first.turn_id)
    assert seg.state == "idle"
    (second,) = feed(seg, mic.frames("....#####"))
    assert isinstance(second, StartTurn) and not second.barge_in


def test_a_turn_that_ends_while_listening_returns_to_idle() -> None:
    seg, mic = Segmenter(ep()), Mic()
    (start,) = feed(seg, mic.frames("#####"))
    assert isinstance(start, StartTurn)
    seg.replied(start.turn_id)  # failed or timed out before its endpoint
    assert seg.state == "idle"
    assert feed(seg, mic.frames("...")) == []


def test_push_to_talk_ignores_speech_and_the_key_cuts_the_turn() -> None:
    seg, mic = Segmenter(ep(), ptt=True), Mic()
    assert feed(seg, mic.frames("...#######...")) == []  # talking without the key: nothing
    (start,) = seg.press()
    assert isinstance(start, StartTurn) and not start.barge_in
    # 200 ms from before the press: people start talking as they press
    assert [f.index for f in start.frames] == list(range(mic.index - 11, mic.index))
    actions = feed(seg, mic.frames("#####....."))
    assert all(isinstance(a, ToTurn) for a in actions)  # silence does not end it
    (end,) = seg.press()
    assert end == EndInput(start.turn_id)
    seg.heard(start.turn_id)
    assert seg.state == "replying"
    assert feed(seg, mic.frames("#####")) == []  # speech over the reply: the key decides
    (barge,) = seg.press()
    assert isinstance(barge, StartTurn) and barge.barge_in


def test_a_press_before_the_first_frame_starts_the_turn_at_that_frame() -> None:
    """The key can come as the device opens, before it captured anything (a loaded machine
    delays the first frame): the press waits for the first frame instead of leaving the
    segmenter listening to a turn that never started, which made the next press end nothing."""
    seg, mic = Segmenter(ep(), ptt=True), Mic()
    assert seg.press() == []
    (start,) = feed(seg, mic.frames("#"))
    assert isinstance(start, StartTurn) and [f.index for f in start.frames] == [0]
    assert all(isinstance(a, ToTurn) for a in feed(seg, mic.frames("##..")))
    assert seg.press() == [EndInput(start.turn_id)]


def test_two_presses_before_the_first_frame_take_each_other_back() -> None:
    seg, mic = Segmenter(ep(), ptt=True), Mic()
    assert seg.press() == [] and seg.press() == []
    assert feed(seg, mic.frames("###")) == [] and seg.state == "idle"
