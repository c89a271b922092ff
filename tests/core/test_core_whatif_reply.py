"""Reply what-ifs on literal turns: the chunker replayed on recorded deltas, a TTS swap."""

from __future__ import annotations

from voicelat.core.base.turn import Turn
from voicelat.core.judge.whatif import parse_setting, predict
from voicelat.core.judge.whatif_reply import (
    ChunkerModel,
    ChunkerSetting,
    chunker_assumptions,
    chunker_moves,
    fixture_medians,
    server_sentence_release,
    theil_sen_slope,
    tts_swap_moves,
    tts_text_unit,
)
from voicelat.core.measure.arrivals import MAX_DELTAS, delta_record, fed_text
from voicelat.core.measure.events import Delta

MS = 1_000_000
SENTENCE = ChunkerSetting("sentence", 1)
CLAUSE = ChunkerSetting("clause", 1)
CLOUDY = [" It's", " a", " bit", " cloudy", ",", " but", " it's", " not", " too", " bad", "."]


def _turn(
    i: int,
    fixture: str,
    words: list[str],
    *,
    gap_ms: int = 20,
    ttfb_ms: int = 80,
    tail_ms: int = 50,
    mode: ChunkerSetting = SENTENCE,
    record: bool = True,
) -> Turn:
    """A turn whose LLM streams ``words`` every ``gap_ms`` from 1000 ms after speech end and
    whose chunker (``mode``) cut where the real one cuts; TTS first byte ``ttfb_ms`` later,
    audible ``tail_ms`` after that."""
    end, first = 2000 * MS, 3000 * MS
    deltas = [Delta(first + k * gap_ms * MS, w) for k, w in enumerate(words)]
    from voicelat.core.measure.chunker import Chunker

    chunker = Chunker(mode.mode, mode.min_chars)  # type: ignore[arg-type]
    cut = next((d.t_ns for d in deltas if chunker.feed(d.content)), deltas[-1].t_ns)
    done = deltas[-1].t_ns + 5 * MS
    fab = cut + ttfb_ms * MS
    ms = {
        "speech_end": end,
        "llm_first_token": first,
        "llm_first_speakable": cut,
        "llm_done": done,
        "tts_request": cut + MS // 2,
        "tts_first_byte": fab,
        "output_first_audible": fab + tail_ms * MS,
    }
    extra = {"llm_deltas": delta_record(deltas)} if record else {}
    reply = "".join(words).strip()
    return Turn(i, fixture, 0, ms, {}, fab + tail_ms * MS - end, reply=reply, extra=extra)


def test_the_record_rebuilds_what_the_chunker_was_fed() -> None:
    deltas = [Delta(5 * MS, "  Hi"), Delta(7 * MS, ","), Delta(9 * MS, " there"), Delta(9, "")]
    record = delta_record(deltas)
    assert record == {"lead_ws": 2, "d": [[0, 4], [2 * MS, 1], [4 * MS, 6]], "more": False}
    fed = fed_text(record, "Hi, there")
    assert fed is not None and fed.complete
    assert fed.deltas == ((0, "  Hi"), (2 * MS, ","), (4 * MS, " there"))
    assert fed_text(record, "Hi, there and more") is None  # the record and the reply disagree
    assert fed_text(None, "Hi") is None and delta_record([Delta(1, "")]) is None
    many = delta_record([Delta(k, "a ") for k in range(MAX_DELTAS + 5)])
    assert many is not None and len(many["d"]) == MAX_DELTAS and many["more"] is True


def test_clause_mode_on_a_piece_tts_moves_by_the_first_clause() -> None:
    turn = _turn(1, "weather", CLOUDY)
    found = chunker_moves([turn], ChunkerModel(SENTENCE, CLAUSE, "piece"))
    # Sentence: cut at "." (delta 10, 200 ms); clause: at "," (delta 4, 80 ms). Too few turns
    # to fit the TTS's time to first byte against the length: it is kept as it was.
    assert found.slope_ns_per_char is None and found.replay_gap_ns == 0
    move = found.moves[0]
    assert move.shift_ns == -120 * MS
    assert move.part_ns == (280 * MS, 160 * MS)
    pred = predict(
        [turn],
        [parse_setting("chunker.mode=clause")],
        endpoint_shift_ns={"weather": 0},
        reply_moves=found.moves,
        reply_part="llm_first_token -> tts_first_byte",
    )
    assert pred.predicted_ns == (turn.e2e_ns - 120 * MS,)  # type: ignore[operator]
    assert pred.part == "llm_first_token -> tts_first_byte"
    assert pred.predicted_endpointing(50) == 160 * MS


def test_the_ttfb_slope_is_fitted_on_the_run_when_it_has_enough_turns() -> None:
    # TTS TTFB = 20 ms + 2 ms per character of the first sentence, on 8 fixtures of 4 lengths.
    replies = [
        [" Yes", ",", " sure", "."],
        [" It's", " a", " bit", " cloudy", ",", " but", " fine", "."],
        [" Ten", " minutes", ",", " maybe", " more", " than", " that", "."],
        [" Hello", ",", " I'm", " the", " friendly", " voice", " assistant", " here", "."],
    ]
    turns = []
    for i in range(8):
        words = replies[i % 4]
        ttfb = 20 + 2 * len("".join(words).strip())
        turns.append(_turn(i, f"f{i}", words, ttfb_ms=ttfb))
    found = chunker_moves(turns, ChunkerModel(SENTENCE, CLAUSE, "piece"))
    assert found.slope_ns_per_char is not None and round(found.slope_ns_per_char) == 2 * MS
    # " Yes, sure." -> "Yes,": 2 deltas (40 ms) earlier and 6 characters shorter (12 ms).
    assert found.moves[0].shift_ns == -40 * MS - 12 * MS
    text = " ".join(chunker_assumptions("piece", "espeak-tts", found.slope_ns_per_char))
    assert "2.00 ms per character" in text and "Theil-Sen" in text


def test_a_sentence_splitting_server_starts_when_it_sees_the_sentence_end() -> None:
    # One sentence: the server holds it until the stream ends, whatever the chunker sends.
    turn = _turn(1, "weather", CLOUDY)
    found = chunker_moves([turn], ChunkerModel(SENTENCE, CLAUSE, "sentence"))
    assert found.moves[0].shift_ns == 0
    # Two sentences: the first is released when the next one's capital reaches the server,
    # which clause mode sends with the next clause, sentence mode only with the next sentence.
    two = [" Yes", ".", " I", " can", ",", " sure", "."]
    assert server_sentence_release([(0, " Yes."), (5, " I can,")], 99, True) == (5, "Yes.")
    assert server_sentence_release([(0, " Yes. i")], 99, True) == (99, "Yes. i")
    assert server_sentence_release([(0, " Yes.")], None, False) is None
    found = chunker_moves([_turn(2, "yes", two)], ChunkerModel(SENTENCE, CLAUSE, "sentence"))
    # sentence mode sends " I can, sure." at delta 6 (120 ms); clause mode " I can," at 80 ms.
    assert found.moves[0].shift_ns == -40 * MS
    whole = chunker_moves([turn], ChunkerModel(SENTENCE, CLAUSE, "whole"))
    assert whole.moves[0].shift_ns == 0


def test_turns_without_a_record_or_past_its_end_are_left_out() -> None:
    old = _turn(1, "old", CLOUDY, record=False)
    long = _turn(2, "long", [" word"] * (MAX_DELTAS + 3) + ["."])
    found = chunker_moves([old, long], ChunkerModel(SENTENCE, CLAUSE, "piece"))
    assert [m.shift_ns for m in found.moves] == [None, None]
    assert "no per-delta arrival times" in found.moves[0].why
    assert "after the recorded deltas" in found.moves[1].why
    pred = predict(
        [old, long],
        [parse_setting("chunker.mode=clause")],
        endpoint_shift_ns={"old": 0, "long": 0},
        reply_moves=found.moves,
        reply_part="x",
    )
    assert pred.n == 0 and [f for f, _ in pred.excluded] == ["old", "long"]


def test_text_units_of_the_stages() -> None:
    assert tts_text_unit({"stage": "wyoming-tts", "streaming": True}) == "sentence"
    assert tts_text_unit({"stage": "wyoming-tts", "streaming": False}) == "whole"
    assert tts_text_unit({"stage": "espeak-tts"}) == "piece"
    assert theil_sen_slope([(1, 1)] * 10) is None  # one length: no fit


def test_a_tts_swap_takes_the_fixtures_median_from_the_compare_cell() -> None:
    mine = [_turn(1, "a", CLOUDY, tail_ms=50), _turn(2, "b", CLOUDY), _turn(3, "z", CLOUDY)]
    # The other TTS: first speakable -> first audible 30, 40, 200 ms on a; 70 ms on b.
    cell = [
        _turn(10, "a", CLOUDY, ttfb_ms=10, tail_ms=20),
        _turn(11, "a", CLOUDY, ttfb_ms=20, tail_ms=20),
        _turn(12, "a", CLOUDY, ttfb_ms=180, tail_ms=20),
        _turn(13, "b", CLOUDY, ttfb_ms=50, tail_ms=20),
        _turn(14, "b", CLOUDY, ttfb_ms=1, tail_ms=1, record=False).__class__(
            14, "b", 0, {}, {}, None, failed=True
        ),
    ]
    medians = fixture_medians(cell)
    assert medians == {"a": 40 * MS, "b": 70 * MS}
    moves = tts_swap_moves(mine, medians, output_delta_ns=5 * MS)
    # Recorded part: 80 + 50 = 130 ms; a: 40 + 5, b: 70 + 5.
    assert [m.shift_ns for m in moves] == [-85 * MS, -55 * MS, None]
    assert moves[0].part_ns == (130 * MS, 45 * MS)
    assert "no warm turn of this fixture" in moves[2].why
    pred = predict(
        mine,
        [parse_setting("tts=espeak")],
        endpoint_shift_ns={"a": 0, "b": 0, "z": 0},
        reply_moves=moves,
        reply_part="llm_first_speakable -> output_first_audible",
    )
    assert pred.n == 2 and pred.excluded == (("z", moves[2].why),)
    assert pred.predicted_ns == (mine[0].e2e_ns - 85 * MS, mine[1].e2e_ns - 55 * MS)  # type: ignore[operator]
