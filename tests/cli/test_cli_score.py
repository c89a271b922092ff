"""``voicelat score`` and the [cost] table from the command line: bad prices are one line and
exit 2, a priced run prints its cost, the summary and scores.jsonl get it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import ROOT, voicelat
from voicelat.core.base.turn import Turn
from voicelat.files.results import turn_to_json, write_summary

S = 1_000_000_000


def _pipeline(tmp_path: Path, cost: str) -> Path:
    text = (ROOT / "pipelines" / "emulated-openai.toml").read_text()
    path = tmp_path / "p.toml"
    path.write_text(text + "\n" + cost)
    return path


def test_bad_prices_stop_the_run_before_it_starts_with_one_line(tmp_path: Path) -> None:
    cases = {
        '[cost]\ncurrency = "USD"\n[cost.tts]\nper_word = 1.0\n': "per_word is not a known price unit",
        '[cost]\ncurrency = "USD"\n[cost.llm]\nper_million_input_tokens = -0.1\n': "is negative",
        '[cost]\ncurrency = "USD"\nprices = "missing.toml"\n': "prices file",
    }
    for cost, message in cases.items():
        path = _pipeline(tmp_path, cost)
        r = voicelat("run", "-p", str(path), "--no-tui", "--out", str(tmp_path / "o"))
        assert r.returncode == 2, r.stderr
        lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and message in lines[0], r.stderr
        assert "Traceback" not in r.stderr


def test_a_currency_mix_with_the_prices_file_is_exit_2(tmp_path: Path) -> None:
    (tmp_path / "prices.toml").write_text('currency = "EUR"\n[tts]\nper_character = 0.00001\n')
    path = _pipeline(tmp_path, '[cost]\ncurrency = "USD"\nprices = "prices.toml"\n')
    r = voicelat("run", "-p", str(path), "--no-tui", "--out", str(tmp_path / "o"))
    assert r.returncode == 2 and "mixes with the prices file's EUR" in r.stderr, r.stderr


def _run_dir(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    turns = [
        Turn(
            index=i,
            fixture="f",
            t0_ns=0,
            milestones={"endpoint": 2 * S, "output_first_audible": 4 * S},
            segments={},
            e2e_ns=S,
            figures={"tts_audio_ns": 2 * S, "llm_prompt_tokens": 10, "llm_tokens": 5},
            reply="x" * 50,
        )
        for i in range(2)
    ]
    (run / "turns.jsonl").write_text("".join(json.dumps(turn_to_json(t)) + "\n" for t in turns))
    pipeline = {"name": "p", "stt": {"stage": "openai-stt"}, "llm": {"stage": "openai"}}
    counts = {"turns": 2, "headline": 2}
    doc = {"schema_version": 1, "counts": counts, "pipeline": pipeline | {"tts": {"stage": "x"}}}
    write_summary(run, doc)
    return run


def test_score_prices_a_saved_run_with_a_prices_file(tmp_path: Path) -> None:
    run = _run_dir(tmp_path)
    prices = tmp_path / "prices.toml"
    prices.write_text(
        'currency = "USD"\nsource = "test"\n[llm]\nper_input_token = 0.001\n'
        "per_output_token = 0.002\n[tts]\nper_character = 0.0001\n"
    )
    r = voicelat("score", str(run), "--score", "off", "--prices", str(prices))
    assert r.returncode == 0, r.stderr
    # 10 * 0.001 + 5 * 0.002 + 50 * 0.0001 = 0.025 a turn; 2 turns over 2 * 6 s.
    assert "cost: 0.025 USD per turn" in r.stdout, r.stdout
    assert "0.25 USD per minute of conversation" in r.stdout
    assert "not priced: stt (openai-stt)" in r.stdout
    summary = json.loads((run / "summary.json").read_text())
    assert summary["cost"]["total"] == 0.05
    rows = [json.loads(x) for x in (run / "scores.jsonl").read_text().splitlines()]
    assert [r["cost"]["total"] for r in rows] == [0.025, 0.025]


def test_score_of_bad_prices_file_or_mode_is_exit_2(tmp_path: Path) -> None:
    run = _run_dir(tmp_path)
    bad = tmp_path / "bad.toml"
    bad.write_text('currency = "USD"\n[tts]\nper_character = -1\n')
    r = voicelat("score", str(run), "--prices", str(bad))
    assert r.returncode == 2 and "is negative" in r.stderr and "Traceback" not in r.stderr
    r = voicelat("score", str(run), "--score", "mos")
    assert r.returncode == 2 and "invalid choice" in r.stderr


@pytest.mark.e2e
def test_ci_holds_a_priced_run_to_its_cost_per_turn(tmp_path: Path) -> None:
    run = _run_dir(tmp_path)
    prices = tmp_path / "prices.toml"
    prices.write_text('currency = "USD"\n[tts]\nper_character = 0.0001\n')  # 0.005 a turn
    assert voicelat("score", str(run), "--score", "off", "--prices", str(prices)).returncode == 0
    for limit, code, verdict in (("0.01", 0, "<="), ("0.004", 1, ">")):
        budget = tmp_path / f"b{code}.toml"
        budget.write_text(f"[budget]\nmin_turns = 1\ncost_per_turn = {limit}\n")
        r = voicelat("ci", "--results", str(run), "--budget", str(budget))
        assert r.returncode == code, r.stdout + r.stderr
        assert f"cost per turn 0.005 USD {verdict} limit {limit} USD" in r.stdout, r.stdout


def test_compare_refuses_combinations_priced_in_two_currencies_before_measuring(
    tmp_path: Path,
) -> None:
    usd = _pipeline(tmp_path, '[cost]\ncurrency = "USD"\n[cost.tts]\nper_character = 0.1\n')
    eur = tmp_path / "eur.toml"
    eur.write_text(usd.read_text().replace('currency = "USD"', 'currency = "EUR"'))
    eur.write_text(eur.read_text().replace('name = "emulated-openai"', 'name = "in-euros"'))
    r = voicelat("compare", str(usd), str(eur), "--no-tui", "--out", str(tmp_path / "o"))
    assert r.returncode == 2, r.stderr
    assert "priced in different currencies (emulated-openai in USD, in-euros in EUR)" in r.stderr
    assert not (tmp_path / "o").exists()  # refused before anything ran
