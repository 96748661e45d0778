"""LlamaIndex's ``LlamaCPP`` as its users write it, unchanged: run with
``python -m pyllama.compat.as_llama_cpp llama_index_app.py MODEL``; prints JSON."""

import json
import sys

from llama_index.core.llms import ChatMessage
from llama_index.llms.llama_cpp import LlamaCPP

llm = LlamaCPP(
    model_path=sys.argv[1],
    temperature=0,
    max_new_tokens=16,
    context_window=512,
    model_kwargs={"n_threads": 2},
    verbose=False,
)
messages = [ChatMessage(role="user", content="What is the capital of France?")]
print(
    json.dumps(
        {
            "context_window": llm.metadata.context_window,
            "complete": llm.complete("The capital of France is").text,
            "stream": "".join(r.delta for r in llm.stream_complete("The capital of France is")),
            "chat": llm.chat(messages).message.content,
            "chat_prompt": llm.messages_to_prompt(messages),
        }
    )
)
