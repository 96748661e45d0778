#include "engine/graph_greedy.hpp"

#include <atomic>
#include <cmath>
#include <deque>
#include <utility>
#include <vector>

#include "ggml-backend.h"
#include "ggml.h"

namespace pyllama::engine {

namespace {

// One graph's picks: for each of the node's outputs, the unpadded logits row and the bias of
// the stage that asked for it. Written on the engine's loop thread while llama.cpp builds
// the graph, read by ggml's compute threads when it runs (started after: no lock). The biases
// are the stages' own: a stage is freed only after llama_set_sampler let go of it, and a
// change of samplers makes llama.cpp build a new graph (and a new plan) before it computes.
struct Pick {
    int64_t row;
    const SparseBias * bias;
    // the sequence's output (a view of the node): ggml flags it for computation only where
    // the sequence has a row in this batch; an idle one's stage is pointed at row 0
    const ggml_tensor * out;
};

struct Plan {
    std::vector<Pick> picks;
    std::atomic<uint64_t> * rows = nullptr;
};

// a graph is reused (computed again, not rebuilt) only while nothing changed since it was
// built, but reserve graphs (built, never computed) may come in between: keep a few
constexpr size_t kPlansKept = 8;

}  // namespace

struct GraphGreedy::Shared {
    int32_t n_seq_max = 1;
    std::atomic<uint64_t> rows{0};
    // the graph being built's node; cleared by every stage's backend_reset, which llama.cpp
    // calls on each sampler before it applies any of them to a new graph
    ggml_tensor * node = nullptr;
    std::deque<std::unique_ptr<Plan>> plans;
};

namespace {

struct GreedyStage {
    SparseBias bias;
    GraphGreedy::Shared * shared = nullptr;
    bool cpu = false;       // the logits live on the CPU backend: pyllama's kernel runs there
    bool accepted = false;  // backend_init said yes
};

GreedyStage * state(const llama_sampler * smpl) { return static_cast<GreedyStage *>(smpl->ctx); }

const char * stage_name(const llama_sampler *) { return "pyllama-greedy"; }

// The host pick over candidates, the same rule as the graph's (used only where the graph
// did not pick: llama.cpp then hands the candidates to the chain)
void stage_apply(llama_sampler * smpl, llama_token_data_array * cur) {
    const SparseBias & bias = state(smpl)->bias;
    int64_t best = -1;
    float best_v = -INFINITY;
    for (size_t i = 0; i < cur->size; ++i) {
        const float v = cur->data[i].logit + bias.at(cur->data[i].id);
        if (v > best_v) {
            best_v = v;
            best = static_cast<int64_t>(i);
        }
    }
    cur->selected = best;
}

llama_sampler * make_stage(const SparseBias & bias, GraphGreedy::Shared * shared);

llama_sampler * stage_clone(const llama_sampler * smpl) { return make_stage(state(smpl)->bias, state(smpl)->shared); }

void stage_free(llama_sampler * smpl) { delete state(smpl); }

bool stage_backend_init(llama_sampler * smpl, ggml_backend_buffer_type_t buft, uint32_t) {
    GreedyStage * st = state(smpl);
    ggml_backend_dev_t dev = ggml_backend_buft_get_device(buft);
    // the CPU's own buffer type names no device (as llama.cpp's backend-support check knows)
    st->cpu = dev ? ggml_backend_dev_type(dev) == GGML_BACKEND_DEVICE_TYPE_CPU : ggml_backend_buft_is_host(buft);
    // elsewhere ggml_argmax takes no bias: then the host picks
    st->accepted = st->cpu || st->bias.empty();
    return st->accepted;
}

void stage_backend_reset(llama_sampler * smpl) { state(smpl)->shared->node = nullptr; }

// The row of the unpadded logits that `view` shows, and those logits; -1 unless `view` is a
// whole row of llama.cpp's sampling input, pad(logits, 0, 1, 0, 0), other than its zero row.
int64_t unpadded_row(const ggml_tensor * view, ggml_tensor ** logits) {
    const ggml_tensor * pad = view->view_src;
    if (!pad || pad->op != GGML_OP_PAD || view->type != GGML_TYPE_F32) return -1;
    ggml_tensor * src = pad->src[0];
    const int32_t * pp = reinterpret_cast<const int32_t *>(pad->op_params);
    const bool one_row = pp[0] == 0 && pp[1] == 0 && pp[2] == 0 && pp[3] == 1 && pp[4] == 0 && pp[5] == 0 &&
                         pp[6] == 0 && pp[7] == 0 && pp[8] == 0;
    if (!src || !one_row || src->type != GGML_TYPE_F32 || !ggml_is_contiguous(src) || !ggml_is_contiguous(pad)) {
        return -1;
    }
    if (ggml_nelements(view) != src->ne[0] || view->view_offs % pad->nb[1] != 0) return -1;
    const auto row = static_cast<int64_t>(view->view_offs / pad->nb[1]);
    if (row >= src->ne[1]) return -1;
    *logits = src;
    return row;
}

// GGML_OP_CUSTOM on all of ggml's threads, each taking every nth pick (last rows first: the
// output projection wrote them last)
void pick_rows(ggml_tensor * dst, int ith, int nth, void * userdata) {
    const auto & plan = *static_cast<const Plan *>(userdata);
    const ggml_tensor * src = dst->src[0];
    const auto n = static_cast<int64_t>(plan.picks.size());
    const auto n_vocab = static_cast<int32_t>(src->ne[0]);
    auto * out = static_cast<int32_t *>(dst->data);
    uint64_t picked = 0;
    for (int64_t j = ith; j < n; j += nth) {
        const int64_t k = n - 1 - j;
        const Pick & p = plan.picks[static_cast<size_t>(k)];
        if (!(p.out->flags & GGML_TENSOR_FLAG_COMPUTE)) continue;
        const auto * l = reinterpret_cast<const float *>(static_cast<const char *>(src->data) + p.row * src->nb[1]);
        out[k] = biased_argmax(l, n_vocab, *p.bias);
        ++picked;
    }
    plan.rows->fetch_add(picked, std::memory_order_relaxed);
}

// One sequence's pick on one thread, from whatever tensor it was given (llama.cpp's probe
// graphs, or a graph that is not shaped as pick_rows expects).
void pick_one(ggml_tensor * dst, int ith, int, void * userdata) {
    if (ith != 0) return;
    const ggml_tensor * row = dst->src[0];
    const auto n = static_cast<int32_t>(ggml_nelements(row));
    const auto * st = static_cast<const GreedyStage *>(userdata);
    *static_cast<int32_t *>(dst->data) = biased_argmax(static_cast<const float *>(row->data), n, st->bias);
}

// This sequence's output of the graph's shared node (made by the first sequence to ask),
// or null where the node cannot take it.
ggml_tensor * shared_pick(GreedyStage & st, ggml_context * ctx, ggml_tensor * logits) {
    ggml_tensor * src = nullptr;
    const int64_t row = unpadded_row(logits, &src);
    if (row < 0) return nullptr;
    GraphGreedy::Shared & sh = *st.shared;
    if (sh.node && sh.node->src[0] != src) return nullptr;
    // one output per active row, plus one per idle sequence (llama.cpp points those at row 0)
    const int64_t capacity = src->ne[1] + sh.n_seq_max;
    if (!sh.node) {
        auto plan = std::make_unique<Plan>();
        plan->rows = &sh.rows;
        ggml_tensor * args[] = {src};
        sh.node = ggml_custom_4d(ctx, GGML_TYPE_I32, capacity, 1, 1, 1, args, 1, pick_rows, GGML_N_TASKS_MAX,
                                 plan.get());
        ggml_set_name(sh.node, "pyllama_greedy_rows");
        ggml_set_output(sh.node);
        sh.plans.push_back(std::move(plan));
        if (sh.plans.size() > kPlansKept) sh.plans.pop_front();
    }
    Plan & plan = *sh.plans.back();
    const auto k = static_cast<int64_t>(plan.picks.size());
    if (k >= capacity) return nullptr;
    ggml_tensor * out = ggml_view_1d(ctx, sh.node, 1, static_cast<size_t>(k) * sizeof(int32_t));
    plan.picks.push_back(Pick{row, &st.bias, out});
    return out;
}

void stage_backend_apply(llama_sampler * smpl, ggml_context * ctx, ggml_cgraph *, llama_sampler_data * data) {
    GreedyStage * st = state(smpl);
    if (st->cpu) {
        data->sampled = shared_pick(*st, ctx, data->logits);
        if (!data->sampled) {
            ggml_tensor * args[] = {data->logits};
            data->sampled = ggml_custom_4d(ctx, GGML_TYPE_I32, 1, 1, 1, 1, args, 1, pick_one, 1, st);
        }
    } else {
        data->sampled = ggml_argmax(ctx, ggml_reshape_1d(ctx, data->logits, ggml_nelements(data->logits)));
    }
    ggml_set_name(data->sampled, "pyllama_greedy");
    // the pick is all the engine reads (this stage is attached only without n_probs): with
    // the row left here llama.cpp would keep the pad in the graph and copy the row out
    data->logits = nullptr;
}

void stage_copy_state(const llama_sampler *, llama_sampler *) {}  // stateless

llama_sampler_i stage_iface = {
    /* .name              = */ stage_name,
    /* .accept            = */ nullptr,
    /* .apply             = */ stage_apply,
    /* .reset             = */ nullptr,
    /* .clone             = */ stage_clone,
    /* .free              = */ stage_free,
    /* .backend_init      = */ stage_backend_init,
    /* .backend_accept    = */ nullptr,
    /* .backend_apply     = */ stage_backend_apply,
    /* .backend_set_input = */ nullptr,
    /* .backend_reset     = */ stage_backend_reset,
    /* .copy_state        = */ stage_copy_state,
};

llama_sampler * make_stage(const SparseBias & bias, GraphGreedy::Shared * shared) {
    return llama_sampler_init(&stage_iface, new GreedyStage{bias, shared});
}

}  // namespace

GraphGreedy::GraphGreedy(int32_t n_seq_max) : shared_(std::make_unique<Shared>()) { shared_->n_seq_max = n_seq_max; }

GraphGreedy::~GraphGreedy() = default;

Sampler GraphGreedy::chain(const SparseBias & bias) {
    Sampler chain = Sampler::chain(true);
    Sampler stage(make_stage(bias, shared_.get()));
    chain.add(stage);
    return chain;
}

uint64_t GraphGreedy::rows_picked() const { return shared_->rows.load(std::memory_order_relaxed); }

bool GraphGreedy::attached(const Sampler & chain) {
    const llama_sampler * stage = llama_sampler_chain_get(chain.get(), 0);
    return stage && state(stage)->accepted;
}

bool GraphGreedy::on_cpu(const Sampler & chain) {
    const llama_sampler * stage = llama_sampler_chain_get(chain.get(), 0);
    return stage && state(stage)->accepted && state(stage)->cpu;
}

bool GraphGreedy::rebias(const Sampler & chain, const SparseBias & bias) {
    GreedyStage * st = state(llama_sampler_chain_get(chain.get(), 0));
    if (!st->cpu && !bias.empty()) return false;
    st->bias = bias;
    return true;
}

}  // namespace pyllama::engine
