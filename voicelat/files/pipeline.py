"""Pipeline files (TOML): which stages, how to endpoint and chunk, and the latency budget.

Secrets never live in a pipeline file: a stage names the environment variable holding its key.
Errors name the file, the table, the key and (when it can be found) the line.
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from voicelat.core.base.errors import ConfigError
from voicelat.core.base.network import NetworkProfile
from voicelat.core.calls.bargein import words_of
from voicelat.core.judge.cost import Prices, parse_prices

_TOP_LEVEL = {
    "pipeline", "stt", "llm", "tts", "s2s", "agent", "endpointing", "chunker", "output", "turn",
    "budget", "cost", "network", "turn_taking",
}  # fmt: skip
#: Keys of ``[agent]`` that are voicelat's (the trace listener), not the transport stage's.
_AGENT_TRACE_KEYS = (
    "traces", "trace_wait_ms", "trace_port", "trace_clock_offset_ms", "trace_clock_uncertainty_ms"
)  # fmt: skip
_SECRET_LOOKING = re.compile(r"^(sk-|xi-|Bearer |Token )|^[A-Za-z0-9_\-]{32,}$")
#: Stage keys that name a credential (``api_key``, ``xi_api_key``, ``token``...). Provider options
#: that merely contain "key" (Deepgram's ``keywords``/``keyterm``) are not credentials.
_SECRET_KEY = re.compile(
    r"(^|_)(api_?key|key|token|secret|password|passwd|credentials?)$", re.IGNORECASE
)


class StageTable(dict[str, Any]):
    """A stage's table of a pipeline file that remembers where it came from, so an option the
    stage refuses is reported as ``path:line: [table] key ...``.

    It is a plain ``dict`` to everything else (equality, JSON); a table built in code (a matrix
    combination, a test) is a plain dict and is reported without a location.
    """

    def __init__(self, values: Any = (), /) -> None:
        super().__init__(values)
        self.source: Path | None = None
        self.lines: dict[str, int] = {}
        self.header_line: int | None = None

    @classmethod
    def located(
        cls, values: dict[str, Any], *, table: str, text: str, source: Path | None
    ) -> StageTable:
        """``values`` with the line of each key (and of the ``[table]`` header) in ``text``."""
        out = cls(values)
        out.source = source
        out.header_line = _line_of(text, table, None)
        for key in values:
            line = _line_of(text, table, key)
            if line is not None and line != out.header_line:
                out.lines[key] = line
        return out

    def line_of(self, key: str | None) -> int | None:
        """The line of ``key`` in the file; the table's header line for a key it does not hold."""
        if key is not None and key in self.lines:
            return self.lines[key]
        return self.header_line

    def copy(self) -> StageTable:
        out = StageTable(self)
        out.source, out.lines, out.header_line = self.source, dict(self.lines), self.header_line
        return out


@dataclass(frozen=True)
class Endpointing:
    """How the pipeline decides the user's turn is over."""

    mode: str = "vad"  # "vad" (client VAD silence hangover) or "provider" (STT end-of-turn)
    hangover_ms: int = 600
    threshold_dbfs: float = -40.0
    min_speech_ms: int = 100


@dataclass(frozen=True)
class ChunkerConfig:
    mode: str = "sentence"
    min_chars: int = 1


@dataclass(frozen=True)
class OutputConfig:
    latency_ms: int = 0
    save_audio: bool = False


@dataclass(frozen=True)
class TurnConfig:
    timeout_s: float = 60.0
    pacer_lag_limit_ms: float = 10.0
    #: Busy-wait the last millisecond before each input frame (sub-ms send times, ~5 % of a
    #: core per session: docs/BENCHMARKS.md). Off by default.
    busy_wait: bool = False


@dataclass(frozen=True)
class TurnTaking:
    """How voicelat's own cascade takes an interruption while it speaks (``[turn_taking]``;
    docs/BARGE_IN.md): a VAD hears the line during the reply; speech that lasts
    ``min_speech_ms`` is an interruption, and with ``barge_in`` on the reply is cancelled
    (LLM stream and TTS request closed, the sink flushed)."""

    barge_in: bool = True
    #: Speech shorter than this never interrupts ("mm-hmm" is ~0.3-0.5 s, a sentence longer).
    min_speech_ms: int = 300
    #: The VAD's level during the reply (dBFS; the endpointer's by default).
    threshold_dbfs: float = -40.0
    #: Words that do not interrupt ("mm-hmm", "yeah"), normalised (lowercase, no punctuation:
    #: :func:`~voicelat.core.calls.bargein.words_of`). Empty: the VAD alone decides. Set: a
    #: VAD trigger waits for the STT's words of the overlay, and only a word outside these
    #: stops the reply (docs/BARGE_IN.md).
    ignore_words: tuple[str, ...] = ()
    #: How long after the VAD trigger the words may take; past it the reply stops anyway.
    words_timeout_ms: int = 1500


@dataclass(frozen=True)
class AgentTraces:
    """How an agent pipeline reads the agent's own spans (``[agent] traces``, ``trace_wait_ms``)."""

    #: "none" (black-box), "pipecat" (Pipecat's span names), "genai" (OTel GenAI conventions)
    #: or "livekit" (LiveKit Agents' spans: core/traces/livekit_trace.py).
    mapping: str = "none"
    #: How long after a turn's reply to wait for its late spans.
    wait_ms: int = 2000
    #: Where the trace receiver listens (127.0.0.1, OTLP/HTTP ``/v1/traces``).
    port: int = 4318
    #: An agent on another host: its wall clock minus voicelat's, and how well that is known.
    clock_offset_ms: float = 0.0
    clock_uncertainty_ms: float = 0.0


@dataclass(frozen=True)
class Pipeline:
    """A parsed pipeline file."""

    name: str
    path: Path | None
    sha256: str
    stack: str | None
    stt: dict[str, Any]
    llm: dict[str, Any]
    tts: dict[str, Any]
    endpointing: Endpointing = Endpointing()
    chunker: ChunkerConfig = ChunkerConfig()
    output: OutputConfig = OutputConfig()
    turn: TurnConfig = TurnConfig()
    turn_taking: TurnTaking = TurnTaking()
    budget: dict[str, Any] = field(default_factory=dict)
    description: str = ""
    #: A speech-to-speech pipeline's one stage (``[s2s]``); then stt, llm and tts are empty.
    s2s: dict[str, Any] | None = None
    #: A black-box agent pipeline's transport stage (``[agent]`` without the trace keys).
    agent: dict[str, Any] | None = None
    agent_traces: AgentTraces = AgentTraces()
    #: Unit prices per stage (``[cost]``, or the prices file it names); None: not priced.
    cost: Prices | None = None
    #: The pipeline's ``[network]`` table as a profile (``--network`` overrides it); None: none.
    network: NetworkProfile | None = None

    def to_json(self) -> dict[str, Any]:
        priced = {"cost": self.cost.to_json()} if self.cost is not None else {}
        if self.s2s is not None:
            return {**self._common_json(), "s2s": self.s2s, **priced}
        if self.agent is not None:
            return {
                **self._common_json(),
                "agent": self.agent,
                "traces": vars(self.agent_traces),
                **priced,
            }
        return {**self._common_json(), **priced}

    def _common_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "path": str(self.path) if self.path else None,
            "sha256": self.sha256,
            "stack": self.stack,
            "stt": self.stt,
            "llm": self.llm,
            "tts": self.tts,
            "endpointing": vars(self.endpointing),
            "chunker": vars(self.chunker),
            "output": vars(self.output),
            "turn": vars(self.turn),
            "turn_taking": vars(self.turn_taking),
        }


def default_pipeline_path() -> Path:
    """The embedded local stack pipeline shipped with voicelat."""
    here = Path(__file__).resolve().parent.parent  # the package root (voicelat/)
    for candidate in (
        here / "data" / "pipelines" / "local.toml",
        here.parent / "pipelines" / "local.toml",
    ):
        if candidate.exists():
            return candidate
    raise ConfigError(
        "the default pipeline file is missing from this installation: reinstall voicelat"
    )


def load_pipeline(path: Path) -> Pipeline:
    """Read and validate a pipeline file."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(
            f"pipeline file {path} does not exist (see pipelines/ for examples)"
        ) from None
    except OSError as exc:
        raise ConfigError(f"cannot read pipeline file {path}: {exc.strerror}") from None
    try:
        # TOML is UTF-8: a replacement character would end up in a prompt or a voice id.
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise ConfigError(
            f"{path}:{line}: not UTF-8 (byte 0x{raw[exc.start]:02x}): TOML files are UTF-8;"
            " save it as UTF-8"
        ) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        at = re.search(r"at line (\d+)", str(exc))
        loc = f"{path}:{at.group(1)}" if at else str(path)
        raise ConfigError(f"{loc}: not valid TOML: {exc}") from None
    return parse_pipeline(data, text=text, path=path, sha256=hashlib.sha256(raw).hexdigest())


def parse_pipeline(
    data: dict[str, Any], *, text: str = "", path: Path | None = None, sha256: str = ""
) -> Pipeline:
    """Validate a pipeline file's data; each stage table is kept for the stage to check (as a
    :class:`StageTable` that knows its lines when ``text`` is the file's source)."""
    where = str(path) if path else "pipeline"

    def err(table: str, key: str | None, msg: str) -> ConfigError:
        line = _line_of(text, table, key)
        loc = f"{where}:{line}" if line else where
        name = f"[{table}] {key}" if key else f"[{table}]"
        return ConfigError(f"{loc}: {name} {msg}")

    unknown = sorted(set(data) - _TOP_LEVEL)
    if unknown:
        line = _line_of(text, unknown[0], None) or _line_of(text, "", unknown[0])
        loc = f"{where}:{line}" if line else where
        raise ConfigError(
            f"{loc}: unknown table(s) {', '.join(unknown)}; valid tables: {', '.join(sorted(_TOP_LEVEL))}"
        )
    kinds = _stage_kinds(data, err)
    for stage in kinds:
        _check_stage_table(data.get(stage), stage, err)
    meta = _table(data, "pipeline", err)
    name = meta.get("name", path.stem if path else "pipeline")
    if not isinstance(name, str):
        raise err("pipeline", "name", "must be a string")
    stack = meta.get("stack")
    if stack is not None and stack != "local":
        raise err(
            "pipeline", "stack", f'must be "local" (the embedded stack) or absent, not {stack!r}'
        )
    desc = meta.get("description", "")
    stages = {
        kind: StageTable.located(dict(data[kind]), table=kind, text=text, source=path)
        if kind in kinds
        else StageTable()
        for kind in ("stt", "llm", "tts", "s2s", "agent")
    }
    agent_traces = AgentTraces()
    if "agent" in kinds:
        agent_traces = _agent_traces(stages["agent"], err)
    return Pipeline(
        name=name,
        path=path,
        sha256=sha256,
        stack=stack,
        stt=stages["stt"],
        llm=stages["llm"],
        tts=stages["tts"],
        endpointing=_endpointing(_table(data, "endpointing", err), err),
        chunker=_chunker(_table(data, "chunker", err), err),
        output=_output(_table(data, "output", err), err),
        turn=_turn(_table(data, "turn", err), err),
        turn_taking=_turn_taking(_table(data, "turn_taking", err), err),
        budget=_table(data, "budget", err),
        description=desc if isinstance(desc, str) else "",
        s2s=stages["s2s"] if "s2s" in kinds else None,
        agent=stages["agent"] if "agent" in kinds else None,
        agent_traces=agent_traces,
        cost=_cost(data, where, path),
        network=_network(data, text, path, err),
    )


def _cost(data: dict[str, Any], where: str, path: Path | None) -> Prices | None:
    """The ``[cost]`` table, on top of the prices file its ``prices`` key names (relative to
    the pipeline file)."""
    table = data.get("cost")
    if table is None:
        return None
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: [cost] must be a table")
    base = None
    named = table.get("prices")
    if named is not None:
        if not isinstance(named, str) or not named:
            raise ConfigError(f"{where}: [cost] prices must name a prices file (a TOML path)")
        file = Path(named) if path is None else path.parent / named
        base = load_prices(file)
    return parse_prices(table, source=where, base=base)


def load_prices(path: Path) -> Prices:
    """Read a prices file: a TOML file of one ``[cost]`` table's keys (currency, stage tables)."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"prices file {path} does not exist (docs/COMPARE.md: Cost)") from None
    except OSError as exc:
        raise ConfigError(f"cannot read prices file {path}: {exc.strerror}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    if "prices" in data:
        raise ConfigError(f"{path}: a prices file cannot name another prices file (prices =)")
    return parse_prices(data.get("cost", data), source=str(path))


def _network(data: dict[str, Any], text: str, path: Path | None, err: Any) -> NetworkProfile | None:
    """The ``[network]`` table as a profile (files/network.py), when the file has one."""
    if "network" not in data:
        return None
    from voicelat.files.network import network_from_table

    return network_from_table(_table(data, "network", err), text=text, path=path)


def _stage_kinds(data: dict[str, Any], err: Any) -> tuple[str, ...]:
    """``("s2s",)`` for a speech-to-speech pipeline, ``("agent",)`` for a black-box agent,
    else the cascade's three tables."""
    single = [k for k in ("s2s", "agent") if k in data]
    if not single:
        return ("stt", "llm", "tts")
    others = [k for k in ("stt", "llm", "tts", "s2s", "agent") if k in data and k != single[0]]
    if others:
        raise err(
            others[0],
            None,
            f"cannot be combined with [{single[0]}]: a pipeline is one speech-to-speech stage, "
            "one agent, or an [stt], [llm] and [tts] cascade",
        )
    return (single[0],)


def _agent_traces(table: StageTable, err: Any) -> AgentTraces:
    """The trace keys of ``[agent]``, taken out of the table (the stage never sees them)."""
    traces = AgentTraces(
        mapping=_choice(
            table, "traces", ("none", "pipecat", "genai", "livekit"), "none", "agent", err
        ),
        wait_ms=_int(table, "trace_wait_ms", 2000, "agent", err, lo=0, hi=60000),
        port=_int(table, "trace_port", 4318, "agent", err, lo=0, hi=65535),
        clock_offset_ms=_num(
            table, "trace_clock_offset_ms", 0.0, "agent", err, lo=-86_400_000, hi=86_400_000
        ),
        clock_uncertainty_ms=_num(
            table, "trace_clock_uncertainty_ms", 0.0, "agent", err, lo=0, hi=86_400_000
        ),
    )
    for key in _AGENT_TRACE_KEYS:
        table.pop(key, None)
        table.lines.pop(key, None)
    return traces


def _check_stage_table(table: Any, stage: str, err: Any) -> None:
    """Present, names its stage, and holds no secret (the rest is the stage's to check)."""
    if not isinstance(table, dict):
        raise err(
            stage,
            None,
            "is missing: every pipeline needs [stt], [llm] and [tts] tables "
            "(or one [s2s] or [agent] table)",
        )
    if not isinstance(table.get("stage"), str):
        raise err(stage, "stage", 'is missing: name the stage to use (e.g. stage = "openai")')
    for key, value in table.items():
        if _SECRET_KEY.search(key) and isinstance(value, str):
            raise err(
                stage,
                key,
                "looks like a secret: name an environment variable with api_key_env instead",
            )
        if key == "api_key_env" and isinstance(value, str) and _SECRET_LOOKING.match(value):
            raise err(stage, key, "must name an environment variable, not hold the key itself")


def _endpointing(ep: dict[str, Any], err: Any) -> Endpointing:
    endpointing = Endpointing(
        mode=_choice(ep, "mode", ("vad", "provider"), "vad", "endpointing", err),
        hangover_ms=_int(ep, "hangover_ms", 600, "endpointing", err, lo=0, hi=5000),
        threshold_dbfs=_num(ep, "threshold_dbfs", -40.0, "endpointing", err, lo=-120, hi=0),
        min_speech_ms=_int(ep, "min_speech_ms", 100, "endpointing", err, lo=0, hi=5000),
    )
    _only(ep, {"mode", "hangover_ms", "threshold_dbfs", "min_speech_ms"}, "endpointing", err)
    return endpointing


def _chunker(ch: dict[str, Any], err: Any) -> ChunkerConfig:
    chunker = ChunkerConfig(
        mode=_choice(ch, "mode", ("sentence", "clause", "token"), "sentence", "chunker", err),
        min_chars=_int(ch, "min_chars", 1, "chunker", err, lo=1, hi=1000),
    )
    _only(ch, {"mode", "min_chars"}, "chunker", err)
    return chunker


def _output(out: dict[str, Any], err: Any) -> OutputConfig:
    save = out.get("save_audio", False)
    if not isinstance(save, bool):
        raise err("output", "save_audio", "must be true or false")
    output = OutputConfig(
        latency_ms=_int(out, "latency_ms", 0, "output", err, lo=0, hi=2000), save_audio=save
    )
    _only(out, {"latency_ms", "save_audio"}, "output", err)
    return output


def _turn(tu: dict[str, Any], err: Any) -> TurnConfig:
    busy = tu.get("busy_wait", False)
    if not isinstance(busy, bool):
        raise err("turn", "busy_wait", "must be true or false")
    turn = TurnConfig(
        timeout_s=_num(tu, "timeout_s", 60.0, "turn", err, lo=1, hi=3600),
        pacer_lag_limit_ms=_num(tu, "pacer_lag_limit_ms", 10.0, "turn", err, lo=0, hi=10000),
        busy_wait=busy,
    )
    _only(tu, {"timeout_s", "pacer_lag_limit_ms", "busy_wait"}, "turn", err)
    return turn


def _turn_taking(tt: dict[str, Any], err: Any) -> TurnTaking:
    barge_in = tt.get("barge_in", True)
    if not isinstance(barge_in, bool):
        raise err("turn_taking", "barge_in", "must be true or false")
    taking = TurnTaking(
        barge_in=barge_in,
        min_speech_ms=_int(tt, "min_speech_ms", 300, "turn_taking", err, lo=0, hi=10000),
        threshold_dbfs=_num(tt, "threshold_dbfs", -40.0, "turn_taking", err, lo=-120, hi=0),
        ignore_words=_ignore_words(tt.get("ignore_words", []), err),
        words_timeout_ms=_int(tt, "words_timeout_ms", 1500, "turn_taking", err, lo=100, hi=10000),
    )
    keys = {"barge_in", "min_speech_ms", "threshold_dbfs", "ignore_words", "words_timeout_ms"}
    _only(tt, keys, "turn_taking", err)
    return taking


def _ignore_words(value: Any, err: Any) -> tuple[str, ...]:
    """``ignore_words``: a list of words (or short phrases, each of whose words is ignored),
    kept normalised as the transcript is, so "Mm-hmm." in the file matches "mm-hmm" heard."""
    if not isinstance(value, list):
        raise err("turn_taking", "ignore_words", f"must be a list of words, not {value!r}")
    out: list[str] = []
    for item in value:
        if not isinstance(item, str):
            raise err("turn_taking", "ignore_words", f"must hold only strings, not {item!r}")
        words = words_of(item)
        if not words:
            raise err("turn_taking", "ignore_words", f"holds an entry with no word: {item!r}")
        out += [w for w in words if w not in out]
    return tuple(out)


def _table(data: dict[str, Any], name: str, err: Any) -> dict[str, Any]:
    value = data.get(name, {})
    if not isinstance(value, dict):
        raise err(name, None, "must be a table")
    return value


def _only(table: dict[str, Any], allowed: set[str], name: str, err: Any) -> None:
    for key in table:
        if key not in allowed:
            raise err(name, key, f"is not a known key; valid keys: {', '.join(sorted(allowed))}")


def _choice(
    table: dict[str, Any], key: str, choices: tuple[str, ...], default: str, name: str, err: Any
) -> str:
    value = table.get(key, default)
    if value not in choices:
        raise err(name, key, f"must be one of {', '.join(choices)}, not {value!r}")
    return str(value)


def _int(
    table: dict[str, Any], key: str, default: int, name: str, err: Any, *, lo: int, hi: int
) -> int:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise err(name, key, f"must be an integer, not {value!r}")
    if not lo <= value <= hi:
        raise err(name, key, f"must be within {lo}..{hi}, not {value}")
    return value


def _num(
    table: dict[str, Any], key: str, default: float, name: str, err: Any, *, lo: float, hi: float
) -> float:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise err(name, key, f"must be a number, not {value!r}")
    if not lo <= value <= hi:
        raise err(name, key, f"must be within {lo:g}..{hi:g}, not {value}")
    return float(value)


def _line_of(text: str, table: str, key: str | None) -> int | None:
    """Line number of ``key`` inside ``[table]`` (or of the table header) in the TOML source."""
    if not text:
        return None
    current = ""
    header_line = None
    for no, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        m = re.match(r"^\[\[?\s*([^\]]+?)\s*\]\]?", stripped)
        if m:
            current = m.group(1)
            if current == table:
                header_line = no
            continue
        if key and current == table and re.match(rf"^\"?{re.escape(key)}\"?\s*=", stripped):
            return no
    return header_line
