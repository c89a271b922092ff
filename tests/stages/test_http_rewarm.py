"""The HTTP stages' re-warm before a measured request, against the OpenAI emulator on loopback:
no warm-up GET while the pooled connection is alive and known to stay so, a reconnect outside
the request when the server closed it, and what the policy learns (the idle probe, the
server's advertised ``Keep-Alive``)."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import httpx
import pytest

from voicelat.core.measure.clock import MonotonicClock
from voicelat.core.measure.events import Connected, StageEvent
from voicelat.emulate import Emulators
from voicelat.stages.keepalive import (
    REWARM_IDLE_NS,
    IdleProbe,
    RewarmPolicy,
    acquire_probe,
    keepalive_timeout_ns,
    pooled_state,
    release_probe,
)
from voicelat.stages.openai import OpenAILLM

KEY_ENV = "VOICELAT_TEST_REWARM_KEY"
FAST = {"latency": {"headers": 1, "token": 1}}
S = 1_000_000_000


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "test-key-123")


def _profile(idle_timeout_s: float) -> dict[str, Any]:
    return {"openai": {**FAST, "wire": {"idle_timeout_s": idle_timeout_s}}}


def _llm(em: Emulators) -> OpenAILLM:
    return OpenAILLM({"base_url": em.url("openai"), "api_key_env": KEY_ENV, "model": "m"})


async def _turn(llm: OpenAILLM) -> Connected:
    async def run() -> list[StageEvent]:
        return [e async for e in llm.complete("Hello?")]

    events = await asyncio.wait_for(run(), 5.0)
    return next(e for e in events if isinstance(e, Connected))


def _gets(em: Emulators) -> int:
    return len(em.truth.select("openai", "models"))


@pytest.mark.e2e
async def test_an_alive_connection_after_idle_gets_no_rewarm_request() -> None:
    # The emulator keeps idle connections open (no idle timeout): once the probe has been open
    # longer than the idle the next request will see, prepare() sends nothing.
    async with Emulators(["openai"], profile=_profile(0.0), seed=1) as em, _llm(em) as llm:
        await _turn(llm)
        for _ in range(2):  # the probe ages past the turns' idle (the first may re-warm)
            await asyncio.sleep(1.3)
            await llm.prepare()
            await _turn(llm)
        await asyncio.sleep(1.3)
        assert pooled_state(llm._client) == "alive"
        before, warmed = _gets(em), llm.warm_requests
        await llm.prepare()  # idle 1.3 s > the old 1 s rule: it used to GET here
        connected = await _turn(llm)
        assert (_gets(em), llm.warm_requests) == (before, warmed)
        assert (connected.cold, connected.new_connection) == (False, False)
        chats = em.truth.select("openai", "chat")
        assert len({ex.connection for ex in chats}) == 1  # one connection for every turn


async def test_a_connection_the_server_closed_is_reconnected_before_the_request() -> None:
    # The server drops connections idle 0.3 s: after 0.6 s the pooled one is at EOF, and
    # prepare() reconnects (a warm-up GET on a new connection) so the request is warm.
    async with Emulators(["openai"], profile=_profile(0.3), seed=1) as em, _llm(em) as llm:
        await _turn(llm)
        await asyncio.sleep(0.6)
        assert pooled_state(llm._client) == "dead"
        warmed = llm.warm_requests
        await llm.prepare()
        connected = await _turn(llm)
        assert llm.warm_requests == warmed + 1
        assert (connected.cold, connected.new_connection) == (False, False)
        rewarm, chat = em.truth.select("openai", "models")[-1], em.truth.last("openai", "chat")
        first_chat = em.truth.select("openai", "chat")[0]
        assert chat.connection == rewarm.connection != first_chat.connection
        assert llm._rewarm.reasons == {"dead": 1}


async def test_without_prepare_the_closed_connection_makes_the_request_cold() -> None:
    # The marking the re-warm protects: a request that had to connect says so.
    async with Emulators(["openai"], profile=_profile(0.3), seed=1) as em, _llm(em) as llm:
        await _turn(llm)
        await asyncio.sleep(0.6)
        connected = await _turn(llm)
        assert (connected.cold, connected.new_connection) == (True, True)


async def test_the_probe_measures_the_servers_idle_timeout() -> None:
    clock = MonotonicClock()
    async with Emulators(["openai"], profile=_profile(0.4), seed=1) as em:
        url = httpx.URL(f"{em.url('openai')}/models")
        headers = {"Authorization": f"Bearer {os.environ[KEY_ENV]}"}
        probe = await acquire_probe(url, headers, clock)
        assert isinstance(probe, IdleProbe)
        assert await acquire_probe(url, headers, clock) is probe  # one per server and loop
        await asyncio.sleep(0.2)
        assert probe.closed_after_ns is None and 0.15 * S < probe.keep_ns() < 0.3 * S
        await asyncio.sleep(0.6)
        assert probe.closed_after_ns is not None
        assert 0.35 * S < probe.keep_ns() < 0.55 * S  # the server's 0.4 s
        release_probe(probe)
        release_probe(probe)
        assert em.truth.last("openai", "models").status == 200  # it asked with the key


async def test_an_https_server_has_no_probe() -> None:
    url = httpx.URL("https://127.0.0.1:9/v1/models")
    assert await acquire_probe(url, {}, MonotonicClock()) is None


def test_the_advertised_keepalive_bounds_the_idle() -> None:
    assert keepalive_timeout_ns({"keep-alive": "timeout=5, max=100"}) == 5 * S
    assert keepalive_timeout_ns({"keep-alive": "max=100"}) is None
    assert keepalive_timeout_ns({}) is None
    policy = RewarmPolicy()
    policy.answered({"keep-alive": "timeout=5"})
    policy.prepared(10 * S)
    policy.request(12 * S, {})  # 2 s from prepare() to the request
    assert policy.gap_ns == 2 * S
    assert not policy.needs_rewarm(2 * S, "alive")  # 2 + 2.5 + 0.25 < 5
    assert policy.needs_rewarm(3 * S, "alive")  # would reach 5 s at the request
    assert policy.needs_rewarm(REWARM_IDLE_NS // 2, "dead")  # dead: always
    assert not policy.needs_rewarm(REWARM_IDLE_NS, "alive")  # short idles: never
    assert policy.needs_rewarm(2 * S, "unknown")  # no pool to look at: the old 1 s rule
    assert policy.reasons == {"keepalive": 1, "dead": 1, "idle": 1}


def test_nothing_known_about_the_server_rewarms_after_one_second() -> None:
    policy = RewarmPolicy()
    assert policy.needs_rewarm(REWARM_IDLE_NS + 1, "alive")
    assert not policy.needs_rewarm(REWARM_IDLE_NS, "alive")


async def test_every_client_shares_one_verifying_ssl_context() -> None:
    # Building an SSL context costs ~40 ms of CPU: once per process, not once per stage.
    import ssl

    async with (
        Emulators(["openai"], profile=_profile(0.0), seed=1) as em,
        _llm(em) as a,
        _llm(em) as b,
    ):
        pools = [getattr(s._client, "_transport", None) for s in (a, b)]
        contexts = [getattr(getattr(p, "_pool", None), "_ssl_context", None) for p in pools]
    assert contexts[0] is contexts[1]
    assert isinstance(contexts[0], ssl.SSLContext)
    assert contexts[0].verify_mode == ssl.CERT_REQUIRED and contexts[0].check_hostname
