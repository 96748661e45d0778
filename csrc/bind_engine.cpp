#include <pybind11/stl.h>

#include <optional>

#include "bindings.hpp"
#include "engine/engine.hpp"
#include "engine/text_stream.hpp"

namespace py = pybind11;

namespace pyllama {

using engine::Engine;
using engine::EngineParams;
using engine::Event;
using engine::TaskKind;
using engine::TaskParams;

namespace {

const char * event_type_name(Event::Type t) {
    switch (t) {
        case Event::Type::Token: return "token";
        case Event::Type::Final: return "final";
        case Event::Type::Error: return "error";
        case Event::Type::Progress: return "progress";
    }
    return "error";
}

py::dict slot_dict(const engine::SlotInfo & s) {
    py::dict d;
    d["id"] = s.id;
    d["state"] = s.state;
    d["task_id"] = s.task_id;
    d["n_ctx"] = s.n_ctx;
    d["n_past"] = s.n_past;
    d["n_prompt"] = s.n_prompt;
    d["n_decoded"] = s.n_decoded;
    d["n_cache"] = s.n_cache;
    d["last_task_id"] = s.last_task_id;
    d["n_prompt_processed"] = s.n_prompt_processed;
    d["n_prompt_cached"] = s.n_prompt_cached;
    d["has_next_token"] = s.has_next_token;
    d["has_new_line"] = s.has_new_line;
    return d;
}

py::dict metrics_dict(const engine::Metrics & m) {
    py::dict d;
    d["n_prompt_tokens_total"] = m.n_prompt_tokens_total;
    d["n_prompt_cached_total"] = m.n_prompt_cached_total;
    d["n_prompt_shared_total"] = m.n_prompt_shared_total;
    d["t_prompt_ms_total"] = m.t_prompt_ms_total;
    d["n_predicted_total"] = m.n_predicted_total;
    d["t_predicted_ms_total"] = m.t_predicted_ms_total;
    d["n_decode_total"] = m.n_decode_total;
    d["t_decode_ms_total"] = m.t_decode_ms_total;
    d["t_sample_ms_total"] = m.t_sample_ms_total;
    d["t_batch_ms_total"] = m.t_batch_ms_total;
    d["n_busy_slots_total"] = m.n_busy_slots_total;
    d["n_tasks_done"] = m.n_tasks_done;
    d["n_processing"] = m.n_processing;
    d["n_deferred"] = m.n_deferred;
    d["n_tokens_max"] = m.n_tokens_max;
    d["kv_usage"] = m.kv_usage;
    d["n_draft_tokens"] = m.n_draft_tokens;
    d["n_draft_accepted"] = m.n_draft_accepted;
    d["n_draft_steps"] = m.n_draft_steps;
    d["n_sampled_backend"] = m.n_sampled_backend;
    d["n_sampled_split"] = m.n_sampled_split;
    d["n_sampled_host"] = m.n_sampled_host;
    d["n_draft_sampled_backend"] = m.n_draft_sampled_backend;
    d["n_graph_greedy_rows"] = m.n_graph_greedy_rows;
    return d;
}

}  // namespace

void register_engine(py::module_ & m) {
    py::register_exception<engine::OverloadedError>(m, "OverloadedError", PyExc_RuntimeError);
    static py::exception<engine::ContextSizeError> & ctx_error =
        py::register_exception<engine::ContextSizeError>(m, "ContextSizeError", PyExc_ValueError);
    // Registered after: tried first. Carries the numbers llama-server's error reports.
    py::register_exception_translator([](std::exception_ptr p) {
        try {
            if (p) std::rethrow_exception(p);
        } catch (const engine::ContextSizeError & e) {
            auto type = py::reinterpret_borrow<py::object>(ctx_error.ptr());
            py::object inst = type(e.what());
            inst.attr("n_prompt_tokens") = e.n_prompt_tokens;
            inst.attr("n_ctx") = e.n_ctx_slot;
            PyErr_SetObject(ctx_error.ptr(), inst.ptr());
        }
    });

    py::class_<engine::TextStream>(m, "TextStream",
                                   "Token bytes in, safe text out: holds back partial UTF-8 and stop-string prefixes.")
        .def(py::init<std::vector<std::string>>(), py::arg("stops") = std::vector<std::string>{})
        .def("push", [](engine::TextStream & t, py::bytes piece) { return py::bytes(t.push(piece)); }, py::arg("piece"),
             "Add one token's bytes; return the bytes that can be emitted now.")
        .def("flush", [](engine::TextStream & t) { return py::bytes(t.flush()); },
             "End of generation: the held bytes, less an unfinished character.")
        .def_property_readonly("stopped", &engine::TextStream::stopped)
        .def_property_readonly("stopping_word", &engine::TextStream::stopping_word);

    py::enum_<TaskKind>(m, "TaskKind")
        .value("COMPLETION", TaskKind::Completion)
        .value("EMBEDDING", TaskKind::Embedding)
        .value("RERANK", TaskKind::Rerank);

    py::class_<ReasoningBudget>(m, "ReasoningBudget",
                                "llama-server's reasoning budget: thinking-block tags as tokens, the limit, runtime control.")
        .def(py::init<>())
        .def_readwrite("start", &ReasoningBudget::start, "the start tag's tokens")
        .def_readwrite("end", &ReasoningBudget::end, "each end tag's tokens; the first is forced")
        .def_readwrite("forced", &ReasoningBudget::forced, "tokens forced when the budget runs out (message + end tag)")
        .def_readwrite("prefill", &ReasoningBudget::prefill, "the generation prompt's tokens, accepted first")
        .def_readwrite("budget", &ReasoningBudget::budget, "tokens allowed in the block; -1: no limit")
        .def_readwrite("control", &ReasoningBudget::control, "Engine.control may end the block");

    py::class_<engine::NgramMap>(m, "NgramMap", "ngram-simple / ngram-map-k / ngram-map-k4v sizes.")
        .def(py::init<>())
        .def_readwrite("size_n", &engine::NgramMap::size_n, "the n-gram looked up (default 12)")
        .def_readwrite("size_m", &engine::NgramMap::size_m, "the m-gram drafted after it (default 48)")
        .def_readwrite("min_hits", &engine::NgramMap::min_hits, "times seen before it is drafted (default 1)");

    py::class_<engine::NgramSpec>(m, "NgramSpec",
                                  "n-gram self-speculation (llama-server's --spec-type ngram-* and sizes).")
        .def(py::init<>())
        .def_readwrite("types", &engine::NgramSpec::types,
                       "ngram-simple, ngram-map-k, ngram-map-k4v, ngram-mod, ngram-cache; the first that drafts wins")
        .def_readwrite("mod_n_match", &engine::NgramSpec::mod_n_match, "ngram-mod lookup length (default 24)")
        .def_readwrite("mod_n_min", &engine::NgramSpec::mod_n_min, "ngram-mod: shorter drafts dropped (default 48)")
        .def_readwrite("mod_n_max", &engine::NgramSpec::mod_n_max, "ngram-mod: longest draft (default 64)")
        .def_readwrite("simple", &engine::NgramSpec::simple)
        .def_readwrite("map_k", &engine::NgramSpec::map_k)
        .def_readwrite("map_k4v", &engine::NgramSpec::map_k4v)
        .def_readwrite("lookup_cache_static", &engine::NgramSpec::lookup_cache_static, "ngram-cache: static cache file")
        .def_readwrite("lookup_cache_dynamic", &engine::NgramSpec::lookup_cache_dynamic,
                       "ngram-cache: dynamic cache file (read, never written)");

    py::class_<TaskParams>(m, "TaskParams", "One request for the engine: tokens in, events out.")
        .def(py::init<>())
        .def_readwrite("kind", &TaskParams::kind)
        .def_readwrite("prompt", &TaskParams::prompt)
        .def_readwrite("sampling", &TaskParams::sampling)
        .def_readwrite("n_predict", &TaskParams::n_predict)
        .def_readwrite("stop", &TaskParams::stop)
        .def_readwrite("preserved_tokens", &TaskParams::preserved_tokens)
        .def_readwrite("special", &TaskParams::special, "write every special token out as text (-sp)")
        .def_readwrite("return_progress", &TaskParams::return_progress)
        .def_readwrite("t_max_predict_ms", &TaskParams::t_max_predict_ms)
        .def_readwrite("n_probs", &TaskParams::n_probs)
        .def_readwrite("post_sampling_probs", &TaskParams::post_sampling_probs)
        .def_readwrite("cache_prompt", &TaskParams::cache_prompt)
        .def_readwrite("n_cmpl", &TaskParams::n_cmpl)
        .def_readwrite("id_slot", &TaskParams::id_slot)
        .def_readwrite("priority", &TaskParams::priority,
                       "admission order among waiting tasks: lower first, FIFO among equals")
        .def_readwrite("embd_normalize", &TaskParams::embd_normalize)
        .def_readwrite("lora_scales", &TaskParams::lora_scales)
        .def_readwrite("n_cache_reuse", &TaskParams::n_cache_reuse)
        .def_readwrite("n_keep", &TaskParams::n_keep,
                       "context shift: prompt tokens kept; -1 the whole prompt, -2 the engine's")
        .def_readwrite("n_discard", &TaskParams::n_discard,
                       "context shift: tokens dropped after n_keep; 0 half of what follows")
        .def_readwrite("spec_n_max", &TaskParams::spec_n_max)
        .def_readwrite("spec_n_min", &TaskParams::spec_n_min)
        .def_readwrite("spec_p_min", &TaskParams::spec_p_min)
        .def_readwrite("cmpl_id", &TaskParams::cmpl_id, "the completion id clients see (Engine.control)")
        .def_readwrite("reasoning", &TaskParams::reasoning)
        .def_readwrite("media", &TaskParams::media, "media chunks over the prompt's placeholders (Projector.tokenize)")
        .def(
            "set_prompt",
            [](TaskParams & t, const MediaPrompt & mp) {
                t.prompt = mp.tokens;
                t.media = mp.media;
            },
            py::arg("prompt"), "Take a MediaPrompt's tokens and media.");

    py::class_<Event>(m, "Event", "token, final or error: the closed set a task produces.")
        .def_property_readonly("type", [](const Event & e) { return event_type_name(e.type); })
        .def_readonly("index", &Event::index)
        .def_readonly("done", &Event::done)
        .def_readonly("id_slot", &Event::id_slot)
        .def_readonly("token", &Event::token)
        .def_property_readonly("text", [](const Event & e) { return py::bytes(e.text); },
                               "UTF-8 bytes; whole characters except where the model produced invalid UTF-8")
        .def_readonly("logprob", &Event::logprob)
        .def_property_readonly("top", [](const Event & e) {
            py::list out;
            for (const auto & t : e.top) out.append(py::make_tuple(t.id, t.logprob));
            return out;
        })
        .def_property_readonly("stop", [](const Event & e) { return engine::stop_reason_name(e.stop); })
        .def_readonly("stopping_word", &Event::stopping_word)
        .def_readonly("n_prompt", &Event::n_prompt)
        .def_readonly("n_cached", &Event::n_cached)
        .def_readonly("n_shared", &Event::n_shared)
        .def_readonly("n_processed", &Event::n_processed)
        .def_readonly("n_predicted", &Event::n_predicted)
        .def_readonly("t_prompt_ms", &Event::t_prompt_ms)
        .def_readonly("t_predicted_ms", &Event::t_predicted_ms)
        .def_readonly("truncated", &Event::truncated)
        .def_readonly("n_draft", &Event::n_draft)
        .def_readonly("n_draft_accepted", &Event::n_draft_accepted)
        .def_readonly("embedding", &Event::embedding)
        .def_readonly("n_embd_rows", &Event::n_embd_rows)
        .def_readonly("error_kind", &Event::error_kind)
        .def_readonly("message", &Event::message)
        .def("__repr__", [](const Event & e) {
            return std::string("<Event ") + event_type_name(e.type) + " index=" + std::to_string(e.index) +
                   " token=" + std::to_string(e.token) + (e.done ? " done" : "") + ">";
        });

    py::class_<Engine>(m, "Engine", "Continuous batching over n_parallel slots on a C++ thread.")
        .def(py::init([](std::shared_ptr<Model> model, int32_t n_parallel, uint32_t n_ctx, uint32_t n_batch,
                         uint32_t n_ubatch, int32_t n_threads, int32_t n_threads_batch, int32_t flash_attn,
                         bool embeddings, int32_t pooling, const std::string & type_k, const std::string & type_v,
                         bool kv_unified, int32_t max_queue, float slot_prompt_similarity, bool context_shift,
                         int32_t n_keep, std::vector<std::pair<std::string, float>> lora,
                         std::shared_ptr<Model> draft_model, int32_t spec_n_max, int32_t spec_n_min,
                         float spec_p_min, std::vector<double> spec_synth_probs, int64_t cache_ram_mib,
                         bool cache_idle_slots, bool verbose, std::shared_ptr<Projector> projector,
                         bool offload_kqv, bool op_offload, bool swa_full, int32_t rope_scaling_type,
                         float rope_freq_base, float rope_freq_scale, float yarn_ext_factor,
                         float yarn_attn_factor, float yarn_beta_fast, float yarn_beta_slow, uint32_t yarn_orig_ctx,
                         const CpuParams & cpu, std::optional<CpuParams> cpu_batch,
                         std::vector<std::pair<std::string, float>> control_vectors,
                         std::pair<int32_t, int32_t> control_vector_layers, bool warmup, int32_t draft_threads,
                         int32_t draft_threads_batch, std::optional<CpuParams> draft_cpu,
                         std::optional<CpuParams> draft_cpu_batch, std::string draft_type_k,
                         std::string draft_type_v, bool perf, int32_t n_ctx_slot_max,
                         std::optional<engine::NgramSpec> ngram, bool share_prefix, int32_t share_min,
                         bool cont_batching, int32_t n_ctx_checkpoints, int32_t checkpoint_min_step,
                         bool draft_backend_sampling, bool graph_greedy, int32_t embd_step_tokens) {
                 if (!model) throw std::invalid_argument("model is None");
                 EngineParams p;
                 p.ctx.n_ctx = n_ctx;
                 p.ctx.n_batch = n_batch;
                 p.ctx.n_ubatch = n_ubatch;
                 p.ctx.n_threads = n_threads;
                 p.ctx.n_threads_batch = n_threads_batch;
                 p.ctx.flash_attn = flash_attn;
                 p.ctx.embeddings = embeddings;
                 p.ctx.pooling = pooling;
                 p.ctx.type_k = type_k;
                 p.ctx.type_v = type_v;
                 p.ctx.kv_unified = kv_unified;
                 p.n_parallel = n_parallel;
                 p.max_queue = max_queue;
                 p.slot_prompt_similarity = slot_prompt_similarity;
                 p.context_shift = context_shift;
                 p.n_keep = n_keep;
                 p.lora = std::move(lora);
                 p.draft = std::move(draft_model);
                 p.spec_n_max = spec_n_max;
                 p.spec_n_min = spec_n_min;
                 p.spec_p_min = spec_p_min;
                 p.spec_synth_probs = std::move(spec_synth_probs);
                 p.cache_ram_mib = cache_ram_mib;
                 p.cache_idle_slots = cache_idle_slots;
                 p.verbose = verbose;
                 p.projector = std::move(projector);
                 p.ctx.offload_kqv = offload_kqv;
                 p.ctx.op_offload = op_offload;
                 p.ctx.no_perf = !perf;
                 p.n_ctx_slot_max = n_ctx_slot_max;
                 p.ctx.swa_full = swa_full;
                 p.ctx.rope_scaling_type = rope_scaling_type;
                 p.ctx.rope_freq_base = rope_freq_base;
                 p.ctx.rope_freq_scale = rope_freq_scale;
                 p.ctx.yarn_ext_factor = yarn_ext_factor;
                 p.ctx.yarn_attn_factor = yarn_attn_factor;
                 p.ctx.yarn_beta_fast = yarn_beta_fast;
                 p.ctx.yarn_beta_slow = yarn_beta_slow;
                 p.ctx.yarn_orig_ctx = yarn_orig_ctx;
                 p.ctx.cpu = cpu;
                 p.ctx.cpu_batch = cpu_batch.value_or(cpu);  // llama-server: same as --cpu-* unless given
                 for (auto & [path, scale] : control_vectors) p.control_vectors.push_back({path, scale});
                 p.control_vector_start = control_vector_layers.first;
                 p.control_vector_end = control_vector_layers.second;
                 p.warmup = warmup;
                 p.draft_threads = draft_threads;
                 p.draft_threads_batch = draft_threads_batch;
                 p.draft_cpu = std::move(draft_cpu);
                 p.draft_cpu_batch = std::move(draft_cpu_batch);
                 p.draft_type_k = std::move(draft_type_k);
                 p.draft_type_v = std::move(draft_type_v);
                 if (ngram) p.ngram = std::move(*ngram);
                 if (share_min < 1) throw std::invalid_argument("share_min must be >= 1");
                 p.share_prefix = share_prefix;
                 p.share_min = share_min;
                 p.cont_batching = cont_batching;
                 p.n_ctx_checkpoints = n_ctx_checkpoints;
                 p.checkpoint_min_step = checkpoint_min_step;
                 p.draft_backend_sampling = draft_backend_sampling;
                 p.graph_greedy = graph_greedy;
                 if (embd_step_tokens < -1) throw std::invalid_argument("embd_step_tokens must be >= -1");
                 p.embd_step_tokens = embd_step_tokens;
                 // Context allocation and adapter loading take time: release the GIL.
                 py::gil_scoped_release release;
                 return std::make_unique<Engine>(std::move(model), p);
             }),
             py::arg("model"), py::kw_only(), py::arg("n_parallel") = 1, py::arg("n_ctx") = 4096,
             py::arg("n_batch") = 2048, py::arg("n_ubatch") = 512, py::arg("n_threads") = -1,
             py::arg("n_threads_batch") = -1, py::arg("flash_attn") = -1, py::arg("embeddings") = false,
             py::arg("pooling") = -1, py::arg("type_k") = "f16", py::arg("type_v") = "f16",
             py::arg("kv_unified") = false, py::arg("max_queue") = 256, py::arg("slot_prompt_similarity") = 0.1f,
             py::arg("context_shift") = false, py::arg("n_keep") = 0,
             py::arg("lora") = std::vector<std::pair<std::string, float>>{},
             py::arg("draft_model") = std::shared_ptr<Model>{}, py::arg("spec_n_max") = 3,
             py::arg("spec_n_min") = 0, py::arg("spec_p_min") = 0.0f,
             py::arg("spec_synth_probs") = std::vector<double>{}, py::arg("cache_ram_mib") = 0,
             py::arg("cache_idle_slots") = true, py::arg("verbose") = false,
             py::arg("projector") = std::shared_ptr<Projector>{}, py::arg("offload_kqv") = true,
             py::arg("op_offload") = true, py::arg("swa_full") = true, py::arg("rope_scaling_type") = -1,
             py::arg("rope_freq_base") = 0.0f, py::arg("rope_freq_scale") = 0.0f, py::arg("yarn_ext_factor") = -1.0f,
             py::arg("yarn_attn_factor") = -1.0f, py::arg("yarn_beta_fast") = -1.0f,
             py::arg("yarn_beta_slow") = -1.0f, py::arg("yarn_orig_ctx") = 0u, py::arg("cpu") = CpuParams{},
             py::arg("cpu_batch") = std::optional<CpuParams>{},
             py::arg("control_vectors") = std::vector<std::pair<std::string, float>>{},
             py::arg("control_vector_layers") = std::pair<int32_t, int32_t>{0, 0}, py::arg("warmup") = true,
             py::arg("draft_threads") = -1, py::arg("draft_threads_batch") = -1,
             py::arg("draft_cpu") = std::optional<CpuParams>{}, py::arg("draft_cpu_batch") = std::optional<CpuParams>{},
             py::arg("draft_type_k") = "", py::arg("draft_type_v") = "", py::arg("perf") = false, py::arg("n_ctx_slot_max") = 0,
             py::arg("ngram") = std::optional<engine::NgramSpec>{}, py::arg("share_prefix") = true,
             py::arg("share_min") = 32, py::arg("cont_batching") = true,
             py::arg("n_ctx_checkpoints") = 32, py::arg("checkpoint_min_step") = 8192,
             py::arg("draft_backend_sampling") = false, py::arg("graph_greedy") = true,
             py::arg("embd_step_tokens") = -1,
             "Context options follow llama.cpp's (rope_scaling_type -1: the model's; yarn_* -1: the "
             "model's); cpu/cpu_batch place the compute threads; control_vectors: (path, scale) "
             "added to control_vector_layers (0: first/last); warmup decodes BOS+EOS once at start; "
             "share_prefix: a prompt prefix another slot holds or is evaluating (at least share_min "
             "tokens more than the slot's own cache) is copied from it instead of evaluated again; "
             "draft_backend_sampling: the draft model's top-10 pick runs inside its graph; "
             "graph_greedy: with 8 slots or more, greedy tasks pick in the graph on the CPU backend "
             "(the host's token) without backend_sampling too; embd_step_tokens: an embedding step "
             "takes more inputs only while it holds at most this many tokens (0: up to n_batch; -1: "
             "n_embd/2 for an encoder, else 0; an input alone still goes whole).")
        // submit copies the TaskParams into C++ first; building the sampler chains
        // (grammar parsing) then runs without the GIL.
        .def("submit", [](Engine & e, TaskParams p) { return e.submit(std::move(p)); }, py::arg("params"),
             py::call_guard<py::gil_scoped_release>())
        .def("submit_many", [](Engine & e, std::vector<TaskParams> ps) { return e.submit_many(std::move(ps)); },
             py::arg("params"), py::call_guard<py::gil_scoped_release>(),
             "Submit tasks together: all or none admitted; their prompts share the first batch.")
        .def("cancel", &Engine::cancel, py::arg("task_id"), py::call_guard<py::gil_scoped_release>())
        .def("take_ready", &Engine::take_ready, "Drain events of every task that has some: [(task_id, [Event])].")
        .def("wait", &Engine::wait, py::arg("task_id"), py::arg("timeout_ms") = -1,
             py::call_guard<py::gil_scoped_release>(), "Block until task_id has events; returns them.")
        .def("set_notify_socket", &Engine::set_notify_socket, py::arg("handle"),
             "Send one byte on (a duplicate of) this connected socket when events are ready; "
             "-1 stops. Empty the socket before each take_ready.")
        .def_property_readonly("n_ctx_slot", &Engine::n_ctx_slot)
        .def_property_readonly("n_parallel", &Engine::n_parallel)
        .def_property_readonly("model", &Engine::model)
        .def_property_readonly("projector", &Engine::projector)
        .def_property_readonly("lora_paths", &Engine::lora_paths)
        .def("lora_scales", &Engine::lora_scales, py::call_guard<py::gil_scoped_release>())
        .def_property_readonly("serves_completions", &Engine::serves_completions,
                               "Completions too: no embeddings, or a model with a KV cache (--embedding on a generative model).")
        .def_property_readonly("serves_embeddings", &Engine::serves_embeddings)
        .def_property_readonly("pooling", &Engine::pooling,
                               "The pooling in effect (llama_pooling_type: 0 none, 1 mean, 2 cls, 3 last, 4 rank).")
        .def_property_readonly("warmup_ms", &Engine::warmup_ms, "How long the start-up warm-up took (-1: none ran).")
        .def("set_lora_scales", &Engine::set_lora_scales, py::arg("scales"), py::call_guard<py::gil_scoped_release>())
        .def("slots", [](const Engine & e) {
            py::list out;
            for (const auto & s : e.slots()) out.append(slot_dict(s));
            return out;
        })
        .def("metrics", [](const Engine & e) { return metrics_dict(e.metrics()); })
        .def("save_slot", &Engine::save_slot, py::arg("slot_id"), py::arg("path"), py::call_guard<py::gil_scoped_release>())
        .def("restore_slot", &Engine::restore_slot, py::arg("slot_id"), py::arg("path"),
             py::call_guard<py::gil_scoped_release>())
        .def("erase_slot", &Engine::erase_slot, py::arg("slot_id"), py::call_guard<py::gil_scoped_release>())
        .def("control", &Engine::control, py::arg("cmpl_id"), py::arg("action"), py::call_guard<py::gil_scoped_release>(),
             "Act on a running completion ('reasoning_end'): (success, why not).")
        .def("stop", &Engine::stop, py::call_guard<py::gil_scoped_release>());
}

}  // namespace pyllama
