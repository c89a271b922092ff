"""Issue #30: nothing a server said reaches /metrics. The Prometheus exporter labels series
only with the pipeline's name, a segment and a failure stage from a fixed set; a turn that
failed with the key in its reason (as a server could echo it) is scraped over real HTTP."""

from __future__ import annotations

import urllib.request

from voicelat.core.base.secrets import forget_secrets, register_secret
from voicelat.core.base.turn import Turn
from voicelat.export.prometheus import PrometheusExporter

KEY = "sk-metrics-leak-0123456789abcdef"


def test_a_failure_reason_with_the_key_never_reaches_metrics() -> None:
    register_secret(KEY)
    try:
        turn = Turn(
            0, "f", 0, {}, {}, None, failed=True, failure_stage=f"llm {KEY}",
            failure_reason=f"401 from the server: invalid key {KEY}", flags=(KEY,),
            extra={"server": KEY},
        )  # fmt: skip
        exporter = PrometheusExporter(0, pipeline="leaky")
        try:
            exporter.on_turn(turn)
            url = f"http://127.0.0.1:{exporter.port}/metrics"
            with urllib.request.urlopen(url, timeout=5) as r:
                text = r.read().decode()
        finally:
            exporter.close(None)
    finally:
        forget_secrets()
    assert "voicelat_turn_failures_total" in text  # the failure was counted ...
    assert KEY not in text and KEY[:12] not in text  # ... with nothing of what it said
