"""A Ctrl-C (or SIGTERM taking its path) that lands inside a library's task group comes out as
``BaseExceptionGroup([KeyboardInterrupt])`` (anyio's ``connect_tcp`` under httpx, seen in CI on
a SIGTERM during a stage's idle re-warm): it is still an interruption (exit 130/143, one line),
never a traceback and exit 1."""

from __future__ import annotations

import argparse

import pytest

import voicelat.cli.main as cli
from voicelat.cli import signals
from voicelat.core.base.errors import only_interrupts


def test_only_interrupts_sees_through_nested_groups() -> None:
    assert only_interrupts(KeyboardInterrupt())
    assert only_interrupts(BaseExceptionGroup("tg", [KeyboardInterrupt()]))
    nested = BaseExceptionGroup("outer", [BaseExceptionGroup("inner", [KeyboardInterrupt()])])
    assert only_interrupts(nested)
    assert not only_interrupts(BaseExceptionGroup("tg", [KeyboardInterrupt(), OSError("x")]))
    assert not only_interrupts(OSError("x"))


def _parser_raising(exc: BaseException) -> argparse.ArgumentParser:
    def boom(args: argparse.Namespace) -> int:
        raise exc

    parser = argparse.ArgumentParser()
    parser.set_defaults(func=boom, command="run")
    return parser


def test_main_treats_a_wrapped_ctrl_c_as_an_interruption(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    signals.reset()
    group = BaseExceptionGroup("unhandled errors in a TaskGroup", [KeyboardInterrupt()])
    monkeypatch.setattr(cli, "build_parser", lambda: _parser_raising(group))
    assert cli.main([]) == 130
    err = capsys.readouterr().err
    assert "interrupted" in err and "Traceback" not in err


def test_main_still_raises_a_group_holding_a_real_error(monkeypatch: pytest.MonkeyPatch) -> None:
    signals.reset()
    group = BaseExceptionGroup("tg", [KeyboardInterrupt(), RuntimeError("a bug")])
    monkeypatch.setattr(cli, "build_parser", lambda: _parser_raising(group))
    with pytest.raises(BaseExceptionGroup):
        cli.main([])
