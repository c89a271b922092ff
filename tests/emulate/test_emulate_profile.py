"""Profiles: distributions, fault draws and validation (no I/O)."""

from __future__ import annotations

import random
import statistics

import pytest

from voicelat.core.base.errors import ConfigError
from voicelat.emulate import Profile, emulator_class, load_profile
from voicelat.emulate.dist import Empirical, Fixed, LogNormal, Normal, parse_dist
from voicelat.emulate.profile import builtin_profiles

OPENAI = emulator_class("openai")


def test_bare_number_is_a_fixed_delay() -> None:
    d = parse_dist(120, "x")
    assert d == Fixed(ms=120.0)
    assert d.sample(random.Random(1)) == 120.0


def test_each_distribution_parses_and_samples_in_range() -> None:
    rng = random.Random(7)
    normal = parse_dist({"dist": "normal", "mean": 300, "sd": 40}, "x")
    assert isinstance(normal, Normal)
    values = [normal.sample(rng) for _ in range(2000)]
    assert 290 < statistics.mean(values) < 310
    logn = parse_dist({"dist": "lognormal", "median": 200, "sigma": 0.5}, "x")
    assert isinstance(logn, LogNormal)
    values = [logn.sample(rng) for _ in range(2000)]
    assert 185 < statistics.median(values) < 215
    # Right-skewed: the mean is above the median.
    assert statistics.mean(values) > statistics.median(values)
    emp = parse_dist({"dist": "empirical", "values": [10, 20, 30]}, "x")
    assert isinstance(emp, Empirical)
    assert {emp.sample(rng) for _ in range(200)} == {10.0, 20.0, 30.0}


def test_samples_are_clamped_and_never_negative() -> None:
    d = parse_dist({"dist": "normal", "mean": 0, "sd": 50, "min": 5, "max": 20}, "x")
    rng = random.Random(3)
    values = [d.sample(rng) for _ in range(500)]
    assert min(values) == 5.0 and max(values) == 20.0
    unclamped = parse_dist({"dist": "normal", "mean": 0, "sd": 50}, "x")
    assert min(unclamped.sample(rng) for _ in range(500)) == 0.0


def test_seeded_sampling_repeats() -> None:
    d = parse_dist({"dist": "lognormal", "median": 300, "sigma": 0.4}, "x")
    a = [d.sample(random.Random("s/openai/req/3")) for _ in range(3)]
    b = [d.sample(random.Random("s/openai/req/3")) for _ in range(3)]
    assert a == b


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (-5, "cannot be negative"),
        ({"dist": "gamma"}, "dist must be one of"),
        ({"dist": "normal", "mean": 1}, "needs sd"),
        ({"dist": "fixed", "ms": 1, "shape": 2}, "unknown key(s) shape"),
        ({"dist": "empirical", "values": []}, "non-empty list"),
        ("fast", "must be a number of ms or a table"),
    ],
)
def test_bad_distributions_are_one_clear_line(value: object, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_dist(value, "[openai.latency] ttft")
    text = str(err.value)
    assert message in text and "[openai.latency] ttft" in text and "\n" not in text


def test_resolve_fills_defaults_and_overrides() -> None:
    cfg = Profile.from_dict({"openai": {"latency": {"ttft": 42}}}).resolve(OPENAI)
    assert cfg.latency["ttft"] == Fixed(ms=42.0)
    assert cfg.latency["headers"] == OPENAI.LATENCY["headers"]
    assert cfg.content["reply"] == OPENAI.CONTENT["reply"]
    assert cfg.wire.nodelay is True


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"opneai": {}}, "unknown emulator table(s) [opneai]"),
        ({"openai": {"latency": {"ttfb": 1}}}, "ttfb is not a latency of the openai emulator"),
        ({"openai": {"faults": {"close_1011": 0.1}}}, "close_1011 does not apply"),
        ({"openai": {"faults": {"boom": 0.1}}}, "boom is not a fault"),
        ({"openai": {"faults": {"http_429": 0.7, "http_500": 0.6}}}, "add up to 1.3"),
        ({"openai": {"faults": {"stall": {"p": 2}}}}, "p must be a probability"),
        ({"openai": {"faults": {"stall": {"p": 0.1, "endpoints": ["tts"]}}}}, "unknown endpoint"),
        ({"openai": {"content": {"reply": 3}}}, "reply must be a str"),
        ({"openai": {"content": {"voice": "x"}}}, "voice is not a content option"),
        ({"openai": {"wire": {"timer": "busy"}}}, "timer must be 'sleep' or 'spin'"),
        ({"openai": {"api_key_env": "VOICELAT_TEST_UNSET_VAR"}}, "VOICELAT_TEST_UNSET_VAR"),
        ({"openai": {"colour": 1}}, "unknown key(s) colour"),
        ({"seed": "x"}, "seed must be an integer"),
    ],
)
def test_bad_profiles_are_one_clear_line(data: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        Profile.from_dict(data).resolve(OPENAI)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_pinned_key_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VOICELAT_TEST_PIN", "s3cret")
    cfg = Profile.from_dict({"openai": {"api_key_env": "VOICELAT_TEST_PIN"}}).resolve(OPENAI)
    assert cfg.api_key == "s3cret"
    assert "s3cret" not in repr(cfg)


def test_fault_draw_is_exclusive_filtered_and_seeded() -> None:
    cfg = Profile.from_dict(
        {
            "openai": {
                "faults": {
                    "http_429": 0.25,
                    "stall": {"p": 0.25, "seconds": 3, "after": 2, "endpoints": ["chat"]},
                }
            }
        }
    ).resolve(OPENAI)
    kinds = OPENAI.FAULTS
    draws = [cfg.draw_fault(random.Random(i), "chat", kinds) for i in range(4000)]
    share_429 = sum(1 for d in draws if d and d.kind == "http_429") / len(draws)
    share_stall = sum(1 for d in draws if d and d.kind == "stall") / len(draws)
    assert 0.22 < share_429 < 0.28 and 0.22 < share_stall < 0.28
    stall = next(d for d in draws if d and d.kind == "stall")
    assert (stall.seconds, stall.after) == (3.0, 2)
    # The stall is filtered to chat: speech requests only ever get the 429.
    speech = {
        d.kind for i in range(2000) if (d := cfg.draw_fault(random.Random(i), "speech", kinds))
    }
    assert speech == {"http_429"}
    again = [cfg.draw_fault(random.Random(i), "chat", kinds) for i in range(4000)]
    assert again == draws


def test_builtin_profiles_load_and_resolve() -> None:
    names = builtin_profiles()
    assert {"exact", "realistic", "flaky"} <= set(names)
    for name in names:
        profile = load_profile(name)
        for emulator in profile.tables:
            profile.resolve(emulator_class(emulator))
    exact = load_profile("exact").resolve(OPENAI)
    assert exact.latency["ttft"] == Fixed(ms=120.0)


def test_missing_profile_file_names_the_builtins(tmp_path: object) -> None:
    with pytest.raises(ConfigError) as err:
        load_profile("/nonexistent/profile.toml")
    assert "built-in profiles" in str(err.value) and "realistic" in str(err.value)
