"""The machine checks of the trust verdict, on plain integers: load per core, CPU steal,
run-queue waits of voicelat and of the local servers, disk-I/O stalls; a downgrade with one
line per reason, and the turns that ran while the machine was over a limit named."""

from __future__ import annotations

from typing import Any

from voicelat.core.base.turn import Turn
from voicelat.core.summaries.diagnostics import (
    MachineSample,
    ProcessSample,
    TrustThresholds,
    assess_trust,
    machine_judged,
)

S = 1_000_000_000
MS = 1_000_000


def _turn(index: int, t0_s: int, length_s: int = 2) -> Turn:
    return Turn(
        index=index,
        fixture="f",
        t0_ns=t0_s * S,
        milestones={"speech_end": 1 * S, "output_first_audible": length_s * S},
        segments={},
        e2e_ns=1 * S,
    )


def _sample(
    second: int,
    *,
    load: int = 500,
    steal: int = 0,
    iowait: int = 0,
    io_us: int | None = 0,
    llm: tuple[int, int] = (300 * MS, 10 * MS),
    loop: tuple[int, int] = (50 * MS, 1 * MS),
) -> MachineSample:
    # one second on 2 cores at 100 ticks/s: 200 ticks
    return MachineSample(
        start_ns=second * S,
        end_ns=(second + 1) * S,
        cores=2,
        load1_milli=load,
        cpu_ticks=200,
        steal_ticks=steal,
        iowait_ticks=iowait,
        io_stall_us=io_us,
        processes=(ProcessSample("voicelat", *loop), ProcessSample("llm", *llm)),
    )


def _trust(samples: list[MachineSample], turns: list[Turn] | None = None) -> dict[str, Any]:
    turns = turns if turns is not None else [_turn(i, 3 * i) for i in range(4)]
    return assess_trust(turns, [0] * 10, machine=samples)


def _codes(trust: dict[str, Any]) -> list[str]:
    return [r["code"] for r in trust["reasons"]]


def test_a_quiet_machine_keeps_trust_and_says_what_it_judged() -> None:
    trust = _trust([_sample(s) for s in range(12)])
    assert trust["trustworthy"], trust["reasons"]
    c = trust["checks"]
    assert c["machine_samples"] == 12
    assert c["machine_load_per_core_max"] == 0.25
    assert c["machine_steal_share"] == 0 and c["machine_io_stall_share"] == 0
    assert c["llm_runq_wait_share"] == round(10 / 310, 4)
    assert c["voicelat_runq_wait_per_s_ns"] == 1 * MS
    assert c["machine_distrusted_turns"] == 0
    assert machine_judged(c) == "machine load 0.2/core, steal 0%, CPU waits <= 3%, disk stall 0%"


def test_no_samples_no_machine_checks() -> None:
    trust = _trust([])
    assert trust["trustworthy"] and "machine_samples" not in trust["checks"]
    assert machine_judged(trust["checks"]) is None


def test_a_loaded_machine_is_one_line_and_a_downgrade() -> None:
    trust = _trust([_sample(s, load=3400 if s == 5 else 900) for s in range(12)])
    assert not trust["trustworthy"]
    assert _codes(trust) == ["machine_load"]
    (reason,) = trust["reasons"]
    assert "load average 1.7 per core > 1.5" in reason["message"]
    assert "\n" not in reason["message"]


def test_a_starved_llm_server_names_the_turns_it_inflated() -> None:
    # seconds 6-7: the LLM server waited 400 ms for a CPU per 300 ms it ran
    samples = [_sample(s, llm=(300 * MS, 400 * MS) if s in (6, 7) else (300 * MS, 5 * MS))
               for s in range(12)]
    trust = _trust(samples)
    assert not trust["trustworthy"]
    # over the whole run the share stays low (800 of 800 + 3600 + 50 ms) ...
    assert "machine_inflated" not in _codes(trust)
    # ... but turn #2 (6 s - 8 s) is named
    assert _codes(trust) == ["machine_turns"]
    assert "distrust #2" in trust["reasons"][0]["message"]
    assert trust["checks"]["machine_distrusted_turns"] == 1


def test_a_short_wait_of_a_process_that_hardly_ran_is_no_reason() -> None:
    # 2 ms of wait on 1 ms of CPU: a large share, but under the 10 ms/s floor
    trust = _trust([_sample(s, loop=(1 * MS, 2 * MS)) for s in range(12)])
    assert trust["trustworthy"], trust["reasons"]


def test_steal_and_io_stalls_over_the_run() -> None:
    samples = [_sample(s, steal=30, io_us=250_000) for s in range(12)]
    trust = _trust(samples)
    assert _codes(trust) == ["machine_inflated", "machine_turns"]
    message = trust["reasons"][0]["message"]
    assert "CPU steal 15%" in message and "disk-I/O stall 25% (PSI io some)" in message
    assert "distrust #0, #1, #2, #3" in trust["reasons"][1]["message"]


def test_without_psi_iowait_is_the_disk_signal() -> None:
    samples = [_sample(s, iowait=40, io_us=None) for s in range(12)]
    trust = _trust(samples)
    assert "disk-I/O stall 20% (iowait)" in trust["reasons"][0]["message"]
    assert trust["checks"]["machine_io_stall_share"] == 0.2


def test_the_limits_are_thresholds_in_the_section() -> None:
    t = TrustThresholds(machine_steal_share=0.5)
    trust = assess_trust([_turn(0, 0)], [], t, machine=[_sample(0, steal=30)])
    assert trust["trustworthy"]
    th = trust["thresholds"]
    assert th["machine_steal_share"] == 0.5 and th["machine_runq_wait_floor_per_s_ms"] == 10
    assert th["machine_load_per_core"] == 1.5 and th["machine_io_stall_share"] == 0.1
