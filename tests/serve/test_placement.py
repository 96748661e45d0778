"""Placement: routers whose views of the load differ a little agree where a prompt goes."""

from __future__ import annotations

import random

import pytest

from pyllama.serve.placement import Option, order, rendezvous

NAMES = ["6nwobxcm", "xowwdwr7", "l7cq2k1a"]
PROMPT = 4096  # a cold prompt's work, bytes
ANSWER = 1024


def _cold(waiting: list[int]) -> list[Option]:
    return [
        Option(replica=n, name=n, waiting=w, work=PROMPT + ANSWER, matched=0)
        for n, w in zip(NAMES, waiting, strict=True)
    ]


def test_rendezvous_is_stable_and_spreads_keys():
    assert rendezvous(12345, "a") == rendezvous(12345, "a")
    firsts = [min(NAMES, key=lambda n, k=k: rendezvous(k, n)) for k in range(300)]
    for n in NAMES:
        assert 60 < firsts.count(n) < 140  # about a third each


def test_negative_and_large_keys():
    assert rendezvous(-1, "a") != rendezvous(1, "a")
    rendezvous(2**64 - 1, "a")


@pytest.mark.parametrize("seed", range(20))
def test_two_views_a_little_apart_place_a_new_prompt_alike(seed: int):
    rng = random.Random(seed)
    key = rng.getrandbits(64)
    base = [rng.randrange(0, 20_000) for _ in NAMES]
    # the other ingress's requests, as a report a second old: off by under an answer's cost
    other = [w + rng.randrange(-ANSWER // 2, ANSWER // 2) for w in base]
    a = order(rng.sample(_cold(base), 3), key, ANSWER, 0.25)[0].name
    b = order(rng.sample(_cold(other), 3), key, ANSWER, 0.25)[0].name
    assert a == b


def test_without_slack_the_least_loaded_wins_as_before():
    # the lowest score alone disagrees between the two views: what placement fixes
    key = next(
        k for k in range(1000) if min(NAMES[:2], key=lambda n, k=k: rendezvous(k, n)) == NAMES[1]
    )
    a = order(_cold([1000, 1100, 50_000]), key, 0, 0.0)[0].name
    b = order(_cold([1100, 1000, 50_000]), key, 0, 0.0)[0].name
    assert (a, b) == (NAMES[0], NAMES[1])
    assert order(_cold([1000, 1100, 50_000]), key, ANSWER, 0.25)[0].name == NAMES[1]
    assert order(_cold([1100, 1000, 50_000]), key, ANSWER, 0.25)[0].name == NAMES[1]


def test_load_is_bounded():
    # a replica far busier than the best is not chosen whatever its rank
    for key in range(50):
        first = order(_cold([0, 40_000, 40_000]), key, ANSWER, 0.25)[0]
        assert first.name == NAMES[0]


def test_the_held_prefix_wins_among_the_near_best():
    opts = [
        Option(replica="a", name="a", waiting=3000, work=ANSWER, matched=16),
        Option(replica="b", name="b", waiting=0, work=PROMPT + ANSWER, matched=0),
    ]
    for key in range(50):  # within the bound: the replica holding the prefix, whatever the hash
        assert order(opts, key, ANSWER, 0.25)[0].name == "a"


def test_every_option_comes_back_once_and_the_rest_by_score():
    opts = _cold([5000, 0, 2500])
    ranked = order(opts, 7, ANSWER, 0.25)
    assert sorted(o.name for o in ranked) == sorted(NAMES)
    rest = ranked[1:]
    assert [o.score for o in rest] == sorted(o.score for o in rest)


def test_no_key_lowest_score_then_fewest_blocks_then_input_order():
    opts = [
        Option(replica="a", name="a", waiting=10, work=0, matched=0, held=5),
        Option(replica="b", name="b", waiting=10, work=0, matched=0, held=2),
        Option(replica="c", name="c", waiting=10, work=0, matched=0, held=2),
        Option(replica="d", name="d", waiting=0, work=20, matched=0, held=9),
    ]
    assert [o.name for o in order(opts, None, ANSWER, 0.25)] == ["b", "c", "a", "d"]
    assert order([], 3, ANSWER) == []
