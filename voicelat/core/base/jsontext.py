"""The one JSON reader: every file and message voicelat reads as JSON goes through :func:`loads`.

``json.loads`` raises ``RecursionError`` on a deeply nested value (``[[[[...`` a few thousand
deep: a damaged results line, a hostile server's message), and ``RecursionError`` is not a
``ValueError``: every ``except ValueError`` around a read let it escape as a traceback (or as a
bare "RecursionError" failure text). :func:`loads` turns it into a ``ValueError`` like any
other bad JSON, so the callers' one ``except ValueError`` covers it.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["TOO_DEEP", "TooDeep", "loads"]

#: What a value nested beyond the parser's reach is called in messages.
TOO_DEEP = "JSON nested too deeply"


class TooDeep(ValueError):
    """JSON nested deeper than the parser reaches (a ``ValueError``, so ``except ValueError``
    covers it; a caller that must tell it from other bad JSON catches this first)."""

    def __init__(self) -> None:
        super().__init__(TOO_DEEP)


def loads(text: str | bytes | bytearray) -> Any:
    """``json.loads(text)``; a value nested too deeply is :class:`TooDeep` (a ``ValueError``,
    as bytes that are not UTF-8 already are: ``UnicodeDecodeError``)."""
    try:
        return json.loads(text)
    except RecursionError:
        raise TooDeep from None
