"""Which server a stage talked to, when it was one of the embedded stack's.

A stage can only say what its server says about itself: an HTTP ``Server`` header names the
web framework (llama-cpp-python's server answers ``uvicorn``), and in-process engines have no
server at all. When the run started or reused the embedded stack, the stack knows each server's
package, version and pid; this puts them into the stage's description (the summary's
``stages``, and compare's metadata), keeping the header as ``http_server``.

It is also the one place every stage's description passes on its way into the summary, so it
scrubs them: what a server says about itself (its ``Server`` header, a version, model ids) is
the server's text, and a server may echo a key anywhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from voicelat.core.base.secrets import scrub_json

__all__ = ["with_stack_servers"]


def with_stack_servers(
    stages: Mapping[str, Mapping[str, Any]], stack: Mapping[str, Mapping[str, Any]]
) -> dict[str, dict[str, Any]]:
    """``stages`` (kind -> ``describe()``) with the stack's server identity for every stage
    whose ``url``/``base_url`` points at that kind's embedded server, every string scrubbed of
    every registered key."""
    out: dict[str, dict[str, Any]] = {}
    for kind, description in stages.items():
        d = dict(description)
        server = stack.get(kind)
        url = str(d.get("url") or d.get("base_url") or "")
        if server and server.get("url") and url.startswith(str(server["url"])):
            header = d.get("server")
            if header and header != server.get("package") and d.get("base_url"):
                d["http_server"] = header
            d["server"] = server.get("package") or header
            d["server_version"] = server.get("version")
            d["server_pid"] = server.get("pid")
        out[kind] = d
    return scrub_json(out)  # type: ignore[no-any-return]
