"""The host-memory prompt cache (--cache-ram) and --cache-idle-slots: with a unified KV
cache, starting a task clears idle slots after saving their prompts to RAM, and a later
request for such a prompt gets it back from RAM instead of evaluating it again."""

from __future__ import annotations

import httpx
import pytest

from helpers.servers import running_server

http = httpx.Client(timeout=120)  # generous: the machine may be busy with other tests

LONG = (
    "Once upon a time in a land far away, there lived a brave knight who traveled across "
    "mountains and rivers to find the legendary golden sword hidden deep within the "
    "enchanted forest of whispers. He met dragons, fairies and wizards on his quest."
)


def complete(url: str, prompt: str, **kw) -> dict:
    body = {"prompt": prompt, "n_predict": 4, "temperature": 0, "cache_prompt": True, **kw}
    r = http.post(url + "/completion", json=body, timeout=120)
    assert r.status_code == 200, r.text
    return r.json()


@pytest.mark.parametrize("cache_ram", ["100", "0"])
@pytest.mark.flag_effect("--cache-ram")
def test_idle_slots_go_to_ram_and_come_back(smollm_path, cache_ram):
    # without prefix sharing: it would copy the long prompt from slot 0 when it stays
    # (cache_ram 0); test_an_idle_slot_shares_without_the_ram_cache checks that
    args = ("-m", smollm_path, "-t", "2", "-c", "2048", "-np", "2", "-kvu", "--no-prefix-share")
    with running_server(*args, "--cache-ram", cache_ram) as url:
        first = complete(url, LONG, id_slot=0)
        n_long = first["timings"]["prompt_n"]
        assert n_long > 40
        complete(url, "The quick brown fox", id_slot=1)  # slot 0 is idle: saved, cleared
        # slot 1 holds the fox: only the RAM cache can give it the long prompt's KV
        again = complete(url, LONG, id_slot=1)
        if cache_ram == "0":
            assert again["timings"]["cache_n"] == 0
        else:  # restored: only the last prompt token is evaluated again
            assert again["timings"]["cache_n"] == n_long - 1
        assert again["content"] == first["content"]  # the restored KV is the same prompt's


def test_without_idle_slot_caching_the_slot_keeps_its_kv(smollm_path):
    args = ("-m", smollm_path, "-t", "2", "-c", "2048", "-np", "2", "-kvu")
    with running_server(*args, "--cache-ram", "100", "--no-cache-idle-slots") as url:
        first = complete(url, LONG, id_slot=0)
        complete(url, "The quick brown fox", id_slot=1)
        again = complete(url, LONG, id_slot=0)
        assert again["timings"]["cache_n"] >= first["timings"]["prompt_n"] - 1


def test_an_idle_slot_shares_without_the_ram_cache(smollm_path):
    """No RAM cache: slot 0 keeps the long prompt, and slot 1 copies it from there."""
    args = ("-m", smollm_path, "-t", "2", "-c", "2048", "-np", "2", "-kvu", "--cache-ram", "0")
    with running_server(*args) as url:
        first = complete(url, LONG, id_slot=0)
        n_long = first["timings"]["prompt_n"]
        complete(url, "The quick brown fox", id_slot=1)
        again = complete(url, LONG, id_slot=1)
        assert again["timings"]["cache_n"] == again["timings"]["shared_n"] == n_long - 1
        assert again["content"] == first["content"]
