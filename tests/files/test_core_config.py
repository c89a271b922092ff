"""Pipeline files: a valid one parses; each mistake is a ConfigError naming table, key and line."""

from __future__ import annotations

import copy as copy_module
import dataclasses
import hashlib
import json
import pickle
import re
import tomllib
from pathlib import Path

import pytest

from voicelat.core.base.errors import ConfigError
from voicelat.files.pipeline import (
    ChunkerConfig,
    Endpointing,
    StageTable,
    default_pipeline_path,
    load_pipeline,
    parse_pipeline,
)

VALID = """\
[pipeline]
name = "test"
description = "a test pipeline"

[endpointing]
mode = "vad"
hangover_ms = 500
threshold_dbfs = -45.5

[stt]
stage = "wyoming-stt"
url = "tcp://127.0.0.1:10300"

[llm]
stage = "openai"
base_url = "http://127.0.0.1:8080/v1"
max_tokens = 40
api_key_env = "OPENAI_API_KEY"

[tts]
stage = "wyoming-tts"
url = "tcp://127.0.0.1:10200"

[chunker]
mode = "clause"
min_chars = 4

[output]
latency_ms = 20
save_audio = true

[turn]
timeout_s = 30

[budget]
max_failure_rate = 0.1

[budget.e2e]
p90_ms = 3000
"""


def write(tmp_path: Path, text: str, name: str = "p.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def line_no(text: str, needle: str) -> int:
    """1-based number of the line that contains ``needle``."""
    for no, line in enumerate(text.splitlines(), start=1):
        if needle in line:
            return no
    raise AssertionError(needle)


def load_error(tmp_path: Path, text: str) -> str:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_pipeline(path)
    msg = str(info.value)
    assert msg.startswith(str(path)), msg  # the file is named first
    assert "\n" not in msg.strip()  # one line a person can act on
    return msg


def test_valid_pipeline_parses(tmp_path: Path) -> None:
    path = write(tmp_path, VALID)
    p = load_pipeline(path)
    assert p.name == "test" and p.description == "a test pipeline"
    assert p.path == path
    assert p.sha256 == hashlib.sha256(VALID.encode()).hexdigest()
    assert p.stack is None
    assert p.stt == {"stage": "wyoming-stt", "url": "tcp://127.0.0.1:10300"}
    assert p.llm["max_tokens"] == 40 and p.llm["api_key_env"] == "OPENAI_API_KEY"
    assert p.endpointing == Endpointing(mode="vad", hangover_ms=500, threshold_dbfs=-45.5)
    assert p.chunker == ChunkerConfig(mode="clause", min_chars=4)
    assert p.output.latency_ms == 20 and p.output.save_audio is True
    assert p.turn.timeout_s == 30.0 and p.turn.pacer_lag_limit_ms == 10.0
    assert p.budget == {"max_failure_rate": 0.1, "e2e": {"p90_ms": 3000}}
    j = p.to_json()
    assert j["endpointing"]["hangover_ms"] == 500 and j["path"] == str(path)


def test_defaults_when_optional_tables_are_absent() -> None:
    data = {t: {"stage": "x"} for t in ("stt", "llm", "tts")}
    p = parse_pipeline(data)
    assert p.name == "pipeline"
    assert p.endpointing == Endpointing()
    assert p.chunker == ChunkerConfig()
    assert p.budget == {}


def test_shipped_local_pipeline_is_valid() -> None:
    p = load_pipeline(default_pipeline_path())
    assert p.stack == "local"
    assert p.name == "local"


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_pipeline(tmp_path / "nope.toml")


def test_invalid_toml_reports_the_line(tmp_path: Path) -> None:
    text = VALID.replace('mode = "clause"', "mode = clause")
    msg = load_error(tmp_path, text)
    line = line_no(text, "mode = clause")
    assert "not valid TOML" in msg
    assert f":{line}:" in msg


def test_missing_llm_table(tmp_path: Path) -> None:
    start = VALID.index("[llm]")
    text = VALID[:start] + VALID[VALID.index("[tts]") :]
    msg = load_error(tmp_path, text)
    assert "[llm]" in msg and "missing" in msg


def test_missing_stage_key_points_at_the_table(tmp_path: Path) -> None:
    text = VALID.replace('stage = "openai"\n', "")
    msg = load_error(tmp_path, text)
    assert "[llm] stage" in msg and "missing" in msg
    assert f":{line_no(text, '[llm]')}:" in msg


def test_wrong_type_in_endpointing(tmp_path: Path) -> None:
    text = VALID.replace("hangover_ms = 500", 'hangover_ms = "x"')
    msg = load_error(tmp_path, text)
    assert "[endpointing] hangover_ms" in msg and "integer" in msg and "'x'" in msg
    assert f":{line_no(text, 'hangover_ms')}:" in msg


def test_out_of_range_value(tmp_path: Path) -> None:
    text = VALID.replace("threshold_dbfs = -45.5", "threshold_dbfs = 3")
    msg = load_error(tmp_path, text)
    assert "[endpointing] threshold_dbfs" in msg and "-120..0" in msg
    assert f":{line_no(text, 'threshold_dbfs')}:" in msg


def test_stage_keys_are_left_to_the_stage(tmp_path: Path) -> None:
    # max_tokens = "x" is the stage's to check (it knows its own keys); config passes it on.
    p = load_pipeline(write(tmp_path, VALID.replace("max_tokens = 40", 'max_tokens = "x"')))
    assert p.llm["max_tokens"] == "x"


def test_bad_choice(tmp_path: Path) -> None:
    text = VALID.replace('mode = "clause"', 'mode = "word"')
    msg = load_error(tmp_path, text)
    assert "[chunker] mode" in msg and "sentence, clause, token" in msg
    assert f":{line_no(text, 'mode = ' + chr(34) + 'word')}:" in msg


def test_boolean_is_not_an_integer(tmp_path: Path) -> None:
    text = VALID.replace("latency_ms = 20", "latency_ms = true")
    msg = load_error(tmp_path, text)
    assert "[output] latency_ms" in msg and "integer" in msg
    assert f":{line_no(text, 'latency_ms')}:" in msg


def test_unknown_table(tmp_path: Path) -> None:
    text = VALID + '\n[llms]\nstage = "openai"\n'
    msg = load_error(tmp_path, text)
    assert "llms" in msg and "unknown table" in msg
    assert "valid tables" in msg and "endpointing" in msg
    assert f":{line_no(text, '[llms]')}:" in msg


def test_unknown_key_in_endpointing(tmp_path: Path) -> None:
    text = VALID.replace("hangover_ms = 500", "hangover_ms = 500\nhangover = 5")
    msg = load_error(tmp_path, text)
    assert "[endpointing] hangover " in msg and "not a known key" in msg
    assert "hangover_ms" in msg  # the valid keys are listed
    assert f":{line_no(text, 'hangover = 5')}:" in msg


def test_same_key_name_in_another_table_is_not_mistaken_for_it(tmp_path: Path) -> None:
    text = VALID.replace('[tts]\nstage = "wyoming-tts"', '[tts]\nmode = 1\nstage = "wyoming-tts"')
    text = text.replace('mode = "clause"', 'mode = "bad"')
    msg = load_error(tmp_path, text)
    assert "[chunker] mode" in msg
    assert f":{line_no(text, 'mode = ' + chr(34) + 'bad')}:" in msg


def test_secret_in_a_key_is_refused(tmp_path: Path) -> None:
    text = VALID.replace('api_key_env = "OPENAI_API_KEY"', 'api_key = "sk-proj-abcdef123456"')
    msg = load_error(tmp_path, text)
    assert "[llm] api_key" in msg and "secret" in msg and "api_key_env" in msg
    assert "sk-proj" not in msg  # never echo the secret
    assert f":{line_no(text, 'api_key =')}:" in msg


def test_key_itself_in_api_key_env_is_refused(tmp_path: Path) -> None:
    text = VALID.replace('"OPENAI_API_KEY"', '"sk-proj-abcdef123456"')
    msg = load_error(tmp_path, text)
    assert "[llm] api_key_env" in msg and "environment variable" in msg
    assert "sk-proj" not in msg
    assert f":{line_no(text, 'api_key_env')}:" in msg


def test_other_secret_names_are_refused() -> None:
    for key in ("xi_api_key", "token", "access_token", "secret", "password", "apikey"):
        data = {"stt": {"stage": "x"}, "llm": {"stage": "x"}, "tts": {"stage": "x", key: "v"}}
        with pytest.raises(ConfigError, match=rf"\[tts\] {key} looks like a secret"):
            parse_pipeline(data)


def test_provider_options_that_merely_contain_key_are_fine() -> None:
    # Deepgram's documented options: not credentials.
    stt = {"stage": "deepgram", "keywords": "voicelat", "keyterm": "Paris", "api_key_env": "DG"}
    p = parse_pipeline({"stt": stt, "llm": {"stage": "x"}, "tts": {"stage": "x"}})
    assert p.stt["keyterm"] == "Paris"


def test_stack_must_be_local() -> None:
    data = {
        "pipeline": {"stack": "remote"},
        "stt": {"stage": "x"},
        "llm": {"stage": "x"},
        "tts": {"stage": "x"},
    }
    with pytest.raises(ConfigError, match=r"\[pipeline\] stack"):
        parse_pipeline(data)


def test_a_table_that_is_not_a_table() -> None:
    data = {"stt": {"stage": "x"}, "llm": {"stage": "x"}, "tts": {"stage": "x"}, "chunker": 3}
    with pytest.raises(ConfigError, match=r"\[chunker\] must be a table"):
        parse_pipeline(data)


def test_error_location_without_a_file() -> None:
    data = tomllib.loads(VALID.replace("hangover_ms = 500", "hangover_ms = -1"))
    with pytest.raises(ConfigError) as info:
        parse_pipeline(data)
    assert re.match(
        r"^pipeline: \[endpointing\] hangover_ms must be within 0\.\.5000", str(info.value)
    )


def test_unknown_top_level_key_reports_its_line(tmp_path: Path) -> None:
    text = 'name = "oops"\n' + VALID
    msg = load_error(tmp_path, text)
    assert "unknown table(s) name" in msg and f"{tmp_path / 'p.toml'}:1:" in msg


def test_stage_tables_know_their_file_and_lines(tmp_path: Path) -> None:
    path = write(tmp_path, VALID)
    p = load_pipeline(path)
    assert isinstance(p.stt, StageTable) and p.stt.source == path
    assert p.llm.line_of("max_tokens") == line_no(VALID, "max_tokens = 40")
    assert p.llm.line_of("not_there") == line_no(VALID, "[llm]")  # the table's header
    assert p.tts.line_of("url") == line_no(VALID, 'url = "tcp://127.0.0.1:10200"')
    # Still a plain mapping to everything else, and copies keep the location.
    assert p.llm == {
        "stage": "openai",
        "base_url": "http://127.0.0.1:8080/v1",
        "max_tokens": 40,
        "api_key_env": "OPENAI_API_KEY",
    }
    for copy in (p.llm.copy(), copy_module.deepcopy(p.llm), pickle.loads(pickle.dumps(p.llm))):
        assert isinstance(copy, StageTable) and copy == p.llm
        assert copy.line_of("max_tokens") == p.llm.line_of("max_tokens")
    assert dataclasses.asdict(p)["llm"] == p.llm
    assert json.loads(json.dumps(p.to_json()))["llm"]["max_tokens"] == 40


def test_stage_tables_without_a_source_have_no_location() -> None:
    p = parse_pipeline({t: {"stage": "x", "k": 1} for t in ("stt", "llm", "tts")})
    assert p.stt.source is None and p.stt.line_of("k") is None
