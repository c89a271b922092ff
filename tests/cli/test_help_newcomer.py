"""Every command's --help has a description, examples that parse, and metavars that say what a
value is (issue #29: `run --help` had no description, no help had an example, and options
showed argparse's placeholders: ``--pipeline PIPELINE``, ``--turns TURNS``)."""

from __future__ import annotations

import argparse
import shlex

import pytest

from voicelat.cli.helptext import EXAMPLES
from voicelat.cli.main import build_parser


def _commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> list[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    out = [(path, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out += _commands(sub, (*path, name))
    return out


COMMANDS = _commands(build_parser())


@pytest.mark.parametrize("path", [" ".join(p) for p, _ in COMMANDS])
def test_every_command_has_a_description_and_examples(path: str) -> None:
    parser = dict((" ".join(p), x) for p, x in COMMANDS)[path]
    text = parser.format_help()
    assert parser.description, f"`voicelat {path} --help` has no description"
    assert "\nexamples:\n  voicelat" in text, f"`voicelat {path} --help` has no example"


def _placeholder(action: argparse.Action) -> bool:
    """argparse's own metavar: the option's name in capitals."""
    return action.metavar is None and action.choices is None and bool(action.option_strings)


def test_no_option_shows_its_own_name_as_its_value() -> None:
    bad = [
        f"voicelat {' '.join(path)} {a.option_strings[0]} {a.dest.upper()}"
        for path, parser in COMMANDS
        for a in parser._actions
        if a.nargs != 0 and not isinstance(a, argparse._SubParsersAction) and _placeholder(a)
        and a.dest.upper() not in ("PORT",)  # PORT already says what it is
    ]
    assert bad == []


@pytest.mark.parametrize("line", [e for lines in EXAMPLES.values() for e in lines])
def test_every_example_parses(line: str) -> None:
    argv = shlex.split(line.split(" #")[0].split(" > ")[0])
    assert argv[0] == "voicelat"
    args = build_parser().parse_args(argv[1:])  # a bad flag exits 2 here
    assert args.command is not None or argv[1:] == []


def test_run_help_says_what_run_does() -> None:
    text = " ".join(dict(COMMANDS)[("run",)].format_help().split())
    assert "Replay the audio fixtures" in text and "--pipeline FILE.toml" in text
    assert "--turns N" in text and "--fixtures DIR" in text
