"""Shared fixtures: the embedded local stack on test ports, started once per session."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Runs the tests start do not time the instrument reference (~3 s each, engine/calibrate.py)
# unless they ask for it (--calibrate, or this variable): tests/engine/test_calibrate.py does.
os.environ.setdefault("VOICELAT_CALIBRATE", "off")

#: Ports that do not clash with a stack a developer keeps running on the defaults.
TEST_STACK_ENV = {
    "VOICELAT_STT_PORT": "10311",
    "VOICELAT_TTS_PORT": "10211",
    "VOICELAT_LLM_PORT": "8091",
}


def _free(port: int) -> int:
    """``port`` or the next one nobody listens on (another test session may hold the first)."""
    for candidate in range(port, port + 50):
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", candidate))
            except OSError:
                continue
            return candidate
    raise RuntimeError(f"no free port near {port}")


@pytest.fixture(scope="session")
def local_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The three real servers, up and warmed; yields the environment that points at them."""
    from voicelat.stack import LocalStack, StackConfig

    state = tmp_path_factory.mktemp("stack-state")
    env = {k: str(_free(int(v))) for k, v in TEST_STACK_ENV.items()}
    env["VOICELAT_STATE_DIR"] = str(state)
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    stack = LocalStack(StackConfig())
    try:
        status = stack.up()
        yield {"env": env, "status": status, "config": stack.config}
    finally:
        stack.release()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture(autouse=True)
def _secret_registry_per_test() -> Iterator[None]:
    """Each test starts from the keys registered before it: one test's key (read from the
    environment) must not scrub the words of another test's messages."""
    from voicelat.core.base.secrets import forget_secrets, registered_secrets

    before = registered_secrets()
    yield
    forget_secrets(before)
