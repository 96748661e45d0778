#include "core/compute_thread.hpp"

#include "core/log.hpp"

namespace pyllama {

ComputeThread::~ComputeThread() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
}

void ComputeThread::run(const std::function<void()> & fn) {
    if (thread_.joinable() && std::this_thread::get_id() == thread_.get_id()) {
        fn();
        return;
    }
    std::lock_guard<std::mutex> call(call_mu_);
    std::unique_lock<std::mutex> lock(mu_);
    if (!thread_.joinable()) thread_ = std::thread(&ComputeThread::loop, this);
    job_ = &fn;
    done_ = false;
    error_ = nullptr;
    cv_.notify_all();
    cv_.wait(lock, [this] { return done_; });
    job_ = nullptr;
    log_append(logged_);
    if (error_) std::rethrow_exception(error_);
}

void ComputeThread::loop() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
        cv_.wait(lock, [this] { return stop_ || (job_ != nullptr && !done_); });
        if (stop_) return;
        const std::function<void()> * job = job_;
        lock.unlock();
        std::exception_ptr error;
        log_clear();
        try {
            (*job)();
        } catch (...) {
            error = std::current_exception();
        }
        std::string logged = log_take();
        lock.lock();
        error_ = error;
        logged_ = std::move(logged);
        done_ = true;
        cv_.notify_all();
    }
}

}  // namespace pyllama
