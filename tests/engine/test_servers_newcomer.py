"""A stage on the embedded stack is described by the stack's server, not an HTTP header."""

from __future__ import annotations

from voicelat.engine.servers import with_stack_servers

STACK = {
    "llm": {
        "url": "http://127.0.0.1:8080",
        "package": "llama-cpp-python",
        "version": "0.3.36",
        "pid": 4242,
        "reused": True,
    },
    "stt": {
        "url": "tcp://127.0.0.1:10300",
        "package": "wyoming-faster-whisper",
        "version": "3.8.1",
        "pid": 4243,
        "reused": False,
    },
}


def test_the_llm_server_is_llama_cpp_python_not_uvicorn() -> None:
    stages = {
        "llm": {"stage": "openai", "base_url": "http://127.0.0.1:8080/v1", "server": "uvicorn"},
        "stt": {"stage": "wyoming-stt", "url": "tcp://127.0.0.1:10300", "server": "faster-whisper"},
        "tts": {"stage": "espeak-tts", "engine_version": "1.51", "worker_pid": 7},
    }
    out = with_stack_servers(stages, STACK)
    assert out["llm"]["server"] == "llama-cpp-python"
    assert out["llm"]["server_version"] == "0.3.36" and out["llm"]["server_pid"] == 4242
    assert out["llm"]["http_server"] == "uvicorn"  # the header is kept, under its own name
    assert out["stt"]["server"] == "wyoming-faster-whisper" and out["stt"]["server_pid"] == 4243
    assert out["tts"] == stages["tts"]  # in-process: no server to name


def test_a_stage_on_another_server_keeps_its_own_description() -> None:
    stages = {
        "llm": {
            "stage": "openai",
            "base_url": "https://api.example.invalid/v1",
            "server": "cloudflare",
        }
    }
    assert with_stack_servers(stages, STACK) == stages
    assert with_stack_servers(stages, {}) == stages
