// llama-server's --fit: lower the GPU layers and the context size (only those left at
// their defaults) until the model fits the devices' free memory, before loading it.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/context.hpp"
#include "core/model.hpp"

namespace pyllama {

struct FitResult {
    int status = 0;  // 0 fits, 1 no allocation projected to fit, 2 error (e.g. unreadable file)
    int32_t n_gpu_layers = -1;
    uint32_t n_ctx = 0;
    std::vector<float> tensor_split;  // empty: unchanged
    std::vector<std::pair<std::string, std::string>> tensor_overrides;  // pattern, buffer type
};

// Runs llama.cpp's fitting (it measures allocations with no_alloc loads; not thread-safe:
// it swaps llama.cpp's global logger while it runs). margins_mib: free memory to leave per
// device (one value: every device); n_ctx_min: the smallest context it may choose.
FitResult fit_params(const std::string & path, const ModelParams & model, const ContextParams & context,
                     const std::vector<size_t> & margins_mib, uint32_t n_ctx_min);

}  // namespace pyllama
