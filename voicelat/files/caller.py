"""A scenario's simulated caller: the ``[caller]`` table, or a caller file it names.

::

    # in a scenario file                  # or: caller = "callers/booker.toml" (same keys,
    [caller]                              #      top level or under [caller], relative path)
    persona = "You are Sam. You call a restaurant to book a table."
    goal = "A table for four, tomorrow at eight."
    max_turns = 6                         # the hard limit on the caller's turns (1..100)
    seed = 7                              # the LLM's seed (temperature 0 unless set)
    gap_ms = 600                          # the human gap after each reply
    goal_token = "[DONE]"                 # the LLM ends its last line with it
    end_on_goodbye = true                 # the agent saying goodbye ends the call
    hear = "auto"                         # auto | text | stt | both: how it hears the agent
    opening = "Hi, I'd like a table."     # a fixed first line (optional)
    frozen = "runs/last"                  # replay that run's caller lines (optional)
    [caller.llm]                          # an `openai` LLM stage table (default: the stack's)
    base_url = "https://api.example.com/v1"
    model = "some-model"
    api_key_env = "CALLER_KEY"
    [caller.voice]                        # a TTS stage table (default: espeak-ng, en-us+m3)
    stage = "espeak-tts"
    voice = "en-us+m3"
    [caller.stt]                          # an STT stage table (default: the stack's Whisper)
    [caller.judge]                        # optional: an LLM asked whether the goal was reached
                                          # (judge = true: the caller's own LLM)

Every mistake is one :class:`~voicelat.core.base.errors.ConfigError` naming the file and the key.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from voicelat.core.base.errors import ConfigError
from voicelat.core.calls.caller import CallerSpec

__all__ = ["MAX_CALLER_TURNS", "parse_caller"]

#: The most turns a caller may be given (a conversation that never ends still ends here).
MAX_CALLER_TURNS = 100
_KEYS = {
    "persona", "goal", "llm", "voice", "stt", "judge", "hear", "max_turns", "seed", "gap_ms",
    "goal_token", "end_on_goodbye", "opening", "frozen",
}  # fmt: skip
_LLM_KEYS_DENIED = {"stream"}


def parse_caller(scenario: Path, value: Any) -> CallerSpec:
    """The caller a scenario's ``caller`` key describes: a table, or a file name (relative
    to the scenario) holding the same keys."""
    if isinstance(value, str):
        path = (scenario.parent / value).resolve()
        data = _read(scenario, path)
        table = data.get("caller", data)
        if not isinstance(table, dict):
            raise ConfigError(f"{path}: [caller] must be a table")
        return _spec(path, table)
    if isinstance(value, dict):
        return _spec(scenario, value)
    raise ConfigError(
        f"{scenario}: caller is a [caller] table or the name of a caller file, not {value!r}"
    )


def _read(scenario: Path, path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_bytes().decode("utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{scenario}: caller file {path} does not exist") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the caller file: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text: save the caller file as UTF-8") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None


def _spec(path: Path, t: Mapping[str, Any]) -> CallerSpec:
    where = f"{path}: [caller]"
    unknown = sorted(set(t) - _KEYS)
    if unknown:
        raise ConfigError(f"{where} unknown key {unknown[0]!r} (known: {', '.join(sorted(_KEYS))})")
    persona = t.get("persona")
    if not isinstance(persona, str) or not persona.strip():
        raise ConfigError(f'{where} needs persona = "who the caller is and what it wants"')
    judge: Mapping[str, Any] | None
    raw_judge = t.get("judge")
    if raw_judge is True:
        judge = {}
    elif raw_judge is None or raw_judge is False:
        judge = None
    else:
        judge = _table(where, "judge", raw_judge)
    hear = t.get("hear", "auto")
    if hear not in ("auto", "text", "stt", "both"):
        raise ConfigError(f"{where} hear must be 'auto', 'text', 'stt' or 'both', not {hear!r}")
    llm = _table(where, "llm", t.get("llm", {}))
    if llm.get("stage", "openai") != "openai":
        raise ConfigError(f"{where} llm: the caller's LLM is an `openai` (compatible) stage")
    if set(llm) & _LLM_KEYS_DENIED:
        raise ConfigError(f"{where} llm: `stream` is the stage's own (always streamed)")
    opening = t.get("opening")
    if opening is not None and (not isinstance(opening, str) or not opening.strip()):
        raise ConfigError(f"{where} opening must be a non-empty line, or left out")
    frozen = t.get("frozen")
    if frozen is not None and not isinstance(frozen, str):
        raise ConfigError(f"{where} frozen is a results directory (a string)")
    goal_token = _str(where, t, "goal_token", CallerSpec.goal_token)
    if not goal_token.strip():
        raise ConfigError(f"{where} goal_token must not be empty")
    end_on_goodbye = t.get("end_on_goodbye", True)
    if not isinstance(end_on_goodbye, bool):
        raise ConfigError(f"{where} end_on_goodbye must be true or false")
    return CallerSpec(
        persona=persona.strip(),
        goal=_str(where, t, "goal", ""),
        llm=llm,
        voice=_table(where, "voice", t.get("voice", {})),
        stt=_table(where, "stt", t.get("stt", {})),
        judge=judge,
        hear=hear,
        max_turns=_int(where, t, "max_turns", CallerSpec.max_turns, 1, MAX_CALLER_TURNS),
        seed=_int(where, t, "seed", CallerSpec.seed, 0, 2**31 - 1),
        gap_ms=_int(where, t, "gap_ms", CallerSpec.gap_ms, 0, 600_000),
        goal_token=goal_token,
        end_on_goodbye=end_on_goodbye,
        opening=opening.strip() if isinstance(opening, str) else None,
        frozen=str(path.parent / frozen) if isinstance(frozen, str) else None,
        source=str(path),
    )


def _table(where: str, key: str, value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(f"{where} {key} is a table ([caller.{key}]), not {value!r}")
    return dict(value)


def _str(where: str, t: Mapping[str, Any], key: str, default: str) -> str:
    value = t.get(key, default)
    if not isinstance(value, str):
        raise ConfigError(f"{where} {key} must be a string, not {value!r}")
    return value


def _int(where: str, t: Mapping[str, Any], key: str, default: int, lo: int, hi: int) -> int:
    value = t.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise ConfigError(f"{where} {key} must be a whole number from {lo} to {hi}, not {value!r}")
    return value
