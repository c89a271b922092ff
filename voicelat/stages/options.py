"""Stage options declared once: one frozen dataclass per stage, one parser for all of them.

A stage declares its table of the pipeline file as a frozen, keyword-only dataclass: a field
per key, its type and its default. :func:`parse_options` derives everything else from that
declaration: which keys are allowed (plus ``stage``, which picks the class), the defaults, the
type checks (an ``int`` is no ``bool``; a ``float`` takes an integer; ``X | None`` means "absent
is None"; ``tuple[str, ...]`` takes a TOML array; ``Mapping[str, V]`` a table; ``Literal`` a
fixed set of strings). A class may add its own checks in ``check()`` by raising
:class:`OptionProblem` with the key at fault.

Every error names the table and the key; when the table came from a pipeline file (a
:class:`~voicelat.files.pipeline.StageTable`), it is prefixed with ``path:line: ``. Secrets are
never options: :func:`read_secret` reads the environment variable ``api_key_env`` names.
"""

from __future__ import annotations

import dataclasses
import os
import types
from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypeVar, Union, get_args, get_origin, get_type_hints
from urllib.parse import urlsplit

from voicelat.core.base.errors import ConfigError, StageError
from voicelat.core.base.secrets import check_secret, register_secret
from voicelat.files.pipeline import StageTable

__all__ = [
    "OptionProblem",
    "QueryTable",
    "location",
    "parse_options",
    "query_strings",
    "read_secret",
]

T = TypeVar("T")

#: Extra query parameters some providers take verbatim (``[stt.query]``).
QueryTable = Mapping[str, str | int | float | bool]

#: Keys every stage table may hold besides its options.
_ALWAYS = frozenset({"stage"})


class OptionProblem(Exception):
    """A value of the right type that the stage cannot use; ``key`` is the option at fault and
    ``message`` the text after ``[table] `` (it starts with the key)."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key
        self.message = message


def require_one_of(key: str, value: object, choices: Sequence[object], why: str = "") -> None:
    """A stage ``check()``'s "``key`` must be one of ...": the one wording for every choice."""
    if value not in choices:
        allowed = ", ".join(map(str, choices))
        raise OptionProblem(key, f"{key} must be one of {allowed}{' ' + why if why else ''}")


def location(values: Mapping[str, Any], key: str | None) -> str:
    """``path:line: `` for ``key`` of a table read from a file (``path: `` without its line),
    or nothing for a table built in code (a matrix, a test)."""
    if not isinstance(values, StageTable) or values.source is None:
        return ""
    line = values.line_of(key)
    return f"{values.source}:{line}: " if line else f"{values.source}: "


def parse_options(cls: type[T], table: str, values: Mapping[str, Any]) -> T:
    """The options dataclass ``cls`` built from the stage's table ``values``.

    Raises ConfigError for an unknown key (listing the valid ones), a wrong type or a missing
    required key, and StageError for a value ``cls.check()`` refuses.
    """
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls.__name__} is not a dataclass")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - set(fields) - _ALWAYS)
    if unknown:
        raise ConfigError(
            f"{location(values, unknown[0])}[{table}] has unknown key(s) {', '.join(unknown)}; "
            f"valid keys: {', '.join(sorted(fields))}"
        )
    hints = get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for name, f in fields.items():
        if name in values:
            kwargs[name] = _value(table, values, name, hints[name], f.metadata.get("expect"))
            problem = _bounds_problem(name, kwargs[name]) or _scheme_problem(cls, name, values)
            if problem is not None:
                raise ConfigError(f"{location(values, name)}[{table}] {name} {problem}")
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ConfigError(f"{location(values, None)}[{table}] needs {name!r}")
    instance = cls(**kwargs)
    check = getattr(instance, "check", None)
    if check is not None:
        try:
            check()
        except OptionProblem as problem:
            raise StageError(
                f"{location(values, problem.key)}[{table}] {problem.message}"
            ) from None
    return instance


#: The largest number an option may hold: beyond it a value is a typo, and float() of a long
#: TOML integer raises OverflowError.
_MAX_NUMBER = 1e12
#: Options that must be positive whatever the stage: a zero or negative timeout used to be
#: accepted and later reported as "server not reachable".
_POSITIVE = ("timeout", "_s", "rate", "max_tokens", "rate_wpm")


def _bounds_problem(name: str, value: Any) -> str | None:
    """The rules every stage's options share (numbers finite and sane, timeouts and rates
    positive, URLs parseable with a port in range), or None when ``value`` passes."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        if value != value or abs(value) > _MAX_NUMBER:  # NaN, infinities, huge integers
            return f"must be a finite number below {_MAX_NUMBER:.0e}, not {_brief(value)}"
        if _must_be_positive(name) and value <= 0:
            return f"must be positive, not {value!r}"
        if name.endswith("_ms") and value < 0:
            return f"cannot be negative, not {value!r}"
        return None
    if isinstance(value, str) and name in ("url", "base_url"):
        return _url_problem(value)
    return None


def _brief(value: float) -> str:
    """A number in a message: a 400-digit TOML integer shown by its size, not in full."""
    text = repr(value)
    return text if len(text) <= 24 else f"{text[:8]}... (a {len(text)}-digit integer)"


def _scheme_problem(cls: type, name: str, values: Mapping[str, Any]) -> str | None:
    """A ``url``/``base_url`` whose scheme the stage cannot speak (``cls.schemes``, when the
    options class names them): refused at load, exit 2, rather than on every turn as a
    server that cannot be reached (exit 3)."""
    schemes: tuple[str, ...] | None = getattr(cls, "schemes", None)
    value = values[name]
    if name not in ("url", "base_url") or not schemes or not isinstance(value, str):
        return None
    if value.lower().startswith(tuple(f"{s}://" for s in schemes)):
        return None
    wanted = " or ".join(f"{s}://" for s in schemes)
    return f"must start with {wanted}, not {value!r}"


def _must_be_positive(name: str) -> bool:
    return "timeout" in name or name.endswith(_POSITIVE)


def _url_problem(url: str) -> str | None:
    try:
        parts = urlsplit(url)
        port = parts.port  # ValueError when out of range or not a number
    except ValueError as exc:
        return f"is not a valid URL ({exc}): {url!r}"
    # Only what the URL itself gets wrong: each stage checks its schemes (tcp://, unix://, ...).
    if port == 0 and parts.hostname:
        return f"has port 0 in {url!r}: give the port the server listens on"
    return None


def read_secret(table: str, var: str | None) -> str | None:
    """The value of the environment variable the pipeline names (never the key itself); None
    when the table names no variable, a StageError when it names one that is not set."""
    if var is None:
        return None
    value = os.environ.get(var)
    if not value:
        raise StageError(
            f"[{table}] reads its API key from ${var}, which is not set: export {var}=..."
        )
    problem = check_secret(value)
    if problem is not None:
        # Checked here, before any request: httpx would fail with the key in its message.
        raise StageError(f"[{table}] the API key in ${var} {problem}: export it again without it")
    register_secret(value)
    return value


def check_settings(key: str, values: Mapping[str, Any], known: Sequence[str], context: str) -> None:
    """A table of provider settings (``vad = {...}``) holds only ``known`` keys, and its
    durations (``*_ms``, ``*Ms``) are integers 0..60000 ms; else :class:`OptionProblem`
    (exit 2 at load: a provider refuses an unknown setting mid-run, or silently ignores it)."""
    unknown = sorted(set(values) - set(known))
    if unknown:
        valid = ", ".join(sorted(known)) or "none"
        raise OptionProblem(
            key, f"{key} has unknown key(s) {', '.join(unknown)} for {context}; valid: {valid}"
        )
    for name, value in values.items():
        if name.endswith(("_ms", "Ms")) and (
            isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 60_000
        ):
            raise OptionProblem(key, f"{key}.{name} must be an integer 0..60000 ms, not {value!r}")


def query_strings(query: Mapping[str, Any]) -> dict[str, str]:
    """A ``query`` table as query-string values: booleans as ``true``/``false``."""
    return {str(k): str(v).lower() if isinstance(v, bool) else str(v) for k, v in query.items()}


# -- the type rules ------------------------------------------------------------------------------
def _value(table: str, values: Mapping[str, Any], key: str, tp: Any, expect: str | None) -> Any:
    value = values[key]
    if not _conforms(value, tp):
        what = expect or _describe(tp)
        word = "not" if get_origin(_strip_none(tp)) is Literal else "got"
        raise ConfigError(
            f"{location(values, key)}[{table}] {key} must be {what}, {word} {value!r}"
        )
    return _convert(value, tp)


def _is_union(tp: Any) -> bool:
    return get_origin(tp) in (Union, types.UnionType)


def _strip_none(tp: Any) -> Any:
    """``X`` for ``X | None`` (what a present value must be)."""
    if _is_union(tp):
        args = [a for a in get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return tp


def _conforms(value: Any, tp: Any) -> bool:
    if tp is Any:
        return True
    if _is_union(tp):
        return any(_conforms(value, arg) for arg in get_args(tp))
    origin = get_origin(tp)
    if origin is Literal:
        return any(value == a and type(value) is type(a) for a in get_args(tp))
    if tp is type(None):
        return value is None
    if tp is bool:
        return isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if tp is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if tp is str:
        return isinstance(value, str)
    if origin is tuple:
        item = get_args(tp)[0]
        return isinstance(value, list | tuple) and all(_conforms(v, item) for v in value)
    if origin in (Mapping, dict):
        item = get_args(tp)[1] if get_args(tp) else Any
        return isinstance(value, Mapping) and all(
            isinstance(k, str) and _conforms(v, item) for k, v in value.items()
        )
    raise TypeError(f"parse_options cannot check {tp!r}")


def _convert(value: Any, tp: Any) -> Any:
    tp = _strip_none(tp)
    if tp is float and isinstance(value, int):
        # A huge TOML integer stays an int for the range check to refuse (float() of it
        # raised OverflowError, a traceback instead of the one-line range error).
        return float(value) if abs(value) <= _MAX_NUMBER else value
    if get_origin(tp) is tuple:
        return tuple(value)
    if get_origin(tp) in (Mapping, dict):
        return dict(value)
    return value


def _describe(tp: Any) -> str:
    tp = _strip_none(tp)
    if _is_union(tp):
        return " or ".join(_describe(a) for a in get_args(tp))
    origin = get_origin(tp)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in get_args(tp))
    if origin is tuple:
        return {str: "a list of strings", int: "a list of integers"}.get(get_args(tp)[0], "a list")
    if origin in (Mapping, dict):
        return "a table"
    names = {str: "a string", int: "an integer", float: "a number", bool: "true or false"}
    return names.get(tp, str(tp))
