"""The week of workloads in ``examples/seed/workloads.jsonl``: the guide's story on its 24xH100 setup.

Time 0 is Saturday 00:00; the week runs to the next Saturday 00:00 (604,800 s). Teams and queues:
``research``, ``applied-ml`` and ``inference``, each with 8 H100 nominal in cohort ``gpu-pool``; research
may borrow 12 more, inference lends at most 4.

- Saturday 08:00: research submits a learning-rate sweep, 48 trials of 2 GPUs (10-14 h each, class
  ``sweep``) a few seconds apart. applied-ml is idle and inference keeps to at most 4 GPUs until Tuesday,
  so the sweep runs 10 trials at once: 20 GPUs, 8 borrowed from applied-ml and 4 from inference.
- Monday 09:00: applied-ml submits an 8-GPU fine-tune (2 pods x 4 H100, 16 cpu and 128Gi each, class
  ``production-finetune``, 6 h). It fits applied-ml's own nominal quota but every lendable GPU is in use, so
  it reclaims: the 4 most recently admitted sweep trials are preempted, requeue ahead of the trials still
  waiting, and resume their remaining work as research's other trials finish.
- Background, all class ``standard``: inference's nightly 2-GPU embedding job at 02:00 every day and a few
  1-GPU evaluations (at most 4 GPUs at once until Tuesday); Tuesday to Friday, office-hours experiments from
  every team and two more applied-ml fine-tunes (Wednesday and Friday), drawn from a fixed seed.

Requests follow the guide's fine-tune: 4 cpu and 32Gi per GPU. :func:`week_workloads` builds the workloads;
``render_week_jsonl`` is the file's exact text (a unit test keeps the two equal).
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from kuota.simulator.lines import WorkloadLine, to_jsonl

MINUTE = 60
HOUR = 3600
DAY = 24 * HOUR
WEEK = 7 * DAY
SATURDAY, SUNDAY, MONDAY, TUESDAY, WEDNESDAY, THURSDAY, FRIDAY = range(7)
DAY_NAMES = ("sat", "sun", "mon", "tue", "wed", "thu", "fri")
FINETUNE_AT = MONDAY * DAY + 9 * HOUR
SWEEP_AT = SATURDAY * DAY + 8 * HOUR
SWEEP_TRIALS = 48
SWEEP_GPUS_PER_TRIAL = 2
SWEEP_SEED = 20260101
OFFICE_SEED = 1


def week_workloads() -> list[WorkloadLine]:
    """Every workload of the week, ordered by submission time, then name."""
    # separate draws, so retuning the background never changes the story
    workloads = [*_sweep(random.Random(SWEEP_SEED)), _finetune("llm-finetune-mon", FINETUNE_AT, 6 * HOUR)]
    workloads += _inference_quiet_days()
    workloads += _office_days(random.Random(OFFICE_SEED))
    workloads.sort(key=lambda workload: (workload["submitAt"], workload["namespace"], workload["name"]))
    return workloads


def render_week_jsonl() -> str:
    return "".join(to_jsonl(week_workloads()))


def _sweep(rng: random.Random) -> Iterator[WorkloadLine]:
    for trial in range(1, SWEEP_TRIALS + 1):
        yield _job(
            f"sweep-lr-{trial:02d}",
            "research",
            "sweep",
            at=SWEEP_AT + (trial - 1) * 30,
            duration=rng.randrange(10 * HOUR, 14 * HOUR + 1, 5 * MINUTE),
            gpus=SWEEP_GPUS_PER_TRIAL,
        )


def _finetune(name: str, at: int, duration: int) -> WorkloadLine:
    return _job(name, "applied-ml", "production-finetune", at=at, duration=duration, gpus=4, pods=2)


def _inference_quiet_days() -> Iterator[WorkloadLine]:
    """Inference from Saturday to Monday: never more than 4 GPUs at once, so it lends its other 4."""
    for day in range(7):
        yield _job(
            f"embed-nightly-{DAY_NAMES[day]}",
            "inference",
            "standard",
            at=day * DAY + 2 * HOUR,
            duration=3 * HOUR,
            gpus=2,
        )
    for name, at, duration in (
        ("eval-sat-1", SATURDAY * DAY + 14 * HOUR, 2 * HOUR),
        ("eval-sun-1", SUNDAY * DAY + 11 * HOUR, HOUR),
        ("eval-mon-1", MONDAY * DAY + 10 * HOUR, HOUR),
        ("eval-mon-2", MONDAY * DAY + 13 * HOUR, 90 * MINUTE),
        ("eval-mon-3", MONDAY * DAY + 15 * HOUR + 30 * MINUTE, HOUR),
    ):
        yield _job(name, "inference", "standard", at=at, duration=duration, gpus=1)


def _office_days(rng: random.Random) -> Iterator[WorkloadLine]:
    """Tuesday to Friday: each team's experiments between 09:00 and 18:00, plus two fine-tunes."""
    yield _finetune("llm-finetune-wed", WEDNESDAY * DAY + 10 * HOUR, 5 * HOUR)
    yield _finetune("llm-finetune-fri", FRIDAY * DAY + 9 * HOUR + 30 * MINUTE, 7 * HOUR)
    # team, name stem, jobs per day, GPU sizes, shortest and longest run
    teams = (
        ("research", "exp", (3, 6), (1, 2, 4), (1 * HOUR, 6 * HOUR)),
        ("applied-ml", "exp", (2, 4), (2, 4), (2 * HOUR, 5 * HOUR)),
        ("inference", "eval", (4, 8), (1, 2), (30 * MINUTE, 2 * HOUR)),
    )
    for day in range(TUESDAY, FRIDAY + 1):
        for team, stem, (fewest, most), sizes, (shortest, longest) in teams:
            for n in range(1, rng.randint(fewest, most) + 1):
                yield _job(
                    f"{stem}-{DAY_NAMES[day]}-{n}",
                    team,
                    "standard",
                    at=day * DAY + rng.randrange(9 * HOUR, 18 * HOUR, 5 * MINUTE),
                    duration=rng.randrange(shortest, longest + 1, 5 * MINUTE),
                    gpus=rng.choice(sizes),
                )


def _job(
    name: str, team: str, priority_class: str, *, at: int, duration: int, gpus: int, pods: int = 1
) -> WorkloadLine:
    return {
        "name": name,
        "namespace": team,
        "queue": f"{team}-queue",
        "priorityClass": priority_class,
        "submitAt": at,
        "duration": duration,
        "maxExecutionSeconds": None,
        "podSets": [
            {
                "name": "main",
                "count": pods,
                "requests": {"cpu": str(4 * gpus), "memory": f"{32 * gpus}Gi", "nvidia.com/gpu": str(gpus)},
                "nodeSelector": {},
                "tolerations": [],
            }
        ],
    }
