"""Chunker: speakable pieces at sentence or clause boundaries, without waiting for the next token."""

from __future__ import annotations

import pytest

from voicelat.core.measure.chunker import Chunker


def run(chunker: Chunker, tokens: list[str]) -> list[tuple[int, str]]:
    """(index of the token that released the piece, piece); flush is index len(tokens)."""
    out = [(i, piece) for i, tok in enumerate(tokens) for piece in chunker.feed(tok)]
    out += [(len(tokens), piece) for piece in chunker.flush()]
    return out


def test_sentence_emits_at_the_end_of_the_buffer_without_waiting() -> None:
    c = Chunker("sentence")
    assert c.feed("Sure") == []
    assert c.feed(".") == ["Sure."]  # a boundary at the end of what streamed so far
    assert c.feed(" It is") == []
    assert c.feed(" sunny!") == [" It is sunny!"]
    assert c.flush() == []


def test_sentence_emits_at_a_dot_followed_by_space() -> None:
    c = Chunker("sentence")
    assert c.feed("Hello there. How are") == ["Hello there."]
    assert c.feed(" you? Fine") == [" How are you?"]
    assert c.flush() == [" Fine"]


def test_several_sentences_in_one_delta() -> None:
    c = Chunker("sentence")
    assert c.feed("One. Two! Three? Four") == ["One.", " Two!", " Three?"]
    assert c.flush() == [" Four"]


def test_no_boundary_inside_a_word_or_number() -> None:
    c = Chunker("sentence")
    assert c.feed("Visit example.com or pay 3.50 now") == []
    assert c.flush() == ["Visit example.com or pay 3.50 now"]


def test_abbreviation_does_not_end_a_sentence() -> None:
    c = Chunker("sentence")
    assert c.feed("Call Dr.") == []  # "Dr." at the end of the buffer
    assert c.feed(" Smith today") == []  # "Dr. " followed by a space
    assert c.feed(". Then") == ["Call Dr. Smith today."]
    assert c.flush() == [" Then"]
    other = Chunker("sentence")
    assert other.feed("Use tools, e.g. a hammer. Ok") == ["Use tools, e.g. a hammer."]


def test_trailing_number_dot_waits_for_the_next_token() -> None:
    c = Chunker("sentence")
    assert c.feed("It costs 3.") == []  # may be "3.5"
    assert c.feed("5 dollars.") == ["It costs 3.5 dollars."]
    d = Chunker("sentence")
    assert d.feed("I counted to 3.") == []
    assert d.feed(" Then I stopped.") == ["I counted to 3.", " Then I stopped."]


def test_closing_quote_stays_with_its_sentence() -> None:
    c = Chunker("sentence")
    assert c.feed('He said "hi." Then') == ['He said "hi."']


def test_sentence_mode_does_not_split_at_commas() -> None:
    c = Chunker("sentence")
    assert c.feed("Well, I think so, yes") == []
    assert c.flush() == ["Well, I think so, yes"]


def test_clause_mode_splits_at_commas_and_sentence_ends() -> None:
    c = Chunker("clause")
    assert c.feed("Well, I think") == ["Well,"]
    assert c.feed(" so; maybe. Or") == [" I think so;", " maybe."]
    assert c.flush() == [" Or"]


def test_clause_mode_min_chars_skips_a_too_short_first_clause() -> None:
    c = Chunker("clause", min_chars=5)
    assert c.feed("Hi, there, friend") == ["Hi, there,"]
    assert c.flush() == [" friend"]


def test_clause_mode_keeps_thousands_separators() -> None:
    c = Chunker("clause")
    assert c.feed("About 1,") == []
    assert c.feed("000 people") == []
    assert c.flush() == ["About 1,000 people"]


def test_token_mode_passes_through() -> None:
    c = Chunker("token")
    assert c.feed("Hel") == ["Hel"]
    assert c.feed("lo.") == ["lo."]
    assert c.feed("") == []
    assert c.flush() == []


def test_flush_returns_the_rest_once_and_drops_whitespace() -> None:
    c = Chunker("sentence")
    c.feed("no end in sight")
    assert c.flush() == ["no end in sight"]
    assert c.flush() == []
    c.feed("Done.")
    c.feed("   ")
    assert c.flush() == []


def test_pieces_rebuild_the_text() -> None:
    text = "Sure thing. The weather in Paris is 21.5 degrees, mostly sunny! Dr. Who? Yes."
    tokens = [text[i : i + 3] for i in range(0, len(text), 3)]
    for mode in ("sentence", "clause", "token"):
        pieces = [p for _, p in run(Chunker(mode), tokens)]
        assert "".join(pieces) == text


def test_first_speakable_comes_with_the_token_that_ends_the_sentence() -> None:
    tokens = ["Sure", " thing", ".", " The", " rest"]
    assert run(Chunker("sentence"), tokens)[0] == (2, "Sure thing.")


def test_bad_mode() -> None:
    with pytest.raises(ValueError, match="sentence, clause or token"):
        Chunker("word")  # type: ignore[arg-type]


def test_no_as_a_word_ends_a_sentence_but_no_before_a_number_does_not() -> None:
    c = Chunker("sentence")
    assert c.feed("No.") == []  # could still be "No. 5": wait for one token
    assert c.feed(" I can't do that. Ok") == ["No.", " I can't do that."]
    d = Chunker("sentence")
    assert d.feed("Take bus No. 5 home. Then") == ["Take bus No. 5 home."]
    e = Chunker("sentence")
    assert e.feed("The answer is no. Sorry") == ["The answer is no."]
