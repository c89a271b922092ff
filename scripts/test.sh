#!/usr/bin/env bash
# Install voicelat with the embedded stack and the dev tools into .venv, then run the tests.
# llama-cpp-python compiles from source: 3-4 minutes on 2 cores the first time.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}" CMAKE_ARGS="${CMAKE_ARGS:--DLLAVA_BUILD=OFF}" \
  .venv/bin/python -m pip install -q -e '.[local,dev]'
.venv/bin/ruff check voicelat tests
.venv/bin/mypy
# The layering contracts in pyproject.toml ([tool.importlinter]; docs/ARCHITECTURE.md).
.venv/bin/lint-imports
.venv/bin/python -m pytest "$@"
