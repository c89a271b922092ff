"""Which emulators exist: the built-in ones by name, plus third-party ones by entry point.

A new built-in provider adds one line to :data:`BUILTIN` (module path and class, imported
only when used). A package outside voicelat registers its class in the entry-point group
``voicelat.emulators`` instead::

    [project.entry-points."voicelat.emulators"]
    acme = "acme_voicelat.emulator:AcmeEmulator"
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from typing import TYPE_CHECKING

from voicelat.core.errors import ConfigError

if TYPE_CHECKING:
    from voicelat.emulate.base import Emulator

__all__ = ["BUILTIN", "ENTRY_POINT_GROUP", "emulator_class", "known_emulators"]

ENTRY_POINT_GROUP = "voicelat.emulators"

#: name -> "module:Class". Ports are fixed per emulator so pipeline files can name them.
BUILTIN: dict[str, str] = {
    "openai": "voicelat.emulate.providers.openai:OpenAIEmulator",
    "inworld": "voicelat.emulate.providers.inworld:InworldEmulator",
    "deepgram": "voicelat.emulate.providers.deepgram:DeepgramEmulator",
    "elevenlabs": "voicelat.emulate.providers.elevenlabs:ElevenLabsEmulator",
    "cartesia": "voicelat.emulate.providers.cartesia:CartesiaEmulator",
    "assemblyai": "voicelat.emulate.providers.assemblyai:AssemblyAIEmulator",
}


def known_emulators() -> dict[str, str]:
    """Every emulator name with where its class lives (built-ins win over entry points)."""
    found = {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}
    found.update(BUILTIN)
    return found


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
    return cls  # type: ignore[no-any-return]
