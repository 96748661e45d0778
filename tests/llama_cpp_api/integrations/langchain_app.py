"""LangChain's llama.cpp classes as their users write them, unchanged: run with
``python -m pyllama.compat.as_llama_cpp langchain_app.py MODEL``; prints JSON."""

import json
import sys

from langchain_community.chat_models import ChatLlamaCpp
from langchain_community.llms import LlamaCpp

model = sys.argv[1]
llm = LlamaCpp(model_path=model, n_ctx=512, temperature=0, max_tokens=16, verbose=False)
chat = ChatLlamaCpp(model_path=model, n_ctx=512, temperature=0, max_tokens=16, verbose=False)
question = [("user", "What is the capital of France?")]
print(
    json.dumps(
        {
            "invoke": llm.invoke("The capital of France is"),
            "stream": "".join(llm.stream("The capital of France is")),
            "num_tokens": llm.get_num_tokens("hello world"),
            "chat": chat.invoke(question).content,
            "chat_stream": "".join(c.content for c in chat.stream(question)),
        }
    )
)
