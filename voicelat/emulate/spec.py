"""What an emulator declares about itself, apart from how it serves requests.

A profile is validated against these declarations (:mod:`voicelat.emulate.profile`) before any
emulator exists, so they live below the profile, the exchanges and :class:`~voicelat.emulate.base.
Emulator` (which subclasses :class:`EmulatorSpec`): none of those modules needs to import another
one that imports it back.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from voicelat.emulate.dist import Dist

__all__ = ["EmulatorSpec"]


class EmulatorSpec:
    """The class-level declarations of a provider emulator (see :class:`Emulator`)."""

    name: ClassVar[str]
    """Registry name, as typed in ``voicelat serve NAME`` and used for the profile table."""
    title: ClassVar[str] = ""
    """One line for ``voicelat serve --list`` and the docs."""
    base_path: ClassVar[str] = ""
    """Appended to ``http://host:port`` in the printed base URL (OpenAI: ``/v1``)."""
    default_port: ClassVar[int] = 0
    """The port ``voicelat serve`` uses without ``--port`` (pipelines point at it)."""
    ENDPOINTS: ClassVar[tuple[str, ...]] = ()
    """Endpoint names of the routes, for fault filters (``endpoints = ["chat"]``)."""
    LATENCY: ClassVar[Mapping[str, Dist]] = {}
    """Latency keys this emulator draws, with their defaults (ms)."""
    CONTENT: ClassVar[Mapping[str, Any]] = {}
    """Content options with defaults; a profile value must have the default's type."""
    FAULTS: ClassVar[frozenset[str]] = frozenset()
    """Fault kinds this emulator can inject (subset of profile.FAULT_KINDS)."""
    CLOSE_REASONS: ClassVar[Mapping[int, str]] = {}
    """Websocket close reason text per code, as the provider sends it."""
