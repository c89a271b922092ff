"""Which emulators exist, and their classes by name (the names: :mod:`voicelat.emulate.names`).

A new built-in provider adds one line to :data:`~voicelat.emulate.names.BUILTIN`; a package
outside voicelat registers its class in the entry-point group ``voicelat.emulators``.
"""

from __future__ import annotations

import importlib
from typing import cast

from voicelat.core.base.errors import ConfigError
from voicelat.emulate.base import Emulator
from voicelat.emulate.names import BUILTIN, ENTRY_POINT_GROUP, known_emulators

__all__ = ["BUILTIN", "ENTRY_POINT_GROUP", "emulator_class", "known_emulators"]


def emulator_class(name: str) -> type[Emulator]:
    """The class registered as ``name``; a clear error lists the known names."""
    known = known_emulators()
    target = known.get(name)
    if target is None:
        raise ConfigError(f"unknown emulator {name!r}; known emulators: {', '.join(sorted(known))}")
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
        cls = getattr(module, attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"emulator {name!r} cannot be loaded from {target}: {exc}") from None
    return cast("type[Emulator]", cls)
