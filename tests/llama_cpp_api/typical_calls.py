"""Sixteen typical llama-cpp-python calls (the shapes of its README), written for
llama-cpp-python. ``test_typical_calls.py`` runs this file with only its import line
changed and compares what it prints with ``typical_calls.llama_cpp_python.json``, the
same script's output under llama-cpp-python 0.3.36 itself:

    python typical_calls.py MODEL EMBEDDING_MODEL HUB_REPO > out.json

It prints one JSON object: for each call, the shape of what it returned (types and keys,
recursively; the first element stands for a list's elements).
"""

import json
import sys

import llama_cpp
from llama_cpp import Llama, LlamaGrammar

MODEL, EMBEDDING_MODEL, HUB_REPO = sys.argv[1:4]


def shape(x):
    if isinstance(x, dict):
        return {k: shape(v) for k, v in sorted(x.items())}
    if isinstance(x, (list, tuple)):
        return [shape(x[0])] if x else []
    if x is None:
        return None
    return type(x).__name__


out = {}
llm = Llama(model_path=MODEL, n_gpu_layers=-1, seed=1337, n_ctx=2048, verbose=False)
out["1 Llama()"] = type(llm).__name__
out["2 __call__ echo stop"] = shape(
    llm("Q: Name the planets in the solar system? A: ", max_tokens=32, stop=["Q:", "\n"], echo=True)
)
chunks = list(llm("The capital of France is", max_tokens=8, stream=True))
out["3 stream"] = [shape(chunks[0]), shape(chunks[-1])]

chat = Llama(model_path=MODEL, chat_format="llama-2", n_ctx=2048, verbose=False)
out["4 chat_format llama-2"] = shape(
    chat.create_chat_completion(
        messages=[
            {"role": "system", "content": "You are an assistant who perfectly describes images."},
            {"role": "user", "content": "Describe this image in detail please."},
        ],
        max_tokens=16,
    )
)
deltas = list(
    llm.create_chat_completion(
        messages=[{"role": "user", "content": "Hi"}], max_tokens=8, stream=True
    )
)
out["5 chat stream"] = [shape(deltas[0]), shape(deltas[1]), shape(deltas[-1])]
res = llm.create_chat_completion(
    messages=[
        {"role": "system", "content": "You are a helpful assistant that outputs in JSON."},
        {"role": "user", "content": "Who won the world series in 2020"},
    ],
    response_format={
        "type": "json_object",
        "schema": {
            "type": "object",
            "properties": {"team_name": {"type": "string"}},
            "required": ["team_name"],
        },
    },
    temperature=0.7,
    max_tokens=64,
)
out["6 response_format"] = [shape(res), sorted(json.loads(res["choices"][0]["message"]["content"]))]

tools = Llama(model_path=MODEL, chat_format="chatml-function-calling", n_ctx=2048, verbose=False)
res = tools.create_chat_completion(
    messages=[
        {
            "role": "system",
            "content": "A chat between a curious user and an artificial intelligence assistant.",
        },
        {"role": "user", "content": "Extract Jason is 25 years old"},
    ],
    tools=[
        {
            "type": "function",
            "function": {
                "name": "UserDetail",
                "parameters": {
                    "type": "object",
                    "title": "UserDetail",
                    "properties": {
                        "name": {"title": "Name", "type": "string"},
                        "age": {"title": "Age", "type": "integer"},
                    },
                    "required": ["name", "age"],
                },
            },
        }
    ],
    tool_choice={"type": "function", "function": {"name": "UserDetail"}},
    max_tokens=64,
)
call = res["choices"][0]["message"]["tool_calls"][0]
out["7 tools named"] = [
    shape(res),
    res["choices"][0]["finish_reason"],
    call["function"]["name"],
    sorted(json.loads(call["function"]["arguments"])),
]
ids = llm.tokenize(b"Hello World")
out["8 tokenize"] = [shape(ids), shape(llm.tokenize(b"Hello World", add_bos=False, special=True))]
out["9 detokenize"] = [type(llm.detokenize(ids)).__name__, llm.detokenize(ids).decode()]
out["10 sizes"] = [
    type(v).__name__
    for v in (llm.n_ctx(), llm.n_vocab(), llm.n_embd(), llm.token_bos(), llm.token_eos())
]
out["11 metadata"] = [type(llm.metadata).__name__, type(llm.metadata["general.name"]).__name__]
state = llm.save_state()
first = llm("Once upon a time", max_tokens=8, temperature=1.0)["choices"][0]["text"]
llm.load_state(state)
again = llm("Once upon a time", max_tokens=8, temperature=1.0)["choices"][0]["text"]
out["12 save/load_state"] = [type(state).__name__, first == again]
llm.reset()
llm.eval(llm.tokenize(b"The sky is"))
tok = llm.sample(temp=0.0)
gen = llm.generate(llm.tokenize(b"The sky is"), top_k=40, top_p=0.95, temp=1.0, repeat_penalty=1.0)
several = [next(gen) for _ in range(3)]
gen.close()
out["13 reset/eval/sample/generate"] = [type(tok).__name__, shape(several), llm.n_tokens > 0]
grammar = LlamaGrammar.from_string('root ::= "yes" | "no"')
out["14 grammar"] = llm("Is the sky blue? Answer:", grammar=grammar, max_tokens=4)["choices"][0][
    "text"
] in ("yes", "no")
emb = Llama(model_path=EMBEDDING_MODEL, embedding=True, verbose=False)
out["15 embeddings"] = [
    shape(emb.create_embedding("Hello, world!")),
    shape(emb.create_embedding(["a", "b"])),
    shape(emb.embed("Hello, world!")),
]
pre = Llama.from_pretrained(repo_id=HUB_REPO, filename="*Q4_1.gguf", verbose=False)
out["16 from_pretrained"] = [type(pre).__name__, pre.n_vocab() == llm.n_vocab()]
out["version"] = bool(llama_cpp.__version__)
print(json.dumps(out, indent=1, sort_keys=True))
