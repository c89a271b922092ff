"""Which emulator names exist: the built-in ones, plus third-party ones by entry point.

Names only (no class is imported), so the profile parser can check its table names without
depending on the emulator classes; :mod:`voicelat.emulate.registry` loads a class by name.

A new built-in provider adds one line to :data:`BUILTIN` (module path and class, imported
only when used). A package outside voicelat registers its class in the entry-point group
``voicelat.emulators`` instead::

    [project.entry-points."voicelat.emulators"]
    acme = "acme_voicelat.emulator:AcmeEmulator"
"""

from __future__ import annotations

from importlib.metadata import entry_points

__all__ = ["BUILTIN", "ENTRY_POINT_GROUP", "known_emulators"]

ENTRY_POINT_GROUP = "voicelat.emulators"

#: name -> "module:Class". Ports are fixed per emulator so pipeline files can name them.
BUILTIN: dict[str, str] = {
    "openai": "voicelat.emulate.providers.openai:OpenAIEmulator",
    "inworld": "voicelat.emulate.providers.inworld:InworldEmulator",
    "deepgram": "voicelat.emulate.providers.deepgram:DeepgramEmulator",
    "elevenlabs": "voicelat.emulate.providers.elevenlabs:ElevenLabsEmulator",
    "cartesia": "voicelat.emulate.providers.cartesia:CartesiaEmulator",
    "assemblyai": "voicelat.emulate.providers.assemblyai:AssemblyAIEmulator",
    "openai-realtime": "voicelat.emulate.providers.openai_realtime:OpenAIRealtimeEmulator",
    "gemini-live": "voicelat.emulate.providers.gemini_live:GeminiLiveEmulator",
}


def known_emulators() -> dict[str, str]:
    """Every emulator name with where its class lives (built-ins win over entry points)."""
    found = {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}
    found.update(BUILTIN)
    return found
