"""Network profiles from the command line and from files: ``--network 4g`` names a built-in,
``--network my-net.toml`` reads a file's ``[network]`` table, and a pipeline file's own
``[network]`` table is parsed the same way (:func:`network_from_table`). Errors name the file,
the line and the key (docs/NETWORK.md lists every key)."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from voicelat.core.base.errors import ConfigError
from voicelat.core.base.network import BUILTIN_PROFILES, NetworkProfile, parse_profile

__all__ = ["load_network", "network_from_table"]


def network_from_table(
    data: Mapping[str, Any], *, text: str = "", path: Path | None = None
) -> NetworkProfile:
    """A ``[network]`` table (``data`` is the table; ``text`` the file's source, for lines)."""
    where = str(path) if path else "pipeline"

    def err(table: str, key: str | None, msg: str) -> ConfigError:
        line = _line_of(text, table, key)
        loc = f"{where}:{line}" if line else where
        name = f"[{table}] {key}" if key else f"[{table}]"
        return ConfigError(f"{loc}: {name} {msg}")

    return parse_profile(data, err=err, default_name=path.stem if path else "custom")


def load_network(spec: str) -> NetworkProfile:
    """``--network SPEC``: a built-in's name, or a TOML file holding a ``[network]`` table."""
    if spec in BUILTIN_PROFILES:
        return BUILTIN_PROFILES[spec]
    path = Path(spec)
    if not (path.suffix == ".toml" or path.exists()):
        raise ConfigError(
            f"--network {spec}: not a built-in profile ({', '.join(BUILTIN_PROFILES)}) "
            "nor a TOML file with a [network] table"
        )
    try:
        text = path.read_bytes().decode("utf-8", errors="replace")
    except FileNotFoundError:
        raise ConfigError(f"--network {spec}: the file does not exist") from None
    except OSError as exc:
        raise ConfigError(f"--network {spec}: cannot read it: {exc.strerror}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    table = data.get("network")
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: has no [network] table (docs/NETWORK.md lists its keys)")
    return network_from_table(table, text=text, path=path)


def _line_of(text: str, table: str, key: str | None) -> int | None:
    """The line of ``key`` in ``[table]`` (or of the header) of a TOML source."""
    current, header = "", None
    for no, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        m = re.match(r"^\[\s*([^\]]+?)\s*\]", stripped)
        if m:
            current = m.group(1)
            header = no if current == table else header
            continue
        if key and current == table and re.match(rf"^\"?{re.escape(key)}\"?\s*=", stripped):
            return no
    return header
