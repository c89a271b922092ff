"""A run under a network profile: the stages' addresses pointed at the impairment relay
(``engine/relay.py``, a process of its own) for the run, and what the relay realised recorded
beside what was asked for in ``summary.json`` (a ``network`` section; a miss beyond the
documented tolerance is a trust reason, ``network_missed``). docs/NETWORK.md.

:func:`open_network` is the one entry point the run job calls (``engine/job.py``).
"""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from voicelat.core.base.errors import ConfigError, InfraError
from voicelat.core.base.network import NetworkProfile, realised_misses
from voicelat.engine.phone_leg import TRANSCODE_NOTE, realised_from_turns

__all__ = ["NetworkRun", "RelayProcess", "open_network", "relayed_pipeline"]

_PLAIN = {"http": 80, "ws": 80, "tcp": None}
_TABLES = ("stt", "llm", "tts", "s2s", "agent")
_URL_KEYS = ("url", "base_url")
MEDIA_NOTE = (
    "webrtc: the signalling (the offer) goes through the TCP relay; each call's media (RTP, "
    "STUN, DTLS, SCTP on one UDP path) through its own UDP relay in voicelat's process (the "
    "offer and the answer name only the relay's candidates): realised per way in 'media'"
)
PHONE_NOTE = (
    "codec pcmu: a phone leg on the audio (the caller's frames and the reply, 8 kHz mu-law, "
    "delay + fixed jitter buffer, lost frames repeated once then silenced); the stages' "
    "connections are not relayed"
)


class RelayProcess:
    """The relay child (``python -m voicelat.engine.relay``): started, asked to stop, and
    its realised impairment read back. A context manager; never left running."""

    def __init__(self, profile: NetworkProfile, targets: list[tuple[str, str, int]]) -> None:
        self.profile = profile
        self.targets = targets  # (kind, host, port)
        self.listen: list[tuple[str, int]] = []
        self.realised: dict[str, Any] = {}
        self._proc: subprocess.Popen[str] | None = None

    def start(self) -> list[tuple[str, int]]:
        """Start the child; the (host, port) each target's relay listens on."""
        req = {
            "profile": self.profile.to_json(),
            "relays": [{"kind": k, "host": h, "port": p} for k, h, p in self.targets],
        }
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "voicelat.engine.relay"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": _pythonpath()},
        )
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.write(json.dumps(req) + "\n")
        self._proc.stdin.flush()
        line = self._proc.stdout.readline()
        if not line:
            self.close()
            raise InfraError("the network relay did not start (python -m voicelat.engine.relay)")
        self.listen = [(str(h), int(p)) for h, p in json.loads(line)["listen"]]
        return self.listen

    def close(self) -> dict[str, Any]:
        """Stop the child (idempotent); what it realised per direction."""
        proc, self._proc = self._proc, None
        if proc is None:
            return self.realised
        try:
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write("stop\n")
            proc.stdin.flush()
            line = proc.stdout.readline()
            if line:
                self.realised = json.loads(line).get("realised", {})
            proc.wait(timeout=5)
        except (OSError, ValueError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait()
        return self.realised

    def __enter__(self) -> RelayProcess:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _pythonpath() -> str:
    """The child imports this voicelat, wherever it was imported from."""
    root = str(Path(__file__).resolve().parents[2])
    rest = os.environ.get("PYTHONPATH", "")
    return root + (os.pathsep + rest if rest else "")


def _target(url: str, where: str) -> tuple[str, int]:
    """``host, port`` of a plain address the relay can stand in for (``ConfigError`` for TLS)."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in _PLAIN:
        raise ConfigError(
            f"{where} = {url!r}: --network relays plain http://, ws:// and tcp:// addresses only "
            "(a TLS certificate names the real host, which a relay on 127.0.0.1 is not); run "
            "against an emulator or the embedded stack (docs/NETWORK.md)"
        )
    port = parts.port or _PLAIN[scheme]
    if parts.hostname is None or port is None:
        raise ConfigError(f"{where} = {url!r}: names no host and port to relay")
    return parts.hostname, port


def relayed_pipeline(pipeline: Any, listen: Mapping[tuple[str, int], tuple[str, int]]) -> Any:
    """``pipeline`` with each stage's address replaced by its relay's (``listen``: target ->
    relay address)."""
    changes: dict[str, Any] = {}
    for kind, key, url in _addresses(pipeline):
        host, port = listen[_target(url, f"[{kind}] {key}")]
        parts = urlsplit(url)
        table = changes.get(kind) or getattr(pipeline, kind).copy()
        table[key] = urlunsplit(parts._replace(netloc=f"{host}:{port}"))
        changes[kind] = table
    return replace(pipeline, **changes)


def _addresses(pipeline: Any) -> list[tuple[str, str, str]]:
    """(table, key, url) of every stage address: named in the pipeline, else the stage's
    default (a provider's own, usually TLS: refused by :func:`_target`, never left unrelayed
    in silence). In-process stages have none."""
    out = []
    for kind in _TABLES:
        table = getattr(pipeline, kind, None) or {}
        named = [(kind, key, table[key]) for key in _URL_KEYS if isinstance(table.get(key), str)]
        if not named and isinstance(table.get("stage"), str):
            named = [(kind, key, url) for key, url in _default_address(table["stage"], kind)]
        out += named
    return out


def _default_address(stage: str, kind: str) -> list[tuple[str, str]]:
    """The ``url``/``base_url`` default of the stage's options (its module's dataclasses)."""
    from voicelat.stages.base import load_stage_class

    module = sys.modules[load_stage_class(stage, kind).__module__]  # type: ignore[arg-type]
    for obj in vars(module).values():
        if isinstance(obj, type) and dataclasses.is_dataclass(obj):
            for f in dataclasses.fields(obj):
                if f.name in _URL_KEYS and isinstance(f.default, str):
                    return [(f.name, f.default)]
    return []


@dataclass
class NetworkRun:
    """A run's network: the profile, its relay, and the pipeline pointed at the relay."""

    profile: NetworkProfile
    pipeline: Any
    relay: RelayProcess | None = None
    notes: list[str] = field(default_factory=list)

    #: WebRTC: the media path has its own relay per call (stages/media_relay.py), realised
    #: from the turns' ``media_*`` figures.
    media: bool = False

    def close(self, turns: Sequence[Any] = ()) -> dict[str, Any]:
        """Stop the relay; the ``network`` section of the summary (a phone leg's or the
        WebRTC media's realised impairment read from ``turns``' figures)."""
        phone = self.profile.codec == "pcmu"
        if phone:
            realised = realised_from_turns(self.profile, turns) if turns else {}
        else:
            realised = self.relay.close() if self.relay is not None else {}
        misses = realised_misses(self.profile, realised) if realised else []
        section: dict[str, Any] = {
            "requested": self.profile.to_json(),
            "applied_by": "phone_leg" if phone else "relay",
            "realised": realised,
            "misses": misses,
            "notes": self.notes,
        }
        if self.media:
            media = media_realised(turns)
            section["media"] = media
            if any(media[w]["packets"] for w in media):
                misses += [f"media {m}" for m in realised_misses(self.profile, media)]
        return section

    def record(self, outcome: Any) -> None:
        """Stop the relay and write its section (and any trust reason) into the summary."""
        turns: Sequence[Any] = ()
        if (self.profile.codec == "pcmu" or self.media) and outcome is not None:
            turns = _turns_of(outcome)
        section = self.close(turns)
        summary = getattr(outcome, "summary", None)
        if not isinstance(summary, dict):
            return
        summary["network"] = section
        trust = summary.get("trust")
        if section["misses"] and isinstance(trust, dict):
            trust["trustworthy"] = False
            trust.setdefault("reasons", []).append(
                {
                    "code": "network_missed",
                    "message": "the realised network impairment missed the requested one: "
                    + "; ".join(section["misses"]),
                }
            )
        from voicelat.files.results import write_summary

        write_summary(outcome.run_dir, summary)


def media_realised(turns: Sequence[Any]) -> dict[str, Any]:
    """The WebRTC media relays' realised impairment over ``turns`` (their ``media_*``
    figures), per way, in the relay's shape: datagrams, lost, the loss %, and the median of
    the turns' P50 one-way delay and lateness (each call has its own relay)."""
    out: dict[str, Any] = {}
    for way in ("up", "down"):
        n = lost = 0
        delays: list[float] = []
        late: list[float] = []
        for t in turns:
            f: Mapping[str, Any] = getattr(t, "figures", {}) or {}
            p, lf = f.get(f"media_{way}_packets"), f.get(f"media_{way}_lost")
            if isinstance(p, int | float) and isinstance(lf, int | float):
                n, lost = n + int(p), lost + int(lf)
            d, lt = f.get(f"media_{way}_delay_p50_ns"), f.get(f"media_{way}_late_p50_ns")
            if isinstance(d, int | float):
                delays.append(d / 1e6)
            if isinstance(lt, int | float):
                late.append(lt / 1e6)
        out[way] = {
            "packets": n,
            "lost": lost,
            "loss_pct": round(100 * lost / n, 3) if n else None,
            "delay_p50_ms": round(statistics.median(delays), 3) if delays else None,
            "late_p50_ms": round(statistics.median(late), 3) if late else None,
        }
    return out


def _turns_of(outcome: Any) -> Sequence[Any]:
    """Every turn of a finished run: the outcome's, else its directory's turns.jsonl."""
    every = getattr(outcome, "every_turn", None)
    turns = list(every()) if callable(every) else []
    if turns:
        return turns
    # A comparison's combination hands its summary without its turns: they are on disk.
    run_dir = getattr(outcome, "run_dir", None)
    if run_dir is not None and (Path(run_dir) / "turns.jsonl").exists():
        from voicelat.files.results import load_run

        return list(load_run(Path(run_dir)).turns)
    return []


def open_network(
    spec: str | None, pipeline: Any, info: Any = None, *, ray: str | None = None
) -> NetworkRun | None:
    """The run's network (``spec``, what ``--network`` names, else the pipeline's
    ``[network]``), its relay started and the stages pointed at it; None when the run names no
    network. ``ray``: the run's Ray address (a relay on this loopback cannot serve it)."""
    profile: NetworkProfile | None
    if spec:
        from voicelat.files.network import load_network

        profile = load_network(spec)
    else:
        profile = getattr(pipeline, "network", None)
    if profile is None:
        return None
    if ray:
        raise ConfigError(
            f"network {profile.name} with --ray: the relay listens on this machine's loopback, "
            "which the other nodes cannot reach; run it without --ray (--workers N shares it)"
        )
    if profile.mode == "netem":
        from voicelat.engine.netem import netem_problem

        problem = netem_problem()
        raise ConfigError(
            f"network {profile.name}: mode netem "
            + (
                f"is unavailable here: {problem}; "
                if problem
                else "applies to the servers it "
                "starts in its namespace (voicelat serve NAME --network P); "
            )
            + 'the relay is the fallback: mode = "relay"'
        )
    # The profile rides on the pipeline: the turn engine reads a phone leg from it.
    pipeline = replace(pipeline, network=profile)
    if profile.codec == "pcmu":
        # A carrier leg is between the caller and the agent, where the audio is: the caller's
        # frames and the reply's audio go through it (engine/phone_leg.py), the stages'
        # connections do not (they are the agent's, on its own network).
        run = NetworkRun(profile, pipeline, notes=[PHONE_NOTE, TRANSCODE_NOTE])
        if info is not None:
            info(f"network {profile.name}: a phone leg on the audio ({profile.source})")
        return run
    addresses = _addresses(pipeline)
    targets = sorted({_target(url, f"[{kind}] {key}") for kind, key, url in addresses})
    run = NetworkRun(profile, pipeline)
    if pipeline.agent and str(pipeline.agent.get("stage")) == "webrtc":
        run.notes.append(MEDIA_NOTE)
        run.media = True
    if not targets:
        run.notes.append("no stage names a network address: nothing to relay")
        return run
    relay = RelayProcess(profile, [("tcp", h, p) for h, p in targets])
    listen = relay.start()
    run.relay = relay
    run.pipeline = relayed_pipeline(pipeline, dict(zip(targets, listen, strict=True)))
    if info is not None:
        info(f"network {profile.name}: {len(targets)} address(es) relayed ({profile.source})")
    return run
