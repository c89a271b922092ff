"""What ``voicelat CMD --help`` shows beyond the options: a description, examples, metavars.

Each command module registers its own options; this pass over the finished parser tree gives
every command a description (``run`` had none), a few examples to copy, and a metavar that
says what a value is (``--pipeline FILE.toml``, ``--turns N``) where argparse would have
printed the option's name in capitals (``--pipeline PIPELINE``). One table here instead of a
keyword on ~40 ``add_argument`` calls in a dozen modules.
"""

from __future__ import annotations

import argparse
import re

__all__ = ["DESCRIPTIONS", "EXAMPLES", "METAVARS", "ExamplesFormatter", "polish"]

#: Option dest -> what its value is, for options registered without a metavar.
METAVARS: dict[str, str] = {
    "pipeline": "FILE.toml",
    "fixtures": "DIR",
    "out": "DIR",
    "turns": "N",
    "repeat": "N",
    "warmup": "N",
    "budget": "FILE.toml",
    "tolerance_ms": "MS",
    "tolerance_pct": "PCT",
    "confidence": "LEVEL",
    "resamples": "N",
    "seed": "N",
    "port": "PORT",
    "host": "ADDRESS",
    "cache_dir": "DIR",
    "state_dir": "DIR",
    "transport": "NAME[,NAME...]",
    "hangovers": "MS[,MS...]",
    "min_speech_ms": "MS",
    "max_seconds": "SEC",
    "prices": "FILE.toml",
    "min_trailing_ms": "MS",
}

#: Commands whose module gives no description: the one-line help, said in full.
DESCRIPTIONS: dict[str, str] = {
    "run": (
        "Replay the audio fixtures (default: the bundled ones) through a pipeline (default: "
        "the embedded local stack, started when it is not running) at real-time pace and "
        "measure every turn: the e2e latency from the end of speech to the first audible "
        "reply, split into segments (endpointing, STT, LLM, TTS...). Writes turns.jsonl, "
        "summary.json and report.html into --out and shows the turns in the terminal UI. "
        "Exit codes: 0 done, 2 usage or config error, 3 a server is down or every turn failed."
    ),
    "stack up": "Start the embedded STT, LLM and TTS servers on loopback and leave them running.",
    "stack down": "Stop every server `voicelat stack up` (or a run) started.",
    "stack status": "Show each embedded server: its URL, pid, health and version.",
    "agent up": "Start the example Pipecat bot (and the embedded stack it talks to).",
    "agent down": "Stop the example Pipecat bot.",
    "agent status": "Show whether the example Pipecat bot is running and where.",
    "baseline": "Keep a run as the baseline later `voicelat ci --baseline` runs compare with.",
}

#: Command path -> example command lines (shown under "examples:" in its --help).
EXAMPLES: dict[str, tuple[str, ...]] = {
    "": (
        "voicelat run                               # the bundled fixtures on the local stack",
        "voicelat run -p pipelines/openai.toml -n 30",
        "voicelat view runs/<dir>                   # open saved results",
    ),
    "run": (
        "voicelat run                               # bundled fixtures, embedded local stack",
        "voicelat run -p pipelines/openai.toml -n 30 --out runs/openai",
        "voicelat run -p pipelines/emulated-openai.toml --no-tui   # offline, emulated",
        "voicelat run --concurrency 4 --workers 2  # four sessions over two processes",
    ),
    "ci": (
        "voicelat ci -p pipelines/local.toml --junit junit.xml",
        "voicelat ci -p pipelines/local.toml --budget budget.toml --baseline baseline/",
        "voicelat ci --results runs/<dir> --budget budget.toml   # gate a finished run",
    ),
    "baseline": ("voicelat baseline save runs/<dir> baseline/",),
    "baseline save": ("voicelat baseline save runs/<dir> baseline/",),
    "compare": (
        "voicelat compare pipelines/local.toml pipelines/emulated-openai.toml -n 20",
        "voicelat compare --matrix pipelines/matrix-local.toml",
        "voicelat compare runs/<a> runs/<b>         # rank runs already made",
    ),
    "view": ("voicelat view runs/<dir>", "voicelat view runs/<dir> --html   # rewrite report.html"),
    "live": ("voicelat live", "voicelat live --ptt --turns 5 --out runs/live"),
    "devices": ("voicelat devices",),
    "serve": (
        "voicelat serve --list",
        "voicelat serve openai --port 0            # prints `openai BASE_URL` once ready",
        "voicelat serve openai deepgram --profile realistic",
    ),
    "endpointing": (
        "voicelat endpointing                       # every installed endpointer, pause set",
        "voicelat endpointing --endpointers energy --hangovers 300,500,800",
        "voicelat endpointing --endpointers none --runs runs/<deepgram-run>",
    ),
    "score": (
        "voicelat score runs/<dir>                  # cost, reply WER and DNSMOS",
        "voicelat score runs/<dir> --score off --prices prices.toml   # price only",
    ),
    "whatif": (
        "voicelat whatif runs/<dir> --set endpointing.hangover_ms=300",
        "voicelat whatif runs/<dir> --set chunker.mode=clause --json whatif.json",
    ),
    "fixtures": ("voicelat fixtures annotate my-recordings/", "voicelat fixtures check my-recordings/"),
    "fixtures annotate": (
        "voicelat fixtures annotate my-recordings/",
        "voicelat fixtures annotate my-recordings/ --no-transcribe --force",
    ),
    "fixtures check": ("voicelat fixtures check my-recordings/",),
    "completion": ("voicelat completion bash > ~/.local/share/bash-completion/completions/voicelat",),
    "stack": ("voicelat stack up", "voicelat stack status", "voicelat stack down"),
    "stack up": ("voicelat stack up", "voicelat stack up --llm-port 8090"),
    "stack down": ("voicelat stack down",),
    "stack status": ("voicelat stack status",),
    "agent": ("voicelat agent up", "voicelat agent status", "voicelat agent down"),
    "agent up": ("voicelat agent up", "voicelat agent up --transport pipecat-ws --port 8765"),
    "agent down": ("voicelat agent down",),
    "agent status": ("voicelat agent status",),
}


class ExamplesFormatter(argparse.HelpFormatter):
    """argparse's formatter, except that indented lines (the examples) are kept as written
    instead of being re-wrapped into one paragraph."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        blocks = re.split(r"\n(?=\S)", text)  # a new block at each unindented line
        out = []
        for block in blocks:
            head, _, rest = block.partition("\n")
            out.append(super()._fill_text(head, width, indent))
            if rest:
                out.append(rest)
        return "\n".join(out)


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:  # argparse has no public way to walk the tree
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def polish(parser: argparse.ArgumentParser, path: str = "") -> None:
    """Give ``parser`` and every subcommand under it its description, examples and metavars."""
    if parser.description is None and path in DESCRIPTIONS:
        parser.description = DESCRIPTIONS[path]
    examples = EXAMPLES.get(path)
    if examples and parser.epilog is None:
        parser.epilog = "examples:\n" + "\n".join(f"  {line}" for line in examples)
        parser.formatter_class = ExamplesFormatter
    for action in parser._actions:
        takes_value = action.nargs != 0 and not isinstance(action, argparse._SubParsersAction)
        bare = action.metavar is None and action.choices is None
        if action.option_strings and takes_value and bare and action.dest in METAVARS:
            action.metavar = METAVARS[action.dest]
    for name, sub in _subparsers(parser).items():
        polish(sub, f"{path} {name}".strip())
