// CPU placement for ggml's compute threads: llama-server's --cpu-mask, --cpu-range,
// --cpu-strict, --prio and --poll (and their -batch variants), as ggml threadpools that a
// context owns. Without any of them a context keeps ggml's per-graph default pool.
#pragma once

#include <string>

#include "ggml-cpu.h"
#include "llama.h"

namespace pyllama {

struct CpuParams {
    std::string mask;   // hex affinity mask ("" none), as --cpu-mask
    std::string range;  // "lo-hi", as --cpu-range; joins the mask
    int strict = 0;     // 1: one thread per CPU of the mask (--cpu-strict)
    int priority = 0;   // ggml_sched_priority: -1 low ... 3 realtime (--prio)
    int poll = 50;      // 0 (wait) ... 100 (spin) (--poll)

    bool is_default() const { return mask.empty() && range.empty() && strict == 0 && priority == 0 && poll == 50; }
    // ggml's pool parameters for n_threads; throws std::invalid_argument naming a bad
    // mask, range, priority or poll level.
    ggml_threadpool_params to_ggml(int n_threads) const;
};

// The two pools of a context (generation, batch) attached to it; freed after it.
class Threadpools {
public:
    Threadpools() = default;
    Threadpools(const Threadpools &) = delete;
    Threadpools & operator=(const Threadpools &) = delete;
    ~Threadpools();

    // Attach pools for cpu/cpu_batch when either is not the default (as llama-server's
    // common_threadpools::init); throws on a bad setting or a pool ggml cannot create.
    void attach(llama_context * ctx, const CpuParams & cpu, int n_threads, const CpuParams & cpu_batch,
                int n_threads_batch);
    bool attached() const { return pool_ != nullptr; }

private:
    ggml_threadpool * pool_ = nullptr;
    ggml_threadpool * pool_batch_ = nullptr;
    void (*free_)(ggml_threadpool *) = nullptr;
};

// --prio for the whole process (llama-server sets it after creating its context); false
// when the system refuses (realtime without the privilege).
bool set_process_priority(int priority);

// --numa: ggml's NUMA strategy, once per process before a model loads
// ("distribute", "isolate", "numactl"); throws std::invalid_argument on another name.
void numa_init(const std::string & strategy);

}  // namespace pyllama
