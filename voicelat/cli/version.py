"""``voicelat --version``: voicelat's version, and the embedded stack's servers when it runs.

A latency number is only comparable with another from the same servers, so the version line
names them: each running server's package, version, pid and address (from the stack's state
file; nothing is started), or, when the stack is not running, the server packages installed.
"""

from __future__ import annotations

import argparse
import platform
from collections.abc import Sequence
from typing import Any, NoReturn

from voicelat.core.base.errors import VoicelatError
from voicelat.core.base.version import __version__

__all__ = ["VersionAction", "version_text"]


def version_text() -> str:
    """What ``voicelat --version`` prints."""
    lines = [f"voicelat {__version__} (Python {platform.python_version()})"]
    try:
        from voicelat.stack import LocalStack, StackConfig

        status = LocalStack(StackConfig()).status()
    except (VoicelatError, ImportError, OSError) as exc:
        lines.append(f"embedded stack: unavailable ({exc})")
        return "\n".join(lines)
    running = [s for s in status.servers if s.running]
    if not running:
        installed = ", ".join(f"{s.package} {s.version or 'not installed'}" for s in status.servers)
        lines.append(f"embedded stack: not running (`voicelat stack up`); installed: {installed}")
        return "\n".join(lines)
    lines.append("embedded stack:")
    lines.extend(f"  {s.line()}" for s in status.servers)
    return "\n".join(lines)


class VersionAction(argparse.Action):
    """``--version``: print :func:`version_text` and exit 0 (argparse's own prints one string
    fixed when the parser is built)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        kwargs.setdefault("help", "show voicelat's version and the embedded stack's servers")
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> NoReturn:
        print(version_text(), flush=True)
        parser.exit()
