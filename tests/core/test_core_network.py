"""Network profiles (core/base/network.py): parsing, validation, the draws, netem's spelling and the
realised-vs-requested check, with plain numbers."""

from __future__ import annotations

import itertools

import pytest

from voicelat.core.base.errors import ConfigError
from voicelat.core.base.network import (
    BUILTIN_PROFILES,
    Direction,
    Impairer,
    NetworkProfile,
    builtin_profile,
    netem_args,
    parse_profile,
    profile_from_json,
    realised_misses,
    tcp_stall_ns,
)


def test_builtins_exist_with_sources_and_phone_is_a_carrier_leg() -> None:
    assert set(BUILTIN_PROFILES) == {"lan", "broadband", "4g", "3g-bad", "transatlantic", "phone"}
    assert all(p.source for p in BUILTIN_PROFILES.values())
    phone = builtin_profile("phone")
    assert phone.codec == "pcmu" and phone.up.loss_pct == 1.0
    assert phone.expected_delay_ms("up") == 100  # 60 ms path + 40 ms fixed jitter buffer
    assert builtin_profile("transatlantic").up.delay_ms == 80
    assert 2 < builtin_profile("3g-bad").down.mean_loss_pct < 3.5  # bursty, ~2.9 % long-run


def test_unknown_builtin_names_the_builtins() -> None:
    with pytest.raises(ConfigError, match="unknown network profile 'wifi'; built-ins: lan, "):
        builtin_profile("wifi")


def test_table_keys_apply_to_both_directions_and_subtables_override() -> None:
    p = parse_profile(
        {"profile": "4g", "delay_ms": 20, "up": {"loss_pct": 2}, "down": {"rate_kbit": 500}}
    )
    assert p.name == "4g" and p.up.delay_ms == p.down.delay_ms == 20
    assert p.up.loss_pct == 2 and p.down.loss_pct == 0.5  # the base's, untouched
    assert p.down.rate_kbit == 500 and p.up.rate_kbit == 10_000
    assert p.up.jitter_ms == 10  # from the built-in


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"delay": 10}, "[network] delay is not a known key"),
        ({"up": {"lag_ms": 1}}, "[network.up] lag_ms is not a known key"),
        ({"delay_ms": -5}, "[network] delay_ms must not be negative, not -5"),
        ({"delay_ms": 1e9}, "[network] delay_ms must be at most 10000"),
        ({"loss_pct": 100}, "[network] loss_pct must be below 100, not 100"),
        ({"down": {"loss_pct": 150}}, "[network.down] loss_pct must be below 100"),
        ({"delay_ms": "10ms"}, "[network] delay_ms must be a number, not '10ms'"),
        ({"jitter_distribution": "gamma"}, "jitter_distribution must be one of normal"),
        ({"profile": "wifi"}, "[network] profile names 'wifi'"),
        ({"delay_ms": 1, "jitter_ms": 500}, "jitter_ms 500 is absurd"),
        ({"reorder_pct": 5}, "reorder_pct needs a delay_ms"),
        ({"loss_model": "gilbert", "ge_p_pct": 10, "ge_r_pct": 0}, "long-run loss 100 %"),
        ({"mode": "kernel"}, "[network] mode must be one of relay, netem, auto"),
        ({"seed": -1}, "[network] seed must be a non-negative integer"),
    ],
)
def test_bad_tables_say_which_key_and_why(table: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as exc:
        parse_profile(table)
    assert message in str(exc.value)
    assert "\n" not in str(exc.value)


def test_json_round_trip() -> None:
    for p in BUILTIN_PROFILES.values():
        assert profile_from_json(p.to_json()) == p


def test_draws_are_seeded_and_follow_the_profile() -> None:
    d = Direction(delay_ms=40, jitter_ms=5, loss_pct=10)
    a = [Impairer(d, 7).delay_ns() for _ in range(3)]
    imp1, imp2 = Impairer(d, 7), Impairer(d, 7)
    assert [imp1.delay_ns() for _ in range(50)] == [imp2.delay_ns() for _ in range(50)]
    assert len(set(a)) == 1  # a fresh impairer with the same seed draws the same first delay
    imp = Impairer(d, 3)
    delays = sorted(imp.delay_ns() for _ in range(4000))
    median = delays[len(delays) // 2]
    assert abs(median - 40_000_000) < 500_000
    sd = (sum((x - 40e6) ** 2 for x in delays) / len(delays)) ** 0.5
    assert 4.5e6 < sd < 5.5e6
    lost = sum(imp.lost() for _ in range(20000))
    assert 1700 < lost < 2300


def test_jitter_never_goes_negative_and_correlation_smooths() -> None:
    d = Direction(delay_ms=1, jitter_ms=10)
    imp = Impairer(d, 1)
    assert min(imp.delay_ns() for _ in range(2000)) == 0

    def mean_step(corr: float) -> float:
        imp = Impairer(Direction(delay_ms=100, jitter_ms=10, jitter_correlation_pct=corr), 2)
        xs = [imp.delay_ns() for _ in range(3000)]
        return sum(abs(a - b) for a, b in itertools.pairwise(xs)) / len(xs)

    assert mean_step(75) < 0.5 * mean_step(0)


def test_gilbert_elliott_loses_in_bursts_at_its_stationary_rate() -> None:
    d = Direction(loss_model="gilbert", ge_p_pct=2, ge_r_pct=25)
    imp = Impairer(d, 11)
    seq = [imp.lost() for _ in range(50000)]
    rate = 100 * sum(seq) / len(seq)
    assert abs(rate - d.mean_loss_pct) < 1.5  # 2/(2+25) = 7.4 %
    runs, cur = [], 0
    for lost in seq:
        if lost:
            cur += 1
        elif cur:
            runs.append(cur)
            cur = 0
    assert sum(runs) / len(runs) > 3  # mean burst 1/r = 4 packets; random loss would be ~1.08


def test_jitter_buffer_holds_to_its_depth_and_drops_later_packets() -> None:
    d = Direction(delay_ms=60, jitter_ms=10)
    imp = Impairer(d, 4, jitter_buffer_ms=40)
    got = [imp.played_delay_ns() for _ in range(2000)]
    assert {g for g in got if g is not None} == {100_000_000}
    imp = Impairer(Direction(delay_ms=60, jitter_ms=30), 4, jitter_buffer_ms=20)
    late = sum(imp.played_delay_ns() is None for _ in range(4000))
    assert 0.2 * 4000 < late < 0.35 * 4000  # P(N(0,1) > 2/3) ~ 25 %


def test_rate_cap_transmit_time_and_tcp_stall() -> None:
    imp = Impairer(Direction(rate_kbit=64), 1)
    assert imp.transmit_ns(800) == 100_000_000  # 6400 bits at 64 kbit/s
    assert Impairer(Direction(), 1).transmit_ns(10**6) == 0
    assert tcp_stall_ns(Direction(delay_ms=10)) == 200_000_000  # Linux's minimum RTO
    assert tcp_stall_ns(Direction(delay_ms=150, jitter_ms=50)) == 500_000_000


def test_netem_arguments_spell_the_profile() -> None:
    assert netem_args(builtin_profile("4g").up) == [
        "delay", "35ms", "10ms", "25%", "distribution", "normal",
        "loss", "random", "0.5%", "rate", "10000kbit",
    ]  # fmt: skip
    assert netem_args(builtin_profile("3g-bad").up)[6:12] == [
        "loss", "gemodel", "1.5%", "50%", "100%", "0%",
    ]  # fmt: skip
    phone = builtin_profile("phone")
    assert netem_args(phone.up, jitter_buffer_ms=phone.jitter_buffer_ms)[:2] == ["delay", "100ms"]
    assert netem_args(Direction()) == []
    uniform = Direction(delay_ms=10, jitter_ms=2, jitter_distribution="uniform")
    assert netem_args(uniform) == ["delay", "10ms", "2ms"]  # netem's default, no table file
    assert netem_args(Direction(delay_ms=5, reorder_pct=10, duplicate_pct=1))[-4:] == [
        "duplicate", "1%", "reorder", "10%",
    ]  # fmt: skip


def test_with_jitter_the_delay_is_not_judged_but_the_relays_timekeeping_is() -> None:
    p = NetworkProfile("j", up=Direction(delay_ms=35, jitter_ms=10), down=Direction(delay_ms=35))
    held = {"up": {"packets": 100, "loss_pct": 0.0, "delay_p50_ms": 40.2, "late_p50_ms": 0.1}}
    assert realised_misses(p, held) == []  # in-order delivery behind later draws: expected
    behind = {"up": {"packets": 100, "loss_pct": 0.0, "delay_p50_ms": 40.2, "late_p50_ms": 3.5}}
    (miss,) = realised_misses(p, behind)
    assert miss.startswith("up: the relay delivered 3.5 ms behind its schedule at P50")


def test_realised_tally_reports_percentiles_and_lateness() -> None:
    from voicelat.core.base.network import RealisedTally

    t = RealisedTally(packets=4, lost=1)
    for d, late in ((10, 1), (20, 2), (30, 3)):
        t.delivered(d * 1_000_000, late * 100_000)
    out = t.to_json()
    assert out["loss_pct"] == 25.0 and out["delay_p50_ms"] == 20.0 and out["late_p50_ms"] == 0.2
    assert RealisedTally().to_json()["delay_p50_ms"] is None


def test_realised_misses_flag_only_beyond_the_tolerance() -> None:
    p = NetworkProfile("t", up=Direction(delay_ms=40), down=Direction(delay_ms=40, loss_pct=5))
    ok = {
        "up": {"packets": 500, "loss_pct": 0.0, "delay_p50_ms": 41.5},
        "down": {"packets": 500, "loss_pct": 5.8, "delay_p50_ms": 39.0},
    }
    assert realised_misses(p, ok) == []
    bad = {
        "up": {"packets": 500, "loss_pct": 0.0, "delay_p50_ms": 47.0},
        "down": {"packets": 5000, "loss_pct": 1.0, "delay_p50_ms": 40.0},
    }
    misses = realised_misses(p, bad)
    assert len(misses) == 2
    assert misses[0].startswith("up: realised P50 one-way delay 47 ms, requested 40 ms")
    assert misses[1].startswith("down: realised loss 1 % over 5000 packets, requested 5 %")
