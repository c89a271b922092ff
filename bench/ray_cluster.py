"""A real two-node Ray cluster on this machine, for the ``--ray`` tests and bench.

``ray start --head`` plus a second ``ray start --address`` (two raylets, two node ids, one
machine), each with one CPU and a 100 MB object store, the dashboard off, every port fixed in
voicelat's test range (head 6390, node/object managers and agents 9350-9399, workers
20000-20999) and its own temp directory, so it cannot meet another Ray on the machine. The
workers the raylets start import voicelat from ``pythonpath`` (a worktree, not only the
installed package). :meth:`LocalRayCluster.stop` is ``ray stop --force`` on that temp dir's
processes: always call it (a context manager, or a fixture finalizer).

    python bench/ray_cluster.py up|down     # by hand: start / stop it
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

PORT = 6390
TEMP_DIR = Path("/tmp/voicelat-ray")
OBJECT_STORE = 100_000_000
#: (node manager, object manager, agent listen, agent grpc, metrics, runtime env agent,
#: worker ports) for the head and the second node.
NODE_PORTS = (
    (9350, 9351, 9352, 9353, 9354, 9355, (20000, 20499)),
    (9360, 9361, 9362, 9363, 9364, 9365, (20500, 20999)),
)


def _ray_bin() -> str:
    here = Path(sys.executable).parent / "ray"
    return str(here) if here.exists() else (shutil.which("ray") or "ray")


@dataclass
class LocalRayCluster:
    """Two Ray nodes on 127.0.0.1 (see the module docstring)."""

    pythonpath: Path | None = None
    nodes: int = 2
    port: int = PORT
    temp_dir: Path = TEMP_DIR
    started: list[str] = field(default_factory=list)
    #: Node k's ``VOICELAT_REGION`` (its raylet's environment: its actors' region label).
    regions: tuple[str, ...] = ()

    @property
    def address(self) -> str:
        """The head's GCS address (``--ray`` takes it)."""
        return f"127.0.0.1:{self.port}"

    def _env(self, k: int | None = None) -> dict[str, str]:
        env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0")
        if k is not None and k < len(self.regions):
            env["VOICELAT_REGION"] = self.regions[k]
        if self.pythonpath is not None:
            env["PYTHONPATH"] = str(self.pythonpath)
        # Without this a raylet's workers are Python processes that resolve `voicelat` from
        # site-packages: the installed copy, not the one under test.
        return env

    def _args(self, k: int) -> list[str]:
        nm, om, al, ag, me, re_, (lo, hi) = NODE_PORTS[k]
        args = [
            "--num-cpus", "1", "--object-store-memory", str(OBJECT_STORE),
            "--node-ip-address", "127.0.0.1", "--node-manager-port", str(nm),
            "--object-manager-port", str(om), "--dashboard-agent-listen-port", str(al),
            "--dashboard-agent-grpc-port", str(ag), "--metrics-export-port", str(me),
            "--runtime-env-agent-port", str(re_), "--min-worker-port", str(lo),
            "--max-worker-port", str(hi), "--disable-usage-stats",
        ]  # fmt: skip
        if k == 0:
            return ["start", "--head", "--port", str(self.port), "--include-dashboard=false",
                    "--temp-dir", str(self.temp_dir), *args]  # fmt: skip
        return ["start", "--address", self.address, *args]

    def start(self) -> LocalRayCluster:
        """Start the head, then the other nodes; wait until all are alive."""
        self.stop()  # a cluster a killed run left behind
        for k in range(self.nodes):
            proc = subprocess.run(
                [_ray_bin(), *self._args(k)],
                env=self._env(k),
                capture_output=True,
                text=True,
                timeout=120,
            )
            if proc.returncode != 0:
                self.stop()
                raise RuntimeError(f"ray start (node {k}) failed: {proc.stderr[-2000:]}")
            self.started.append(f"node{k}")
        return self

    def stop(self) -> None:
        """``ray stop --force``, then any process still holding the temp dir is killed."""
        subprocess.run(
            [_ray_bin(), "stop", "--force"],
            env=self._env(),
            capture_output=True,
            timeout=120,
        )
        for pid in _pids_under(self.temp_dir):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.started.clear()

    def __enter__(self) -> LocalRayCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _pids_under(temp_dir: Path) -> list[int]:
    """Processes whose command line names ``temp_dir`` (this cluster's raylets, GCS, agents)."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if str(temp_dir).encode() in cmd:
            pids.append(int(proc.name))
    return pids


def ray_processes() -> list[str]:
    """Every Ray process on the machine (``ps``): what a test checks is gone at the end."""
    out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    marks = ("raylet", "gcs_server", "ray::", "default_worker.py", "dashboard/agent.py",
             "runtime_env/agent")  # fmt: skip
    return [line for line in out.splitlines() if any(m in line for m in marks)]


if __name__ == "__main__":
    cluster = LocalRayCluster(pythonpath=Path(__file__).resolve().parent.parent)
    if sys.argv[1:] == ["up"]:
        t0 = time.monotonic()
        cluster.start()
        print(f"ray cluster up at {cluster.address} in {time.monotonic() - t0:.1f} s")
    else:
        cluster.stop()
        print("ray cluster stopped")
