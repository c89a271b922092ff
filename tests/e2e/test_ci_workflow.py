"""docs/CI.md's GitHub Actions workflow, kept true: its structure, and its steps run as a script.

The fast test reads the YAML block out of docs/CI.md and checks what a new user tripped over:
the install step installs this checkout (voicelat is on no package index), llama-cpp-python
gets ``CMAKE_ARGS=-DLLAVA_BUILD=OFF``, and pip's cache and the model assets are cached at the
paths the tools really use.

The slow test runs the workflow's ``run:`` steps with bash, the ``${{ ... }}`` expressions filled
in, the ``uses:`` steps emulated (``setup-python``: a fresh virtual environment first on PATH;
the caches: pip's real cache directory "restored", an empty asset cache, an empty baseline), in
a copy of the checkout under a temporary HOME: once as a push to main (the gate saves the
baseline) and once as a pull request (the gate compares with it).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.fresh_clone import make_clone, pip_cache_or_skip, relax_budget

yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parents[2]
CI_DOC = ROOT / "docs" / "CI.md"

#: What the gate step runs in the slow test instead of `--repeat 2` (two rounds of 14 fixtures):
#: 8 measured turns, the `min_turns` of pipelines/local.toml's budget.
_SHORT = "--turns 8"


def _workflow() -> dict[str, Any]:
    text = CI_DOC.read_text(encoding="utf-8")
    section = text[text.index("## GitHub Actions") :]
    match = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert match, "docs/CI.md: no ```yaml block under ## GitHub Actions"
    doc = yaml.safe_load(match.group(1))
    assert isinstance(doc, dict)
    return doc


def _job() -> dict[str, Any]:
    jobs = _workflow()["jobs"]
    assert list(jobs) == ["latency"]
    job = jobs["latency"]
    assert isinstance(job, dict)
    return job


def _step(job: dict[str, Any], uses: str) -> dict[str, Any]:
    found = [s for s in job["steps"] if str(s.get("uses", "")).startswith(uses + "@")]
    assert len(found) == 1, f"expected one {uses} step, got {len(found)}"
    return found[0]


def _named(job: dict[str, Any], word: str) -> dict[str, Any]:
    found = [s for s in job["steps"] if "run" in s and word in s.get("name", "")]
    assert len(found) == 1, f"expected one run step named ...{word}..., got {len(found)}"
    return found[0]


def test_workflow_installs_this_checkout_with_caches() -> None:
    job = _job()
    assert "-DLLAVA_BUILD=OFF" in job["env"]["CMAKE_ARGS"]
    # A native build crashes on AMX CPUs (README.md, "Two commands").
    assert "-DGGML_NATIVE=OFF" in job["env"]["CMAKE_ARGS"]
    for step in job["steps"]:
        if "uses" in step:  # every action pinned to a major version
            assert re.fullmatch(r"[\w-]+/[\w/-]+@v\d+", step["uses"]), step["uses"]

    setup = _step(job, "actions/setup-python")["with"]
    assert setup["cache"] == "pip"
    assert (ROOT / setup["cache-dependency-path"]).is_file()

    from voicelat.stack.config import ENV_CACHE, default_cache_dir

    assets = next(s["with"] for s in job["steps"] if s.get("uses") == "actions/cache@v4")
    saved = os.environ.pop(ENV_CACHE, None)
    try:  # the cached path is where the stack prepares its models by default
        assert Path(assets["path"]).expanduser() == default_cache_dir()
    finally:
        if saved is not None:
            os.environ[ENV_CACHE] = saved
    assert "hashFiles('pyproject.toml')" in assets["key"]

    install = _named(job, "Install")["run"]
    targets = re.findall(r"pip install (?:--\S+ )*'([^']+)'", install)
    assert targets == [".[local]"], f"the install step must install this checkout: {targets}"

    gate = _named(job, "Latency gate")["run"]
    assert "voicelat ci" in gate
    assert "--repeat 2" in gate  # what the slow test shortens
    for pipeline in re.findall(r"--pipeline (\S+)", gate):
        assert (ROOT / pipeline).is_file(), f"the gate names {pipeline}, not in the repository"
    for fixtures in re.findall(r"--fixtures (\S+)", gate):
        assert (ROOT / fixtures / "manifest.json").is_file(), f"no fixtures in {fixtures}"
    # The baseline the gate writes on main is the directory both cache steps keep.
    assert "--save-baseline baseline" in gate
    assert _step(job, "actions/cache/save")["with"]["path"] == "baseline"
    assert _step(job, "actions/cache/restore")["with"]["path"] == "baseline"


def _expand(script: str, context: dict[str, str]) -> str:
    def sub(m: re.Match[str]) -> str:
        key = m.group(1).strip()
        assert key in context, f"unknown expression ${{{{ {key} }}}} in a run step"
        return context[key]

    return re.sub(r"\$\{\{(.*?)\}\}", sub, script)


def _script(job: dict[str, Any], names: list[str], ref: str) -> str:
    parts = ["set -euo pipefail"]
    for word in names:
        run = _named(job, word)["run"]
        parts.append(_expand(run, {"github.ref": ref, "github.sha": "0" * 40}))
    return "\n".join(parts).replace("--repeat 2", _SHORT)


@pytest.mark.slow
@pytest.mark.stack
def test_workflow_steps_run_as_a_script(tmp_path: Path) -> None:
    pip_cache = pip_cache_or_skip()
    job = _job()
    py = tmp_path / "python"
    # setup-python: a fresh interpreter environment first on PATH (the base interpreter, not
    # the test's virtual environment, so nothing of voicelat is installed in it yet).
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", str(py)], check=True)
    clone = make_clone(tmp_path, pip_cache, path_prefix=py / "bin")
    relax_budget(clone.work)
    work, home, env = clone.work, clone.home, clone.env
    summary_md = tmp_path / "step-summary.md"
    env.update(GITHUB_STEP_SUMMARY=str(summary_md), **{k: str(v) for k, v in job["env"].items()})
    try:
        push = subprocess.run(
            ["bash", "-c", _script(job, ["Install", "Latency gate"], "refs/heads/main")],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
        log = push.stdout + push.stderr
        assert push.returncode == 0, log[-4000:]
        assert "Building wheel for llama-cpp-python" not in log, "pip's cache was not used"
        assert "GATE PASSED" in log
        assert (work / "baseline" / "summary.json").is_file()
        assert (work / "ci-results" / "junit.xml").is_file()
        summary = json.loads((work / "ci-results" / "run" / "summary.json").read_text())
        llm = summary["stages"]["llm"]  # the stack's server, not its HTTP header ("uvicorn")
        assert llm["server"] == "llama-cpp-python" and isinstance(llm["server_pid"], int), llm
        assert any((home / ".cache" / "voicelat" / "models").glob("*.gguf")), "asset cache"
        installed = subprocess.run(
            [str(py / "bin" / "python"), "-c", "import voicelat; print(voicelat.__file__)"],
            cwd=tmp_path,  # not the test's checkout: `python -c` imports from its cwd
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert installed.startswith(str(py)), f"voicelat not installed into the job: {installed}"
        assert "latency gate: ✅ passed" in summary_md.read_text()  # $GITHUB_STEP_SUMMARY

        shutil.rmtree(work / "ci-results")  # a fresh runner; the baseline came from the cache
        pr = subprocess.run(
            ["bash", "-c", _script(job, ["Latency gate"], "refs/pull/1/merge")],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        log = pr.stdout + pr.stderr
        assert pr.returncode == 0, log[-4000:]
        assert "vs baseline baseline" in log
    finally:
        subprocess.run(
            [str(py / "bin" / "voicelat"), "stack", "down"],
            env=env,
            capture_output=True,
            timeout=60,
            check=False,
        )
        shutil.rmtree(py, ignore_errors=True)  # about 1 GB


@pytest.mark.e2e
def test_a_wheel_ships_the_bundled_fixtures_and_default_pipeline(tmp_path: Path) -> None:
    # A non-editable install (the workflow's, or one from a git URL) has no checkout around
    # it: `voicelat run` with no --fixtures needs the fixtures inside the package.
    import zipfile

    out = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = out.glob("voicelat-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "voicelat/data/fixtures/manifest.json" in names
    assert "voicelat/data/pipelines/local.toml" in names
