"""Budget files on disk: a TOML file holding one ``[budget]`` table (parsed by core/judge/budget.py)."""

from __future__ import annotations

import tomllib
from pathlib import Path

from voicelat.core.base.errors import ConfigError
from voicelat.core.judge.budget import Budget, parse_budget

# The pipeline loader's line locator: errors in both files point at lines the same way.
from voicelat.files.pipeline import _line_of


def load_budget_file(path: Path) -> Budget:
    """Read a budget file: a TOML file holding one ``[budget]`` table."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"budget file {path} does not exist") from None
    except OSError as exc:
        raise ConfigError(f"cannot read budget file {path}: {exc.strerror}") from None
    text = raw.decode("utf-8", errors="replace")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    extra = sorted(k for k in data if k != "budget")
    if extra:
        raise ConfigError(
            f"{path}: a budget file holds one [budget] table; unknown top-level "
            f"key(s) {', '.join(extra)} (limits go in [budget.e2e], [budget.<segment>])"
        )
    table = data.get("budget")
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: no [budget] table (see docs/CI.md for the format)")
    return parse_budget(table, source=str(path), locate=lambda tbl, key: _line_of(text, tbl, key))


__all__ = ["load_budget_file"]
