"""Pipeline files with an [s2s] table: one speech-to-speech stage instead of the cascade."""

from __future__ import annotations

from pathlib import Path

import pytest

from voicelat.core.base.errors import ConfigError
from voicelat.files.pipeline import load_pipeline

S2S = """\
[pipeline]
name = "rt"

[s2s]
stage = "openai-realtime"
model = "gpt-realtime"
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "p.toml"
    path.write_text(text)
    return path


def test_s2s_table_is_the_pipelines_one_stage(tmp_path: Path) -> None:
    p = load_pipeline(_write(tmp_path, S2S))
    assert p.s2s == {"stage": "openai-realtime", "model": "gpt-realtime"}
    assert p.s2s.line_of("model") == 6  # type: ignore[attr-defined]
    assert p.stt == {} and p.llm == {} and p.tts == {}
    assert p.to_json()["s2s"]["stage"] == "openai-realtime"


def test_cascade_pipeline_has_no_s2s_and_json_is_unchanged(tmp_path: Path) -> None:
    text = "".join(f'[{k}]\nstage = "x"\n' for k in ("stt", "llm", "tts"))
    p = load_pipeline(_write(tmp_path, text))
    assert p.s2s is None
    assert "s2s" not in p.to_json()


def test_s2s_with_a_cascade_table_is_refused_with_its_line(tmp_path: Path) -> None:
    path = _write(tmp_path, S2S + '\n[tts]\nstage = "espeak"\n')
    with pytest.raises(ConfigError, match=r"p\.toml:8: \[tts\] cannot be combined with \[s2s\]"):
        load_pipeline(path)


def test_s2s_without_a_stage_or_with_a_secret_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"\[s2s\] stage is missing"):
        load_pipeline(_write(tmp_path, '[s2s]\nmodel = "m"\n'))
    with pytest.raises(ConfigError, match=r"\[s2s\] api_key looks like a secret"):
        load_pipeline(_write(tmp_path, '[s2s]\nstage = "x"\napi_key = "sk-abc"\n'))


def test_compare_combinations_take_s2s_pipelines_beside_cascades(tmp_path: Path) -> None:
    from voicelat.files.matrix import check_stages, combinations_from_files

    s2s = _write(tmp_path, S2S)
    cascade = tmp_path / "c.toml"
    cascade.write_text('[pipeline]\nname = "c"\n' + "".join(
        f'[{k}]\nstage = "x-{k}"\n' for k in ("stt", "llm", "tts")
    ))  # fmt: skip
    combos = combinations_from_files([s2s, cascade])
    assert [c.labels for c in combos] == [
        {"s2s": "openai-realtime"},
        {"stt": "x-stt", "llm": "x-llm", "tts": "x-tts"},
    ]
    looked: list[tuple[str, str]] = []
    check_stages(combos, lambda name, kind: looked.append((name, kind)), "files")
    assert ("openai-realtime", "s2s") in looked and ("x-llm", "llm") in looked
