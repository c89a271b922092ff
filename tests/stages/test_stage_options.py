"""Stage options declared once: one dataclass per stage, one parser, errors that name the key,
the file and the line."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pytest

from voicelat.core.base.errors import ConfigError, StageError
from voicelat.files.pipeline import load_pipeline
from voicelat.stages.deepgram import DeepgramSTT, DeepgramSTTOptions
from voicelat.stages.openai import OpenAILLM
from voicelat.stages.options import OptionProblem, parse_options, query_strings, read_secret
from voicelat.stages.wyoming import WyomingSTT, WyomingTTS


@dataclass(frozen=True, kw_only=True)
class _Demo:
    url: str
    name: str = "x"
    count: int = 1
    ratio: float = 0.5
    on: bool = False
    note: str | None = None
    words: tuple[str, ...] = ()
    table: dict[str, int] = field(default_factory=dict)
    mode: Literal["a", "b"] = "a"

    def check(self) -> None:
        if self.count < 0:
            raise OptionProblem("count", "count must be at least 0")


PIPELINE = """\
[pipeline]
name = "p"

[stt]
stage = "deepgram-stt"
api_key_env = "VOICELAT_TEST_OPT_KEY"
{stt}

[llm]
stage = "openai"
base_url = "http://127.0.0.1:9/v1"
{llm}

[tts]
stage = "wyoming-tts"
"""


def _pipeline(tmp_path: Path, stt: str = "", llm: str = "") -> Path:
    path = tmp_path / "p.toml"
    path.write_text(PIPELINE.format(stt=stt, llm=llm), encoding="utf-8")
    return path


def _line(path: Path, needle: str) -> int:
    lines = path.read_text(encoding="utf-8").splitlines()
    return next(no for no, line in enumerate(lines, start=1) if needle in line)


def test_defaults_types_and_conversions() -> None:
    o = parse_options(_Demo, "t", {"stage": "s", "url": "u", "ratio": 2, "words": ["a", "b"]})
    assert o == _Demo(url="u", ratio=2.0, words=("a", "b"))
    assert isinstance(o.ratio, float)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"count": True}, "[t] count must be an integer, got True"),
        ({"count": 1.5}, "[t] count must be an integer, got 1.5"),
        ({"ratio": "x"}, "[t] ratio must be a number, got 'x'"),
        ({"on": 1}, "[t] on must be true or false, got 1"),
        ({"note": 3}, "[t] note must be a string, got 3"),
        ({"words": ["a", 1]}, "[t] words must be a list of strings, got ['a', 1]"),
        ({"table": {"k": "v"}}, "[t] table must be a table, got {'k': 'v'}"),
        ({"mode": "c"}, "[t] mode must be one of 'a', 'b', not 'c'"),
    ],
)
def test_a_wrong_type_names_the_key_and_the_type(values: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_options(_Demo, "t", {"url": "u", **values})
    assert str(info.value) == message


def test_unknown_and_missing_keys() -> None:
    with pytest.raises(ConfigError) as info:
        parse_options(_Demo, "t", {"url": "u", "colour": 1})
    assert str(info.value) == (
        "[t] has unknown key(s) colour; valid keys: count, mode, name, note, on, ratio, "
        "table, url, words"
    )
    with pytest.raises(ConfigError, match=r"^\[t\] needs 'url'$"):
        parse_options(_Demo, "t", {})
    with pytest.raises(StageError, match=r"^\[t\] count must be at least 0$"):
        parse_options(_Demo, "t", {"url": "u", "count": -1})


def test_secrets_come_only_from_the_named_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    assert read_secret("stt", None) is None
    monkeypatch.delenv("VOICELAT_TEST_OPT_KEY", raising=False)
    with pytest.raises(StageError) as info:
        read_secret("stt", "VOICELAT_TEST_OPT_KEY")
    assert str(info.value) == (
        "[stt] reads its API key from $VOICELAT_TEST_OPT_KEY, which is not set: "
        "export VOICELAT_TEST_OPT_KEY=..."
    )
    monkeypatch.setenv("VOICELAT_TEST_OPT_KEY", "k-123")
    assert read_secret("stt", "VOICELAT_TEST_OPT_KEY") == "k-123"


def test_query_strings() -> None:
    assert query_strings({"a": True, "b": 3, "c": "x"}) == {"a": "true", "b": "3", "c": "x"}


def test_a_stage_error_from_a_file_names_the_file_and_the_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VOICELAT_TEST_OPT_KEY", "k-123")
    path = _pipeline(tmp_path, stt='rate = "fast"', llm="max_tokens = true")
    p = load_pipeline(path)
    with pytest.raises(ConfigError) as info:
        DeepgramSTT(p.stt)
    assert str(info.value) == (
        f"{path}:{_line(path, 'rate = ')}: [stt] rate must be an integer, got 'fast'"
    )
    with pytest.raises(ConfigError) as info:
        OpenAILLM(p.llm)
    assert str(info.value).startswith(f"{path}:{_line(path, 'max_tokens')}: [llm] max_tokens ")


def test_an_unknown_key_from_a_file_names_its_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VOICELAT_TEST_OPT_KEY", "k-123")
    path = _pipeline(tmp_path, stt="chunk = 3")
    with pytest.raises(ConfigError) as info:
        DeepgramSTT(load_pipeline(path).stt)
    msg = str(info.value)
    assert msg.startswith(f"{path}:{_line(path, 'chunk = 3')}: [stt] has unknown key(s) chunk;")
    assert "valid keys: api_key_env, auth, base_url" in msg


def test_a_refused_value_from_a_file_names_its_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VOICELAT_TEST_OPT_KEY", "k-123")
    path = _pipeline(tmp_path, stt="endpointing = true")
    with pytest.raises(StageError) as info:
        DeepgramSTT(load_pipeline(path).stt)
    assert str(info.value) == (
        f"{path}:{_line(path, 'endpointing')}: [stt] endpointing must be milliseconds or false"
    )


def test_a_missing_key_from_a_file_points_at_the_table(tmp_path: Path) -> None:
    path = _pipeline(tmp_path)
    text = path.read_text(encoding="utf-8").replace('base_url = "http://127.0.0.1:9/v1"\n', "")
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        OpenAILLM(load_pipeline(path).llm)
    assert str(info.value) == f"{path}:{_line(path, '[llm]')}: [llm] needs 'base_url'"


def test_plain_tables_have_no_location() -> None:
    with pytest.raises(ConfigError) as info:
        WyomingTTS({"stage": "wyoming-tts", "streaming": "yes"})
    assert str(info.value) == "[tts] streaming must be true or false, got 'yes'"
    with pytest.raises(StageError, match=r"^\[stt\] url must look like tcp://HOST:PORT"):
        WyomingSTT({"url": "http://127.0.0.1:1"})


def test_every_option_of_a_stage_is_declared_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VOICELAT_TEST_OPT_KEY", "k-123")
    stt = DeepgramSTT({"api_key_env": "VOICELAT_TEST_OPT_KEY", "endpointing": False})
    assert stt.options == DeepgramSTTOptions(api_key_env="VOICELAT_TEST_OPT_KEY", endpointing=False)
    assert stt.input_rate == 16000 and stt.endpointing is False
    assert "endpointing=false" in stt._url()
