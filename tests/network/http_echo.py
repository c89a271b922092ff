"""A real HTTP/1.1 server for the relay tests, run as its own process: ``POST /echo`` answers
the body back, ``POST /stream`` answers a chunked event stream whose first event comes 5 ms
after the headers (as an LLM's first token). Binds 127.0.0.1 or the address given; prints
its port, serves until terminated."""

from __future__ import annotations

import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go in separate writes

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if self.path == "/stream":
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.flush()
            time.sleep(0.005)
            for part in (b"data: first\n\n", b"data: [DONE]\n\n"):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


if __name__ == "__main__":
    import sys

    server = ThreadingHTTPServer((sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()
