#include "engine/graph_greedy.hpp"

#include <cmath>
#include <cstdint>

#include "ggml-backend.h"
#include "ggml.h"

namespace pyllama::engine {

namespace {

struct GreedyStage {
    SparseBias bias;
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

llama_sampler * make_stage(const SparseBias & bias);

llama_sampler * stage_clone(const llama_sampler * smpl) { return make_stage(state(smpl)->bias); }

void stage_free(llama_sampler * smpl) { delete state(smpl); }

bool stage_backend_init(llama_sampler * smpl, ggml_backend_buffer_type_t buft, uint32_t) {
    GreedyStage * st = state(smpl);
    ggml_backend_dev_t dev = ggml_backend_buft_get_device(buft);
    st->cpu = dev && ggml_backend_dev_type(dev) == GGML_BACKEND_DEVICE_TYPE_CPU;
    // elsewhere ggml_argmax takes no bias: then the host picks
    st->accepted = st->cpu || st->bias.empty();
    return st->accepted;
}

// GGML_OP_CUSTOM with one task: runs on one of ggml's compute threads while the graph runs;
// reads the sequence's row (just written by the output projection) and the stage's bias,
// which nothing changes while the stage is attached.
void argmax_op(ggml_tensor * dst, int ith, int, void * userdata) {
    if (ith != 0) return;
    const ggml_tensor * row = dst->src[0];
    const auto n = static_cast<int32_t>(ggml_nelements(row));
    const auto * st = static_cast<const GreedyStage *>(userdata);
    *static_cast<int32_t *>(dst->data) = biased_argmax(static_cast<const float *>(row->data), n, st->bias);
}

void stage_backend_apply(llama_sampler * smpl, ggml_context * ctx, ggml_cgraph *, llama_sampler_data * data) {
    GreedyStage * st = state(smpl);
    if (st->cpu) {
        ggml_tensor * args[] = {data->logits};
        data->sampled = ggml_custom_4d(ctx, GGML_TYPE_I32, 1, 1, 1, 1, args, 1, argmax_op, 1, st);
    } else {
        data->sampled = ggml_argmax(ctx, ggml_reshape_1d(ctx, data->logits, ggml_nelements(data->logits)));
    }
    ggml_set_name(data->sampled, "pyllama_greedy");
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
    /* .backend_reset     = */ nullptr,
    /* .copy_state        = */ stage_copy_state,
};

llama_sampler * make_stage(const SparseBias & bias) { return llama_sampler_init(&stage_iface, new GreedyStage{bias}); }

}  // namespace

Sampler graph_greedy_chain(const SparseBias & bias) {
    Sampler chain = Sampler::chain(true);
    Sampler stage(make_stage(bias));
    chain.add(stage);
    return chain;
}

bool graph_greedy_attached(const Sampler & chain) {
    const llama_sampler * stage = llama_sampler_chain_get(chain.get(), 0);
    return stage && state(stage)->accepted;
}

}  // namespace pyllama::engine
