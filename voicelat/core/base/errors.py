"""Errors that reach the user as one clear line and a documented exit code."""

from __future__ import annotations

from voicelat.core.base.secrets import scrub_secrets

EXIT_OK = 0
EXIT_GATE_FAILED = 1
EXIT_USAGE = 2
EXIT_INFRA = 3
#: ``ci --untrusted inconclusive``: only latency checks failed, on a run that distrusts its machine.
EXIT_GATE_INCONCLUSIVE = 4
EXIT_INTERRUPTED = 130


class VoicelatError(Exception):
    """A problem the user can fix; ``str()`` is the whole message, ``exit_code`` the process status."""

    exit_code = EXIT_USAGE

    def __init__(self, message: str, *, exit_code: int | None = None) -> None:
        # Every startup error passes here: a key a server echoed never reaches stderr, and the
        # message stays one line whatever it quotes (a TOML key may hold a newline).
        one_line = message.strip().replace("\r", "\\r").replace("\n", "\\n")
        super().__init__(scrub_secrets(one_line))
        if exit_code is not None:
            self.exit_code = exit_code


class ConfigError(VoicelatError):
    """A pipeline, budget or fixture file that cannot be used as given."""


class AudioError(VoicelatError):
    """Audio input that cannot be read or used."""


class StageError(VoicelatError):
    """A stage that cannot be built or reached (unknown name, server down, missing key)."""


class InfraError(VoicelatError):
    """The pipeline's infrastructure is not usable (stack down, every turn failed)."""

    exit_code = EXIT_INFRA


class StageFailure(Exception):
    """A stage failed in the middle of a turn; the turn is recorded as failed and the run goes on."""

    def __init__(self, stage: str, reason: str) -> None:
        reason = scrub_secrets(reason)
        super().__init__(f"{stage}: {reason}")
        self.stage = stage
        self.reason = reason


def only_interrupts(exc: BaseException) -> bool:
    """Whether ``exc`` is a Ctrl-C (or a stop signal taking its path) wrapped in exception
    groups and nothing else.

    A signal that lands while a library runs a task group (anyio's ``connect_tcp`` inside
    httpx) comes out as ``BaseExceptionGroup([KeyboardInterrupt])``: it must still stop the
    run as an interruption (exit 130/143, summary kept), not as a failure with a traceback.
    """
    if isinstance(exc, KeyboardInterrupt):
        return True
    if isinstance(exc, BaseExceptionGroup):
        return all(only_interrupts(e) for e in exc.exceptions)
    return False
