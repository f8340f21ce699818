"""A rank of a multi-node test job (standard library only), for the job-channel tests.

    job_worker.py OUT_DIR [--fail RANK:CODE] [--fail-attempt N] [--fail-when-all-started]
                  [--stall RANK] [--steps N] [--step-seconds S] [--ps-forever]

Each process writes its pid to OUT_DIR/<role>-<rank>-<attempt>.pid, the rendezvous port it was
given to OUT_DIR/port-<rank>-<attempt> (MASTER_PORT; empty when unset) and, when it succeeds,
OUT_DIR/ok-<rank>-<attempt> holding time.time(). Ranks print one line per step and call
``malaunch.context.heartbeat()``. ``--fail``: that rank exits CODE after its first step (the
time is in OUT_DIR/failed-<rank>) while the others sleep; ``--fail-attempt`` limits that to
one attempt (MALAUNCH_RESTART_COUNT), the others then succeed; ``--fail-when-all-started``
makes that rank wait (up to 60 s) until every rank of the attempt has written its pid file, so
that a test can count every rank of a failed attempt on a loaded machine. ``--stall``: after
3 steps that rank loops silently in ``stall_here``; the others wait for it in
``wait_for_peer``. A ps task (``--job_name=ps`` from the tensorflow_ps plan) serves forever.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from malaunch import context


def stall_here() -> None:
    while True:  # deliberately silent and stuck: the hang under test
        time.sleep(0.05)


def wait_for_peer(marker: str) -> None:
    print("waiting for the stalled rank", flush=True)
    while not os.path.exists(marker):  # waits for a rank that never comes
        time.sleep(0.05)


def wait_for_every_rank(out: str, attempt: int, world_size: int) -> None:
    names = {f"worker-{rank}-{attempt}.pid" for rank in range(world_size)}
    deadline = time.monotonic() + 60  # a hang guard: the test's own checks then fail
    while not names <= set(os.listdir(out)) and time.monotonic() < deadline:
        time.sleep(0.05)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--fail")
    parser.add_argument("--fail-attempt", type=int)
    parser.add_argument("--fail-when-all-started", action="store_true")
    parser.add_argument("--stall", type=int)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--step-seconds", type=float, default=0.1)
    args, rest = parser.parse_known_args()
    ctx = context.current()
    attempt = ctx.restart_count
    role = "ps" if "--job_name=ps" in rest else ctx.role
    name = f"{role}-{ctx.rank}-{attempt}"
    with open(os.path.join(args.out, f"{name}.pid"), "w") as handle:
        handle.write(str(os.getpid()))
    with open(os.path.join(args.out, f"port-{ctx.rank}-{attempt}"), "w") as handle:
        handle.write(os.environ.get("MASTER_PORT", ""))
    print(f"{name} started", flush=True)
    if role == "ps":
        while True:
            time.sleep(1)
    failing = None
    if args.fail:
        rank, code = (int(part) for part in args.fail.split(":"))
        if args.fail_attempt is None or args.fail_attempt == attempt:
            failing = (rank, code)
    for step in range(args.steps):
        print(f"rank {ctx.rank} step {step}", flush=True)
        context.heartbeat()
        if failing is not None:
            if ctx.rank == failing[0]:
                if args.fail_when_all_started:
                    wait_for_every_rank(args.out, attempt, ctx.world_size)
                with open(os.path.join(args.out, f"failed-{ctx.rank}"), "w") as handle:
                    handle.write(repr(time.time()))
                return failing[1]
            time.sleep(120)
        if args.stall is not None and step == 3:
            if ctx.rank == args.stall:
                stall_here()
            time.sleep(0.4)  # the stalled rank goes quiet first
            wait_for_peer(os.path.join(args.out, "never"))
        time.sleep(args.step_seconds)
    with open(os.path.join(args.out, f"ok-{ctx.rank}-{attempt}"), "w") as handle:
        handle.write(repr(time.time()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
