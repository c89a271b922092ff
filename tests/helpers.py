"""Small helpers shared by the tests that run the voicelat command."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def voicelat(
    *args: str, env: dict[str, str] | None = None, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m voicelat ARGS`` the way a user would; never a shell."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "voicelat", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
        cwd=ROOT,
    )


def read_turns(run_dir: Path) -> list[dict[str, Any]]:
    return [
        json.loads(line)
        for line in (run_dir / "turns.jsonl").read_text().splitlines()
        if line.strip()
    ]


def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9']+", text.lower().replace("10", "ten").replace("2", "two"))


def wer(ref: str, hyp: str) -> float:
    """Word error rate by edit distance over words."""
    r, h = words(ref), words(hyp)
    d = list(range(len(h) + 1))
    for i, rw in enumerate(r, 1):
        prev, d[0] = d[0], i
        for j, hw in enumerate(h, 1):
            cur = min(d[j] + 1, d[j - 1] + 1, prev + (rw != hw))
            prev, d[j] = d[j], cur
    return d[len(h)] / max(1, len(r))


def emulated_openai_pipeline(em: Any) -> Any:
    """pipelines/emulated-openai.toml pointed at ``em``'s running OpenAI emulator (an
    ``voicelat.emulate.Emulators`` that serves ``openai``)."""
    from dataclasses import replace

    from voicelat.files.pipeline import load_pipeline

    pipeline = load_pipeline(ROOT / "pipelines" / "emulated-openai.toml")
    server = em.servers["openai"]
    default = f"127.0.0.1:{server.emulator.default_port}"
    here = f"127.0.0.1:{server.port}"
    tables: dict[str, Any] = {
        k: dict(getattr(pipeline, k))
        | {"base_url": getattr(pipeline, k)["base_url"].replace(default, here)}
        for k in ("stt", "llm", "tts")
    }
    return replace(pipeline, **tables)
