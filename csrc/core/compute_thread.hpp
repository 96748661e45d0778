// One thread that runs every graph computation of a context. ggml's CPU backend runs a
// graph as an OpenMP parallel region, and libgomp keeps a pool of worker threads for
// each thread that ever started one, for as long as that thread lives. Once two live
// threads own pools and their threads outnumber the cores, libgomp makes every barrier
// sleep instead of spin: each of the hundreds of barriers per token becomes a futex
// round trip, and decoding runs 3-4x slower (measured on 2 cores). Python code calls a
// context from whatever thread it is on (the main thread, a web framework's pool);
// running the computation on the context's own thread keeps one pool per context, and
// ending that thread with the context gives its pool back.
#pragma once

#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace pyllama {

class ComputeThread {
public:
    ComputeThread() = default;
    ComputeThread(const ComputeThread &) = delete;
    ComputeThread & operator=(const ComputeThread &) = delete;
    ~ComputeThread();  // ends and joins the thread

    // Run fn on the thread (started on first use) and wait for it; an exception fn throws
    // is rethrown here, and what llama.cpp logged meanwhile joins this thread's captured
    // log (core/log.hpp). Callers are served one at a time; a call from the thread itself
    // runs inline.
    void run(const std::function<void()> & fn);

private:
    void loop();

    std::mutex call_mu_;  // one caller at a time
    std::mutex mu_;
    std::condition_variable cv_;
    const std::function<void()> * job_ = nullptr;
    std::exception_ptr error_;
    std::string logged_;  // the job's captured log
    bool done_ = false;
    bool stop_ = false;
    std::thread thread_;
};

}  // namespace pyllama
