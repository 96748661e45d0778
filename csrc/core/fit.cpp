#include "core/fit.hpp"

#include "core/log.hpp"

#include <algorithm>

#include "fit.h"
#include "ggml-backend.h"

namespace pyllama {

FitResult fit_params(const std::string & path, const ModelParams & model, const ContextParams & context,
                     const std::vector<size_t> & margins_mib, uint32_t n_ctx_min) {
    LlamaModelParams lp(model);
    llama_context_params cp = to_llama(context);
    std::vector<size_t> margins(llama_max_devices(), 0);
    for (size_t i = 0; i < margins.size(); ++i) {
        const size_t mib = margins_mib.empty() ? 1024 : margins_mib[std::min(i, margins_mib.size() - 1)];
        margins[i] = mib << 20;
    }
    const int status = common_fit_params(path.c_str(), &lp.params, &cp, lp.split.data(), lp.tensors.data(),
                                         margins.data(), n_ctx_min, nullptr,
                                         // its trace (what each device is projected to hold) when
                                         // verbose, as llama-server -v prints it
                                         log_get_level() <= GGML_LOG_LEVEL_DEBUG ? GGML_LOG_LEVEL_DEBUG
                                                                                 : GGML_LOG_LEVEL_ERROR);
    FitResult r;
    r.status = status;
    r.n_gpu_layers = lp.params.n_gpu_layers;
    r.n_ctx = cp.n_ctx;
    if (lp.params.tensor_split == lp.split.data()) r.tensor_split = lp.split;
    while (!r.tensor_split.empty() && r.tensor_split.back() == 0.0f) r.tensor_split.pop_back();
    for (const llama_model_tensor_buft_override & o : lp.tensors) {
        if (o.pattern == nullptr) break;
        r.tensor_overrides.emplace_back(o.pattern, ggml_backend_buft_name(o.buft));
    }
    return r;
}

}  // namespace pyllama
