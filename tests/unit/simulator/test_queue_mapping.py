from __future__ import annotations

import hashlib
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kuota.simulator.errors import SourceSpecError
from kuota.simulator.queue_mapping import QueueTarget, queue_for_user
from tests.examples import examples

TEAMS = [QueueTarget(f"team-{i:02d}", f"team-{i:02d}-queue") for i in range(1, 15)]
USERS = [str(user) for user in range(1, 2001)]


def test_the_mapping_is_pinned_so_results_stay_comparable_across_releases() -> None:
    assert [str(queue_for_user(user, TEAMS)) for user in ("1", "2", "3", "42")] == [
        "team-06/team-06-queue",
        "team-13/team-13-queue",
        "team-12/team-12-queue",
        "team-14/team-14-queue",
    ]


def test_a_user_goes_to_the_queue_with_the_highest_documented_sha256_score() -> None:
    def score(target: QueueTarget) -> int:
        digest = hashlib.sha256(f"42\0{target.namespace}/{target.queue}".encode()).digest()
        return int.from_bytes(digest[:8], "big")

    assert queue_for_user("42", TEAMS) == max(TEAMS, key=score)


@settings(max_examples=examples(50), deadline=None)
@given(st.permutations(TEAMS), st.sampled_from(USERS))
def test_the_order_the_queues_are_listed_in_does_not_matter(queues: list[QueueTarget], user: str) -> None:
    assert queue_for_user(user, queues) == queue_for_user(user, TEAMS)


def test_adding_a_queue_moves_users_only_onto_the_new_queue() -> None:
    newcomer = QueueTarget("team-15", "team-15-queue")
    moved = 0
    for user in USERS:
        before, after = queue_for_user(user, TEAMS), queue_for_user(user, [*TEAMS, newcomer])
        if before != after:
            assert after == newcomer
            moved += 1
    assert 0 < moved < len(USERS) / 10  # about 1/15 of them


def test_removing_a_queue_moves_only_that_queues_users() -> None:
    removed = TEAMS[3]
    remaining = [target for target in TEAMS if target != removed]
    for user in USERS:
        before = queue_for_user(user, TEAMS)
        if before != removed:
            assert queue_for_user(user, remaining) == before


def test_users_spread_over_all_queues_roughly_evenly() -> None:
    counts = Counter(queue_for_user(user, TEAMS) for user in USERS)
    assert set(counts) == set(TEAMS)
    expected = len(USERS) / len(TEAMS)
    assert all(0.7 * expected < count < 1.3 * expected for count in counts.values()), counts


def test_a_queue_listed_twice_is_refused() -> None:
    with pytest.raises(SourceSpecError, match="listed twice"):
        queue_for_user("1", [TEAMS[0], TEAMS[0]])
