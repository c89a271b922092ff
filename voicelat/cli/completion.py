"""``voicelat completion bash|zsh|fish``: a static shell completion script, made from the parser.

The script is generated from the same argparse parser the command uses (every subcommand, its
options, their choices, which ones take a file), so it cannot drift from the command line, and
it is static: pressing Tab runs the shell's own code, never Python (building the parser imports
every subcommand, over a second). zsh uses the bash script through ``bashcompinit``.

    voicelat completion bash > ~/.local/share/bash-completion/completions/voicelat
    voicelat completion zsh  > ~/.zfunc/voicelat.zsh   # and `source` it from ~/.zshrc
    voicelat completion fish > ~/.config/fish/completions/voicelat.fish
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from voicelat.core.base.errors import EXIT_OK

__all__ = ["Command", "Option", "add_parser", "command_tree", "script"]

SHELLS = ("bash", "zsh", "fish")
PROG = "voicelat"


@dataclass(frozen=True)
class Option:
    """One option of a command, as completion needs it."""

    flags: tuple[str, ...]
    takes_value: bool
    choices: tuple[str, ...]
    files: bool
    help: str


@dataclass(frozen=True)
class Command:
    """A command (``()`` is ``voicelat`` itself, ``("stack", "up")`` a nested one)."""

    path: tuple[str, ...]
    help: str
    options: tuple[Option, ...]
    subcommands: tuple[str, ...]
    choices: tuple[str, ...]  # of its first positional argument, if any


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``completion SHELL``."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "completion",
        help="print a shell completion script (bash, zsh or fish)",
        description="Print a completion script for SHELL. bash: save it as "
        "~/.local/share/bash-completion/completions/voicelat; zsh: source it from ~/.zshrc; "
        "fish: save it as ~/.config/fish/completions/voicelat.fish.",
    )
    p.add_argument("shell", choices=SHELLS, metavar="SHELL", help="bash, zsh or fish")
    p.set_defaults(func=cmd_completion)
    return p


def cmd_completion(args: argparse.Namespace) -> int:
    from voicelat.cli.main import build_parser

    print(script(args.shell, command_tree(build_parser())), end="")
    return EXIT_OK


# -- the parser as data -----------------------------------------------------------------------
def command_tree(parser: argparse.ArgumentParser) -> list[Command]:
    """Every command of ``parser``, parents before their subcommands."""
    out: list[Command] = []
    _walk(parser, (), parser.description or "", out)
    return out


def _walk(
    parser: argparse.ArgumentParser, path: tuple[str, ...], help: str, out: list[Command]
) -> None:
    options: list[Option] = []
    subs: dict[str, tuple[argparse.ArgumentParser, str]] = {}
    choices: tuple[str, ...] = ()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name, sub in action.choices.items():
                subs[name] = (sub, helps.get(name, ""))
        elif action.option_strings and action.help != argparse.SUPPRESS:
            options.append(_option(action))
        elif not action.option_strings and action.choices and not choices:
            choices = tuple(str(c) for c in action.choices)
    out.append(Command(path, help, tuple(options), tuple(subs), choices))
    for name, (sub, sub_help) in subs.items():
        _walk(sub, (*path, name), sub_help, out)


def _option(action: argparse.Action) -> Option:
    return Option(
        flags=tuple(action.option_strings),
        takes_value=action.nargs != 0,
        choices=tuple(str(c) for c in action.choices or ()),
        files=action.type is Path,
        help=" ".join(str(action.help or "").split()).replace("%%", "%"),
    )


def script(shell: str, commands: list[Command]) -> str:
    """The completion script for ``shell``."""
    if shell == "fish":
        return _fish(commands)
    bash = _bash(commands)
    if shell == "zsh":
        return (
            "# voicelat completion for zsh (the bash script, through bashcompinit)\n"
            "autoload -U +X compinit && compinit -u\n"
            "autoload -U +X bashcompinit && bashcompinit\n" + bash
        )
    return bash


# -- bash -------------------------------------------------------------------------------------
def _key(path: tuple[str, ...]) -> str:
    return "_".join((PROG, *path))


def _bash(commands: list[Command]) -> str:
    walk = [
        f"{_key(c.path)}:{s}) key={_key((*c.path, s))} ;;" for c in commands for s in c.subcommands
    ]
    values, words = [], []
    for c in commands:
        for o in (o for o in c.options if o.takes_value):
            pattern = "|".join(f"{_key(c.path)}:{f}" for f in o.flags)
            if o.choices:
                reply = f'COMPREPLY=($(compgen -W "{" ".join(o.choices)}" -- "$cur"))'
            elif o.files:
                reply = 'COMPREPLY=($(compgen -f -- "$cur"))'
            else:
                reply = "COMPREPLY=()"  # a number or a name: nothing to offer
            values.append(f"{pattern}) {reply}; return ;;")
        flags = " ".join(f for o in c.options for f in o.flags)
        nouns = " ".join(c.subcommands or c.choices)
        words.append(f'{_key(c.path)}) opts="{flags}"; nouns="{nouns}" ;;')
    lines = [
        "# voicelat completion for bash: `voicelat completion bash` (generated from its parser)",
        "_voicelat() {",
        "    # zsh (bashcompinit) hands over bash's 0-based COMP_WORDS: index it the same way",
        '    [[ -n "${ZSH_VERSION:-}" ]] && setopt localoptions ksharrays',
        '    local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}"',
        '    local key=voicelat i opts="" nouns=""',
        "    for ((i = 1; i < COMP_CWORD; i++)); do",
        '        case "$key:${COMP_WORDS[i]}" in',
        *(f"            {w}" for w in walk),
        "        esac",
        "    done",
        '    case "$key:$prev" in',
        *(f"        {v}" for v in values),
        "    esac",
        '    case "$key" in',
        *(f"        {w}" for w in words),
        "    esac",
        '    if [[ "$cur" == -* ]]; then',
        '        COMPREPLY=($(compgen -W "$opts" -- "$cur"))',
        '    elif [[ -n "$nouns" ]]; then',
        '        COMPREPLY=($(compgen -W "$nouns" -- "$cur"))',
        "    else",
        '        COMPREPLY=($(compgen -f -- "$cur"))',
        "    fi",
        "}",
        "complete -o filenames -F _voicelat voicelat",
        "",
    ]
    return "\n".join(lines)


# -- fish -------------------------------------------------------------------------------------
def _fish_quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _fish_condition(c: Command, children: tuple[str, ...]) -> str:
    if not c.path:
        return "__fish_use_subcommand"
    parts = [f"__fish_seen_subcommand_from {name}" for name in c.path]
    if children:
        parts.append(f"not __fish_seen_subcommand_from {' '.join(children)}")
    return "; and ".join(parts)


def _fish(commands: list[Command]) -> str:
    lines = [
        "# voicelat completion for fish: `voicelat completion fish` (generated from its parser)",
        "complete -c voicelat -f",
    ]
    for c in commands:
        cond = _fish_quote(_fish_condition(c, c.subcommands))
        for name in c.subcommands:
            sub = next(s for s in commands if s.path == (*c.path, name))
            lines.append(f"complete -c voicelat -n {cond} -a {name} -d {_fish_quote(sub.help)}")
        if c.choices:
            lines.append(f"complete -c voicelat -n {cond} -a {_fish_quote(' '.join(c.choices))}")
        for o in c.options:
            lines.append(_fish_option(cond, o))
    return "\n".join(lines) + "\n"


def _fish_option(cond: str, o: Option) -> str:
    parts = ["complete -c voicelat", "-n", cond]
    for flag in o.flags:
        if flag.startswith("--"):
            parts += ["-l", flag[2:]]
        elif len(flag) == 2:
            parts += ["-s", flag[1:]]
        else:
            parts += ["-o", flag[1:]]
    if o.choices:
        parts += ["-x", "-a", _fish_quote(" ".join(o.choices))]
    elif o.files:
        parts += ["-r", "-F"]
    elif o.takes_value:
        parts.append("-x")
    if o.help:
        parts += ["-d", _fish_quote(o.help[:80])]
    return " ".join(parts)
