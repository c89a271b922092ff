"""Fuzzing the loaders: a fixtures manifest, a pipeline file (text, and tables of any shape
through every stage's option parser) and a results directory (summary.json and turns.jsonl of
any shape, Infinity, huge integers) are loaded and shown (the summary table `voicelat view`
prints) or refused with voicelat's own error, never another exception."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests import fuzzing
from tests.fuzzing import LONG, only_own_errors
from tests.helpers import ROOT
from voicelat.core.summaries.summary import summarize
from voicelat.engine.stageset import StageSet
from voicelat.files.fixtures import load_fixtures
from voicelat.files.pipeline import load_pipeline, parse_pipeline
from voicelat.files.results import load_run, turn_to_json
from voicelat.report.text import summary_table

_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
)
_JSON = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=5)
    ),
    max_leaves=25,
)
_WAV = (ROOT / "fixtures" / "weather_paris.wav").read_bytes()


def SHORT(fn: Any) -> Any:
    """The default suite's profile for the loaders: ~200 cases each (about 12 s for the four
    targets here), more than the shared 40 since these readers take what people edit by hand."""
    return settings(fuzzing._SHORT, max_examples=200)(fn)


# -- manifest ---------------------------------------------------------------------------------
_ENTRY = st.fixed_dictionaries(
    {},
    optional={
        "file": st.sampled_from(["a.wav", "missing.wav", "", "../a.wav", 3]),
        "id": _SCALARS,
        "text": _SCALARS,
        "speech_start_ms": _SCALARS,
        "speech_end_ms": _SCALARS,
        "sha256": st.one_of(_SCALARS, st.just("0" * 64)),
    },
)
_MANIFEST = st.one_of(_JSON, st.fixed_dictionaries({"fixtures": st.lists(_ENTRY, max_size=3)}))


def check_manifest(manifest: Any) -> None:
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "a.wav").write_bytes(_WAV)
        (Path(d) / "manifest.json").write_text(json.dumps(manifest))
        with only_own_errors():
            for fx in load_fixtures(Path(d)):
                assert fx.path.exists()


@SHORT
@given(_MANIFEST)
def test_manifest_loader_fuzz(manifest: Any) -> None:
    check_manifest(manifest)


@LONG
@given(_MANIFEST)
def test_manifest_loader_fuzz_long(manifest: Any) -> None:
    check_manifest(manifest)


# -- pipeline ---------------------------------------------------------------------------------
_LOCAL = (ROOT / "pipelines" / "emulated-openai.toml").read_text().splitlines()
_STAGES = ["openai", "openai-stt", "openai-tts", "wyoming-stt", "wyoming-tts", "inworld-tts",
           "deepgram-stt", "cartesia-tts", "nope", 3]
_OPTION_KEYS = ["base_url", "url", "model", "timeout_s", "max_tokens", "temperature", "rate",
                "api_key_env", "voice", "endpoint", "keepalive", "query", "auth", "language"]


def _stage_table(stage: Any) -> Any:
    return st.fixed_dictionaries(
        {"stage": st.just(stage)}, optional={k: _JSON for k in _OPTION_KEYS}
    )


_TABLES = st.fixed_dictionaries(
    {
        "stt": st.sampled_from(_STAGES).flatmap(_stage_table),
        "llm": st.sampled_from(_STAGES).flatmap(_stage_table),
        "tts": st.sampled_from(_STAGES).flatmap(_stage_table),
    },
    optional={k: _JSON for k in ["pipeline", "endpointing", "chunker", "turn", "budget", "output"]},
)


def check_pipeline_tables(data: dict[str, Any]) -> None:
    with only_own_errors():
        StageSet.from_pipeline(parse_pipeline(data))


def check_pipeline_text(lines: list[str]) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "p.toml"
        path.write_text("\n".join(lines))
        with only_own_errors():
            StageSet.from_pipeline(load_pipeline(path))


# Lines of a real pipeline file, shuffled, dropped, duplicated and mixed with junk.
_TEXT = st.lists(st.one_of(st.sampled_from(_LOCAL), st.text(max_size=20)), max_size=50)


@SHORT
@given(_TABLES)
def test_pipeline_tables_fuzz(data: dict[str, Any]) -> None:
    check_pipeline_tables(data)


@LONG
@given(_TABLES)
def test_pipeline_tables_fuzz_long(data: dict[str, Any]) -> None:
    check_pipeline_tables(data)


@SHORT
@given(_TEXT)
def test_pipeline_text_fuzz(lines: list[str]) -> None:
    check_pipeline_text(lines)


@LONG
@given(_TEXT)
def test_pipeline_text_fuzz_long(lines: list[str]) -> None:
    check_pipeline_text(lines)


# -- results ----------------------------------------------------------------------------------
def _real_turn_line() -> dict[str, Any]:
    from tests.export.synthetic_turns import synthetic_turns

    return turn_to_json(synthetic_turns(1)[0])


_TURN = _real_turn_line()


@st.composite
def _damaged_turn(draw: st.DrawFn) -> Any:
    """A real turn line with some of its values replaced by anything."""
    line = dict(_TURN)
    for key in draw(st.lists(st.sampled_from(sorted(line)), max_size=4)):
        line[key] = draw(_JSON)
    if draw(st.booleans()):
        line["milestones_ns"] = draw(st.dictionaries(st.text(max_size=6), _SCALARS, max_size=4))
    return line


_SUMMARY = st.one_of(
    _JSON,
    st.fixed_dictionaries(
        {"schema_version": st.just(1)},
        optional={
            k: _JSON
            for k in ["run", "counts", "e2e", "segments", "figures", "spans", "waterfall",
                      "failures", "loop_lag", "trust", "budget", "pipeline", "stages"]
        },
    ),
)


def check_results(summary: Any, turns: list[Any], junk: list[str]) -> None:
    with tempfile.TemporaryDirectory() as d:
        run = Path(d)
        if summary is not None:
            (run / "summary.json").write_text(json.dumps(summary))
        lines = [json.dumps(t) for t in turns] + junk
        (run / "turns.jsonl").write_text("\n".join(lines) + "\n")
        with only_own_errors():
            loaded = load_run(run)
            typed = loaded.run_summary or summarize(
                loaded.turns, run={}, pipeline={}, fixtures=[], stages={}
            )
            summary_table(typed, str(run))


_RESULTS = (
    st.one_of(st.none(), _SUMMARY),
    st.lists(st.one_of(_damaged_turn(), st.just(_TURN)), max_size=4),
    st.lists(st.text(max_size=20), max_size=2),
)


@SHORT
@given(*_RESULTS)
def test_results_reader_fuzz(summary: Any, turns: list[Any], junk: list[str]) -> None:
    check_results(summary, turns, junk)


@LONG
@given(*_RESULTS)
def test_results_reader_fuzz_long(summary: Any, turns: list[Any], junk: list[str]) -> None:
    check_results(summary, turns, junk)
