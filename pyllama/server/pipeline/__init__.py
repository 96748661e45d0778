"""The protocol-neutral path every protocol calls: a chat turn planned (template, tools,
grammar, reasoning: ``plan``), prompts made into engine tasks (``tasks``) and submitted,
and the engine's events folded or streamed back into results (``results``); ``turn``
runs one chat turn through those steps, ``deltas`` turns generated text into assistant
message deltas, ``embeddings`` runs embedding tasks, ``schemas`` holds the request fields
every protocol shares (sampling).

May import ``http``, ``state`` and the library (``pyllama.chat``, ``pyllama.engine`` ...);
never a protocol, the router or the app.
"""
