"""The process-wide secret registry: what it scrubs, and what it leaves alone."""

from __future__ import annotations

from voicelat.core.base.secrets import (
    MASK,
    forget_secrets,
    register_secret,
    registered_secrets,
    scrub_secrets,
)


def test_a_registered_key_is_blanked_in_its_plain_json_and_url_forms() -> None:
    key = "sk-test/0123456789+abc"
    register_secret(key)
    assert scrub_secrets(f"bad key {key}") == f"bad key {MASK}"
    assert scrub_secrets("echo sk-test%2F0123456789%2Babc") == f"echo {MASK}"


def test_a_short_value_is_never_a_secret_so_ordinary_words_survive() -> None:
    # A CI machine whose key variable held "bench" once turned "benchmark" into "***mark".
    register_secret("bench")
    assert "bench" not in registered_secrets()
    assert scrub_secrets("unknown benchmark format") == "unknown benchmark format"


def test_forget_secrets_keeps_only_what_it_is_told() -> None:
    before = registered_secrets()
    register_secret("another-long-key-42")
    assert "another-long-key-42" in registered_secrets()
    forget_secrets(before)
    assert "another-long-key-42" not in registered_secrets()
    assert scrub_secrets("another-long-key-42") == "another-long-key-42"
