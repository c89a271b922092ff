"""A network profile on WebRTC's media path (stages/media_relay.py): the offer and the answer
name only the relay's addresses, so the RTP (and STUN, DTLS, SCTP) between voicelat's aiortc
peer and a REAL Pipecat bot behind SmallWebRTC (tests/agents/pipecat_transport_agent.py) crosses
it both ways, on real UDP sockets; loss on the reply's packets is heard at the sink as gaps.

Fast: the SDP rewriting, the relay on real sockets with a UDP peer on each side, the engine
handing the profile to the stage. e2e: turns through the bot clean and under two losses."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import socket
import time
import types
from pathlib import Path
from typing import Any

import pytest

from tests.stages.agent_helpers import one_fixture_dir, pipecat_agent
from voicelat.core.base.errors import InfraError
from voicelat.core.base.network import Direction, NetworkProfile, builtin_profile
from voicelat.core.base.plan import plan_turns
from voicelat.core.base.turn import Turn
from voicelat.core.measure.clock import MonotonicClock
from voicelat.engine.network import NetworkRun
from voicelat.engine.runner import Runner, RunOutcome
from voicelat.engine.stageset import AgentStageSet, StageSet
from voicelat.files.fixtures import load_fixtures
from voicelat.files.pipeline import parse_pipeline
from voicelat.files.results import turn_from_json, write_turns
from voicelat.stages.media_relay import MediaRelay, SdpProblem, host_candidate, with_candidate
from voicelat.stages.webrtc import WebRTC

MS = 1_000_000
PORT = 9297

OFFER = "\r\n".join([
    "v=0", "o=- 1 1 IN IP4 0.0.0.0", "s=-", "t=0 0", "a=group:BUNDLE 0 1",
    "m=audio 40001 UDP/TLS/RTP/SAVPF 96", "c=IN IP4 192.0.2.2", "a=mid:0",
    "a=candidate:a1 1 udp 2130706431 fd00::2 40002 typ host",
    "a=candidate:b2 1 udp 2130706431 192.0.2.2 40001 typ host",
    "a=candidate:c3 1 udp 1694498815 198.51.100.7 40009 typ srflx raddr 192.0.2.2 rport 40001",
    "a=end-of-candidates",
    "m=application 40001 UDP/DTLS/SCTP webrtc-datachannel", "c=IN IP4 192.0.2.2", "a=mid:1",
    "a=candidate:b2 1 udp 2130706431 192.0.2.2 40001 typ host", "a=end-of-candidates", "",
])  # fmt: skip


def test_the_sdp_names_only_the_relays_address() -> None:
    assert host_candidate(OFFER) == ("192.0.2.2", 40001)  # IPv4, UDP, host: not v6, not srflx
    out = with_candidate(OFFER, ("192.0.2.2", 5555))
    cands = [line for line in out.splitlines() if line.startswith("a=candidate:")]
    # One candidate per media section, at the relay: no direct pair is left for ICE to pick.
    assert cands == ["a=candidate:b2 1 udp 2130706431 192.0.2.2 5555 typ host"] * 2
    assert "40001" not in out and "fd00::2" not in out and "198.51.100.7" not in out
    assert next(line for line in out.splitlines() if line.startswith("m=")).split()[1] == "5555"
    assert host_candidate(out) == ("192.0.2.2", 5555)
    with pytest.raises(SdpProblem, match="no IPv4 UDP host candidate"):
        host_candidate("v=0\r\na=candidate:a1 1 udp 1 fd00::2 1 typ host\r\n")


def _udp() -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    s.settimeout(2.0)
    return s


def test_the_relay_impairs_each_way_on_real_sockets() -> None:
    """A caller and a bot socket, each knowing only the relay's address for the other: the
    bot sees the caller at ``as_caller``, the caller the bot at ``as_bot``; 20 ms each way,
    and the down direction loses what its seeded draws say."""
    caller, bot = _udp(), _udp()
    profile = NetworkProfile(
        "t", up=Direction(delay_ms=20), down=Direction(delay_ms=20, loss_pct=30)
    )
    relay = MediaRelay(profile, caller.getsockname(), seed=7)
    try:
        relay.connect(f"a=candidate:x 1 udp 1 127.0.0.1 {bot.getsockname()[1]} typ host\r\n")
        t0 = time.perf_counter_ns()
        caller.sendto(b"up", relay.as_bot)
        data, src = bot.recvfrom(100)
        assert data == b"up" and src == relay.as_caller  # from where the offer said
        assert time.perf_counter_ns() - t0 >= 20 * MS
        # A stranger's datagram to the caller-facing side is not relayed up.
        stranger = _udp()
        stranger.sendto(b"no", relay.as_bot)
        for i in range(100):
            bot.sendto(b"%d" % i, relay.as_caller)
        got = []
        with contextlib.suppress(TimeoutError):
            while len(got) < 100:
                caller.settimeout(0.3)
                data, src = caller.recvfrom(100)
                assert src == relay.as_bot
                got.append(data)
        with pytest.raises(TimeoutError):
            bot.settimeout(0.1)
            bot.recvfrom(100)
        figures = relay.figures_since({})
        assert figures["media_up_packets"] == 1 and figures["media_up_lost"] == 0
        assert figures["media_down_packets"] == 100
        assert figures["media_down_lost"] == 100 - len(got)
        assert 15 <= figures["media_down_lost"] <= 45  # 30 % of 100, seeded
        assert 20 * MS <= (figures["media_down_delay_p50_ns"] or 0) < 25 * MS
    finally:
        relay.close()
        for s in (caller, bot):
            s.close()


async def test_a_hang_up_crosses_the_relay_before_it_stops() -> None:
    """The peer connection's close sends the hang-up (DTLS close_notify, RTCP BYE) into the
    relay and the call then stopped it: the datagrams still on the impaired path were dropped,
    so the bot saw the call end only at its ICE consent timeout (~30 s), after the turn's
    trace wait: every traced turn under a network profile came out `untraced`."""
    from voicelat.stages.webrtc import _Call

    caller, bot = _udp(), _udp()
    relay = MediaRelay(
        NetworkProfile("t", up=Direction(delay_ms=40), down=Direction(delay_ms=40)),
        caller.getsockname(),
        seed=1,
    )
    relay.connect(f"a=candidate:x 1 udp 1 127.0.0.1 {bot.getsockname()[1]} typ host\r\n")

    class Peer:
        async def close(self) -> None:
            caller.sendto(b"close_notify", relay.as_bot)  # as aiortc's DTLS transport does

    call = _Call(Peer(), None, MonotonicClock())
    call.relay = relay
    try:
        await call.close()
        assert relay.in_flight() == 0
        bot.settimeout(0.2)
        data, _ = bot.recvfrom(100)  # it had arrived before the relay stopped
        assert data == b"close_notify"
    finally:
        relay.close()
        for s in (caller, bot):
            s.close()


def test_the_engine_hands_a_profile_to_the_webrtc_stage_but_not_a_phone_leg() -> None:
    bare = parse_pipeline({"agent": {"stage": "webrtc", "url": "http://127.0.0.1:9/api/offer"}})

    def stage(network: NetworkProfile | None) -> Any:
        return StageSet.from_pipeline(dataclasses.replace(bare, network=network)).hearing

    four_g = builtin_profile("4g")
    assert isinstance(stage(four_g), WebRTC) and stage(four_g).media_network == four_g
    assert stage(builtin_profile("phone")).media_network is None  # the audio gets the phone leg
    assert stage(None).media_network is None


def lossy(loss_pct: float) -> NetworkProfile:
    """10 ms each way, ``loss_pct`` random loss on the reply's packets (down)."""
    return NetworkProfile(
        f"loss{loss_pct}",
        up=Direction(delay_ms=10),
        down=Direction(delay_ms=10, loss_pct=loss_pct),
        seed=3,
    )


def _turns(tmp: Path, profile: NetworkProfile, turns: int = 2) -> list[Turn]:
    """``turns`` turns through the bot, the media under ``profile``. A 100 ms output buffer
    (a browser's playout delay is of that order): the line's real-time delivery jitters, and
    on a busy machine the loop stalls for tens of ms, which a sink with no buffer at all would
    count as underruns."""
    table = {"stage": "webrtc", "url": f"http://127.0.0.1:{PORT}/api/offer",
             "reply_idle_ms": 1000, "timeout_s": 8.0}  # fmt: skip
    pipeline = parse_pipeline(
        {"agent": table, "turn": {"timeout_s": 20}, "output": {"latency_ms": 100}}
    )
    stage = WebRTC(table)
    stage.media_network = profile
    fixtures = load_fixtures(one_fixture_dir(tmp))
    runner = Runner(pipeline, fixtures, tmp / "out")
    runner.build_stages = lambda: AgentStageSet.agent_of(stage)  # type: ignore[method-assign]
    with contextlib.suppress(InfraError):
        asyncio.run(runner.run(plan_turns([f.id for f in fixtures], turns=turns, warmup=0)))
    return list(runner.turns)


def _sum(turns: list[Turn], name: str) -> int:
    return sum(int(t.figures.get(name) or 0) for t in turns)


@pytest.mark.e2e
def test_loss_on_the_media_is_heard_as_gaps_and_grows_with_loss(tmp_path: Path) -> None:
    runs: dict[float, list[Turn]] = {}
    with pipecat_agent("webrtc", PORT, "--tone-ms", "2000"):
        for loss in (0.0, 3.0, 10.0):
            runs[loss] = _turns(tmp_path / f"loss{loss}", lossy(loss))
    for turns in runs.values():
        assert len(turns) == 2 and all(t.ok for t in turns), [t.failure_reason for t in turns]
    # Without loss (through the relay, 10 ms each way) every reply frame is decoded and the
    # 2 s tone plays without a gap (the sink counts the wait for the stream's end after the
    # tone as one underrun of 0 ns).
    clean = runs[0.0]
    assert _sum(clean, "webrtc_lost_frames") == 0
    assert _sum(clean, "sink_underrun_total_ns") == 0, [t.figures for t in clean]
    assert _sum(clean, "sink_underruns") <= 2
    assert _sum(clean, "media_down_lost") == 0 and _sum(clean, "media_down_packets") > 150
    for t in clean:  # the relay's own delay: 10 ms, on time
        assert 10 * MS <= t.figures["media_down_delay_p50_ns"] < 12 * MS, t.figures
    # Loss: the relay dropped the reply's packets, aiortc's jitter buffer skipped the frames
    # (it conceals nothing), and the sink ran dry: more of each with more loss.
    low, high = runs[3.0], runs[10.0]
    assert 0 < _sum(low, "media_down_lost") < _sum(high, "media_down_lost")
    assert _sum(low, "webrtc_lost_frames") >= _sum(low, "media_down_lost") > 0
    assert _sum(high, "webrtc_lost_frames") > _sum(low, "webrtc_lost_frames")
    assert _sum(low, "sink_underruns") > _sum(runs[0.0], "sink_underruns")
    assert _sum(high, "sink_underrun_total_ns") > _sum(low, "sink_underrun_total_ns") > 40 * MS
    # The lost audio is missing from the reply (a 2 s tone, ~2.04 s decoded when clean).
    clean_audio = _sum(clean, "agent_audio_ns")
    assert _sum(high, "agent_audio_ns") < _sum(low, "agent_audio_ns") < clean_audio


def test_the_summary_judges_the_media_relays_realised_loss() -> None:
    """The run's network section adds the media path's realised impairment, summed over the
    turns' figures, and a loss far from the requested one is a miss (an untrustworthy run)."""
    bare = parse_pipeline({"agent": {"stage": "webrtc", "url": "http://127.0.0.1:9/api/offer"}})
    profile = NetworkProfile(
        "t", up=Direction(delay_ms=10), down=Direction(delay_ms=10, loss_pct=5)
    )

    def turn(down_lost: int) -> Any:
        return types.SimpleNamespace(figures={
            "media_up_packets": 100, "media_up_lost": 0, "media_up_delay_p50_ns": 10_100_000,
            "media_down_packets": 100, "media_down_lost": down_lost,
            "media_down_delay_p50_ns": 10_200_000, "media_down_late_p50_ns": 200_000,
        })  # fmt: skip

    run = NetworkRun(profile, bare, media=True)
    section = run.close([turn(4), turn(6)])
    assert section["media"]["down"] == {
        "packets": 200, "lost": 10, "loss_pct": 5.0, "delay_p50_ms": 10.2, "late_p50_ms": 0.2,
    }  # fmt: skip
    assert section["media"]["up"]["loss_pct"] == 0.0 and section["misses"] == []
    missed = NetworkRun(profile, bare, media=True).close([turn(40), turn(40)])["misses"]
    assert len(missed) == 1 and missed[0].startswith("media down: realised loss 40 %")


def test_a_comparisons_combination_reads_its_turns_from_disk(tmp_path: Path) -> None:
    """compare records each combination's network with a summary and no turns in memory: the
    media's (and a phone leg's) realised impairment comes from its turns.jsonl."""
    bare = parse_pipeline({"agent": {"stage": "webrtc", "url": "http://127.0.0.1:9/api/offer"}})
    profile = NetworkProfile("t", down=Direction(loss_pct=10))
    line = {"schema_version": 1, "index": 0, "fixture": "x", "repeat": 0, "warmup": False,
            "cold": False, "failed": False, "t0_ns": 0, "milestones_ns": {}, "segments_ns": {},
            "figures": {"media_down_packets": 100, "media_down_lost": 9}}  # fmt: skip
    write_turns(tmp_path, [turn_from_json(line)])
    summary: dict[str, Any] = {"trust": {"trustworthy": True, "reasons": []}}
    NetworkRun(profile, bare, media=True).record(RunOutcome(tmp_path, [], summary))
    assert summary["network"]["media"]["down"]["packets"] == 100
    assert summary["network"]["media"]["down"]["loss_pct"] == 9.0
