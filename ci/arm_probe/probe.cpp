// The CPU variant choice on Linux ARM without Python or a model: cross-built with ggml's ARM
// CPU modules by ci/build_arm_probe.sh, run as qemu-aarch64 CPU models by
// tests/package/test_arm_variants.py.
//
//   arm_probe pyllama DIR   load as _core does at import (csrc/core/backends.cpp, with
//                           PYLLAMA_CPU_VARIANT and the scoring it applies)
//   arm_probe ggml DIR      load as llama.cpp's tools do (ggml_backend_load_all_from_path)
//
// Prints "variant NAME", then runs matrix products (Q4_0, Q4_1, Q8_0 weights: the dot
// product kernels that differ between variants) on the loaded CPU backend and prints each
// one's largest error against a float product of the same weights. A variant whose
// instructions the CPU lacks dies there of SIGILL. Exit 2 when loading fails.
#include <cmath>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/backends.hpp"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml.h"

namespace {

std::string g_ggml_loaded;  // the module ggml's loader reports ("loaded CPU backend from PATH")

void capture_log(ggml_log_level, const char * text, void *) {
    const std::string line(text);
    const std::string mark = "loaded CPU backend from ";
    if (const size_t at = line.find(mark); at != std::string::npos) {
        g_ggml_loaded = line.substr(at + mark.size());
        while (!g_ggml_loaded.empty() && g_ggml_loaded.back() == '\n') g_ggml_loaded.pop_back();
    }
}

// "libggml-cpu-armv8.2_2.so" -> "armv8.2_2"
std::string variant_of(const std::string & path) {
    const std::string file = path.substr(path.find_last_of('/') + 1);
    const std::string prefix = "libggml-cpu-";
    if (file.rfind(prefix, 0) != 0) return "";
    return file.substr(prefix.size(), file.size() - prefix.size() - 3);
}

// Largest |y - ref| / max|ref| of W (n x k, `type`) times X (k x m, f32) on `backend`.
double matmul_error(ggml_backend_t backend, ggml_type type) {
    const int k = 256, n = 32, m = 4;  // m > 1: the i8mm kernels take rows in pairs
    std::mt19937 rng(42);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> w(size_t(n) * k), x(size_t(k) * m);
    for (float & v : w) v = dist(rng);
    for (float & v : x) v = dist(rng);

    std::vector<uint8_t> wq(ggml_row_size(type, k) * n);
    ggml_quantize_chunk(type, w.data(), wq.data(), 0, n, k, nullptr);
    std::vector<float> wd(w.size());  // the quantized weights as floats: the reference's
    ggml_get_type_traits(type)->to_float(wq.data(), wd.data(), int64_t(w.size()));

    ggml_init_params params = {ggml_tensor_overhead() * 8 + ggml_graph_overhead(), nullptr, true};
    ggml_context * ctx = ggml_init(params);
    ggml_tensor * tw = ggml_new_tensor_2d(ctx, type, k, n);
    ggml_tensor * tx = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, k, m);
    ggml_tensor * ty = ggml_mul_mat(ctx, tw, tx);  // n x m
    ggml_cgraph * graph = ggml_new_graph(ctx);
    ggml_build_forward_expand(graph, ty);
    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors(ctx, backend);
    ggml_backend_tensor_set(tw, wq.data(), 0, wq.size());
    ggml_backend_tensor_set(tx, x.data(), 0, x.size() * sizeof(float));
    if (ggml_backend_graph_compute(backend, graph) != GGML_STATUS_SUCCESS) {
        throw std::runtime_error("graph compute failed");
    }
    std::vector<float> y(size_t(n) * m);
    ggml_backend_tensor_get(ty, y.data(), 0, y.size() * sizeof(float));
    ggml_backend_buffer_free(buf);
    ggml_free(ctx);

    double worst = 0, scale = 0;
    for (int j = 0; j < m; ++j) {
        for (int i = 0; i < n; ++i) {
            double ref = 0;
            for (int t = 0; t < k; ++t) ref += double(wd[size_t(i) * k + t]) * x[size_t(j) * k + t];
            worst = std::fmax(worst, std::fabs(y[size_t(j) * n + i] - ref));
            scale = std::fmax(scale, std::fabs(ref));
        }
    }
    return worst / scale;
}

}  // namespace

int main(int argc, char ** argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: %s pyllama|ggml DIR\n", argv[0]);
        return 2;
    }
    const std::string mode = argv[1], dir = argv[2];
    ggml_log_set(capture_log, nullptr);
    std::string variant;
    try {
        if (mode == "pyllama") {
            pyllama::load_backends(dir);
            for (const auto & b : pyllama::loaded_backends()) {
                if (b.name == "CPU") variant = b.variant;
            }
        } else {
            ggml_backend_load_all_from_path(dir.c_str());
            variant = variant_of(g_ggml_loaded);
        }
    } catch (const std::exception & e) {
        std::printf("error %s\n", e.what());
        return 2;
    }
    std::printf("variant %s\n", variant.c_str());
    std::fflush(stdout);

    ggml_backend_dev_t dev = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
    if (dev == nullptr) {
        std::printf("error no CPU device\n");
        return 2;
    }
    ggml_backend_t backend = ggml_backend_dev_init(dev, nullptr);
    for (ggml_type type : {GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q8_0}) {
        std::printf("matmul %s %.5f\n", ggml_type_name(type), matmul_error(backend, type));
        std::fflush(stdout);
    }
    ggml_backend_free(backend);
    return 0;
}
