"""The bad-input battery: one table of bad inputs across run, view, ci, compare, serve, stack and
live; each must end with its documented exit code, exactly one ``voicelat: error:`` line that
says what is wrong, and no traceback. Every case runs the real command in a subprocess; none
needs a server (the input is refused before any would start)."""

from __future__ import annotations

import json
import shutil
import struct
import wave
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.helpers import ROOT, voicelat

EMULATED = (ROOT / "pipelines" / "emulated-openai.toml").read_text()
FIXTURE = ROOT / "fixtures" / "weather_paris.wav"
KEY_ENV = "VOICELAT_EMULATOR_KEY"


# -- building the bad inputs ------------------------------------------------------------------
def _pipeline(d: Path, old: str = "", new: str = "") -> str:
    text = EMULATED.replace(old, new, 1) if old else EMULATED
    assert old == "" or text != EMULATED, f"{old!r} is not in the pipeline"
    path = d / "p.toml"
    path.write_text(text)
    return str(path)


def _wav(d: Path, *, rate: int = 16000, channels: int = 1, frames: bytes | None = None,
         data_size: int | None = None, name: str = "a.wav") -> Path:
    body = frames if frames is not None else FIXTURE.read_bytes()[44:]
    size = len(body) if data_size is None else data_size
    byte_rate = rate * 2 * channels % 2**32
    fmt = struct.pack("<HHIIHH", 1, channels, rate, byte_rate, 2 * channels, 16)
    data = b"fmt " + struct.pack("<I", 16) + fmt + b"data" + struct.pack("<I", size) + body
    path = d / name
    path.write_bytes(b"RIFF" + struct.pack("<I", 4 + len(data)) + b"WAVE" + data)
    return path


def _fixtures(d: Path, wav: Callable[[Path], Path] | None = None, **entry: object) -> str:
    fx = d / "fx"
    fx.mkdir()
    if wav is None:
        shutil.copy(FIXTURE, fx / "a.wav")
    else:
        wav(fx)
    (fx / "manifest.json").write_text(json.dumps({"fixtures": [{"file": "a.wav", **entry}]}))
    return str(fx)


def _silent(fx: Path) -> Path:
    path = fx / "a.wav"
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(b"\0\0" * 16000)
    return path


def _run_dir(d: Path, summary: object | None = None, turns: str | None = None) -> str:
    run = d / "run"
    run.mkdir()
    if summary is not None:
        (run / "summary.json").write_text(json.dumps(summary))
    if turns is not None:
        (run / "turns.jsonl").write_text(turns)
    return str(run)


def _file(d: Path, name: str = "afile", text: str = "x") -> str:
    (d / name).write_text(text)
    return str(d / name)


# -- the table ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    """``argv(tmp)`` is the command line; the error line must hold ``says``."""

    id: str
    argv: Callable[[Path], list[str]]
    code: int
    says: str
    env: dict[str, str] = field(default_factory=lambda: {KEY_ENV: "k"})


def _run(*extra: str) -> Callable[[Path], list[str]]:
    """``voicelat run`` on a good pipeline and fixtures, with ``extra`` flags."""
    return lambda d: ["run", "-p", _pipeline(d), "--no-tui", "-o", str(d / "o"), *extra]


def _run_p(old: str, new: str) -> Callable[[Path], list[str]]:
    """``voicelat run`` on the pipeline with ``old`` replaced by ``new``."""
    return lambda d: ["run", "-p", _pipeline(d, old, new), "--no-tui", "-o", str(d / "o")]


def _run_fx(wav: Callable[[Path], Path] | None = None, **entry: object) -> Callable[[Path], list[str]]:
    return lambda d: [
        "run", "-p", _pipeline(d), "--no-tui", "-o", str(d / "o"), "-f", _fixtures(d, wav, **entry)
    ]


BASE = "http://127.0.0.1:8401/v1"
CASES = [
    # run: flags
    Case("run-turns-huge", _run("--turns", "1" + "0" * 30), 2, "more than a run may plan"),
    Case("run-repeat-huge", _run("--repeat", "9" * 25), 2, "more than a run may plan"),
    Case("run-turns-word", _run("--turns", "many"), 2, "--turns"),
    Case("run-turns-zero", _run("--turns", "0"), 2, "--turns"),
    Case("run-warmup-negative", _run("--warmup", "-1"), 2, "--warmup"),
    Case("run-rate-zero", _run("--rate", "0"), 2, "--rate"),
    Case("run-rate-nan", _run("--rate", "nan"), 2, "--rate"),
    Case("run-rate-long-number", _run("--rate", "9" * 400), 2, "--rate"),
    Case("run-concurrency-zero", _run("--concurrency", "0"), 2, "--concurrency"),
    Case("run-rate-and-concurrency", _run("--rate", "1", "-c", "2"), 2, "not allowed with"),
    Case("run-unknown-flag", _run("--bogus"), 2, "unrecognized arguments"),
    # run: files
    Case("run-missing-pipeline", lambda d: ["run", "-p", str(d / "no.toml")], 2, "does not exist"),
    Case("run-missing-fixtures", _run("-f", "/nonexistent/fx"), 2, "does not exist"),
    Case("run-out-is-a-file", lambda d: ["run", "-p", _pipeline(d), "--no-tui", "-o", _file(d)],
         2, "is a file"),
    Case("run-out-under-a-file",
         lambda d: ["run", "-p", _pipeline(d), "--no-tui", "-o", _file(d) + "/sub"],
         2, "under a file"),
    Case("run-out-not-empty",
         lambda d: ["run", "-p", _pipeline(d), "--no-tui", "-o", str(Path(_file(d)).parent)],
         2, "not empty"),
    # run: pipeline contents
    Case("pipeline-not-toml", _run_p("[tts]", "[tts"), 2, "not valid TOML"),
    Case("pipeline-unknown-stage", _run_p('stage = "openai-tts"', 'stage = "nope"'), 2, "nope"),
    Case("pipeline-port-out-of-range", _run_p(BASE, "http://127.0.0.1:99999/v1"), 2,
         "Port out of range"),
    Case("pipeline-ipv6-unclosed", _run_p(BASE, "http://[::1/v1"), 2, "Invalid IPv6 URL"),
    Case("pipeline-stage-timeout-zero", _run_p('voice = "alloy"', 'voice = "alloy"\ntimeout_s = 0'),
         2, "timeout_s must be positive"),
    Case("pipeline-stage-timeout-negative",
         _run_p('voice = "alloy"', 'voice = "alloy"\ntimeout_s = -5'), 2, "must be positive"),
    Case("pipeline-max-tokens-negative", _run_p("max_tokens = 120", "max_tokens = -3"), 2,
         "max_tokens must be positive"),
    Case("pipeline-max-tokens-long", _run_p("max_tokens = 120", "max_tokens = " + "9" * 18), 2,
         "finite number"),
    Case("pipeline-temperature-nan", _run_p("temperature = 0.0", "temperature = nan"), 2,
         "temperature must be a finite number"),
    Case("pipeline-turn-timeout-zero", _run_p("timeout_s = 30", "timeout_s = 0"), 2,
         "timeout_s must be within"),
    Case("pipeline-inline-secret",
         _run_p('voice = "alloy"', 'voice = "alloy"\napi_key = "sk-123456"'), 2,
         "looks like a secret"),
    # run: keys
    Case("key-unset", _run(), 2, "is not set", env={KEY_ENV: ""}),
    Case("key-stray-newline", _run(), 2, "stray newline", env={KEY_ENV: "sk-0123456789\n"}),
    Case("key-non-ascii", _run(), 2, "non-ASCII", env={KEY_ENV: "sk-\u00e9\u00e9-0123456789"}),
    # run: fixtures
    Case("fixture-rate-1", _run_fx(lambda fx: _wav(fx, rate=1)), 2, "sample rate 1 Hz"),
    Case("fixture-rate-absurd", _run_fx(lambda fx: _wav(fx, rate=4_000_000_000)), 2,
         "sample rate"),
    Case("fixture-zero-channels", _run_fx(lambda fx: _wav(fx, channels=0)), 2, "0 channels"),
    Case("fixture-truncated-data", _run_fx(lambda fx: _wav(fx, data_size=10_000_000)), 2,
         "is truncated"),
    Case("fixture-silent", _run_fx(_silent), 2, "is silent"),
    Case("fixture-speech-end-past-end", _run_fx(speech_start_ms=100, speech_end_ms=99_000), 2,
         "past the end of the audio"),
    Case("fixture-not-a-wav", _run_fx(lambda fx: Path(_file(fx, "a.wav", "ID3 mp3"))), 2,
         "not a WAV file"),
    Case("fixture-manifest-empty",
         lambda d: ["run", "-p", _pipeline(d), "--no-tui", "-f",
                    str(Path(_file(d, "manifest.json", '{"fixtures": []}')).parent)],
         2, "non-empty"),
    Case("fixture-manifest-not-json",
         lambda d: ["run", "-p", _pipeline(d), "--no-tui", "-f",
                    str(Path(_file(d, "manifest.json", "{nope")).parent)],
         2, "not readable JSON"),
    # view
    Case("view-missing", lambda d: ["view", str(d / "nothing")], 2, "no results at"),
    Case("view-empty-dir", lambda d: ["view", str(d)], 2, "holds no turns.jsonl"),
    Case("view-summary-not-object", lambda d: ["view", _run_dir(d, [1, 2])], 2,
         "not a JSON object"),
    Case("view-summary-not-json",
         lambda d: ["view", str(Path(_file(d, "summary.json", "{")).parent)], 2,
         "not readable JSON"),
    Case("view-summary-newer-schema", lambda d: ["view", _run_dir(d, {"schema_version": 99})], 2,
         "upgrade voicelat"),
    Case("view-summary-wrong-shape",
         lambda d: ["view", _run_dir(d, {"schema_version": 1, "counts": {}, "failures": 1})], 2,
         "is damaged"),
    Case("view-only-junk-turns", lambda d: ["view", _run_dir(d, None, "[1]\n{bad\n")], 2,
         "no readable turn"),
    # ci
    Case("ci-tolerance-nan", lambda d: ["ci", "-p", _pipeline(d), "--tolerance-ms", "nan"], 2,
         "--tolerance-ms"),
    Case("ci-results-missing", lambda d: ["ci", "--results", str(d / "none")], 2, "no results at"),
    Case("ci-results-no-summary", lambda d: ["ci", "--results", _run_dir(d, None, "")], 2,
         "holds no readable turns and no summary.json"),
    Case("ci-budget-nan",
         lambda d: ["ci", "-p", _pipeline(d, "[turn]", "[budget.e2e]\np50_ms = nan\n\n[turn]")],
         2, "p50_ms"),
    Case("ci-budget-failure-rate",
         lambda d: ["ci", "-p", _pipeline(d, "[turn]", "[budget]\nmax_failure_rate = 2\n\n[turn]")],
         2, "max_failure_rate"),
    Case("ci-out-is-a-file", lambda d: ["ci", "-p", _pipeline(d), "-o", _file(d)], 2, "is a file"),
    # compare
    Case("compare-nothing", lambda d: ["compare"], 2, ""),
    Case("compare-missing-pipeline", lambda d: ["compare", str(d / "a.toml"), str(d / "b.toml")],
         2, "does not exist"),
    Case("compare-same-run-twice",
         lambda d: ["compare", _run_dir(d, {"schema_version": 1, "counts": {"turns": 0}}, ""),
                    str(d / "run")],
         2, "given twice"),
    # serve
    Case("serve-unknown", lambda d: ["serve", "nope"], 2, "nope"),
    Case("serve-nothing", lambda d: ["serve"], 2, "name the emulators"),
    Case("serve-port-out-of-range", lambda d: ["serve", "openai", "--port", "99999"], 2, "--port"),
    Case("serve-missing-profile",
         lambda d: ["serve", "openai", "--profile", str(d / "none.toml")], 2, "none.toml"),
    # stack
    Case("stack-port-env-word", lambda d: ["stack", "status"], 2, "VOICELAT_LLM_PORT",
         env={"VOICELAT_LLM_PORT": "abc"}),
    Case("stack-port-env-range", lambda d: ["stack", "status"], 2, "VOICELAT_STT_PORT",
         env={"VOICELAT_STT_PORT": "99999"}),
    Case("stack-bogus-action", lambda d: ["stack", "sideways"], 2, "invalid choice"),
    # live
    Case("live-missing-pipeline", lambda d: ["live", "-p", str(d / "no.toml")], 2,
         "does not exist"),
    Case("live-bad-flag", lambda d: ["live", "--bogus"], 2, "unrecognized arguments"),
]


def test_the_battery_is_broad() -> None:
    # Ids start with the command (pipeline-, key-, fixture- cases are `voicelat run`).
    commands = {c.id.split("-")[0] for c in CASES}
    assert len(CASES) >= 40 and len({c.id for c in CASES}) == len(CASES)
    assert {"run", "view", "ci", "compare", "serve", "stack", "live"} <= commands


@pytest.mark.e2e
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input(case: Case, tmp_path: Path) -> None:
    proc = voicelat(*case.argv(tmp_path), env=case.env, timeout=60)
    assert "Traceback" not in proc.stderr, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("voicelat: error:")]
    assert len(errors) == 1, proc.stderr
    assert case.says in errors[0], errors[0]
    assert proc.returncode == case.code, proc.stderr
