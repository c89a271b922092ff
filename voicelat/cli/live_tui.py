"""``voicelat live --tui``: the TUI in this process, the live session in a child process
(``live --no-tui --events jsonl``), as ``run --tui`` does: the UI cannot delay a timestamp."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
from pathlib import Path
from typing import Any, ClassVar

from voicelat.cli.live_args import add_live_arguments
from voicelat.core.base.errors import EXIT_INTERRUPTED, EXIT_OK, VoicelatError
from voicelat.engine.progress import stderr_progress as _info

__all__ = ["forwarded_options", "run_tui"]


def forwarded_options(args: argparse.Namespace) -> list[str]:
    """The ``live`` options in ``args`` that differ from their defaults, as words for the
    measuring child (rebuilt from :func:`add_live_arguments`, so none is forgotten)."""
    probe = argparse.ArgumentParser(add_help=False)
    add_live_arguments(probe)
    words: list[str] = []
    for action in probe._actions:
        if not action.option_strings or action.dest in ("tui", "events", "out", "help"):
            continue
        value = getattr(args, action.dest, action.default)
        if value is None or value == action.default:
            continue
        opt = next(o for o in action.option_strings if o.startswith("--"))
        if action.nargs == 0:  # store_true / store_false
            words.append(opt)
        else:
            words.append(f"{opt}={value}")
    return words


def run_tui(args: argparse.Namespace, pipeline: Any, out_dir: Path, ptt: bool) -> int:
    """The TUI here, the session in a child process (``live --no-tui --events jsonl``)."""
    import json

    from voicelat.files.results import load_run
    from voicelat.tui.app import VoicelatApp
    from voicelat.tui.live import ChildRun, live_model
    from voicelat.tui.protocol import ARGV_ENV, EVENTS_FORMAT

    command = [
        sys.executable,
        "-m",
        "voicelat",
        "live",
        "--no-tui",
        "--events",
        EVENTS_FORMAT,
        *forwarded_options(args),
        f"--out={out_dir}",
    ]
    env = {**os.environ, ARGV_ENV: json.dumps(list(sys.argv))}
    child = _child_class(ChildRun)(command, env=env)
    model = live_model(pipeline, out_dir, 0)
    model.planned = None
    app = _app_class(VoicelatApp, ptt)(model, controller=child)
    try:
        app.run()
    finally:
        # However the app ended (q, a crash), the child stops cleanly before this returns.
        child.stop_and_wait()
    summary: dict[str, Any] | None = None
    with contextlib.suppress(VoicelatError):
        summary = load_run(out_dir).summary
    if summary is not None:
        from voicelat.report.text import summary_table

        print(summary_table(summary, str(out_dir)))
        if (out_dir / "recorded" / "manifest.json").exists():
            _info(
                f"recorded fixtures: replay with `voicelat run --fixtures {out_dir / 'recorded'}`"
            )
    if child.status == "interrupted":
        _info(f"interrupted: finished turns kept, summary written to {out_dir}")
        return EXIT_INTERRUPTED
    if child.status == "failed":
        raise VoicelatError(
            child.message or "the measuring process failed", exit_code=child.exit_code
        )
    return EXIT_OK


def _child_class(base: Any) -> Any:
    """``ChildRun`` for a live session: q is a graceful stop (SIGUSR2: the session ends as it
    does with q in a terminal, exit 0), the push-to-talk key is SIGUSR1. A second stop (the
    user insists, or Ctrl-C while waiting) is SIGINT, as for ``run``."""

    class LiveChild(base):  # type: ignore[misc]
        def request_stop(self) -> None:
            if not getattr(self, "stop_sent", False):
                self._send(signal.SIGUSR2)
                self.stop_sent = True

        def press(self) -> None:
            self._send(signal.SIGUSR1)

        def _send(self, sig: int) -> None:
            proc = self.proc
            if proc is None or self.done or proc.poll() is not None:
                return
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(sig)

    return LiveChild


def _app_class(base: Any, ptt: bool) -> Any:
    """The run TUI, plus the push-to-talk key when asked for."""
    if not ptt:
        return base
    from textual.binding import Binding

    # Textual finds a relative CSS_PATH beside the module that defines the class: this one
    # lives here, so point at the base app's stylesheet explicitly.
    css = Path(sys.modules[base.__module__].__file__ or ".").parent / str(base.CSS_PATH)

    class LiveApp(base):  # type: ignore[misc]
        CSS_PATH = str(css)
        BINDINGS: ClassVar[list[Any]] = [
            *base.BINDINGS,
            Binding("space", "talk", "Talk (push-to-talk)", priority=True),
        ]

        def action_talk(self) -> None:
            """Push-to-talk: start talking, or end the turn."""
            self.controller.press()

    return LiveApp
