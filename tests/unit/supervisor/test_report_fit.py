"""A failure fits one job channel message whatever the failed rank printed: the job channel
refuses a longer line, and a failure that cannot be told stops nobody."""

from __future__ import annotations

import json
from typing import Any, Dict, List

from hypothesis import given, settings
from hypothesis import strategies as st

from malaunch.job.protocol import MAX_MESSAGE, encode
from malaunch.supervisor.outcome import REPORT_BUDGET, fit_report


def failure(tail: List[str], exception: Any) -> Dict[str, Any]:
    return {"kind": "exit", "rank": 1, "role": "worker", "code": 3, "signal": None,
            "log_file": "/logs/worker-1.log", "tail": tail, "exception": exception,
            "error": None}  # fmt: skip


def test_a_long_non_ascii_traceback_keeps_its_end() -> None:
    lines = ["Traceback (most recent call last):"]
    lines += [f'  File "/x/{"é" * 380}{i}.py", line {i}, in f' for i in range(199)]
    lines.append("ValueError: big")
    report = failure(lines[-20:], "\n".join(lines))
    assert len(json.dumps(report, ensure_ascii=True)) > MAX_MESSAGE  # as log_tail reads it
    fitted = fit_report(report)
    assert len(json.dumps(fitted, ensure_ascii=True)) <= REPORT_BUDGET
    assert fitted["exception"].endswith("in f\nValueError: big")
    assert fitted["tail"][-1] == "ValueError: big"
    encode({"t": "failed", "attempt": 0, "failure": {**fitted, "node": 1}})  # fits a message


def test_a_small_failure_is_left_as_it_is() -> None:
    report = failure(["step 1", "boom"], "Traceback (most recent call last):\nValueError: x")
    assert fit_report(report) == report


@settings(max_examples=60, derandomize=True, deadline=None)
@given(
    st.lists(st.text(max_size=400), max_size=20),
    st.none() | st.lists(st.text(max_size=400), max_size=200).map("\n".join),
)
def test_every_failure_fits_a_message(tail: List[str], exception: Any) -> None:
    fitted = fit_report(failure(tail, exception))
    encode({"t": "failed", "attempt": 0, "failure": {**fitted, "node": 1}})
    assert fitted["tail"] == tail[len(tail) - len(fitted["tail"]) :]  # the last lines kept
