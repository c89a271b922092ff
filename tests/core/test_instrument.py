"""The instrument error bar's arithmetic on literal integers (core/summaries/instrument.py)."""

from __future__ import annotations

from voicelat.core.summaries.instrument import (
    ABSURD_ERROR_NS,
    ReferenceTurn,
    TruthExchange,
    calibrated_section,
    clock_ppm,
    clock_warning,
    reference_errors,
    uncalibrated_section,
)

MS = 1_000_000


def test_each_turn_is_matched_to_the_first_exchange_after_its_request() -> None:
    turns = [
        # llm_request, llm_first_token, tts_request, tts_first_byte, speech_end, e2e
        ReferenceTurn(1000 * MS, 1041 * MS, 1050 * MS, 1081 * MS, 800 * MS, 300 * MS),
        ReferenceTurn(3000 * MS, 3040 * MS + 500_000, 3045 * MS, 3076 * MS, 2800 * MS, None),
    ]
    truth = [
        TruthExchange("chat", 900 * MS, 940 * MS),  # before turn 0's request: another turn's
        TruthExchange("chat", 1001 * MS, 1040 * MS),
        TruthExchange("speech", 1051 * MS, 1080 * MS),
        TruthExchange("transcriptions", 990 * MS, None),
        TruthExchange("speech", 3046 * MS, 3075 * MS),
        TruthExchange("chat", 3001 * MS, 3040 * MS),  # listed out of order
    ]
    errors = reference_errors(turns, truth, onset_ns=15 * MS)
    assert errors["ttft"] == [1 * MS, 500_000]
    assert errors["ttfa"] == [1 * MS, 1 * MS]
    # e2e truth: 1080 + 15 - 800 = 295 ms; measured 300 ms; turn 1 has no e2e
    assert errors["e2e"] == [5 * MS]


def test_a_turn_without_its_exchange_gives_no_error() -> None:
    turns = [ReferenceTurn(1000, 1040, 1050, 1090, None, None)]
    # no chat exchange at all; the speech one never wrote audio (it failed)
    truth = [TruthExchange("transcriptions", 990, 995), TruthExchange("speech", 1051, None)]
    assert reference_errors(turns, truth, 0) == {
        "ttft": [],
        "ttfa": [],
        "e2e": [],
    }


def test_the_bar_is_the_p50_and_p99_of_the_magnitudes() -> None:
    errors = {"ttft": [100, 300, -200], "ttfa": [400], "e2e": [1000]}
    s = calibrated_section(errors, turns=3, mode="quick", ppm=1.5)
    # magnitudes 100, 200, 300, 400, 1000: P50 300; P99 = 400 + 0.96 * 600 = 976
    assert (s["status"], s["error_p50_ns"], s["error_p99_ns"], s["error_max_ns"]) == (
        "calibrated",
        300,
        976,
        1000,
    )
    assert s["by_kind"]["ttft"] == {
        "n": 3,
        "error_p50_ns": 200,
        "error_p99_ns": 298,
        "error_max_ns": 300,
    }
    assert s["by_kind"]["e2e"]["error_p99_ns"] == 1000
    assert (s["turns"], s["mode"], s["clock_ppm"], s["reason"]) == (3, "quick", 1.5, None)


def test_no_error_or_an_absurd_one_is_uncalibrated_with_the_reason() -> None:
    empty = calibrated_section({"ttft": []}, turns=3, mode="quick", ppm=None)
    assert empty["status"] == "uncalibrated" and "matched no" in empty["reason"]
    assert empty["error_p99_ns"] is None
    absurd = calibrated_section({"ttft": [ABSURD_ERROR_NS + 1]}, turns=1, mode="full", ppm=None)
    assert absurd["status"] == "uncalibrated" and "absurd" in absurd["reason"]
    off = uncalibrated_section("--calibrate off", "off", 0.5)
    assert (off["status"], off["reason"], off["clock_ppm"], off["by_kind"]) == (
        "uncalibrated",
        "--calibrate off",
        0.5,
        {},
    )


def test_the_clock_rate_check_in_ppm_and_its_bound() -> None:
    # the wall clock advanced 200 us more than the monotonic clock's 1 s: +200 ppm
    assert clock_ppm(0, 0, 1_000_200_000, 1_000_000_000) == 200.0
    assert clock_ppm(5, 5, 5 + 999_950_000, 5 + 1_000_000_000) == -50.0
    assert clock_ppm(0, 0, 900_000, 900_000) is None  # under 1 ms: no rate to see
    warning = clock_warning(200.0)
    assert warning is not None and "+200 ppm" in warning and "±100 ppm" in warning
    assert clock_warning(-50.0) is None and clock_warning(None) is None
    s = calibrated_section({"ttft": [10]}, turns=1, mode="quick", ppm=-150.0)
    assert s["status"] == "calibrated" and "-150 ppm" in s["reason"]
