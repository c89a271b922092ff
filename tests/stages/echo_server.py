"""A real HTTP server on loopback that echoes the request's ``Authorization`` header back in its
error bodies, the way some gateways and proxies do: the secret-scrubbing tests' adversary."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

#: Warm-up paths of the HTTP stages (answered 200 so the stage starts and the turn reaches them).
WARM_PATHS = ("/v1/models", "/models", "/tts/v1/voices")


class _Echo(BaseHTTPRequestHandler):
    #: The request's ``Authorization``, sent back in the ``Server`` header of the answer too.
    _auth = ""

    def version_string(self) -> str:
        return f"echo/1.0 ({self._auth})" if self._auth else "echo/1.0"

    def log_message(self, format: str, *args: object) -> None:  # quiet in tests
        return None

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        auth = self._auth = self.headers.get("Authorization", "")
        if self.path.split("?")[0] in WARM_PATHS and self.command == "GET":
            status, body = 200, json.dumps({"data": [], "voices": []}).encode()
        else:
            # A long prefix so that naive truncation would cut the key in half.
            message = "x" * 150 + f" invalid credentials: {auth} (header echoed)"
            status, body = 500, json.dumps({"error": {"message": message}}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = _answer
    do_POST = _answer


@contextmanager
def echo_server() -> Iterator[str]:
    """``http://127.0.0.1:PORT`` of a running echo server, stopped on exit."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
