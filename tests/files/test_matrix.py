"""Matrix expansion, exclude rules, labels, and the interleaved fair schedule (no I/O but tmp files)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.helpers import ROOT
from voicelat.core.base.errors import ConfigError
from voicelat.core.base.plan import PlannedTurn
from voicelat.files.matrix import (
    Slot,
    check_stages,
    combinations_from_files,
    fair_schedule,
    load_matrix,
    parse_matrix,
)
from voicelat.stages.base import load_stage_class


def _doc(**extra: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "matrix": {"name": "m", "stack": "local"},
        "stt": [
            {"label": "whisper", "stage": "wyoming-stt"},
            {"label": "sphinx", "stage": "pocketsphinx-stt"},
        ],
        "llm": [{"stage": "openai", "base_url": "http://x/v1", "max_tokens": 8}],
        "tts": [
            {"label": "piper", "stage": "wyoming-tts"},
            {"label": "espeak", "stage": "espeak-tts"},
        ],
        "endpointing": {"hangover_ms": 300},
        "budget": {"min_turns": 2},
    }
    doc.update(extra)
    return doc


def test_product_of_alternatives_in_declaration_order() -> None:
    m = parse_matrix(_doc())
    # The single LLM alternative is left out of the names: it does not tell them apart.
    assert [c.name for c in m.combinations] == [
        "whisper+piper",
        "whisper+espeak",
        "sphinx+piper",
        "sphinx+espeak",
    ]
    c = m.combinations[3]
    assert c.labels == {"stt": "sphinx", "llm": "openai", "tts": "espeak"}
    assert c.pipeline.stt == {"stage": "pocketsphinx-stt"}  # the label is not a stage option
    assert c.pipeline.tts["stage"] == "espeak-tts"
    assert c.pipeline.llm["max_tokens"] == 8
    # Shared tables reach every combination.
    assert {x.pipeline.endpointing.hangover_ms for x in m.combinations} == {300}
    assert {x.pipeline.budget["min_turns"] for x in m.combinations} == {2}
    assert {x.pipeline.stack for x in m.combinations} == {"local"}
    # Each combination has its own stable identity.
    assert len({x.pipeline.sha256 for x in m.combinations}) == 4
    assert parse_matrix(_doc()).combinations[3].pipeline.sha256 == c.pipeline.sha256


def test_exclude_drops_matching_combinations_and_reports_them() -> None:
    doc = _doc()
    doc["matrix"]["exclude"] = [
        {"stt": "sphinx", "tts": "piper"},
        {"stt": "whisper", "tts": "espeak"},
    ]
    m = parse_matrix(doc)
    assert [c.name for c in m.combinations] == ["whisper+piper", "sphinx+espeak"]
    assert m.excluded == ["whisper+espeak", "sphinx+piper"]


def test_exclude_on_one_stage_drops_its_whole_row() -> None:
    m = parse_matrix(_doc(exclude=[{"tts": "piper"}]))
    assert [c.name for c in m.combinations] == ["whisper+espeak", "sphinx+espeak"]


def test_exclude_with_an_unknown_label_lists_the_labels() -> None:
    with pytest.raises(
        ConfigError, match=r"no tts alternative labelled 'kokoro'; tts labels: piper, espeak"
    ):
        parse_matrix(_doc(exclude=[{"tts": "kokoro"}]))


def test_excluding_everything_is_an_error() -> None:
    with pytest.raises(ConfigError, match="every combination is excluded"):
        parse_matrix(_doc(exclude=[{"llm": "openai"}]))


def test_duplicate_labels_are_refused() -> None:
    doc = _doc()
    doc["tts"] = [{"stage": "wyoming-tts"}, {"stage": "wyoming-tts", "voice": "x"}]
    with pytest.raises(ConfigError, match="two tts alternatives are labelled 'wyoming-tts'"):
        parse_matrix(doc)


def test_a_stage_list_cannot_be_empty_or_stageless() -> None:
    with pytest.raises(ConfigError, match=r"needs at least one \[\[llm\]\]"):
        parse_matrix(_doc(llm=[]))
    with pytest.raises(ConfigError, match="stt alternative #2 needs stage"):
        parse_matrix(_doc(stt=[{"stage": "wyoming-stt"}, {"label": "x"}]))


def test_unknown_top_level_table_is_named() -> None:
    with pytest.raises(ConfigError, match="unknown table"):
        parse_matrix(_doc(pipelines={}))


def test_unknown_stage_lists_the_known_ones() -> None:
    doc = _doc()
    doc["stt"].append({"label": "vosk", "stage": "vosk-stt"})
    m = parse_matrix(doc)
    with pytest.raises(ConfigError) as err:
        check_stages(m.combinations, load_stage_class, "matrix.toml")
    msg = str(err.value)
    assert msg.startswith("matrix.toml: stt alternative 'vosk': unknown stt stage 'vosk-stt'")
    assert "pocketsphinx-stt" in msg and "wyoming-stt" in msg


def test_missing_matrix_file_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"matrix file .*nope.toml does not exist"):
        load_matrix(tmp_path / "nope.toml")


def test_the_shipped_local_matrix_is_two_by_two() -> None:
    m = load_matrix(ROOT / "pipelines" / "matrix-local.toml")
    assert len(m.combinations) == 4
    assert {c.labels["stt"] for c in m.combinations} == {"whisper", "pocketsphinx"}
    assert {c.labels["tts"] for c in m.combinations} == {"piper", "espeak"}
    check_stages(m.combinations, load_stage_class, "matrix-local.toml")


def test_pipeline_files_become_combinations_named_after_them(tmp_path: Path) -> None:
    local = (ROOT / "pipelines" / "local.toml").read_text()
    a = tmp_path / "a.toml"
    b = tmp_path / "b.toml"
    a.write_text(local)
    b.write_text(local.replace('name = "local"', 'name = "other"'))
    assert [c.name for c in combinations_from_files([a, b])] == ["local", "other"]
    # Two pipelines with one name: the file names tell them apart.
    b.write_text(local)
    assert [c.name for c in combinations_from_files([a, b])] == ["a", "b"]


def test_missing_pipeline_file_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"pipeline file .*missing.toml does not exist"):
        combinations_from_files([ROOT / "pipelines" / "local.toml", tmp_path / "missing.toml"])


# -- the fair schedule ---------------------------------------------------------------------------
def test_schedule_runs_each_fixture_on_every_combination_before_the_next() -> None:
    slots = fair_schedule(3, ["A", "B"], warmup=1)
    got = [(s.combination, s.planned.fixture, s.planned.warmup) for s in slots]
    assert got == [
        # one warm-up turn per combination, first
        (0, "A", True),
        (1, "A", True),
        (2, "A", True),
        # then fixture A on every combination, then fixture B on every combination
        (0, "A", False),
        (1, "A", False),
        (2, "A", False),
        (0, "B", False),
        (1, "B", False),
        (2, "B", False),
    ]
    assert [s.position for s in slots] == list(range(9))


def test_every_combination_gets_the_same_plan() -> None:
    slots = fair_schedule(2, ["A", "B", "C"], repeat=2, warmup=2)
    per = {c: [s.planned for s in slots if s.combination == c] for c in (0, 1)}
    assert per[0] == per[1]
    assert sum(p.warmup for p in per[0]) == 2
    assert [p.fixture for p in per[0] if not p.warmup] == ["A", "B", "C", "A", "B", "C"]


def test_turns_caps_measured_turns_per_combination() -> None:
    slots = fair_schedule(4, ["A", "B", "C"], turns=2, warmup=1)
    assert len(slots) == 4 * 3
    assert slots[-1] == Slot(11, 3, PlannedTurn(2, "B", 0, False))


def test_schedule_needs_a_combination() -> None:
    with pytest.raises(ValueError, match="no combinations"):
        fair_schedule(0, ["A"])
