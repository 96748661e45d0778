"""pyllama.serve.affinity.PrefixIndex: which replica was sent which prompt blocks, bounded per
replica, forgetting the oldest prompts first and a prompt's deeper blocks before its shallow
ones."""

from __future__ import annotations

import pytest

from pyllama.serve.affinity import PrefixIndex


def test_match_counts_leading_blocks_only():
    index = PrefixIndex()
    assert index.match("r", [1, 2, 3]) == 0  # a replica never seen
    index.record("r", [1, 2, 3])
    assert index.match("r", [1, 2, 3]) == 3
    assert index.match("r", [1, 2, 3, 4, 5]) == 3
    assert index.match("r", [1, 2, 9]) == 2
    assert index.match("r", [9, 2, 3]) == 0  # later blocks held, but not the first
    assert index.match("r", [1]) == 1
    assert index.match("r", []) == 0
    assert index.match("other", [1, 2, 3]) == 0


def test_match_accepts_any_sequence():
    index = PrefixIndex()
    index.record("r", (10, 20))
    assert index.match("r", [10, 20]) == index.match("r", (10, 20)) == 2


def test_best_longest_match_and_ties():
    index = PrefixIndex()
    index.record("a", [1, 2])
    index.record("b", [1, 2, 3])
    index.record("c", [7, 8, 9])
    assert index.best(["a", "b", "c"], [1, 2, 3, 4]) == (3, ["b"])
    assert index.best(["c", "a", "b"], [1, 2, 5]) == (2, ["a", "b"])  # ties, in given order
    assert index.best(["a", "b", "c"], [7, 8]) == (2, ["c"])
    assert index.best(["a", "b", "c"], [42]) == (0, ["a", "b", "c"])  # nobody: all tie at 0
    assert index.best([], [1, 2]) == (0, [])
    assert index.best(["a", "b"], []) == (0, ["a", "b"])
    assert index.best(iter(["a", "b"]), [1, 2, 3]) == (3, ["b"])  # any iterable
    assert index.best(["a", "z"], [1, 2]) == (2, ["a"])  # a replica it never saw matches 0


def test_record_adds_to_what_a_replica_holds():
    index = PrefixIndex()
    index.record("r", [1, 2, 3])
    index.record("r", [1, 2, 4, 5])  # shares two blocks with the first prompt
    assert index.size("r") == 5
    assert index.match("r", [1, 2, 3]) == 3
    assert index.match("r", [1, 2, 4, 5]) == 4
    index.record("r", [])
    assert index.size("r") == 5
    assert index.size("nobody") == 0


def test_forget():
    index = PrefixIndex()
    index.record("a", [1, 2])
    index.record("b", [1, 2])
    index.forget("a")
    assert index.match("a", [1, 2]) == 0
    assert index.size("a") == 0
    assert index.match("b", [1, 2]) == 2
    index.forget("never-seen")  # no error
    index.record("a", [3])  # a replica restarted: starts again from nothing
    assert index.match("a", [1, 2]) == 0 and index.match("a", [3]) == 1


def test_keep_only():
    index = PrefixIndex()
    for r in "abc":
        index.record(r, [1, 2])
    index.keep_only(r for r in ["a", "c", "new"])  # any iterable, unknown names are fine
    assert [index.match(r, [1, 2]) for r in "abc"] == [2, 0, 2]
    assert index.size("new") == 0
    index.keep_only([])
    assert [index.size(r) for r in "abc"] == [0, 0, 0]


def test_capacity_evicts_oldest_prompt_first_and_its_deep_blocks_first():
    index = PrefixIndex(capacity_blocks=6)
    a, b = [11, 12, 13], [21, 22, 23]
    index.record("r", a)
    index.record("r", b)
    assert index.size("r") == 6
    index.record("r", [31])  # one over: A's deepest block goes
    assert (index.match("r", a), index.match("r", b)) == (2, 3)
    index.record("r", [32])
    assert (index.match("r", a), index.match("r", b)) == (1, 3)
    index.record("r", [33])  # A gone entirely before any of B
    assert (index.match("r", a), index.match("r", b)) == (0, 3)
    index.record("r", [34])
    assert index.match("r", b) == 2
    assert index.size("r") == 6


def test_recording_again_makes_a_prompt_newest():
    index = PrefixIndex(capacity_blocks=6)
    a, b = [11, 12, 13], [21, 22, 23]
    index.record("r", a)
    index.record("r", b)
    index.record("r", a)  # A sent again: now B is the oldest
    index.record("r", [31, 32])
    assert index.match("r", a) == 3
    assert index.match("r", b) == 1
    assert index.size("r") == 6


def test_a_shared_first_block_outlives_the_chats_behind_it():
    index = PrefixIndex(capacity_blocks=3)
    index.record("r", [1, 10, 11])  # system prompt block 1, then a chat
    index.record("r", [1, 20, 21])  # the same system prompt, another chat: 1 is refreshed
    assert index.size("r") == 3
    assert index.match("r", [1, 10, 11]) == 1  # 10 and 11 evicted, 1 kept
    assert index.match("r", [1, 20, 21]) == 3


def test_a_prompt_longer_than_the_capacity_keeps_its_start():
    index = PrefixIndex(capacity_blocks=2)
    index.record("r", [1, 2, 3, 4, 5])
    assert index.size("r") == 2
    assert index.match("r", [1, 2, 3, 4, 5]) == 2


def test_capacity_is_per_replica():
    index = PrefixIndex(capacity_blocks=3)
    index.record("a", [1, 2, 3])
    index.record("b", [4, 5, 6])
    assert index.match("a", [1, 2, 3]) == 3 and index.match("b", [4, 5, 6]) == 3


def test_capacity_one():
    index = PrefixIndex(capacity_blocks=1)
    index.record("r", [1, 2])
    assert index.match("r", [1, 2]) == 1
    index.record("r", [3])
    assert index.match("r", [1, 2]) == 0 and index.match("r", [3]) == 1


@pytest.mark.parametrize("capacity", [0, -1])
def test_capacity_below_one_raises(capacity: int):
    with pytest.raises(ValueError, match="capacity_blocks"):
        PrefixIndex(capacity_blocks=capacity)


def test_default_capacity():
    assert PrefixIndex().capacity_blocks == 65536
