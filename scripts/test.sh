#!/usr/bin/env bash
# Install voicelat with the embedded stack and the dev tools into .venv, then run the tests.
# llama-cpp-python compiles from source the first time: 3-4 minutes on an idle 2-core machine,
# about 10 on a busy one, with pip silent meanwhile (README.md, "Two commands").
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
echo "installing voicelat[local,dev]: the first time llama-cpp-python compiles (minutes; pip is quiet)" >&2
CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}" CMAKE_ARGS="${CMAKE_ARGS:--DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF}" \
  .venv/bin/python -m pip install -q -e '.[local,dev]'
.venv/bin/ruff check voicelat tests
.venv/bin/mypy
# The layering contracts in pyproject.toml ([tool.importlinter]; docs/ARCHITECTURE.md).
.venv/bin/lint-imports
# Every run ends with its 15 slowest tests (--durations=15, pyproject.toml's addopts).
.venv/bin/python -m pytest "$@"
