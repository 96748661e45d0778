"""pyllama: llama.cpp compiled, bound and served from Python."""

import os
import sys

if sys.platform == "win32":
    # _core's DLLs (llama, ggml, the runtime) are in pyllama/lib, which Windows does not
    # search for an extension's dependencies (Python loads it with only its own folder,
    # the application's, System32 and the add_dll_directory folders): add it, whatever
    # the working directory. The handle keeps it added for the life of the process.
    _dll_dir = os.add_dll_directory(os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))

try:
    from pyllama import _core  # noqa: F401
except ModuleNotFoundError as e:  # pragma: no cover - depends on how Python was started
    # only a missing file: any other ImportError (a CPU variant refused, a library that
    # will not load) carries its own message, which must reach the user as it is
    raise ImportError(
        f"pyllama's compiled module is missing next to {__file__}. This is the source tree, "
        "not the installed package: run from another directory, use the `pyllama` command, "
        "or install in development mode with `pip install -e .`"
    ) from e

from pyllama.plugins import load_all as _load_plugins

_load_plugins()  # GPU backends installed as plugins, before any model can load

from pyllama._core import (  # noqa: E402
    Batch,
    Context,
    LlamaError,
    LoraAdapter,
    Model,
    Sampler,
    SamplingParams,
    __version__,
    build_sampler_chain,
    json_schema_to_grammar,
    system_info,
)
from pyllama.chat import ChatTemplate, ChatTemplateError  # noqa: E402
from pyllama.hardware import backends, devices  # noqa: E402
from pyllama.llama import (  # noqa: E402
    AsyncLlama,
    BatchedLlama,
    Llama,
    LlamaGrammar,
)
from pyllama.models import demo_model  # noqa: E402

__all__ = [
    "AsyncLlama",
    "Batch",
    "BatchedLlama",
    "ChatTemplate",
    "ChatTemplateError",
    "Context",
    "Llama",
    "LlamaError",
    "LlamaGrammar",
    "LoraAdapter",
    "Model",
    "Sampler",
    "SamplingParams",
    "__version__",
    "backends",
    "build_sampler_chain",
    "demo_model",
    "devices",
    "json_schema_to_grammar",
    "system_info",
]
