"""The [cost] table in pipeline and matrix files: a prices file named relative to the file, a
stage's own prices across a matrix's combinations, and the pipeline's JSON carrying them."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import ROOT
from voicelat.core.base.errors import ConfigError
from voicelat.core.base.turn import Turn
from voicelat.core.judge.cost import stage_names_of, turn_cost
from voicelat.files.matrix import load_matrix
from voicelat.files.pipeline import load_pipeline

PRICES = """currency = "USD"
[tts.wyoming-tts]
per_character = 0.002
[tts.espeak-tts]
per_character = 0.001
"""


def test_a_matrix_shares_a_prices_file_and_each_tts_gets_its_own_price(tmp_path: Path) -> None:
    (tmp_path / "prices.toml").write_text(PRICES)
    text = (ROOT / "pipelines" / "matrix-local.toml").read_text()
    (tmp_path / "m.toml").write_text(text + '\n[cost]\nprices = "prices.toml"\n')
    matrix = load_matrix(tmp_path / "m.toml")
    turn = Turn(index=0, fixture="f", t0_ns=0, milestones={}, segments={}, e2e_ns=1, reply="x" * 10)
    by_tts = {}
    for combo in matrix.combinations:
        p = combo.pipeline
        assert p.cost is not None and p.cost.currency == "USD"
        names = stage_names_of(p.to_json())
        by_tts[names["tts"]] = turn_cost(turn, p.cost, names).total
    assert by_tts == {"wyoming-tts": pytest.approx(0.02), "espeak-tts": pytest.approx(0.01)}


def test_a_pipeline_without_cost_keeps_its_json_as_it_was() -> None:
    p = load_pipeline(ROOT / "pipelines" / "emulated-openai.toml")
    assert p.cost is None and "cost" not in p.to_json()


def test_a_prices_file_with_bad_toml_or_a_nested_file_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "bad.toml").write_text("currency = \n")
    (tmp_path / "nest.toml").write_text('prices = "bad.toml"\ncurrency = "USD"\n')
    text = (ROOT / "pipelines" / "emulated-openai.toml").read_text()
    for name, message in (("bad.toml", "not valid TOML"), ("nest.toml", "cannot name another")):
        path = tmp_path / f"p-{name}"
        path.write_text(text + f'\n[cost]\nprices = "{name}"\n')
        with pytest.raises(ConfigError, match=message):
            load_pipeline(path)
