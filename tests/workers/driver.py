"""Runs supervise() as its own process, for tests that signal or SIGKILL the launcher.

    python driver.py PLAN.json OPTIONS.json

PLAN.json is a LaunchPlan (its dry-run JSON); OPTIONS.json holds SuperviseOptions fields
(log_dir, console_ranks, grace_period, max_restarts, forward_signals, reaper). Prints "ready"
on stderr just before supervise() starts, and exits with its code, like the malaunch command.
"""

from __future__ import annotations

import json
import sys

from loguru import logger

from malaunch.errors import MalaunchError
from malaunch.job.restart import RestartPolicy
from malaunch.models import LaunchPlan
from malaunch.supervisor.supervise import SuperviseOptions, supervise


def main() -> int:
    plan_path, options_path = sys.argv[1:3]
    with open(plan_path, encoding="utf-8") as handle:
        plan = LaunchPlan.model_validate_json(handle.read())
    with open(options_path, encoding="utf-8") as handle:
        fields = json.load(handle)
    fields["forward_signals"] = tuple(fields.get("forward_signals", ()))
    if "max_restarts" in fields:
        fields["restart"] = RestartPolicy(max_restarts=fields.pop("max_restarts"), backoff=(0, 0))
    logger.remove()
    logger.add(sys.stderr, format="malaunch: {level.name.lower()}: {message}")
    print("ready", file=sys.stderr, flush=True)
    try:
        return supervise(plan, SuperviseOptions(**fields))
    except MalaunchError as exc:
        print(f"malaunch: error: {exc}", file=sys.stderr)
        return int(exc.exit_code)


if __name__ == "__main__":
    sys.exit(main())
