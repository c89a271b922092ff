"""The two fuzz profiles of the property-based tests (hypothesis).

Every fuzz target is written once as a ``check_*`` function and run twice: a short profile in the
default suite (:data:`SHORT`, a few dozen cases, seconds) and a long one (:data:`LONG`, 10^5
cases per target, ``VOICELAT_FUZZ_EXAMPLES`` to change it) marked ``fuzz``, which the default
run leaves out:

    python -m pytest -m fuzz tests -q

A check fails on any exception that is not voicelat's own error type (:func:`only_own_errors`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, settings

from voicelat.core.base.errors import VoicelatError

F = TypeVar("F", bound=Callable[..., Any])

LONG_EXAMPLES = int(os.environ.get("VOICELAT_FUZZ_EXAMPLES", "100000"))

_SHORT = settings(
    max_examples=40,
    deadline=None,
    derandomize=True,  # the default suite is deterministic; the long run explores
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    database=None,
)
_LONG = settings(
    max_examples=LONG_EXAMPLES,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    database=None,
)


def SHORT(fn: F) -> F:
    """The default suite's profile."""
    return _SHORT(fn)  # type: ignore[no-any-return]


def LONG(fn: F) -> F:
    """The long profile: marked ``fuzz`` (left out of the default run by pyproject's addopts)."""
    # 10^5 cases take minutes: no per-test timeout (pyproject's 600 s would cut the run short).
    return pytest.mark.fuzz(pytest.mark.timeout(0)(_LONG(fn)))  # type: ignore[no-any-return]


@contextmanager
def only_own_errors() -> Iterator[None]:
    """Bad input may be refused with voicelat's own error (one clear line); nothing else."""
    try:
        yield
    except VoicelatError as exc:
        text = str(exc)
        assert text and "\n" not in text.strip(), f"not one line: {text!r}"
