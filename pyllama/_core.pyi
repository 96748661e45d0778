"""
llama.cpp bindings: models, contexts, batches and samplers
"""
from __future__ import annotations
import collections.abc
import numpy
import numpy.typing
import typing
__all__: list[str] = ['Batch', 'ChatReader', 'ChatTemplates', 'Context', 'ContextSizeError', 'CpuParams', 'DEFAULT_SEED', 'Engine', 'Event', 'LlamaError', 'LoraAdapter', 'MediaChunk', 'MediaError', 'MediaPrompt', 'Model', 'NgramMap', 'NgramSpec', 'OverloadedError', 'Projector', 'ReasoningBudget', 'Sampler', 'SamplingParams', 'TaskKind', 'TaskParams', 'TextStream', 'backends', 'buffer_type_names', 'build_info', 'build_sampler_chain', 'chat_anthropic_to_openai', 'chat_apply_builtin', 'chat_builtin_templates', 'chat_media_marker', 'chat_responses_to_openai', 'chat_sampling', 'default_media_marker', 'devices', 'fit_params', 'get_log_level', 'json_schema_to_grammar', 'load_plugin', 'max_devices', 'module_dir', 'numa_init', 'projector_caps', 'rpc_add_server', 'rpc_serve', 'set_log_file', 'set_log_level', 'set_process_priority', 'supports_gpu_offload', 'supports_mlock', 'supports_mmap', 'system_info', 'time_us']
class LlamaError(RuntimeError):
    pass
class CpuParams:
    """
    CPU placement of ggml's compute threads (llama-server's --cpu-mask, --cpu-range, --cpu-strict, --prio, --poll).
    """
    def __init__(self, *, mask: str = '', range: str = '', strict: typing.SupportsInt | typing.SupportsIndex = 0, priority: typing.SupportsInt | typing.SupportsIndex = 0, poll: typing.SupportsInt | typing.SupportsIndex = 50) -> None:
        ...
    def __repr__(self) -> str:
        ...
    @property
    def is_default(self) -> bool:
        ...
    @property
    def mask(self) -> str:
        ...
    @property
    def poll(self) -> int:
        ...
    @property
    def priority(self) -> int:
        ...
    @property
    def range(self) -> str:
        ...
    @property
    def strict(self) -> int:
        ...
class Model:
    """
    A loaded GGUF model (immutable, thread-safe).
    """
    def __init__(self, path: str, *, n_gpu_layers: typing.SupportsInt | typing.SupportsIndex = -1, use_mmap: bool = True, use_mlock: bool = False, vocab_only: bool = False, check_tensors: bool = False, devices: collections.abc.Sequence[str] = [], split_mode: str = 'layer', main_gpu: typing.SupportsInt | typing.SupportsIndex = 0, tensor_split: collections.abc.Sequence[typing.SupportsFloat | typing.SupportsIndex] = [], kv_overrides: collections.abc.Sequence[str] = [], tensor_overrides: collections.abc.Sequence[tuple[str, str]] = [], repack: bool = True, no_host: bool = False, load_mode: str = '', lazy_mode: str = 'auto') -> None:
        """
        Load a GGUF model. ``devices``: ggml device names to offload to (``['none']``: none; empty: every GPU); ``split_mode``: none, layer, row or tensor (llama-server's --split-mode); ``tensor_split``: proportions per device; ``kv_overrides``: metadata overrides, ``KEY=TYPE:VALUE`` (--override-kv); ``tensor_overrides``: (tensor name regex, buffer type) pairs (--override-tensor, --cpu-moe); ``repack``: weight repacking (--no-repack); ``load_mode``: auto, none, mmap, mlock, mmap+mlock or dio ('' follows use_mmap/use_mlock); ``lazy_mode``: on, auto or off.
        """
    def chat_template(self, name: str = '') -> str:
        """
        The model's chat template (named variant when name is given); '' when absent.
        """
    def detokenize(self, tokens: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex], remove_special: bool = False, unparse_special: bool = False) -> bytes:
        ...
    def has_special_text(self, text: str) -> bool:
        """
        Whether ``text`` holds the text of a control or unknown token, the only tokens that parse_special changes: when it does not, tokenize gives the same with and without.
        """
    def is_control(self, token: typing.SupportsInt | typing.SupportsIndex) -> bool:
        ...
    def is_eog(self, token: typing.SupportsInt | typing.SupportsIndex) -> bool:
        ...
    def meta(self, key: str) -> str:
        """
        One metadata value as a string ('' when absent).
        """
    def piece_cache_info(self) -> dict:
        """
        tokenize_prompt's cache: hits and misses of the stretches long enough to keep, entries and bytes of text held.
        """
    def token_score(self, token: typing.SupportsInt | typing.SupportsIndex) -> float:
        ...
    def token_text(self, token: typing.SupportsInt | typing.SupportsIndex) -> bytes:
        ...
    def token_to_piece(self, token: typing.SupportsInt | typing.SupportsIndex, special: bool = False) -> bytes:
        """
        The token's bytes (may be a partial UTF-8 sequence).
        """
    def tokenize(self, text: str, add_special: bool = True, parse_special: bool = False) -> list[int]:
        ...
    def tokenize_prompt(self, text: str, add_special: bool = True) -> list[int]:
        """
        ``tokenize(text, add_special, parse_special=True)``, the same tokens, with the stretches between control tokens (a system prompt, earlier turns) from a cache.
        """
    @property
    def add_bos(self) -> bool:
        ...
    @property
    def add_eos(self) -> bool:
        ...
    @property
    def add_sep(self) -> bool:
        ...
    @property
    def description(self) -> str:
        ...
    @property
    def has_decoder(self) -> bool:
        ...
    @property
    def has_encoder(self) -> bool:
        ...
    @property
    def is_encoder(self) -> bool:
        """
        Non-causal attention (BERT and its kin): its inputs keep no KV cache.
        """
    @property
    def is_hybrid(self) -> bool:
        ...
    @property
    def is_recurrent(self) -> bool:
        ...
    @property
    def metadata(self) -> dict[str, str]:
        """
        All GGUF metadata as strings.
        """
    @property
    def n_cls_out(self) -> int:
        ...
    @property
    def n_ctx_train(self) -> int:
        ...
    @property
    def n_embd(self) -> int:
        ...
    @property
    def n_embd_out(self) -> int:
        ...
    @property
    def n_head(self) -> int:
        ...
    @property
    def n_head_kv(self) -> int:
        ...
    @property
    def n_layer(self) -> int:
        ...
    @property
    def n_params(self) -> int:
        ...
    @property
    def n_vocab(self) -> int:
        ...
    @property
    def offloadable_layers(self) -> int:
        """
        Layers it could offload: the repeating ones and the output.
        """
    @property
    def offloaded_layers(self) -> int:
        """
        Layers llama.cpp put on offload devices (GPU, RPC) at load.
        """
    @property
    def path(self) -> str:
        ...
    @property
    def size(self) -> int:
        ...
    @property
    def token_bos(self) -> int:
        ...
    @property
    def token_eos(self) -> int:
        ...
    @property
    def token_eot(self) -> int:
        ...
    @property
    def token_fim_mid(self) -> int:
        ...
    @property
    def token_fim_pad(self) -> int:
        ...
    @property
    def token_fim_pre(self) -> int:
        ...
    @property
    def token_fim_rep(self) -> int:
        ...
    @property
    def token_fim_sep(self) -> int:
        ...
    @property
    def token_fim_suf(self) -> int:
        ...
    @property
    def token_nl(self) -> int:
        ...
    @property
    def token_pad(self) -> int:
        ...
    @property
    def token_sep(self) -> int:
        ...
    @property
    def vocab_type(self) -> int:
        ...
class Batch:
    """
    Tokens with positions, sequence ids and output flags for one decode.
    """
    def __init__(self, capacity: typing.SupportsInt | typing.SupportsIndex, n_seq_max: typing.SupportsInt | typing.SupportsIndex = 1) -> None:
        ...
    def __len__(self) -> int:
        ...
    def add(self, token: typing.SupportsInt | typing.SupportsIndex, pos: typing.SupportsInt | typing.SupportsIndex, seq_ids: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex], logits: bool = False) -> None:
        ...
    def add_sequence(self, tokens: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex], pos0: typing.SupportsInt | typing.SupportsIndex, seq_id: typing.SupportsInt | typing.SupportsIndex, logits_last: bool = True) -> None:
        """
        Append tokens of one sequence at pos0, pos0+1, ...
        """
    def clear(self) -> None:
        ...
    def logits_at(self, index: typing.SupportsInt | typing.SupportsIndex) -> bool:
        ...
    def set_logits(self, index: typing.SupportsInt | typing.SupportsIndex, logits: bool) -> None:
        ...
    def token_at(self, index: typing.SupportsInt | typing.SupportsIndex) -> int:
        ...
    @property
    def capacity(self) -> int:
        ...
    @property
    def n_seq_max(self) -> int:
        ...
class LoraAdapter:
    """
    A LoRA adapter loaded for a model.
    """
    def __init__(self, model: Model, path: str) -> None:
        ...
    @property
    def path(self) -> str:
        ...
class Context:
    """
    An inference context (KV cache, outputs) on a Model.
    """
    def __init__(self, model: Model, *, n_ctx: typing.SupportsInt | typing.SupportsIndex = 0, n_batch: typing.SupportsInt | typing.SupportsIndex = 2048, n_ubatch: typing.SupportsInt | typing.SupportsIndex = 512, n_seq_max: typing.SupportsInt | typing.SupportsIndex = 1, n_threads: typing.SupportsInt | typing.SupportsIndex = -1, n_threads_batch: typing.SupportsInt | typing.SupportsIndex = -1, flash_attn: typing.SupportsInt | typing.SupportsIndex = -1, embeddings: bool = False, pooling: typing.SupportsInt | typing.SupportsIndex = -1, attention: typing.SupportsInt | typing.SupportsIndex = -1, type_k: str = 'f16', type_v: str = 'f16', offload_kqv: bool = True, kv_unified: bool = True, swa_full: bool = True, no_perf: bool = False, rope_freq_base: typing.SupportsFloat | typing.SupportsIndex = 0.0, rope_freq_scale: typing.SupportsFloat | typing.SupportsIndex = 0.0, compute_thread: bool = True) -> None:
        """
        compute_thread: run decode/encode on the context's own thread whichever Python thread
        calls (ggml's OpenMP pools are per calling thread; see csrc/core/compute_thread.hpp).
        """
    def decode(self, batch: Batch) -> None:
        ...
    def embeddings_ith(self, idx: typing.SupportsInt | typing.SupportsIndex = -1) -> numpy.typing.NDArray[numpy.float32]:
        """
        Zero-copy view of output idx's embedding (pooling none).
        """
    def embeddings_seq(self, seq_id: typing.SupportsInt | typing.SupportsIndex) -> numpy.typing.NDArray[numpy.float32]:
        """
        Zero-copy view of a sequence's pooled embedding (or rank scores).
        """
    def encode(self, batch: Batch) -> None:
        ...
    def logits_ith(self, idx: typing.SupportsInt | typing.SupportsIndex = -1) -> numpy.typing.NDArray[numpy.float32]:
        """
        Zero-copy float32 view of output idx's logits (valid until the next decode).
        """
    def memory_clear(self, data: bool = True) -> None:
        ...
    def perf(self) -> dict:
        ...
    def perf_reset(self) -> None:
        ...
    def seq_add(self, seq_id: typing.SupportsInt | typing.SupportsIndex, p0: typing.SupportsInt | typing.SupportsIndex, p1: typing.SupportsInt | typing.SupportsIndex, delta: typing.SupportsInt | typing.SupportsIndex) -> None:
        ...
    def seq_cp(self, src: typing.SupportsInt | typing.SupportsIndex, dst: typing.SupportsInt | typing.SupportsIndex, p0: typing.SupportsInt | typing.SupportsIndex = -1, p1: typing.SupportsInt | typing.SupportsIndex = -1) -> None:
        ...
    def seq_div(self, seq_id: typing.SupportsInt | typing.SupportsIndex, p0: typing.SupportsInt | typing.SupportsIndex, p1: typing.SupportsInt | typing.SupportsIndex, d: typing.SupportsInt | typing.SupportsIndex) -> None:
        ...
    def seq_keep(self, seq_id: typing.SupportsInt | typing.SupportsIndex) -> None:
        ...
    def seq_pos_max(self, seq_id: typing.SupportsInt | typing.SupportsIndex) -> int:
        ...
    def seq_pos_min(self, seq_id: typing.SupportsInt | typing.SupportsIndex) -> int:
        ...
    def seq_rm(self, seq_id: typing.SupportsInt | typing.SupportsIndex, p0: typing.SupportsInt | typing.SupportsIndex = -1, p1: typing.SupportsInt | typing.SupportsIndex = -1) -> bool:
        ...
    def seq_state_get(self, seq_id: typing.SupportsInt | typing.SupportsIndex) -> bytes:
        ...
    def seq_state_load(self, path: str, seq_id: typing.SupportsInt | typing.SupportsIndex, max_tokens: typing.SupportsInt | typing.SupportsIndex = 1048576) -> list[int]:
        """
        Restore a sequence saved by seq_state_save; returns its tokens.
        """
    def seq_state_save(self, path: str, seq_id: typing.SupportsInt | typing.SupportsIndex, tokens: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex] = []) -> int:
        ...
    def seq_state_set(self, data: bytes, seq_id: typing.SupportsInt | typing.SupportsIndex) -> None:
        ...
    def set_causal_attn(self, causal: bool) -> None:
        ...
    def set_embeddings(self, embeddings: bool) -> None:
        ...
    def set_lora(self, adapters: collections.abc.Sequence[tuple[LoraAdapter, typing.SupportsFloat | typing.SupportsIndex]]) -> None:
        """
        Apply [(adapter, scale), ...] replacing the current set; [] removes all.
        """
    def set_n_threads(self, n_threads: typing.SupportsInt | typing.SupportsIndex, n_threads_batch: typing.SupportsInt | typing.SupportsIndex = -1) -> None:
        ...
    @property
    def can_shift(self) -> bool:
        ...
    @property
    def model(self) -> Model:
        ...
    @property
    def n_batch(self) -> int:
        ...
    @property
    def n_ctx(self) -> int:
        ...
    @property
    def n_embd_out(self) -> int:
        ...
    @property
    def n_outputs(self) -> int:
        ...
    @property
    def n_seq_max(self) -> int:
        ...
    @property
    def n_threads(self) -> int:
        ...
    @property
    def n_ubatch(self) -> int:
        ...
    @property
    def pooling(self) -> int:
        ...
class Sampler:
    """
    One llama.cpp sampler or a chain of them. Sampler.chain() makes a chain; chain.add(stage) moves stage into it.
    """
    @staticmethod
    def adaptive_p(target: typing.SupportsFloat | typing.SupportsIndex, decay: typing.SupportsFloat | typing.SupportsIndex = 0.8999999761581421, seed: typing.SupportsInt | typing.SupportsIndex = 4294967295) -> Sampler:
        ...
    @staticmethod
    def chain(*, no_perf: bool = True) -> Sampler:
        ...
    @staticmethod
    def dist(seed: typing.SupportsInt | typing.SupportsIndex = 4294967295) -> Sampler:
        ...
    @staticmethod
    def dry(model: Model, multiplier: typing.SupportsFloat | typing.SupportsIndex, base: typing.SupportsFloat | typing.SupportsIndex = 1.75, allowed_length: typing.SupportsInt | typing.SupportsIndex = 2, last_n: typing.SupportsInt | typing.SupportsIndex = -1, seq_breakers: collections.abc.Sequence[str] = ['\n', ':', '"', '*']) -> Sampler:
        ...
    @staticmethod
    def grammar(model: Model, grammar: str, root: str = 'root') -> Sampler:
        ...
    @staticmethod
    def grammar_lazy(model: Model, grammar: str, root: str = 'root', trigger_patterns: collections.abc.Sequence[str] = [], trigger_tokens: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex] = []) -> Sampler:
        ...
    @staticmethod
    def greedy() -> Sampler:
        ...
    @staticmethod
    def infill(model: Model) -> Sampler:
        ...
    @staticmethod
    def logit_bias(n_vocab: typing.SupportsInt | typing.SupportsIndex, biases: collections.abc.Sequence[tuple[typing.SupportsInt | typing.SupportsIndex, typing.SupportsFloat | typing.SupportsIndex]]) -> Sampler:
        ...
    @staticmethod
    def min_p(p: typing.SupportsFloat | typing.SupportsIndex, min_keep: typing.SupportsInt | typing.SupportsIndex = 1) -> Sampler:
        ...
    @staticmethod
    def mirostat(n_vocab: typing.SupportsInt | typing.SupportsIndex, seed: typing.SupportsInt | typing.SupportsIndex, tau: typing.SupportsFloat | typing.SupportsIndex, eta: typing.SupportsFloat | typing.SupportsIndex, m: typing.SupportsInt | typing.SupportsIndex = 100) -> Sampler:
        ...
    @staticmethod
    def mirostat_v2(seed: typing.SupportsInt | typing.SupportsIndex, tau: typing.SupportsFloat | typing.SupportsIndex, eta: typing.SupportsFloat | typing.SupportsIndex) -> Sampler:
        ...
    @staticmethod
    def penalties(last_n: typing.SupportsInt | typing.SupportsIndex = 64, repeat: typing.SupportsFloat | typing.SupportsIndex = 1.0, freq: typing.SupportsFloat | typing.SupportsIndex = 0.0, present: typing.SupportsFloat | typing.SupportsIndex = 0.0) -> Sampler:
        ...
    @staticmethod
    def temp(t: typing.SupportsFloat | typing.SupportsIndex) -> Sampler:
        ...
    @staticmethod
    def temp_ext(t: typing.SupportsFloat | typing.SupportsIndex, delta: typing.SupportsFloat | typing.SupportsIndex, exponent: typing.SupportsFloat | typing.SupportsIndex) -> Sampler:
        """
        Dynamic temperature (dynatemp range and exponent).
        """
    @staticmethod
    def top_k(k: typing.SupportsInt | typing.SupportsIndex) -> Sampler:
        ...
    @staticmethod
    def top_n_sigma(n: typing.SupportsFloat | typing.SupportsIndex) -> Sampler:
        ...
    @staticmethod
    def top_p(p: typing.SupportsFloat | typing.SupportsIndex, min_keep: typing.SupportsInt | typing.SupportsIndex = 1) -> Sampler:
        ...
    @staticmethod
    def typical(p: typing.SupportsFloat | typing.SupportsIndex, min_keep: typing.SupportsInt | typing.SupportsIndex = 1) -> Sampler:
        ...
    @staticmethod
    def xtc(p: typing.SupportsFloat | typing.SupportsIndex, t: typing.SupportsFloat | typing.SupportsIndex, min_keep: typing.SupportsInt | typing.SupportsIndex = 1, seed: typing.SupportsInt | typing.SupportsIndex = 4294967295) -> Sampler:
        ...
    def __len__(self) -> int:
        ...
    def accept(self, token: typing.SupportsInt | typing.SupportsIndex) -> None:
        ...
    def add(self, stage: Sampler) -> None:
        """
        Move stage into this chain; returns nothing.
        """
    def clone(self) -> Sampler:
        ...
    def reset(self) -> None:
        ...
    def sample(self, ctx: Context, idx: typing.SupportsInt | typing.SupportsIndex = -1) -> int:
        """
        Sample from output idx of ctx's last decode and accept the token.
        """
    def sample_logits(self, logits: typing.Annotated[numpy.typing.ArrayLike, numpy.float32]) -> int:
        """
        Apply the stages to these logits (one per vocabulary entry), accept and return the selected token.
        """
    @property
    def empty(self) -> bool:
        ...
    @property
    def is_chain(self) -> bool:
        ...
    @property
    def name(self) -> str:
        ...
    @property
    def seed(self) -> int:
        ...
class SamplingParams:
    """
    Every llama-server sampling option; defaults are llama-server's.
    """
    grammar: str
    grammar_lazy: bool
    ignore_eos: bool
    def __init__(self) -> None:
        ...
    def validate(self) -> None:
        """
        Raise ValueError naming the first invalid field.
        """
    @property
    def adaptive_decay(self) -> float:
        ...
    @adaptive_decay.setter
    def adaptive_decay(self, arg0: typing.SupportsFloat | typing.SupportsIndex) -> None:
        ...
    @property
    def adaptive_target(self) -> float:
        ...
    @adaptive_target.setter
    def adaptive_target(self, arg0: typing.SupportsFloat | typing.SupportsIndex) -> None:
        ...
    @property
    def backend_sampling(self) -> bool:
        """
        run the chain inside the decode graph where its stages allow (an engine task)
        """
    @backend_sampling.setter
    def backend_sampling(self, arg0: bool) -> None:
        ...
    @property
    def dry_allowed_length(self) -> int:
        ...
    @dry_allowed_length.setter
    def dry_allowed_length(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None:
        ...
    @property
    def dry_base(self) -> float:
        ...
    @dry_base.setter
    def dry_base(self, arg0: typing.SupportsFloat | typing.SupportsIndex) -> None:
        ...
    @property
    def dry_multiplier(self) -> float:
        ...
    @dry_multiplier.setter
    def dry_multiplier(self, arg0: typing.SupportsFloat | typing.SupportsIndex) -> None:
        ...
    @property
    def dry_penalty_last_n(self) -> int:
        ...
    @dry_penalty_last_n.setter
    def dry_penalty_last_n(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None:
        ...
    @property
    def dry_sequence_breakers(self) -> list[str]:
        ...
    @dry_sequence_breakers.setter
    def dry_sequence_breakers(self, arg0: collections.abc.Sequence[str]) -> None:
        ...
    @property
    def dynatemp_exponent(self) -> float:
        ...
    @dynatemp_exponent.setter
    def dynatemp_exponent(self, arg0: typing.SupportsFloat | typing.SupportsIndex) -> None:
        ...
    @property
    def dynatemp_range(self) -> float:
        ...
    @dynatemp_range.setter
    def dynatemp_range(self, arg0: typing.SupportsFloat | typing.SupportsIndex) -> None:
        ...
    @property
    def frequency_penalty(self) -> float:
        ...
    @frequency_penalty.setter
    def frequency_penalty(self, arg0: typing.SupportsFloat | typing.SupportsIndex) -> None:
        ...
    @property
    def grammar_prefill(self) -> list[int]:
        """
        tokens a non-lazy grammar accepts first (a chat's generation prompt)
        """
    @grammar_prefill.setter
    def grammar_prefill(self, arg0: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex]) -> None:
        ...
    @property
    def grammar_trigger_patterns(self) -> list[str]:
        ...
    @grammar_trigger_patterns.setter
    def grammar_trigger_patterns(self, arg0: collections.abc.Sequence[str]) -> None:
        ...
    @property
    def grammar_trigger_tokens(self) -> list[int]:
        ...
    @grammar_trigger_tokens.setter
    def grammar_trigger_tokens(self, arg0: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex]) -> None:
        ...
    @property
    def logit_bias(self) -> list[tuple[int, float]]:
        ...
    @logit_bias.setter
    def logit_bias(self, arg0: collections.abc.Sequence[tuple[typing.SupportsInt | typing.SupportsIndex, typing.SupportsFloat | typing.SupportsIndex]]) -> None:
        ...
    @property
    def min_keep(self) -> int:
        ...
    @min_keep.setter
    def min_keep(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None:
        ...
    @property
    def min_p(self) -> float:
        ...
    @min_p.setter
    def min_p(self, arg0: typing.SupportsFloat | typing.SupportsIndex) -> None:
        ...
    @property
    def mirostat(self) -> int:
        ...
    @mirostat.setter
    def mirostat(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None:
        ...
    @property
    def mirostat_eta(self) -> float:
        ...
    @mirostat_eta.setter
    def mirostat_eta(self, arg0: typing.SupportsFloat | typing.SupportsIndex) -> None:
        ...
    @property
    def mirostat_tau(self) -> float:
        ...
    @mirostat_tau.setter
    def mirostat_tau(self, arg0: typing.SupportsFloat | typing.SupportsIndex) -> None:
        ...
    @property
    def presence_penalty(self) -> float:
        ...
    @presence_penalty.setter
    def presence_penalty(self, arg0: typing.SupportsFloat | typing.SupportsIndex) -> None:
        ...
    @property
    def repeat_last_n(self) -> int:
        ...
    @repeat_last_n.setter
    def repeat_last_n(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None:
        ...
    @property
    def repeat_penalty(self) -> float:
        ...
    @repeat_penalty.setter
    def repeat_penalty(self, arg0: typing.SupportsFloat | typing.SupportsIndex) -> None:
        ...
    @property
    def samplers(self) -> list[str]:
        ...
    @samplers.setter
    def samplers(self, arg0: collections.abc.Sequence[str]) -> None:
        ...
    @property
    def seed(self) -> int:
        ...
    @seed.setter
    def seed(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None:
        ...
    @property
    def temperature(self) -> float:
        ...
    @temperature.setter
    def temperature(self, arg0: typing.SupportsFloat | typing.SupportsIndex) -> None:
        ...
    @property
    def top_k(self) -> int:
        ...
    @top_k.setter
    def top_k(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None:
        ...
    @property
    def top_n_sigma(self) -> float:
        ...
    @top_n_sigma.setter
    def top_n_sigma(self, arg0: typing.SupportsFloat | typing.SupportsIndex) -> None:
        ...
    @property
    def top_p(self) -> float:
        ...
    @top_p.setter
    def top_p(self, arg0: typing.SupportsFloat | typing.SupportsIndex) -> None:
        ...
    @property
    def typical_p(self) -> float:
        ...
    @typical_p.setter
    def typical_p(self, arg0: typing.SupportsFloat | typing.SupportsIndex) -> None:
        ...
    @property
    def xtc_probability(self) -> float:
        ...
    @xtc_probability.setter
    def xtc_probability(self, arg0: typing.SupportsFloat | typing.SupportsIndex) -> None:
        ...
    @property
    def xtc_threshold(self) -> float:
        ...
    @xtc_threshold.setter
    def xtc_threshold(self, arg0: typing.SupportsFloat | typing.SupportsIndex) -> None:
        ...
class MediaError(ValueError):
    pass
class MediaChunk:
    """
    One image or audio file in a tokenized prompt.
    """
    def __repr__(self) -> str:
        ...
    @property
    def audio(self) -> bool:
        ...
    @property
    def id(self) -> str:
        """
        SHA-256 of the file
        """
    @property
    def n_pos(self) -> int:
        """
        positions it takes (fewer than n_tokens with M-RoPE)
        """
    @property
    def n_tokens(self) -> int:
        ...
    @property
    def start(self) -> int:
        """
        index of its first placeholder token in the prompt
        """
class MediaPrompt:
    """
    Tokens (media as placeholder tokens < -1) and the media chunks.
    """
    def __len__(self) -> int:
        ...
    @property
    def media(self) -> list[MediaChunk]:
        ...
    @property
    def seconds(self) -> list[float]:
        """
        per file: an audio file's duration in seconds, 0 for an image
        """
    @property
    def tokens(self) -> list[int]:
        ...
class Projector:
    """
    A multimodal projector (mmproj GGUF) bound to a loaded model.
    """
    def __init__(self, model: Model, path: str, *, use_gpu: bool = True, n_threads: typing.SupportsInt | typing.SupportsIndex = 4, image_min_tokens: typing.SupportsInt | typing.SupportsIndex = -1, image_max_tokens: typing.SupportsInt | typing.SupportsIndex = -1, batch_max_tokens: typing.SupportsInt | typing.SupportsIndex = -1, warmup: bool = True, device: str = '', marker: str = '') -> None:
        ...
    def tokenize(self, text: str, files: collections.abc.Sequence[bytes], add_special: bool = True, parse_special: bool = True) -> MediaPrompt:
        """
        Tokenize text holding one marker per file; MediaError for a file the projector cannot take.
        """
    @property
    def audio(self) -> bool:
        ...
    @property
    def audio_sample_rate(self) -> int:
        ...
    @property
    def marker(self) -> str:
        ...
    @property
    def mrope(self) -> bool:
        ...
    @property
    def path(self) -> str:
        ...
    @property
    def vision(self) -> bool:
        ...
class OverloadedError(RuntimeError):
    pass
class ContextSizeError(ValueError):
    pass
class TextStream:
    """
    Token bytes in, safe text out: holds back partial UTF-8 and stop-string prefixes.
    """
    def __init__(self, stops: collections.abc.Sequence[str] = []) -> None:
        ...
    def flush(self) -> bytes:
        """
        End of generation: the held bytes, less an unfinished character.
        """
    def push(self, piece: bytes) -> bytes:
        """
        Add one token's bytes; return the bytes that can be emitted now.
        """
    @property
    def stopped(self) -> bool:
        ...
    @property
    def stopping_word(self) -> str:
        ...
class TaskKind:
    """
    Members:
    
      COMPLETION
    
      EMBEDDING
    
      RERANK
    """
    COMPLETION: typing.ClassVar[TaskKind]
    EMBEDDING: typing.ClassVar[TaskKind]
    RERANK: typing.ClassVar[TaskKind]
    __members__: typing.ClassVar[dict[str, TaskKind]]
    @typing.overload
    def __eq__(self, other: TaskKind) -> bool:
        ...
    @typing.overload
    def __eq__(self, other: typing.Any) -> bool:
        ...
    def __getstate__(self) -> int:
        ...
    def __hash__(self) -> int:
        ...
    def __index__(self) -> int:
        ...
    def __init__(self, value: typing.SupportsInt | typing.SupportsIndex) -> None:
        ...
    def __int__(self) -> int:
        ...
    @typing.overload
    def __ne__(self, other: TaskKind) -> bool:
        ...
    @typing.overload
    def __ne__(self, other: typing.Any) -> bool:
        ...
    def __repr__(self) -> str:
        ...
    def __setstate__(self, state: typing.SupportsInt | typing.SupportsIndex) -> None:
        ...
    def __str__(self) -> str:
        ...
    @property
    def name(self) -> str:
        ...
    @property
    def value(self) -> int:
        ...
class ReasoningBudget:
    """
    llama-server's reasoning budget: thinking-block tags as tokens, the limit, runtime control.
    """
    def __init__(self) -> None:
        ...
    @property
    def budget(self) -> int:
        """
        tokens allowed in the block; -1: no limit
        """
    @budget.setter
    def budget(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None:
        ...
    @property
    def control(self) -> bool:
        """
        Engine.control may end the block
        """
    @control.setter
    def control(self, arg0: bool) -> None:
        ...
    @property
    def end(self) -> list[list[int]]:
        """
        each end tag's tokens; the first is forced
        """
    @end.setter
    def end(self, arg0: collections.abc.Sequence[collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex]]) -> None:
        ...
    @property
    def forced(self) -> list[int]:
        """
        tokens forced when the budget runs out (message + end tag)
        """
    @forced.setter
    def forced(self, arg0: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex]) -> None:
        ...
    @property
    def prefill(self) -> list[int]:
        """
        the generation prompt's tokens, accepted first
        """
    @prefill.setter
    def prefill(self, arg0: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex]) -> None:
        ...
    @property
    def start(self) -> list[int]:
        """
        the start tag's tokens
        """
    @start.setter
    def start(self, arg0: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex]) -> None:
        ...
class NgramMap:
    """
    ngram-simple / ngram-map-k / ngram-map-k4v sizes.
    """
    def __init__(self) -> None:
        ...
    @property
    def min_hits(self) -> int:
        """
        times seen before it is drafted (default 1)
        """
    @min_hits.setter
    def min_hits(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None:
        ...
    @property
    def size_m(self) -> int:
        """
        the m-gram drafted after it (default 48)
        """
    @size_m.setter
    def size_m(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None:
        ...
    @property
    def size_n(self) -> int:
        """
        the n-gram looked up (default 12)
        """
    @size_n.setter
    def size_n(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None:
        ...
class NgramSpec:
    """
    n-gram self-speculation (llama-server's --spec-type ngram-* and sizes).
    """
    map_k: NgramMap
    map_k4v: NgramMap
    simple: NgramMap
    def __init__(self) -> None:
        ...
    @property
    def lookup_cache_dynamic(self) -> str:
        """
        ngram-cache: dynamic cache file (read, never written)
        """
    @lookup_cache_dynamic.setter
    def lookup_cache_dynamic(self, arg0: str) -> None:
        ...
    @property
    def lookup_cache_static(self) -> str:
        """
        ngram-cache: static cache file
        """
    @lookup_cache_static.setter
    def lookup_cache_static(self, arg0: str) -> None:
        ...
    @property
    def mod_n_match(self) -> int:
        """
        ngram-mod lookup length (default 24)
        """
    @mod_n_match.setter
    def mod_n_match(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None:
        ...
    @property
    def mod_n_max(self) -> int:
        """
        ngram-mod: longest draft (default 64)
        """
    @mod_n_max.setter
    def mod_n_max(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None:
        ...
    @property
    def mod_n_min(self) -> int:
        """
        ngram-mod: shorter drafts dropped (default 48)
        """
    @mod_n_min.setter
    def mod_n_min(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None:
        ...
    @property
    def types(self) -> list[str]:
        """
        ngram-simple, ngram-map-k, ngram-map-k4v, ngram-mod, ngram-cache; the first that drafts wins
        """
    @types.setter
    def types(self, arg0: collections.abc.Sequence[str]) -> None:
        ...
class TaskParams:
    """
    One request for the engine: tokens in, events out.
    """
    cache_prompt: bool
    kind: TaskKind
    post_sampling_probs: bool
    reasoning: ReasoningBudget
    return_progress: bool
    sampling: SamplingParams
    def __init__(self) -> None:
        ...
    def set_prompt(self, prompt: MediaPrompt) -> None:
        """
        Take a MediaPrompt's tokens and media.
        """
    @property
    def cmpl_id(self) -> str:
        """
        the completion id clients see (Engine.control)
        """
    @cmpl_id.setter
    def cmpl_id(self, arg0: str) -> None:
        ...
    @property
    def embd_normalize(self) -> int:
        ...
    @embd_normalize.setter
    def embd_normalize(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None:
        ...
    @property
    def id_slot(self) -> int:
        ...
    @id_slot.setter
    def id_slot(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None:
        ...
    @property
    def lora_scales(self) -> list[float]:
        ...
    @lora_scales.setter
    def lora_scales(self, arg0: collections.abc.Sequence[typing.SupportsFloat | typing.SupportsIndex]) -> None:
        ...
    @property
    def media(self) -> list[MediaChunk]:
        """
        media chunks over the prompt's placeholders (Projector.tokenize)
        """
    @media.setter
    def media(self, arg0: collections.abc.Sequence[MediaChunk]) -> None:
        ...
    @property
    def n_cache_reuse(self) -> int:
        ...
    @n_cache_reuse.setter
    def n_cache_reuse(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None:
        ...
    @property
    def n_cmpl(self) -> int:
        ...
    @n_cmpl.setter
    def n_cmpl(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None:
        ...
    @property
    def n_discard(self) -> int:
        """
        context shift: tokens dropped after n_keep; 0 half of what follows
        """
    @n_discard.setter
    def n_discard(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None:
        ...
    @property
    def n_keep(self) -> int:
        """
        context shift: prompt tokens kept; -1 the whole prompt, -2 the engine's
        """
    @n_keep.setter
    def n_keep(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None:
        ...
    @property
    def n_predict(self) -> int:
        ...
    @n_predict.setter
    def n_predict(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None:
        ...
    @property
    def n_probs(self) -> int:
        ...
    @n_probs.setter
    def n_probs(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None:
        ...
    @property
    def preserved_tokens(self) -> list[int]:
        ...
    @preserved_tokens.setter
    def preserved_tokens(self, arg0: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex]) -> None:
        ...
    @property
    def priority(self) -> int:
        """
        admission order among waiting tasks: lower first, FIFO among equals
        """
    @priority.setter
    def priority(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None:
        ...
    @property
    def prompt(self) -> list[int]:
        ...
    @prompt.setter
    def prompt(self, arg0: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex]) -> None:
        ...
    @property
    def spec_n_max(self) -> int:
        ...
    @spec_n_max.setter
    def spec_n_max(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None:
        ...
    @property
    def spec_n_min(self) -> int:
        ...
    @spec_n_min.setter
    def spec_n_min(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None:
        ...
    @property
    def spec_p_min(self) -> float:
        ...
    @spec_p_min.setter
    def spec_p_min(self, arg0: typing.SupportsFloat | typing.SupportsIndex) -> None:
        ...
    @property
    def special(self) -> bool:
        """
        write every special token out as text (-sp)
        """
    @special.setter
    def special(self, arg0: bool) -> None:
        ...
    @property
    def stop(self) -> list[str]:
        ...
    @stop.setter
    def stop(self, arg0: collections.abc.Sequence[str]) -> None:
        ...
    @property
    def t_max_predict_ms(self) -> int:
        ...
    @t_max_predict_ms.setter
    def t_max_predict_ms(self, arg0: typing.SupportsInt | typing.SupportsIndex) -> None:
        ...
class Event:
    """
    token, final or error: the closed set a task produces.
    """
    def __repr__(self) -> str:
        ...
    @property
    def done(self) -> bool:
        ...
    @property
    def embedding(self) -> list[float]:
        ...
    @property
    def error_kind(self) -> str:
        ...
    @property
    def id_slot(self) -> int:
        ...
    @property
    def index(self) -> int:
        ...
    @property
    def logprob(self) -> float:
        ...
    @property
    def message(self) -> str:
        ...
    @property
    def n_cached(self) -> int:
        ...
    @property
    def n_draft(self) -> int:
        ...
    @property
    def n_draft_accepted(self) -> int:
        ...
    @property
    def n_embd_rows(self) -> int:
        ...
    @property
    def n_predicted(self) -> int:
        ...
    @property
    def n_processed(self) -> int:
        ...
    @property
    def n_prompt(self) -> int:
        ...
    @property
    def n_shared(self) -> int:
        ...
    @property
    def stop(self) -> str:
        ...
    @property
    def stopping_word(self) -> str:
        ...
    @property
    def t_predicted_ms(self) -> float:
        ...
    @property
    def t_prompt_ms(self) -> float:
        ...
    @property
    def text(self) -> bytes:
        """
        UTF-8 bytes; whole characters except where the model produced invalid UTF-8
        """
    @property
    def token(self) -> int:
        ...
    @property
    def top(self) -> list:
        ...
    @property
    def truncated(self) -> bool:
        ...
    @property
    def type(self) -> str:
        ...
class Engine:
    """
    Continuous batching over n_parallel slots on a C++ thread.
    """
    def __init__(self, model: Model, *, n_parallel: typing.SupportsInt | typing.SupportsIndex = 1, n_ctx: typing.SupportsInt | typing.SupportsIndex = 4096, n_batch: typing.SupportsInt | typing.SupportsIndex = 2048, n_ubatch: typing.SupportsInt | typing.SupportsIndex = 512, n_threads: typing.SupportsInt | typing.SupportsIndex = -1, n_threads_batch: typing.SupportsInt | typing.SupportsIndex = -1, flash_attn: typing.SupportsInt | typing.SupportsIndex = -1, embeddings: bool = False, pooling: typing.SupportsInt | typing.SupportsIndex = -1, type_k: str = 'f16', type_v: str = 'f16', kv_unified: bool = False, max_queue: typing.SupportsInt | typing.SupportsIndex = 256, slot_prompt_similarity: typing.SupportsFloat | typing.SupportsIndex = 0.10000000149011612, context_shift: bool = False, n_keep: typing.SupportsInt | typing.SupportsIndex = 0, lora: collections.abc.Sequence[tuple[str, typing.SupportsFloat | typing.SupportsIndex]] = [], draft_model: Model = None, spec_n_max: typing.SupportsInt | typing.SupportsIndex = 3, spec_n_min: typing.SupportsInt | typing.SupportsIndex = 0, spec_p_min: typing.SupportsFloat | typing.SupportsIndex = 0.0, spec_synth_probs: collections.abc.Sequence[typing.SupportsFloat | typing.SupportsIndex] = [], cache_ram_mib: typing.SupportsInt | typing.SupportsIndex = 0, cache_idle_slots: bool = True, verbose: bool = False, projector: Projector = None, offload_kqv: bool = True, op_offload: bool = True, swa_full: bool = True, rope_scaling_type: typing.SupportsInt | typing.SupportsIndex = -1, rope_freq_base: typing.SupportsFloat | typing.SupportsIndex = 0.0, rope_freq_scale: typing.SupportsFloat | typing.SupportsIndex = 0.0, yarn_ext_factor: typing.SupportsFloat | typing.SupportsIndex = -1.0, yarn_attn_factor: typing.SupportsFloat | typing.SupportsIndex = -1.0, yarn_beta_fast: typing.SupportsFloat | typing.SupportsIndex = -1.0, yarn_beta_slow: typing.SupportsFloat | typing.SupportsIndex = -1.0, yarn_orig_ctx: typing.SupportsInt | typing.SupportsIndex = 0, cpu: CpuParams = ..., cpu_batch: CpuParams | None = None, control_vectors: collections.abc.Sequence[tuple[str, typing.SupportsFloat | typing.SupportsIndex]] = [], control_vector_layers: tuple[typing.SupportsInt | typing.SupportsIndex, typing.SupportsInt | typing.SupportsIndex] = (0, 0), warmup: bool = True, draft_threads: typing.SupportsInt | typing.SupportsIndex = -1, draft_threads_batch: typing.SupportsInt | typing.SupportsIndex = -1, draft_cpu: CpuParams | None = None, draft_cpu_batch: CpuParams | None = None, draft_type_k: str = '', draft_type_v: str = '', perf: bool = False, n_ctx_slot_max: typing.SupportsInt | typing.SupportsIndex = 0, ngram: NgramSpec | None = None, share_prefix: bool = True, share_min: typing.SupportsInt | typing.SupportsIndex = 32, cont_batching: bool = True, n_ctx_checkpoints: typing.SupportsInt | typing.SupportsIndex = 32, checkpoint_min_step: typing.SupportsInt | typing.SupportsIndex = 8192, draft_backend_sampling: bool = False, graph_greedy: bool = True, embd_step_tokens: typing.SupportsInt | typing.SupportsIndex = -1) -> None:
        """
        Context options follow llama.cpp's (rope_scaling_type -1: the model's; yarn_* -1: the model's); cpu/cpu_batch place the compute threads; control_vectors: (path, scale) added to control_vector_layers (0: first/last); warmup decodes BOS+EOS once at start; share_prefix: a prompt prefix another slot holds or is evaluating (at least share_min tokens more than the slot's own cache) is copied from it instead of evaluated again; draft_backend_sampling: the draft model's top-10 pick runs inside its graph; graph_greedy: with 8 slots or more, greedy tasks pick in the graph on the CPU backend (the host's token) without backend_sampling too; embd_step_tokens: an embedding step takes more inputs only while it holds at most this many tokens (0: up to n_batch; -1: n_embd/2 for an encoder, else 0; an input alone still goes whole).
        """
    def cancel(self, task_id: typing.SupportsInt | typing.SupportsIndex) -> None:
        ...
    def control(self, cmpl_id: str, action: str) -> tuple[bool, str]:
        """
        Act on a running completion ('reasoning_end'): (success, why not).
        """
    def erase_slot(self, slot_id: typing.SupportsInt | typing.SupportsIndex) -> None:
        ...
    def lora_scales(self) -> list[float]:
        ...
    def metrics(self) -> dict:
        ...
    def restore_slot(self, slot_id: typing.SupportsInt | typing.SupportsIndex, path: str) -> int:
        ...
    def save_slot(self, slot_id: typing.SupportsInt | typing.SupportsIndex, path: str) -> int:
        ...
    def set_lora_scales(self, scales: collections.abc.Sequence[typing.SupportsFloat | typing.SupportsIndex]) -> None:
        ...
    def set_notify_socket(self, handle: typing.SupportsInt | typing.SupportsIndex) -> None:
        """
        Send one byte on (a duplicate of) this connected socket when events are ready; -1 stops. Empty the socket before each take_ready.
        """
    def slots(self) -> list:
        ...
    def stop(self) -> None:
        ...
    def submit(self, params: TaskParams) -> int:
        ...
    def submit_many(self, params: collections.abc.Sequence[TaskParams]) -> list[int]:
        """
        Submit tasks together: all or none admitted; their prompts share the first batch.
        """
    def take_ready(self) -> list[tuple[int, list[Event]]]:
        """
        Drain events of every task that has some: [(task_id, [Event])].
        """
    def wait(self, task_id: typing.SupportsInt | typing.SupportsIndex, timeout_ms: typing.SupportsInt | typing.SupportsIndex = -1) -> list[Event]:
        """
        Block until task_id has events; returns them.
        """
    @property
    def lora_paths(self) -> list[str]:
        ...
    @property
    def model(self) -> Model:
        ...
    @property
    def n_ctx_slot(self) -> int:
        ...
    @property
    def n_parallel(self) -> int:
        ...
    @property
    def pooling(self) -> int:
        """
        The pooling in effect (llama_pooling_type: 0 none, 1 mean, 2 cls, 3 last, 4 rank).
        """
    @property
    def projector(self) -> Projector:
        ...
    @property
    def serves_completions(self) -> bool:
        """
        Completions too: no embeddings, or a model with a KV cache (--embedding on a generative model).
        """
    @property
    def serves_embeddings(self) -> bool:
        ...
    @property
    def warmup_ms(self) -> float:
        """
        How long the start-up warm-up took (-1: none ran).
        """
class ChatTemplates:
    """
    A model's chat templates in llama.cpp's Jinja engine, with llama-server's options.
    """
    def __init__(self, model: Model, template: str = '', *, use_jinja: bool = True, prefill_assistant: bool = True, reasoning_format: str = 'auto', template_kwargs: collections.abc.Mapping[str, str] = {}, allow_image: bool = False, allow_audio: bool = False, allow_video: bool = False, reasoning: str = 'auto', reasoning_budget: typing.SupportsInt | typing.SupportsIndex = -1, reasoning_budget_message: str = '', force_pure_content: bool = False) -> None:
        """
        `template`: a template text or built-in name ('' : the model's own, else chatml); `template_kwargs`: name -> JSON text. RuntimeError when the template does not parse.
        """
    def chat_params(self, body: str) -> str:
        """
        llama-server's oaicompat_chat_params_parse: an OpenAI chat body (JSON text) to its task parameters (JSON text). ValueError for bad input, RuntimeError when the template fails.
        """
    def example(self) -> str:
        ...
    def source(self, variant: str = '') -> str:
        """
        The template text ('tool_use': the tool-use variant, '' when there is none).
        """
    @property
    def caps(self) -> dict[str, bool]:
        """
        llama.cpp's chat_template_caps
        """
    @property
    def enable_thinking(self) -> bool:
        """
        enable_thinking for a request that does not set it
        """
    @property
    def supports_thinking(self) -> bool:
        ...
    @property
    def use_jinja(self) -> bool:
        ...
    @property
    def was_explicit(self) -> bool:
        ...
class ChatReader:
    """
    A reply parsed as it streams (llama-server's task_result_state).
    """
    def __init__(self, params: str, stream: bool, reasoning_format: str = 'auto') -> None:
        ...
    def update(self, text: str, partial: bool) -> str:
        """
        Add text; JSON {message, diffs, unparsed}. The last call has partial False.
        """
def _argmax(row: typing.Annotated[numpy.typing.ArrayLike, numpy.float32], kernel: str = 'best') -> int:
    """
    The engine's greedy argmax of a float32 row with one kernel (first maximum, NaN never wins, -1 when all are -inf); for tests.
    """
def backends() -> list:
    """
    The backend modules loaded at import: name, CPU variant, file and score.
    """
def buffer_type_names() -> list[str]:
    """
    Buffer types a tensor override may name: each loaded device's own (CPU, CUDA0 ...).
    """
def build_info() -> str:
    ...
def build_sampler_chain(model: Model, params: SamplingParams, n_ctx: typing.SupportsInt | typing.SupportsIndex) -> Sampler:
    """
    The chain llama-server would build for params (grammar first, then its stage order).
    """
def chat_anthropic_to_openai(body: str) -> str:
    """
    llama-server's Anthropic Messages body to an OpenAI chat body (JSON text both ways).
    """
def chat_apply_builtin(template: str, messages: collections.abc.Sequence[tuple[str, str]], add_assistant: bool = True) -> str:
    """
    Format (role, content) pairs with one of llama.cpp's built-in templates, by name or detected from a template's text (ValueError when none matches).
    """
def chat_builtin_templates() -> list[str]:
    ...
def chat_media_marker() -> str:
    """
    llama-server's media marker, random per process ('<__media_...__>'; LLAMA_MEDIA_MARKER pins it): what a media_marker part of a chat renders as.
    """
def chat_responses_to_openai(body: str) -> str:
    """
    llama-server's OpenAI Responses body to an OpenAI chat body (JSON text both ways).
    """
def chat_sampling(model: Model, params: str) -> tuple[list[int], list[str], list[int]]:
    """
    (preserved tokens, trigger patterns, trigger tokens) of a chat's task parameters, as llama-server resolves them against the vocabulary.
    """
def default_media_marker() -> str:
    """
    The text that stands for one image or audio file in a prompt: '<__media__>'.
    """
def devices() -> list:
    """
    Every device of the loaded backends: name, description, type, backend, memory.
    """
def fit_params(path: str, *, n_gpu_layers: typing.SupportsInt | typing.SupportsIndex = -1, devices: collections.abc.Sequence[str] = [], split_mode: str = 'layer', main_gpu: typing.SupportsInt | typing.SupportsIndex = 0, tensor_split: collections.abc.Sequence[typing.SupportsFloat | typing.SupportsIndex] = [], tensor_overrides: collections.abc.Sequence[tuple[str, str]] = [], kv_overrides: collections.abc.Sequence[str] = [], n_ctx: typing.SupportsInt | typing.SupportsIndex = 0, n_parallel: typing.SupportsInt | typing.SupportsIndex = 1, n_batch: typing.SupportsInt | typing.SupportsIndex = 2048, n_ubatch: typing.SupportsInt | typing.SupportsIndex = 512, flash_attn: typing.SupportsInt | typing.SupportsIndex = -1, type_k: str = 'f16', type_v: str = 'f16', kv_unified: bool = True, swa_full: bool = True, offload_kqv: bool = True, margins_mib: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex] = [1024], n_ctx_min: typing.SupportsInt | typing.SupportsIndex = 4096, embeddings: bool = False, speculative: bool = False, repack: bool = True, no_host: bool = False, load_mode: str = '', lazy_mode: str = 'auto', op_offload: bool = True) -> dict:
    """
    llama-server's --fit: the GPU layers, context size, tensor split and tensor overrides (only those left at their defaults change) that fit the devices' free memory, leaving margins_mib free; status 0 fits, 1 nothing projected to fit, 2 error. It sizes the Engine's context: embeddings and speculative (a draft model or n-gram drafts) as it will be built.
    """
def get_log_level() -> int:
    ...
def json_schema_to_grammar(schema: str) -> str:
    """
    Convert a JSON schema (JSON text) to GBNF with llama.cpp's converter.
    """
def load_plugin(dir: str) -> list:
    """
    Load a backend plugin's module from its folder; returns the backends it added. RuntimeError with the reason when it cannot load.
    """
def max_devices() -> int:
    ...
def module_dir() -> str:
    """
    The folder _core was loaded from.
    """
def numa_init(strategy: str) -> None:
    """
    ggml's NUMA strategy (distribute, isolate, numactl), once, before a model loads.
    """
def projector_caps(path: str) -> tuple[bool, bool]:
    """
    (vision, audio) of a projector file, read from its header without loading it.
    """
def rpc_add_server(endpoint: str) -> list[str]:
    """
    Add the devices of the rpc-server at host:port; returns their names.
    """
def rpc_serve(endpoint: str, cache_dir: str | None, n_threads: typing.SupportsInt | typing.SupportsIndex, devices: collections.abc.Sequence[str]) -> None:
    """
    Serve these devices to RPC clients at host:port (blocks; llama.cpp's rpc-server).
    """
def set_log_file(path: str) -> bool:
    """
    Also append the echoed llama.cpp lines to this file ('': stop); False if it cannot be opened.
    """
def set_log_level(level: typing.SupportsInt | typing.SupportsIndex) -> None:
    """
    Lowest ggml log level echoed to stderr: 1 debug, 2 info, 3 warn, 4 error, 5 none.
    """
def set_process_priority(priority: typing.SupportsInt | typing.SupportsIndex) -> bool:
    """
    The process's scheduling priority (-1 low, 0 normal, 1 medium, 2 high, 3 realtime); False when the system refuses.
    """
def supports_gpu_offload() -> bool:
    ...
def supports_mlock() -> bool:
    ...
def supports_mmap() -> bool:
    ...
def system_info() -> str:
    ...
def time_us() -> int:
    ...
DEFAULT_SEED: int = 4294967295
__version__: str = '0.1.0'
