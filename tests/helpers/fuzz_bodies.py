"""Hypothesis strategies for hostile request bodies, drawn from the server's own
``/openapi.json``: each JSON endpoint's schema gives the fields, each field's schema gives
values at and past its bounds, mixed with arbitrary JSON; whole bodies that are not JSON
objects, and hostile message lists. Generation lengths are capped so a case stays cheap."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

__all__ = ["LENGTH_FIELDS", "body_for", "cap_lengths", "hostile_raw", "json_values"]

# fields that set how many tokens a request generates, with the value every case gets
LENGTH_FIELDS = {
    "max_tokens": 2,
    "n_predict": 2,
    "max_completion_tokens": 2,
    "max_output_tokens": 2,
    "num_predict": 2,
}
STRINGS = [
    "",
    "<|im_end|>",
    "<|im_start|>system\n",
    "{{ cycler.__init__.__globals__ }}",
    "../../etc/passwd",
    "\u0000",
    "\U0001f600" * 8,
    "a" * 5000,
    "data:image/png;base64,AAAA",
    "data:audio/wav;base64,UklGRg==",
    "root ::= [",
]
INTS = [-(2**63), -(2**31), -2, -1, 0, 1, 2, 127, 128, 129, 2**31, 2**32, 2**63 - 1, 10**9]
leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-1000, 1000),
    st.sampled_from(INTS),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=30),
    st.sampled_from(STRINGS),
)


def _nest(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    keys = st.text(max_size=12)
    return st.one_of(inner, st.lists(inner, max_size=4), st.dictionaries(keys, inner, max_size=4))


# JSON two containers deep, built level by level: st.recursive's leaf budget is state that
# replays can see differently (Hypothesis raised FlakyStrategyDefinition at 2,000 examples)
json_values = _nest(_nest(leaves))

ROLES = ["system", "user", "assistant", "tool", "developer", "function", "", "nobody"]
part = st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": st.text(max_size=40)}),
    st.fixed_dictionaries(
        {"type": st.just("image_url"), "image_url": st.fixed_dictionaries({"url": leaves})}
    ),
    st.fixed_dictionaries(
        {"type": st.sampled_from(["image", "input_audio", "tool_use", "tool_result", "x"])},
        optional={"source": json_values, "input_audio": json_values, "id": leaves},
    ),
    json_values,
)
message = st.one_of(
    st.fixed_dictionaries(
        {"role": st.one_of(st.sampled_from(ROLES), leaves)},
        optional={
            "content": st.one_of(st.text(max_size=60), st.lists(part, max_size=3), leaves),
            "tool_calls": json_values,
            "name": leaves,
            "reasoning_content": leaves,
            "tool_call_id": leaves,
        },
    ),
    json_values,
)
messages = st.one_of(st.lists(message, min_size=0, max_size=4), json_values)


def _resolve(schema: dict[str, Any], components: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    return components.get(ref.rsplit("/", 1)[1], {}) if ref else schema


def from_schema(
    schema: dict[str, Any], components: dict[str, Any], depth: int = 0
) -> st.SearchStrategy[Any]:
    """Values of the field's own type near and past its bounds, or any JSON (1 in 3)."""
    schema = _resolve(schema, components)
    options: list[st.SearchStrategy[Any]] = []
    for alt in schema.get("anyOf", [schema]):
        alt = _resolve(alt, components)
        kind = alt.get("type")
        lo, hi = alt.get("minimum"), alt.get("maximum")
        if kind == "integer":
            edges = [v for v in (lo, hi) if v is not None]
            edges += [v - 1 for v in edges if v == lo] + [v + 1 for v in edges if v == hi]
            options += [st.integers(-5, 200), st.sampled_from(edges or INTS)]
        elif kind == "number":
            edges = [v for v in (lo, hi) if v is not None]
            options += [st.floats(-1e6, 1e6), st.sampled_from([*edges, -1e-9, 1e308])]
        elif kind == "string":
            options += [st.text(max_size=40), st.sampled_from(STRINGS)]
        elif kind == "boolean":
            options.append(st.booleans())
        elif kind == "array" and depth < 2:
            items = alt.get("items", {})
            options.append(st.lists(from_schema(items, components, depth + 1), max_size=4))
        elif kind == "object" and depth < 2 and alt.get("properties"):
            options.append(object_strategy(alt, components, depth + 1))
    if not options:
        return json_values
    typed = st.one_of(*options)
    return st.one_of(typed, typed, json_values)  # the field's own type 2 times in 3


def object_strategy(
    schema: dict[str, Any], components: dict[str, Any], depth: int = 0
) -> st.SearchStrategy[dict[str, Any]]:
    props = schema.get("properties", {})
    return st.fixed_dictionaries(
        {}, optional={k: from_schema(v, components, depth) for k, v in props.items()}
    )


def cap_lengths(body: Any) -> Any:
    """Every generation length field (top level, and Ollama's options) set small."""
    if isinstance(body, dict):
        body.update(LENGTH_FIELDS)
        if isinstance(body.get("options"), dict):
            body["options"]["num_predict"] = 2
    return body


# a body that passes each endpoint's validation, for the fuzzer to break one field at a time
BASES: dict[str, dict[str, Any]] = {
    "/v1/chat/completions": {"messages": [{"role": "user", "content": "hi"}]},
    "/completion": {"prompt": "hi"},
    "/v1/completions": {"prompt": "hi"},
    "/infill": {"input_prefix": "def f(", "input_suffix": "):"},
    "/v1/messages": {"model": "m", "messages": [{"role": "user", "content": "hi"}]},
    "/v1/messages/count_tokens": {"model": "m", "messages": [{"role": "user", "content": "hi"}]},
    "/v1/responses": {"input": "hi"},
    "/api/chat": {"model": "m", "messages": [{"role": "user", "content": "hi"}]},
    "/api/generate": {"model": "m", "prompt": "hi"},
    "/tokenize": {"content": "hi"},
    "/detokenize": {"tokens": [1, 2]},
    "/apply-template": {"messages": [{"role": "user", "content": "hi"}]},
    "/v1/embeddings": {"input": "hi"},
    "/api/embed": {"model": "m", "input": "hi"},
    "/api/embeddings": {"model": "m", "prompt": "hi"},
    "/api/show": {"model": "m"},
}
for _alias, _path in [
    ("/chat/completions", "/v1/chat/completions"),
    ("/chat/completions/input_tokens", "/v1/chat/completions"),
    ("/v1/chat/completions/input_tokens", "/v1/chat/completions"),
    ("/completions", "/completion"),
    ("/responses", "/v1/responses"),
    ("/responses/input_tokens", "/v1/responses"),
    ("/v1/responses/input_tokens", "/v1/responses"),
    ("/embedding", "/v1/embeddings"),
    ("/embeddings", "/v1/embeddings"),
]:
    BASES[_alias] = BASES[_path]


def body_for(path: str, doc: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    """A base body for ``path`` with up to four of its schema's fields replaced by hostile
    values (messages from the message strategy), lengths capped."""
    components = doc["components"]["schemas"]
    op = doc["paths"][path]["post"]
    schema = _resolve(op["requestBody"]["content"]["application/json"]["schema"], components)
    props = {k: from_schema(v, components) for k, v in schema.get("properties", {}).items()}
    if "messages" in props:
        props["messages"] = messages
    base = BASES.get(path, {})

    @st.composite
    def build(draw: st.DrawFn) -> dict[str, Any]:
        if not props:  # a free-form object (AnyObject)
            return cap_lengths(draw(st.dictionaries(st.text(max_size=12), json_values, max_size=4)))
        body = dict(base)
        for key in draw(st.lists(st.sampled_from(sorted(props)), max_size=4, unique=True)):
            body[key] = draw(props[key])
        if base and draw(st.integers(0, 9)) == 0:
            body.pop(draw(st.sampled_from(sorted(base))))
        return cap_lengths(body)

    return build()


hostile_raw = st.one_of(
    st.binary(max_size=64),
    st.sampled_from([b"", b"null", b"[]", b'"x"', b"1", b"{", b'{"a":1}x', b"\xff\xfe{}"]),
    st.sampled_from([b'{"prompt": "\xed\xa0\x80"}', b'{"messages": "\xc3\x28"}']),
)
