"""The comparison's progress line: counts, elapsed and an ETA from the mean turn so far."""

from __future__ import annotations

from voicelat.report.progress import CompareProgress, fmt_duration, progress_line


def test_eta_is_the_turns_left_times_the_mean_turn() -> None:
    p = CompareProgress(
        done=3, total=10, combos_done=0, combos=2, elapsed_s=24.0, turn_s=(7.0, 8.0, 9.0)
    )
    assert p.mean_turn_s == 8.0 and p.eta_s == 56.0
    assert progress_line(p) == (
        "compare: 3/10 turns (30%), 0/2 combinations done; elapsed 24 s, ETA 56 s (8.0 s/turn)"
    )


def test_before_the_first_turn_the_eta_is_unknown_and_at_the_end_done() -> None:
    start = CompareProgress(done=0, total=4, combos_done=0, combos=2, elapsed_s=0.0)
    assert start.eta_s is None and "ETA ?" in progress_line(start)
    end = CompareProgress(4, 4, 2, 2, 75.0, (18.0, 19.0, 19.0, 19.0), failed=1)
    assert progress_line(end) == (
        "compare: 4/4 turns (100%), 2/2 combinations done, 1 failed; elapsed 1 min 15 s, done"
    )


def test_durations_read_as_people_say_them() -> None:
    assert [fmt_duration(s) for s in (None, 0.4, 59.6, 61, 3599, 3720)] == [
        "?",
        "0 s",
        "1 min 00 s",
        "1 min 01 s",
        "59 min 59 s",
        "1 h 02 min",
    ]
