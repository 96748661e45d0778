"""``*_per_second_10s`` average a fixed time window: a scrape does not reset them, so an
endpoint picker scraping every 50 ms and Prometheus every 15 s read the same numbers.
llama-server's own two gauges keep its meaning: since the previous scrape, which resets
them (its suite's test_server_sleep_metrics_buckets reads that)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from pyllama.server.ops.window import WINDOW_S, ThroughputWindow, Totals

from helpers.servers import running_server

RATES = ("prompt_tokens_per_second_10s", "predicted_tokens_per_second_10s")


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _generation(clock: Clock, window: ThroughputWindow, every: float, until: float) -> list:
    """10 tokens a second of wall time at 100 ms each, sampled every ``every`` seconds."""
    rates = []
    while clock.now < until - 1e-9:
        clock.now = round(clock.now + every, 6)
        n = 10 * clock.now
        rates.append((clock.now, window.rates(Totals(2 * n, 10 * n, n, 100 * n))))
    return rates


@pytest.mark.parametrize("every", [0.05, 1.0, 10.0])
def test_the_window_is_the_same_for_every_scrape_rhythm(every):
    clock = Clock()
    window = ThroughputWindow(clock)
    # 10 s of steady work: 200 prompt tokens/s and 10 generated tokens/s of processing
    for _, rates in _generation(clock, window, every, 30.0):
        assert rates == pytest.approx((200.0, 10.0))
    # then nothing: the window keeps the work done in the last WINDOW_S seconds, then 0
    totals = Totals(600.0, 3000.0, 300.0, 30000.0)
    clock.now = 30.0 + WINDOW_S / 2
    assert window.rates(totals) == pytest.approx((200.0, 10.0))
    clock.now = 30.0 + WINDOW_S + 1 + every
    assert window.rates(totals) == (0.0, 0.0)


def test_a_window_spans_the_last_ten_seconds():
    clock = Clock()
    window = ThroughputWindow(clock)
    # slow work for 20 s, then fast work for 10 s: the window reads only the fast work
    n = t = 0.0
    for _ in range(200):
        clock.now += 0.1
        n, t = n + 1, t + 100.0  # 10 tokens/s
        window.add(Totals(0, 0, n, t))
    for _ in range(100):
        clock.now += 0.1
        n, t = n + 5, t + 100.0  # 50 tokens/s
        window.add(Totals(0, 0, n, t))
    # the baseline is the newest sample at least WINDOW_S old: within a second of it
    _, gen = window.rates(Totals(0, 0, n, t))
    assert 46.0 <= gen <= 50.0


@pytest.fixture(scope="module")
def fresh(smollm_path: str) -> Iterator[str]:
    # its own server: the first request below is the only work in its window
    with running_server("-m", smollm_path, "-t", "2", "-c", "2048", "--metrics") as url:
        yield url


def _read(text: str) -> dict[str, float]:
    """Each unlabelled series, and each series labelled only with model_name, by name."""
    out = {}
    for line in text.splitlines():
        if line.startswith("llamacpp:") and ("{" not in line or line.count("=") == 1):
            name, v = line.rsplit(" ", 1)
            if "{" in name and not name.split("{")[1].startswith("model_name="):
                continue
            out[name.split("{")[0].removeprefix("llamacpp:")] = float(v)
    return out


def test_fast_scrapes_do_not_reset_the_gauges(fresh):
    body = {"prompt": "The sea is wide and", "n_predict": 16, "ignore_eos": True}
    r = httpx.post(fresh + "/completion", json=body, timeout=120)
    assert r.status_code == 200
    t_done = time.monotonic()
    # a picker scrapes every 20 ms while Prometheus reads three times, 0.5 s apart
    fast: list[dict[str, float]] = []
    stop = threading.Event()

    def picker() -> None:
        with httpx.Client(timeout=30) as c:
            while not stop.is_set():
                fast.append(_read(c.get(fresh + "/metrics").text))
                time.sleep(0.02)

    thread = threading.Thread(target=picker)
    thread.start()
    try:
        slow = []
        for _ in range(3):
            slow.append(_read(httpx.get(fresh + "/metrics", timeout=30).text))
            time.sleep(0.5)
    finally:
        stop.set()
        thread.join()
    assert time.monotonic() - t_done < WINDOW_S - 1, "too slow a machine for this window"
    last = slow[-1]
    # the only work of this server: the window's baseline is its start, all zeros
    expected = {
        RATES[0]: last["prompt_tokens_total"] / last["prompt_seconds_total"],
        RATES[1]: last["tokens_predicted_total"] / last["tokens_predicted_seconds_total"],
    }
    assert len(fast) > 10
    for scrape in [*slow, *fast]:
        for name in RATES:
            assert scrape[name] == pytest.approx(expected[name], rel=1e-9), (name, scrape)
    # a fixed window: nothing ran since, so the rates fall to 0 once it has passed
    while (now := _read(httpx.get(fresh + "/metrics", timeout=30).text))[RATES[1]] > 0:
        assert time.monotonic() - t_done < 60, "the window never passed"
        time.sleep(0.2)
    assert time.monotonic() - t_done >= WINDOW_S - 1
    assert now[RATES[0]] == 0


def test_llama_servers_gauges_reset_on_each_scrape(fresh):
    body = {"prompt": "The sky is", "n_predict": 8, "ignore_eos": True}
    assert httpx.post(fresh + "/completion", json=body, timeout=120).status_code == 200
    first = _read(httpx.get(fresh + "/metrics", timeout=30).text)
    second = _read(httpx.get(fresh + "/metrics", timeout=30).text)
    assert first["predicted_tokens_seconds"] > 0 and second["predicted_tokens_seconds"] == 0
    assert second[RATES[1]] > 0  # the window still holds the generation
