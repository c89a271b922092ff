"""The one scrubbing path for secrets: every key read is registered, every text that can reach a
user (a failure reason, an error message) is scrubbed of every registered key.

Stages read keys from environment variables only (:func:`voicelat.stages.options.read_secret`),
which calls :func:`register_secret`. A server may echo the ``Authorization`` header in an error
body; the key must then never reach turns.jsonl, summary.json, stdout or stderr. Rather than
trusting every stage to scrub its own texts, the two places every such text passes through do it:
:class:`~voicelat.core.measure.events.Failed` (a turn's failure reason) and
:class:`~voicelat.core.base.errors.VoicelatError` (a startup error).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

__all__ = [
    "MASK",
    "check_secret",
    "excerpt",
    "forget_secrets",
    "register_environment_secrets",
    "register_secret",
    "registered_secrets",
    "scrub_json",
    "scrub_secrets",
]

MASK = "***"

#: Keys shorter than this are not scrubbed: blanking a short word everywhere garbles every
#: message (a CI machine whose key variable held "bench" turned "benchmark" into "***mark"),
#: and a key that short protects nothing anyway. Every provider's real keys are far longer.
_MIN_LEN = 8

_SECRETS: set[str] = set()


def register_secret(value: str) -> None:
    """Remember ``value`` so that :func:`scrub_secrets` blanks it from now on."""
    if len(value) >= _MIN_LEN:
        _SECRETS.add(value)
        # A header value is sent stripped: a server echoes the stripped form.
        stripped = value.strip()
        # ... and a JSON error body or a URL may carry it escaped.
        for form in (stripped, json.dumps(stripped)[1:-1], quote(stripped, safe="")):
            if len(form) >= _MIN_LEN:
                _SECRETS.add(form)


#: Environment variables whose names say they hold a credential (``OPENAI_API_KEY``,
#: ``DEEPGRAM_API_KEY``, ``HF_TOKEN``, ``TWILIO_AUTH_TOKEN``, ``..._SECRET``...).
_CREDENTIAL_NAME = re.compile(r"(API_?KEY|_KEY|TOKEN|SECRET|PASSWORD|PASSWD)$")
#: A variable no table names is registered only when it is key-sized (every provider's keys
#: are 30+ characters): ``REDIS_PASSWORD=password`` must not blank the word everywhere.
_MIN_AMBIENT_LEN = 16


def register_environment_secrets(environ: Mapping[str, str]) -> None:
    """Register every credential-named variable of ``environ`` (the process environment).

    A stage registers the key it reads (``api_key_env``), but a server may echo a key the run
    never sent: an agent whose own LLM key is in ``OPENAI_API_KEY`` on the same machine, a
    gateway that quotes its upstream's token. Every provider's variable is registered too, so
    that no key in this environment reaches an output whichever table names it.
    """
    for name, value in environ.items():
        if len(value.strip()) >= _MIN_AMBIENT_LEN and _CREDENTIAL_NAME.search(name.upper()):
            register_secret(value)


def registered_secrets() -> frozenset[str]:
    """The keys registered so far (for tests)."""
    return frozenset(_SECRETS)


def forget_secrets(keep: frozenset[str] = frozenset()) -> None:
    """Forget every registered key but ``keep`` (a test suite restores the registry between
    tests so that one test's key never scrubs another's messages)."""
    _SECRETS.intersection_update(keep)


def scrub_secrets(text: str) -> str:
    """``text`` with every registered key replaced by ``***`` (longest first, so a key that
    contains another is blanked whole)."""
    if not _SECRETS or not text:
        return text
    for secret in sorted(_SECRETS, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, MASK)
    return text


def excerpt(text: str, limit: int, *, quoted: bool = False) -> str:
    """The first ``limit`` characters of a server's ``text`` on one line (``quoted``: as its
    ``repr``), scrubbed *before* it is cut: a key cut in half no longer matches the registry,
    so cutting first would let its first half through."""
    line = scrub_secrets(" ".join(text.split()) if not quoted else text)
    return repr(line[:limit]) if quoted else line[:limit]


def scrub_json(value: Any) -> Any:
    """``value`` (a JSON-like document: dicts, lists, strings, numbers) with every registered
    key blanked from every string in it, keys of mappings included.

    For what a server said about itself (a ``Server`` header, a version, model ids) on its way
    into a stage's description, and for whole records on their way to disk: every text a
    server sent is scrubbed, not only failure reasons. Nothing is copied when no key is
    registered; a document nested deeper than :data:`_MAX_DEPTH` is cut there (never a
    RecursionError).
    """
    if not _SECRETS:
        return value
    try:
        # One C-speed pass for the common case (no key anywhere): a turn's ``extra`` is
        # scrubbed as the turn is built, on the measuring loop, so walking it must be rare.
        text = json.dumps(value, default=str)
    except (TypeError, ValueError, RecursionError):
        text = None
    if text is not None and not any(s in text for s in _SECRETS):
        return value
    return _scrub_value(value, 0)


#: Deeper than any record voicelat writes; below the interpreter's recursion limit.
_MAX_DEPTH = 200


def _scrub_value(value: Any, depth: int) -> Any:
    if isinstance(value, str):
        return scrub_secrets(value)
    if depth > _MAX_DEPTH:
        # Nothing voicelat writes nests this deep: a server's nested junk becomes a marker.
        return MASK
    if isinstance(value, Mapping):
        return {scrub_secrets(str(k)): _scrub_value(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        items = [_scrub_value(v, depth + 1) for v in value]
        return items if isinstance(value, list) else tuple(items)
    return value


def check_secret(value: str) -> str | None:
    """What is wrong with ``value`` as an HTTP header or query value, or None when it is fine.

    The message never contains the value itself.
    """
    if value != value.strip():
        return "has leading or trailing whitespace (a stray newline?)"
    for i, ch in enumerate(value):
        if ch in "\r\n\t" or not ch.isprintable():
            return f"contains a control character at position {i + 1} (a stray newline?)"
        if not ch.isascii():
            return f"contains a non-ASCII character at position {i + 1}"
    return None
