"""Results on disk: ``turns.jsonl`` (one line per turn, flushed as it ends) and ``summary.json``.

A run killed mid-write leaves every finished turn readable; the reader skips a torn last line and
says how many lines it skipped.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from voicelat.core.base import jsontext
from voicelat.core.base.errors import ConfigError, InfraError, VoicelatError
from voicelat.core.base.secrets import scrub_json
from voicelat.core.base.turn import SpanRecord, Turn
from voicelat.core.calls.call import CallRecord
from voicelat.core.summaries.run_summary import SCHEMA_VERSION as SCHEMA_VERSION
from voicelat.core.summaries.run_summary import RunSummary

TURNS_FILE = "turns.jsonl"
SUMMARY_FILE = "summary.json"
#: A run of calls (``run --scenario``): one line a call (core/calls/call.py ``CallRecord``).
CALLS_FILE = "calls.jsonl"


def turn_to_json(turn: Turn) -> dict[str, Any]:
    """A turn as one JSON object (integer ns everywhere; milestones relative to ``t0_ns``)."""
    return {
        "schema_version": SCHEMA_VERSION,
        "index": turn.index,
        "fixture": turn.fixture,
        "repeat": turn.repeat,
        "warmup": turn.warmup,
        "cold": turn.cold,
        "cold_stages": list(turn.cold_stages),
        "failed": turn.failed,
        "failure": (
            {"stage": turn.failure_stage, "reason": turn.failure_reason} if turn.failed else None
        ),
        "flags": list(turn.flags),
        "t0_ns": turn.t0_ns,
        "wall_time_ns": turn.wall_time_ns,
        "e2e_ns": turn.e2e_ns,
        "milestones_ns": dict(turn.milestones),
        "segments_ns": dict(turn.segments),
        "figures": dict(turn.figures),
        "spans": [
            {"stage": s.stage, "name": s.name, "start_ns": s.start_ns, "end_ns": s.end_ns}
            for s in turn.spans
        ],
        "transcript": turn.transcript,
        "expected": turn.expected,
        "reply": turn.reply,
        "extra": dict(turn.extra),
    }


#: The largest |ns| a results file may hold (~146 years): a 2^63 ns segment once hung the TUI
#: (it drew a bar that long); beyond this a value is damage, not a measurement.
MAX_NS = 1 << 62


def _ns(value: Any, name: str = "value") -> int:
    """An integer-ns field read back; ValueError for anything a run cannot have written
    (a bool, a string, a float such as Infinity, a huge integer)."""
    if isinstance(value, bool) or not isinstance(value, int) or abs(value) > MAX_NS:
        raise ValueError(f"{name} is not an integer ns value: {_shown(value)}")
    return value


def _duration(value: Any, name: str) -> int:
    """A duration read back: an integer ns value that is not negative (segments are clamped
    at zero and a reply before the end of speech has no e2e: a run never writes one)."""
    if _ns(value, name) < 0:
        raise ValueError(f"{name} is negative ({value})")
    return int(value)


def _ns_or_none(value: Any, name: str = "value") -> int | None:
    return None if value is None else _ns(value, name)


def _shown(value: Any) -> str:
    """A value in a message: its type and a short repr (a damaged field can be huge)."""
    text = repr(value)
    return f"{type(value).__name__} {text[:40]}{'...' if len(text) > 40 else ''}"


def _mapping(data: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = data[key] if key in _REQUIRED else data.get(key)
    if value is None and key not in _REQUIRED:
        return {}
    if not isinstance(value, Mapping):
        raise TypeError(f"{key} is not a JSON object: {_shown(value)}")
    return value


def _strings(data: Mapping[str, Any], key: str) -> tuple[str, ...]:
    value = data.get(key)
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
        raise TypeError(f"{key} is not a list of strings: {_shown(value)}")
    return tuple(value)


#: The fields every turn line has (a line without one is damage).
_REQUIRED = frozenset({"index", "fixture", "t0_ns", "milestones_ns", "segments_ns"})


def _finite(figures: Mapping[str, Any]) -> dict[str, Any]:
    """Figures without NaN, infinities or huge numbers (they break every report's arithmetic)."""
    return {
        str(k): v
        for k, v in figures.items()
        if not isinstance(v, int | float) or isinstance(v, bool) or (v == v and abs(v) < 1e18)
    }


def turn_from_json(data: Mapping[str, Any]) -> Turn:
    """Inverse of :func:`turn_to_json`; raises ``KeyError``/``TypeError``/``ValueError`` on a
    malformed line (wrong types, non-finite or out-of-range numbers)."""
    missing = sorted(_REQUIRED - set(data))
    if missing:
        raise KeyError(f"no {missing[0]}")
    failure = _mapping(data, "failure")
    e2e = data.get("e2e_ns")
    return Turn(
        index=_duration(data["index"], "index"),
        fixture=str(data["fixture"]),
        t0_ns=_ns(data["t0_ns"], "t0_ns"),
        milestones={
            str(k): _ns(v, f"milestone {k}") for k, v in _mapping(data, "milestones_ns").items()
        },
        segments={
            str(k): _duration(v, f"segment {k}") for k, v in _mapping(data, "segments_ns").items()
        },
        e2e_ns=None if e2e is None else _duration(e2e, "e2e_ns"),
        figures=_finite(_mapping(data, "figures")),
        spans=tuple(
            SpanRecord(
                str(s["stage"]),
                str(s["name"]),
                _ns(s["start_ns"], "span start_ns"),
                _ns(s["end_ns"], "span end_ns"),
            )
            for s in data.get("spans") or ()
        ),
        repeat=_duration(data.get("repeat", 0), "repeat"),
        warmup=bool(data.get("warmup", False)),
        cold=bool(data.get("cold", False)),
        cold_stages=_strings(data, "cold_stages"),
        failed=bool(data.get("failed", False)),
        failure_stage=_str_or_none(failure.get("stage")),
        failure_reason=_str_or_none(failure.get("reason")),
        flags=_strings(data, "flags"),
        transcript=_str_or_none(data.get("transcript")),
        expected=_str_or_none(data.get("expected")),
        reply=_str_or_none(data.get("reply")),
        wall_time_ns=_ns_or_none(data.get("wall_time_ns")),
        extra=dict(_mapping(data, "extra")),
    )


def _str_or_none(value: Any) -> str | None:
    return None if value is None else str(value)


class TurnsWriter:
    """Appends one line per finished turn and makes it durable before returning.

    A write that fails (a full disk, an I/O error) raises :class:`InfraError` (exit 3) naming
    the file and the fix, and leaves no torn line: the file is cut back to its last whole turn.
    """

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.path = run_dir / TURNS_FILE
        try:
            run_dir.mkdir(parents=True, exist_ok=True)
            # Unbuffered: a failed write leaves nothing pending that close() would retry.
            self._fh: IO[bytes] | None = self.path.open("ab", buffering=0)
            self._size = self._fh.seek(0, os.SEEK_END)
        except OSError as exc:
            raise _write_error(self.path, exc) from None

    def write(self, turn: Turn) -> None:
        if self._fh is None:
            raise RuntimeError("turns file already closed")
        line = (json.dumps(turn_to_json(turn), separators=(",", ":")) + "\n").encode()
        fd = self._fh.fileno()
        try:
            view = memoryview(line)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, self._size)  # no torn line for the readers
            raise _write_error(self.path, exc) from None
        self._size += len(line)

    def close(self) -> None:
        if self._fh is not None:
            with contextlib.suppress(OSError):  # nothing is buffered: nothing can be lost
                self._fh.close()
            self._fh = None


def write_turns(run_dir: Path, turns: Iterable[Turn]) -> Path:
    """Write a whole ``turns.jsonl`` at once (turns that exist already, e.g. an import), made
    durable by one fsync: :class:`TurnsWriter`'s fsync per turn costs ~10 ms each on a busy
    disk, fine as turns finish, minutes for a week of imported calls."""
    path = run_dir / TURNS_FILE
    tmp = path.with_suffix(".jsonl.tmp")
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        with tmp.open("w", encoding="utf-8") as fh:
            for turn in turns:
                fh.write(json.dumps(turn_to_json(turn), separators=(",", ":")) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise _write_error(path, exc) from None
    return path


def _write_error(path: Path, exc: OSError) -> InfraError:
    return InfraError(
        f"cannot write {path}: {exc.strerror or exc}; free some space or choose another --out "
        "(the turns written so far are kept)"
    )


def write_calls(run_dir: Path, calls: Sequence[CallRecord]) -> Path:
    """Write ``calls.jsonl`` (one line a call) atomically, after the run (off its loop)."""
    path = run_dir / CALLS_FILE
    tmp = path.with_suffix(".jsonl.tmp")
    try:
        # Scrubbed as summary.json is: a call record quotes its turns' failures and replies.
        lines = "".join(json.dumps(scrub_json(c.to_json())) + "\n" for c in calls)
        tmp.write_text(lines, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise _write_error(path, exc) from None
    return path


def read_calls(run_dir: Path) -> list[CallRecord]:
    """The call records of a run of calls (``calls.jsonl``; none for single turns). A line
    that is not a call record is skipped."""
    path = run_dir / CALLS_FILE
    if not path.is_file():
        return []
    out: list[CallRecord] = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            data = jsontext.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict):
            with contextlib.suppress(TypeError, ValueError):
                out.append(CallRecord.from_json(data))
    return out


def write_summary(run_dir: Path, summary: RunSummary | Mapping[str, Any]) -> Path:
    """Write ``summary.json`` atomically (a crash never leaves half a summary)."""
    if isinstance(summary, RunSummary):
        summary = summary.to_json()
    # The last line of defence: whatever a server's text reached the summary, no key does.
    summary = scrub_json(summary)
    path = run_dir / SUMMARY_FILE
    tmp = path.with_suffix(".json.tmp")
    try:
        tmp.write_text(json.dumps(summary, indent=2, sort_keys=False) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise _write_error(path, exc) from None
    return path


def _first_missing(path: Path) -> Path | None:
    """The topmost directory of ``path`` that does not exist yet (None when it exists)."""
    if path.exists():
        return None
    while not path.parent.exists() and path.parent != path:
        path = path.parent
    return path


def check_out_dir(path: Path) -> None:
    """A results directory a run can write: empty or new, creatable, writable.

    A bad ``--out`` (a file, under a file, not empty) is exit 2; one the system will not let
    us write (read-only, full, no permission) is exit 3. Checked before any server starts.
    """
    if path.exists() and not path.is_dir():
        raise ConfigError(f"--out {path} is a file, not a directory: choose another --out")
    try:
        if path.is_dir() and any(path.iterdir()):
            raise ConfigError(f"results directory {path} is not empty: choose another --out")
        created = _first_missing(path)
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".voicelat-write-test"
        probe.write_bytes(b"x")
        probe.unlink()
        # Leave nothing behind: a run refused later (a bad flag) must not leave an empty --out.
        while created is not None:
            path.rmdir()
            if path == created:
                break
            path = path.parent
    except (NotADirectoryError, FileExistsError):
        raise ConfigError(
            f"--out {path} is under a file, not a directory: choose another --out"
        ) from None
    except OSError as exc:
        raise InfraError(
            f"cannot write the results directory {path}: {exc.strerror or exc}; "
            "choose another --out"
        ) from None


@dataclass(frozen=True)
class LoadedRun:
    """A run directory read back: its turns, its summary (if any) and what could not be read.

    ``run_summary`` is the typed summary; ``summary`` the ``summary.json`` document itself.
    """

    path: Path
    turns: tuple[Turn, ...]
    summary: dict[str, Any] | None
    skipped_lines: int
    #: One ``line N: what is wrong`` per turns.jsonl line skipped (``skipped_lines`` of them).
    problems: tuple[str, ...] = ()

    @property
    def run_summary(self) -> RunSummary | None:
        """The summary, typed (None when the run wrote none: killed before its end)."""
        return None if self.summary is None else _typed_summary(self.summary, self.path)


def _typed_summary(summary: dict[str, Any], run_dir: Path) -> RunSummary:
    try:
        return RunSummary.from_json(summary)
    except (TypeError, ValueError, AttributeError, KeyError, OverflowError) as exc:
        # Valid JSON of the wrong shape (a hand edit, a damaged copy): one line, not a traceback.
        raise VoicelatError(
            f"{run_dir / SUMMARY_FILE} is damaged ({type(exc).__name__}: {exc}); "
            f"delete it to view the turns alone"
        ) from None


def load_run(path: Path) -> LoadedRun:
    """Read a run directory (or a ``summary.json`` / ``turns.jsonl`` path inside one)."""
    run_dir = path.parent if path.is_file() else path
    if not run_dir.exists():
        raise VoicelatError(f"no results at {path}: give the directory a run wrote (see --out)")
    turns_path = run_dir / TURNS_FILE
    summary_path = run_dir / SUMMARY_FILE
    if not turns_path.exists() and not summary_path.exists():
        raise VoicelatError(
            f"{run_dir} holds no {TURNS_FILE} or {SUMMARY_FILE}: is it a voicelat run directory?"
        )
    summary: dict[str, Any] | None = None
    if summary_path.exists():
        try:
            summary = jsontext.loads(_read_text(summary_path))
        except ValueError as exc:
            raise VoicelatError(f"{summary_path} is not readable JSON ({exc})") from None
        if not isinstance(summary, dict):
            raise VoicelatError(f"{summary_path} is not a voicelat summary (not a JSON object)")
        check_schema(summary.get("schema_version"), summary_path)
        if set(summary) <= {"schema_version"}:
            # Only a schema_version (a damaged or hand-made file): it would hide every valid
            # turn behind "0 turns"; the readers summarize the turns themselves instead.
            summary = None
    if summary is not None:
        _typed_summary(summary, run_dir)  # a damaged summary is refused here, not mid-report
    turns: list[Turn] = []
    problems: list[str] = []
    if turns_path.exists():
        turns, problems = read_turn_lines(
            _read_text(turns_path, errors="replace").splitlines(), turns_path
        )
    return LoadedRun(run_dir, tuple(turns), summary, len(problems), tuple(problems))


def _read_text(path: Path, errors: str = "strict") -> str:
    """A results file's text; a directory in its place or an unreadable file is one line."""
    if path.is_dir():
        raise VoicelatError(f"{path} is a directory, not a file: remove it or give another run")
    try:
        return path.read_text(encoding="utf-8", errors=errors)
    except UnicodeDecodeError as exc:
        raise VoicelatError(
            f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start})"
        ) from None
    except OSError as exc:
        raise VoicelatError(f"cannot read {path}: {exc.strerror or exc}") from None


def read_turns(lines: Iterable[str], source: Path) -> tuple[list[Turn], int]:
    """Parse turn lines; unreadable lines (a torn last write) are counted, not fatal."""
    turns, problems = read_turn_lines(lines, source)
    return turns, len(problems)


def read_turn_lines(lines: Iterable[str], source: Path) -> tuple[list[Turn], list[str]]:
    """Parse turn lines: the turns, and one ``line N: what is wrong`` per line skipped.

    A damaged record (a torn or truncated line, a field of the wrong type, a negative
    duration, an index seen before) is skipped, never fatal and never silent: the callers
    print each problem as a warning and count them. A newer schema is refused outright.
    """
    turns: list[Turn] = []
    problems: list[str] = []
    first_line: dict[int, int] = {}
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            turn = _turn_line(line, source)
        except _Damaged as exc:
            problems.append(f"line {number}: {exc}")
            continue
        if turn.index in first_line:
            problems.append(
                f"line {number}: index {turn.index} again (first on line {first_line[turn.index]})"
            )
            continue
        first_line[turn.index] = number
        turns.append(turn)
    return turns, problems


class _Damaged(ValueError):
    """One turn line that is not a turn (the message says why)."""


def _turn_line(line: str, source: Path) -> Turn:
    try:
        data = jsontext.loads(line)
    except jsontext.TooDeep:
        raise _Damaged(jsontext.TOO_DEEP) from None
    except ValueError:
        raise _Damaged("not JSON (a torn or truncated write?)") from None
    if not isinstance(data, dict):
        raise _Damaged(f"not a JSON object ({type(data).__name__})")
    version = data.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise _Damaged("no schema_version: not a voicelat turn")
    check_schema(version, source)  # a newer schema is refused, not skipped
    try:
        return turn_from_json(data)
    except KeyError as exc:
        raise _Damaged(str(exc.args[0]) if exc.args else "a field is missing") from None
    except (TypeError, ValueError, AttributeError, OverflowError) as exc:
        raise _Damaged(str(exc) or type(exc).__name__) from None


def check_schema(version: object, source: Path) -> None:
    """Refuse results without a schema version, or of a schema newer than this voicelat reads."""
    if not isinstance(version, int):
        raise VoicelatError(f"{source} has no schema_version: it was not written by voicelat")
    if version > SCHEMA_VERSION:
        raise VoicelatError(
            f"{source} uses results schema {version}, newer than this voicelat reads "
            f"({SCHEMA_VERSION}): upgrade voicelat (pip install -U voicelat)"
        )
