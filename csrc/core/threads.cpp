#include "core/threads.hpp"

#include <cstring>
#include <stdexcept>

#include "common.h"
#include "ggml-backend.h"

namespace pyllama {

ggml_threadpool_params CpuParams::to_ggml(int n_threads) const {
    ggml_threadpool_params tpp;
    ggml_threadpool_params_init(&tpp, n_threads);
    bool mask_bits[GGML_MAX_N_THREADS] = {false};
    if (!mask.empty() && !parse_cpu_mask(mask, mask_bits)) {
        throw std::invalid_argument("invalid CPU mask '" + mask + "' (a hex number such as 0x3 or ff)");
    }
    if (!range.empty() && !parse_cpu_range(range, mask_bits)) {
        throw std::invalid_argument("invalid CPU range '" + range + "' (lo-hi, e.g. 0-3)");
    }
    if (!mask.empty() || !range.empty()) std::memcpy(tpp.cpumask, mask_bits, sizeof(mask_bits));
    if (priority < GGML_SCHED_PRIO_LOW || priority > GGML_SCHED_PRIO_REALTIME) {
        throw std::invalid_argument("invalid priority " + std::to_string(priority) + " (-1 low ... 3 realtime)");
    }
    if (poll < 0 || poll > 100) throw std::invalid_argument("invalid poll level " + std::to_string(poll) + " (0...100)");
    tpp.prio = static_cast<ggml_sched_priority>(priority);
    tpp.poll = static_cast<uint32_t>(poll);
    tpp.strict_cpu = strict != 0;
    return tpp;
}

namespace {
// ggml's CPU backend is loaded at run time (one build per CPU level): its pool functions
// are looked up through the backend registry, as llama.cpp's common code does.
template <typename F>
F * cpu_proc(const char * name) {
    ggml_backend_dev_t dev = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
    if (!dev) throw std::runtime_error("no CPU backend is loaded");
    auto * f = reinterpret_cast<F *>(ggml_backend_reg_get_proc_address(ggml_backend_dev_backend_reg(dev), name));
    if (!f) throw std::runtime_error(std::string("the CPU backend lacks ") + name);
    return f;
}
}  // namespace

Threadpools::~Threadpools() {
    // the context that used them is gone by now (its owner frees it first)
    if (free_) {
        free_(pool_);
        free_(pool_batch_);
    }
}

void Threadpools::attach(llama_context * ctx, const CpuParams & cpu, int n_threads, const CpuParams & cpu_batch,
                         int n_threads_batch) {
    if (cpu.is_default() && cpu_batch.is_default()) return;
    ggml_threadpool_params tpp = cpu.to_ggml(n_threads);
    ggml_threadpool_params tpp_batch = cpu_batch.to_ggml(n_threads_batch);
    // each pool must match its context thread count exactly (llama.cpp's rule)
    auto * make = cpu_proc<decltype(ggml_threadpool_new)>("ggml_threadpool_new");
    free_ = cpu_proc<decltype(ggml_threadpool_free)>("ggml_threadpool_free");
    if (!ggml_threadpool_params_match(&tpp, &tpp_batch)) {
        pool_batch_ = make(&tpp_batch);
        if (!pool_batch_) throw std::runtime_error("cannot create the batch CPU threadpool");
        tpp.paused = true;  // the generation pool sleeps until a one-token decode needs it
    }
    pool_ = make(&tpp);
    if (!pool_) throw std::runtime_error("cannot create the CPU threadpool");
    llama_attach_threadpool(ctx, pool_, pool_batch_);
}

bool set_process_priority(int priority) {
    if (priority < GGML_SCHED_PRIO_LOW || priority > GGML_SCHED_PRIO_REALTIME) {
        throw std::invalid_argument("invalid priority " + std::to_string(priority) + " (-1 low ... 3 realtime)");
    }
    return ::set_process_priority(static_cast<ggml_sched_priority>(priority));
}

void numa_init(const std::string & strategy) {
    ggml_numa_strategy s;
    if (strategy == "distribute" || strategy.empty()) {
        s = GGML_NUMA_STRATEGY_DISTRIBUTE;
    } else if (strategy == "isolate") {
        s = GGML_NUMA_STRATEGY_ISOLATE;
    } else if (strategy == "numactl") {
        s = GGML_NUMA_STRATEGY_NUMACTL;
    } else {
        throw std::invalid_argument("numa strategy must be distribute, isolate or numactl, got '" + strategy + "'");
    }
    llama_numa_init(s);
}

}  // namespace pyllama
