"""Where the running ``voicelat serve`` processes actually listen, for the runs that use them.

The emulated pipelines (``pipelines/emulated-*.toml``) name each emulator's default address
(``127.0.0.1:8401`` for OpenAI, ...). When another process holds that port, ``voicelat serve``
takes a free one instead (or the one ``--port`` asks for) and records, while it serves, which
default address it stands in for: one small JSON file per serve process under the state
directory (where it listens, and what it stands in for), removed when it stops. Only a busy
default port moves an address: ``--port`` is the user's own choice, for pipelines they point
there themselves. A run reads them (:func:`served_moves`) and points a stage
that names a default address at the address the emulator really has
(``voicelat.engine.served``). A record whose process is gone is ignored and removed.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["ENV_STATE_DIR", "register_served", "served_dir", "served_moves", "unregister_served"]

#: The same variable the embedded stack's state directory follows (stack/config.py).
ENV_STATE_DIR = "VOICELAT_STATE_DIR"
#: The cache directory's variable (stack/config.py): its ``state/`` holds the records otherwise.
ENV_CACHE = "VOICELAT_CACHE"
_VERSION = 1


def served_dir() -> Path:
    """``$VOICELAT_STATE_DIR/emulators``, else ``<cache>/state/emulators`` (the stack's state
    directory rule, repeated here: ``emulate`` and ``stack`` do not import each other)."""
    state = os.environ.get(ENV_STATE_DIR)
    if state:
        return Path(state).expanduser() / "emulators"
    cache = os.environ.get(ENV_CACHE)
    base = Path(cache).expanduser() if cache else Path.home() / ".cache" / "voicelat"
    return base / "state" / "emulators"


def register_served(
    at: Sequence[str], moves: Mapping[str, str], pid: int | None = None
) -> Path | None:
    """Record that this process listens on the addresses ``at`` (``host:port``) and stands in
    for each default address of ``moves`` at another one; None (nothing written) when the
    directory is not writable: the runs then use the addresses their pipelines name."""
    pid = os.getpid() if pid is None else pid
    directory = served_dir()
    path = directory / f"serve-{pid}.json"
    try:
        directory.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        doc = {"version": _VERSION, "pid": pid, "at": list(at), "moves": dict(moves)}
        tmp.write_text(json.dumps(doc) + "\n", encoding="utf-8")
        tmp.replace(path)
    except OSError:
        return None
    return path


def unregister_served(path: Path | None) -> None:
    """Remove a record :func:`register_served` wrote (nothing when it wrote none)."""
    if path is not None:
        with contextlib.suppress(OSError):
            path.unlink()


def served_moves() -> dict[str, str]:
    """Default address -> the address a running ``voicelat serve`` really has, over every live
    record (the newest wins an address two of them claim). A default address another serve
    listens on itself is not moved: that one is an emulator too. Stale records are removed."""
    directory = served_dir()
    try:
        paths = sorted(directory.glob("serve-*.json"), key=_mtime)
    except OSError:
        return {}
    out: dict[str, str] = {}
    taken: set[str] = set()
    for path in paths:
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            pid, at, moves = int(doc["pid"]), doc["at"], doc["moves"]
        except (OSError, ValueError, KeyError, TypeError):
            continue  # being written, or not ours: the next run reads it again
        if not _alive(pid):
            unregister_served(path)
            continue
        if isinstance(at, list):
            taken.update(str(a) for a in at)
        if isinstance(moves, dict):
            out.update({str(k): str(v) for k, v in moves.items()})
    return {k: v for k, v in out.items() if k not in taken}


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process: alive, just not ours to signal
    return True
