"""A llama.cpp server that dies of SIGSEGV during startup gets the rebuild hint.

On a CPU with AMX a `-march=native` llama.cpp build crashes on its first completion (seen on
this project's CI machine); the user sees the exit code, and the one line says how to fix it."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from voicelat.stack import LocalStack, StackConfig
from voicelat.stack.manager import _Launch


def _died_of(sig: int, name: str, tmp_path: Path) -> str:
    log = tmp_path / f"{name}.log"
    log.write_text("INFO:     Uvicorn running on http://127.0.0.1:8080\n")
    popen = subprocess.Popen([sys.executable, "-c", f"import os; os.kill(os.getpid(), {int(sig)})"])
    popen.wait(timeout=30)
    launch = _Launch(name, popen, [], log, time.monotonic(), "now")
    stack = LocalStack(StackConfig(cache_dir=tmp_path, state_dir=tmp_path))
    return str(stack._exited_error(launch))


def test_a_segfaulting_llm_names_the_rebuild(tmp_path: Path) -> None:
    message = _died_of(signal.SIGSEGV, "llm", tmp_path)
    assert message.startswith("llm server exited with code -11 during startup")
    assert "\n" not in message
    assert "-DGGML_NATIVE=OFF" in message and "pip cache remove llama_cpp_python" in message


def test_other_exits_get_no_rebuild_hint(tmp_path: Path) -> None:
    assert "GGML_NATIVE" not in _died_of(signal.SIGTERM, "llm", tmp_path)
    assert "GGML_NATIVE" not in _died_of(signal.SIGSEGV, "stt", tmp_path)
