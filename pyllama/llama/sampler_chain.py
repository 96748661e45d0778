"""llama-cpp-python's sampler chain, stage by stage, for ``Llama``'s own loop.

Order as llama-cpp-python 0.3.36: logit bias, penalties over the last
``last_n_tokens_size`` tokens, the grammar, then temperature < 0 samples the full
distribution, 0 is greedy, mirostat 1/2 when asked, otherwise top-k, typical, top-p,
min-p, temperature and the seeded draw. (The engine behind ``AsyncLlama`` uses
llama-server's chain instead: the same stages, its order.)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pyllama import _core

__all__ = ["ChatGrammar", "SamplerArgs", "build_chain", "grammar_text"]


@dataclass
class SamplerArgs:
    top_k: int = 40
    top_p: float = 0.95
    min_p: float = 0.05
    typical_p: float = 1.0
    temp: float = 0.80
    repeat_penalty: float = 1.0
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    tfs_z: float = 1.0
    mirostat_mode: int = 0
    mirostat_tau: float = 5.0
    mirostat_eta: float = 0.1
    penalize_nl: bool = True

    def check(self) -> None:
        # removed from llama.cpp: accepted only where they change nothing
        if self.tfs_z != 1.0:
            raise ValueError(
                f"tfs_z={self.tfs_z}: tail-free sampling was removed from llama.cpp (use 1.0)"
            )
        if not self.penalize_nl:
            raise ValueError("penalize_nl=False: llama.cpp penalizes newlines like any token now")
        if self.mirostat_mode not in (0, 1, 2):
            raise ValueError(f"mirostat_mode={self.mirostat_mode}: 0, 1 or 2")


@dataclass(frozen=True)
class ChatGrammar:
    """A chat's grammar from llama.cpp's chat layer (``pyllama.chat``): lazy, free text
    until a trigger (patterns or token ids), or else taking the generation prompt the
    template wrote first (``prefill``, as llama.cpp's common_sampler_init)."""

    text: str
    trigger_patterns: tuple[str, ...] = ()
    trigger_tokens: tuple[int, ...] = ()
    prefill: tuple[int, ...] = ()

    @property
    def lazy(self) -> bool:
        return bool(self.trigger_patterns or self.trigger_tokens)


def grammar_text(grammar: Any) -> Any:
    """A LlamaGrammar's GBNF, GBNF text or a ChatGrammar as it is."""
    if grammar is None or isinstance(grammar, (str, ChatGrammar)):
        return grammar
    text = getattr(grammar, "_grammar", None)
    if not isinstance(text, str):
        raise TypeError(
            f"grammar must be a LlamaGrammar or GBNF text, not {type(grammar).__name__}"
        )
    return text


def build_chain(
    model: _core.Model,
    args: SamplerArgs,
    *,
    seed: int,
    last_n: int,
    grammar: str | None = None,
    triggers: list[str] | None = None,
    logit_bias: Mapping[Any, float] | None = None,
) -> _core.Sampler:
    args.check()
    S = _core.Sampler
    chain = S.chain()

    def add(stage: _core.Sampler) -> None:
        chain.add(stage)

    if logit_bias:
        add(S.logit_bias(model.n_vocab, [(int(t), float(b)) for t, b in logit_bias.items()]))
    add(S.penalties(last_n, args.repeat_penalty, args.frequency_penalty, args.presence_penalty))
    if isinstance(grammar, ChatGrammar):
        if grammar.lazy:
            add(S.grammar_lazy(model, grammar.text, trigger_patterns=list(grammar.trigger_patterns),
                               trigger_tokens=list(grammar.trigger_tokens)))  # fmt: skip
        else:
            stage = S.grammar(model, grammar.text)
            for t in grammar.prefill:
                stage.accept(t)
            add(stage)
    elif grammar:
        try:
            if triggers:
                add(S.grammar_lazy(model, grammar, trigger_patterns=triggers))
            else:
                add(S.grammar(model, grammar))
        except (RuntimeError, ValueError) as e:
            raise ValueError(f"invalid grammar: {e}") from e
    if args.temp < 0.0:
        add(S.dist(seed))
    elif args.temp == 0.0:
        add(S.greedy())
    elif args.mirostat_mode == 1:
        add(S.mirostat(model.n_vocab, seed, args.mirostat_tau, args.mirostat_eta, 100))
    elif args.mirostat_mode == 2:
        add(S.mirostat_v2(seed, args.mirostat_tau, args.mirostat_eta))
    else:
        add(S.top_k(args.top_k))
        add(S.typical(args.typical_p, 1))
        add(S.top_p(args.top_p, 1))
        add(S.min_p(args.min_p, 1))
        add(S.temp(args.temp))
        add(S.dist(seed))
    return chain
