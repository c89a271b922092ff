"""The pure pieces behind "no key in any output" and "no traceback on nested JSON": the one
JSON reader, scrubbing before cutting, whole documents and turns scrubbed, and the
environment's credential variables registered (plain strings and integers, no I/O)."""

from __future__ import annotations

import json

import pytest

from voicelat.core.base import jsontext
from voicelat.core.base.secrets import (
    MASK,
    excerpt,
    forget_secrets,
    register_environment_secrets,
    register_secret,
    registered_secrets,
    scrub_json,
)
from voicelat.core.base.turn import Turn

KEY = "sk-core-0123456789abcdefKEY"


def test_the_one_json_reader_makes_deep_nesting_a_value_error() -> None:
    with pytest.raises(json.JSONDecodeError):
        jsontext.loads("{")
    with pytest.raises(RecursionError):
        json.loads("[" * 100_000)  # what every `except ValueError` let through
    with pytest.raises(jsontext.TooDeep) as info:
        jsontext.loads("[" * 100_000)
    assert isinstance(info.value, ValueError) and str(info.value) == jsontext.TOO_DEEP
    assert jsontext.loads(b'{"a": [1, 2]}') == {"a": [1, 2]}


def test_a_text_is_scrubbed_before_it_is_cut() -> None:
    register_secret(KEY)
    text = "x" * 20 + f" bad key {KEY} end"
    # Cut first, the first half of the key would survive; scrubbed first, nothing of it does.
    assert KEY[:8] in text[:40]
    assert excerpt(text, 40) == "x" * 20 + f" bad key {MASK} end"[:20]
    assert excerpt("a\n b  " + KEY, 80) == f"a b {MASK}"
    assert excerpt(f"{KEY}\n", 80, quoted=True) == repr(f"{MASK}\n")


def test_a_document_is_scrubbed_everywhere_and_copied_only_when_needed() -> None:
    forget_secrets()  # (the conftest restores the registry after the test)
    doc = {"stages": {"tts": {"server": f"leaky ({KEY})", "models": [KEY, 3]}}, KEY: (1, KEY)}
    assert scrub_json(doc) is doc  # nothing registered: the document itself
    register_secret(KEY)
    clean = scrub_json(doc)
    assert KEY not in json.dumps(clean)
    assert clean == {
        "stages": {"tts": {"server": f"leaky ({MASK})", "models": [MASK, 3]}},
        MASK: (1, MASK),
    }
    deep: list[object] = []
    node = deep
    for _ in range(1000):
        node.append([])
        node = node[0]  # type: ignore[assignment]
    assert scrub_json(deep) is not None  # cut at its depth limit, never a RecursionError


def test_a_turn_is_scrubbed_where_it_is_built() -> None:
    register_secret(KEY)
    turn = Turn(
        1, "f", 0, {}, {}, None,
        failed=True, failure_stage="stt", failure_reason=f"401: {KEY}",
        transcript=f"t {KEY}", reply=f"r {KEY}", flags=(f"f:{KEY}",), extra={"id": KEY},
    )  # fmt: skip
    assert KEY not in repr(turn)
    assert turn.failure_reason == f"401: {MASK}" and turn.extra == {"id": MASK}


def test_credential_variables_of_the_environment_are_registered() -> None:
    register_environment_secrets(
        {
            "OPENAI_API_KEY": KEY,
            "HF_TOKEN": "hf_abcdefghijklmnop",
            "MY_SERVICE_SECRET": "s3cr3t-value-1234",
            "HOME": "/home/someone-long",
            "DEEPGRAM_API_KEY": "short",
            "REDIS_PASSWORD": "password",  # a word, not a key: it must not blank "password"
        }
    )
    found = registered_secrets()
    assert {KEY, "hf_abcdefghijklmnop", "s3cr3t-value-1234"} <= found
    assert "/home/someone-long" not in found and "short" not in found
    assert "password" not in found
