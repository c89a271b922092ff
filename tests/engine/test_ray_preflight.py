"""``--ray ADDRESS`` checked before Ray is asked, against real sockets: a port that accepts TCP
but never answers (it used to hang ``ray.init`` for minutes: the TCP check passed), one that
answers but not HTTP/2, a real HTTP/2 server (the h2 library's, as a gRPC server answers the
preface: a real Ray head's GCS was checked the same way, bench/ray_cluster.py), host names the
IDNA codec refuses (a UnicodeError traceback) and an empty address (it ran locally, exit 0)."""

from __future__ import annotations

import http.server
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from tests.helpers import ROOT, voicelat
from voicelat.core.base.errors import ConfigError, InfraError
from voicelat.engine.ray_workers import check_answers

PIPELINE = ROOT / "pipelines" / "emulated-openai.toml"


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port whose listener accepts connections (the kernel completes them) and never says
    a word."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield int(listener.getsockname()[1])


@pytest.fixture
def http2_port() -> Iterator[int]:
    """A real HTTP/2 server (h2): it answers a client's preface with its SETTINGS."""
    import h2.config
    import h2.connection

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn:
                h2c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
                h2c.initiate_connection()
                conn.settimeout(2.0)
                try:
                    data = conn.recv(65536)
                    h2c.receive_data(data)
                    conn.sendall(h2c.data_to_send())
                    conn.recv(65536)  # until the client closes
                except OSError:
                    pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield int(listener.getsockname()[1])
    finally:
        stop.set()
        thread.join(5)
        listener.close()


@pytest.fixture
def http1_port() -> Iterator[int]:
    """A plain HTTP/1.1 server (the standard library's): something else on the port."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1})
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_a_port_that_accepts_but_never_answers_fails_in_bounded_time(silent_port: int) -> None:
    t0 = time.monotonic()
    with pytest.raises(InfraError, match="accepts connections but does not answer"):
        check_answers(f"127.0.0.1:{silent_port}", timeout_s=1.0)
    assert time.monotonic() - t0 < 3


def test_a_real_http2_server_passes_the_check(http2_port: int) -> None:
    check_answers(f"127.0.0.1:{http2_port}", timeout_s=5.0)


def test_a_server_that_is_not_http2_is_not_a_ray_head(http1_port: int) -> None:
    with pytest.raises(InfraError, match="not as a Ray head"):
        check_answers(f"127.0.0.1:{http1_port}", timeout_s=5.0)


@pytest.mark.parametrize("host", ["a" * 64 + ".example", "a..b", "bücher..example"])
def test_a_host_name_the_idna_codec_refuses_is_a_config_error(host: str) -> None:
    with pytest.raises(ConfigError, match="not a valid host name"):
        check_answers(f"{host}:6379", timeout_s=1.0)


def _error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("voicelat: error:")]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


@pytest.mark.e2e
def test_run_at_a_silent_ray_port_is_one_line_exit_3(silent_port: int, tmp_path: object) -> None:
    t0 = time.monotonic()
    proc = voicelat(
        "run", "-p", str(PIPELINE), "--ray", f"127.0.0.1:{silent_port}", "--no-tui",
        "-o", f"{tmp_path}/r", env={"VOICELAT_EMULATOR_KEY": "k"}, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 3, proc.stderr
    assert "accepts connections but does not answer" in _error_line(proc.stderr)
    assert time.monotonic() - t0 < 60  # it used to hang (no answer in 150 s)


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("address", "says"),
    [("", "an empty address"), ("  ", "an empty address"), ("a" * 64 + ".x:6379", "host name")],
)
def test_run_with_a_bad_ray_address_is_one_line_exit_2(
    address: str, says: str, tmp_path: object
) -> None:
    proc = voicelat(
        "run", "-p", str(PIPELINE), "--ray", address, "--no-tui", "-o", f"{tmp_path}/r",
        env={"VOICELAT_EMULATOR_KEY": "k"}, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert says in _error_line(proc.stderr)
