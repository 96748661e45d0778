"""llama-cpp-python's multimodal chat handlers, in-process on llama.cpp's mtmd projector:

    llm = Llama(model_path="model.gguf", n_ctx=4096,
                chat_handler=MTMDChatHandler(clip_model_path="mmproj.gguf"))
    llm.create_chat_completion(messages=[{"role": "user", "content": [
        {"type": "text", "text": "What is in the picture?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,..."}}]}])

The handler runs the chat on a batching engine of its own that shares the ``Llama``'s
loaded weights (one more KV cache of ``n_ctx``, made on first use) with the projector
attached, exactly as pyllama-server with ``--mmproj`` does: the model's own chat template,
a marker where each image or audio clip goes, the projector's tokens in its place.
``Llava15ChatHandler`` and the other per-family names keep their llama-cpp-python names;
each uses the template the GGUF carries (theirs hard-code one), except
``Llava15ChatHandler``, whose llava-1.5 checkpoints carry none.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from pyllama.chat import ChatTemplate

__all__ = [
    "Gemma3ChatHandler",
    "Llama3VisionAlphaChatHandler",
    "Llava15ChatHandler",
    "Llava16ChatHandler",
    "MTMDChatHandler",
    "MiniCPMv26ChatHandler",
    "MoondreamChatHandler",
    "NanoLlavaChatHandler",
    "ObsidianChatHandler",
    "Qwen25VLChatHandler",
]


class MTMDChatHandler:
    """A chat handler for models with a projector (``clip_model_path``)."""

    # a Jinja chat template; None: the GGUF's own
    CHAT_FORMAT: str | None = None

    def __init__(
        self,
        clip_model_path: str,
        verbose: bool = True,
        image_min_tokens: int = -1,
        image_max_tokens: int = -1,
        **kwargs: Any,
    ) -> None:
        if kwargs:
            raise TypeError(f"{type(self).__name__}() got unknown keywords: {', '.join(kwargs)}")
        if image_min_tokens != -1 or image_max_tokens != -1:
            raise ValueError(
                "image_min_tokens/image_max_tokens are not supported by pyllama's in-process "
                "handlers (pyllama-server takes --image-min-tokens/--image-max-tokens)"
            )
        if not os.path.exists(clip_model_path):
            raise ValueError(f"Clip model path does not exist: {clip_model_path}")
        self.clip_model_path = clip_model_path
        self.verbose = verbose
        self._engine: Any = None
        self._owner: Any = None
        self._lock = threading.Lock()

    def _engine_for(self, llama: Any) -> Any:
        from pyllama.llama.batched_llama import BatchedLlama

        with self._lock:
            if self._owner is not llama:  # first use, or another Llama: its own engine
                if self._engine is not None:
                    self._engine.close()
                ctx = llama.context_params
                self._engine = BatchedLlama(
                    llama.model_path,
                    model=llama.model,
                    clip_model_path=self.clip_model_path,
                    n_parallel=1,
                    n_ctx=ctx.n_ctx,
                    n_batch=ctx.n_batch,
                    n_ubatch=ctx.n_ubatch,
                    n_threads=ctx.n_threads,
                    n_threads_batch=ctx.n_threads_batch,
                    flash_attn=ctx.flash_attn,
                    offload_kqv=ctx.offload_kqv,
                    seed=llama._seed,
                    last_n_tokens_size=llama.last_n_tokens_size,
                    verbose=self.verbose,
                )
                if self.CHAT_FORMAT is not None:
                    # the handler's Jinja format, rendered by llama.cpp like any template
                    self._engine._template = ChatTemplate(self.CHAT_FORMAT, model=llama._model)
                self._owner = llama
            return self._engine

    def __call__(self, *, llama: Any, messages: Any, **call: Any) -> Any:
        if call.get("logits_processor"):
            raise ValueError("logits_processor is not supported with a multimodal chat handler")
        call.pop("logits_processor", None)
        return self._engine_for(llama).create_chat_completion(messages=messages, **call)

    def close(self) -> None:
        with self._lock:
            if self._engine is not None:
                self._engine.close()
            self._engine = self._owner = None


# llava-1.5: no template in its GGUFs; the layout its checkpoints were trained on
_LLAVA15 = (
    "{% for m in messages %}"
    "{% if m.role == 'system' %}{{ m.content }}\n\n"
    "{% elif m.role == 'user' %}USER: {{ m.content }}\n"
    "{% elif m.role == 'assistant' %}ASSISTANT: {{ m.content }}</s>\n{% endif %}"
    "{% endfor %}{% if add_generation_prompt %}ASSISTANT:{% endif %}"
)


class Llava15ChatHandler(MTMDChatHandler):
    CHAT_FORMAT = _LLAVA15


class ObsidianChatHandler(MTMDChatHandler):
    """llama-cpp-python's name for its family; the GGUF's own template."""


class MoondreamChatHandler(MTMDChatHandler):
    """llama-cpp-python's name for its family; the GGUF's own template."""


class Llava16ChatHandler(MTMDChatHandler):
    """llama-cpp-python's name for its family; the GGUF's own template."""


class NanoLlavaChatHandler(MTMDChatHandler):
    """llama-cpp-python's name for its family; the GGUF's own template."""


class Llama3VisionAlphaChatHandler(MTMDChatHandler):
    """llama-cpp-python's name for its family; the GGUF's own template."""


class MiniCPMv26ChatHandler(MTMDChatHandler):
    """llama-cpp-python's name for its family; the GGUF's own template."""


class Qwen25VLChatHandler(MTMDChatHandler):
    """llama-cpp-python's name for its family; the GGUF's own template."""


class Gemma3ChatHandler(MTMDChatHandler):
    """llama-cpp-python's name for its family; the GGUF's own template."""
