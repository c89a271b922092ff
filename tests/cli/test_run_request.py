"""The run's flags become one frozen RunRequest in one place (cli/request.py), and every run
option reaches it: an option added to ``add_run_arguments`` without its line in
``request_from_args`` fails here."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

import pytest

from voicelat.cli.main import build_parser
from voicelat.cli.request import request_from_args
from voicelat.cli.run import add_run_arguments
from voicelat.core.base.errors import ConfigError
from voicelat.engine.request import LoadRequest, RunRequest

#: Run options that are the command's own business, not the run's (the TUI, the child's events).
NOT_IN_REQUEST = {"tui", "events", "help"}


def _every_option_set() -> argparse.Namespace:
    argv = ["run", "-p", "my pipe.toml", "-f", "fx", "-n", "3", "-r", "2", "-w", "0"]
    argv += ["--save-audio", "-o", "somewhere", "--scenario", "scenarios/short.toml"]
    argv += ["--rate", "2.5", "--arrival", "constant", "--arrival-seed", "7"]
    argv += ["--otlp-endpoint", "http://127.0.0.1:4318", "--metrics-port", "9464"]
    argv += ["--metrics-linger", "2.5", "--workers", "2", "--ray", "127.0.0.1:6390"]
    argv += ["--calibrate", "full", "--network", "4g"]
    argv += ["--frozen", "rec", "--caller-cache", "cache", "--region", "eu-west"]
    return build_parser().parse_args(argv)


def _leaves(value: Any, prefix: str = "") -> dict[str, Any]:
    """The request's fields, nested dataclasses flattened (``load.rate``, ``plan.turns``)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(value):
        v = getattr(value, f.name)
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            out.update(_leaves(v, f"{prefix}{f.name}."))
        else:
            out[f"{prefix}{f.name}"] = v
    return out


def test_every_run_option_changes_the_request() -> None:
    """Each option of add_run_arguments, set to a non-default value, moves the request off its
    default: none is dropped on the way."""
    probe = argparse.ArgumentParser(add_help=False)
    add_run_arguments(probe)
    dests = [a.dest for a in probe._actions if a.option_strings and a.dest not in NOT_IN_REQUEST]
    args = _every_option_set()
    unset = [d for d in dests if getattr(args, d) == probe.get_default(d)]
    # --concurrency excludes --rate (one load at a time): it is checked on its own below.
    assert unset == ["concurrency"], f"set {unset} in this test's argv"
    default, got = _leaves(RunRequest()), _leaves(request_from_args(args, ["voicelat", "run"]))
    moved = {k for k in got if got[k] != default[k]}
    assert len(moved) >= len(dests) - 1, sorted(set(default) - moved)
    r = request_from_args(args)
    assert (r.pipeline_path, r.fixtures_dir, r.out_dir) == (
        Path("my pipe.toml"),
        Path("fx"),
        Path("somewhere"),
    )
    assert (r.plan.turns, r.plan.repeat, r.plan.warmup) == (3, 2, 0)
    assert r.load == LoadRequest(rate=2.5, arrival="constant", arrival_seed=7)
    assert (r.workers, r.ray, r.calibrate, r.network) == (2, "127.0.0.1:6390", "full", "4g")
    assert r.exports.metrics_port == 9464 and r.exports.metrics_linger_s == 2.5
    assert r.save_audio and r.scenario == Path("scenarios/short.toml")
    assert r.region == "eu-west"
    closed = build_parser().parse_args(["run", "--concurrency", "4"])
    assert request_from_args(closed).load.load().concurrency == 4


def test_defaults_give_the_default_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VOICELAT_REGION", raising=False)
    args = build_parser().parse_args(["run"])
    assert request_from_args(args) == RunRequest()


def test_the_request_is_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        RunRequest().workers = 2  # type: ignore[misc]


def test_open_loop_options_without_a_rate_are_refused_when_the_run_starts() -> None:
    with pytest.raises(ConfigError, match="add --rate R"):
        LoadRequest(arrival="constant").load()
    with pytest.raises(ConfigError, match="add --rate R"):
        LoadRequest(arrival_seed=3).load()


def test_the_region_comes_from_the_flag_else_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("VOICELAT_REGION", "us-east")
    assert request_from_args(build_parser().parse_args(["run"])).region == "us-east"
    flagged = build_parser().parse_args(["run", "--region", "eu-west"])
    assert request_from_args(flagged).region == "eu-west"  # the flag wins
    monkeypatch.setenv("VOICELAT_REGION", "us east")
    with pytest.raises(ConfigError, match="VOICELAT_REGION: region label 'us east' may hold only"):
        request_from_args(build_parser().parse_args(["run"]))


@pytest.mark.parametrize("command", ["run", "ci", "compare"])
@pytest.mark.parametrize("label", ["eu west", "x" * 41, "", "eu/west"])
def test_a_bad_region_label_is_one_line_exit_2(
    command: str, label: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from voicelat.cli.main import main

    with pytest.raises(SystemExit) as exited:
        main([command, f"--region={label}"])
    assert exited.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--region" in err[0] and "region label" in err[0], err


def test_a_bad_region_in_the_environment_is_one_line_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from voicelat.cli.main import main

    monkeypatch.setenv("VOICELAT_REGION", "eu west")
    code = main(["run", "--no-tui", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("voicelat: error: VOICELAT_REGION")
    assert not (tmp_path / "out").exists()
