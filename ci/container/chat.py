"""One chat through a served container's published port, and its /metrics.

    python3 ci/container/chat.py BASE_URL [MODEL_NAME]

Exits non-zero unless /v1/chat/completions answers with text and /metrics serves
llamacpp: series; with MODEL_NAME, /v1/models must list it (the runtime's --alias).
Prints one line: the answer, its token counts, the slots and the CPU variant ggml chose.
"""

from __future__ import annotations

import json
import sys
import urllib.request


def get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=60) as r:
        return r.read().decode()


def main() -> None:
    base, *name = sys.argv[1:]
    body = {
        "model": name[0] if name else "demo",
        "messages": [{"role": "user", "content": "Name one colour of the rainbow."}],
        "max_tokens": 16,
        "temperature": 0,
    }
    req = urllib.request.Request(
        base + "/v1/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    # a loaded 2-core machine may take a while for the first answer
    with urllib.request.urlopen(req, timeout=600) as r:
        answer = json.load(r)
    text = answer["choices"][0]["message"]["content"]
    if not text.strip():
        raise SystemExit(f"chat.py: an empty answer: {answer}")
    metrics = get(base + "/metrics")
    if "llamacpp:" not in metrics:
        raise SystemExit("chat.py: /metrics serves no llamacpp: series")
    models = [m["id"] for m in json.loads(get(base + "/v1/models"))["data"]]
    if name and name[0] not in models:
        raise SystemExit(f"chat.py: /v1/models lists {models}, not {name[0]}")
    usage = answer["usage"]
    props = json.loads(get(base + "/props"))
    print(
        f"answer {text.strip()!r} ({usage['prompt_tokens']} prompt + "
        f"{usage['completion_tokens']} generated tokens); models {models}; "
        f"{props['total_slots']} slots; CPU variant {props.get('cpu_variant')}; "
        f"/metrics {metrics.count(chr(10) + 'llamacpp:')} llamacpp: samples"
    )


if __name__ == "__main__":
    main()
