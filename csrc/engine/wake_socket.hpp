// The engine's wake-up: one byte sent on a socket that the asyncio side owns and reads.
// A socket, not a pipe, because it is the one handle every event loop can wait on:
// Windows' select() takes sockets only, and its Proactor loop has no add_reader but
// awaits sock_recv on a socket; Linux's selector loops and uvloop watch it as they
// watched the pipe.
#pragma once

#include <cstdint>

namespace pyllama::engine {

class WakeSocket {
public:
    WakeSocket() = default;
    ~WakeSocket() { detach(); }
    WakeSocket(const WakeSocket &) = delete;
    WakeSocket & operator=(const WakeSocket &) = delete;

    // Rings a duplicate of `handle` (a connected socket's fileno, as Python's socket
    // gives it) from now on; the caller may close its own copy at once. -1 detaches.
    // Throws std::system_error when the handle cannot be duplicated.
    void attach(int64_t handle);
    void detach();
    // One byte, never blocking: a full buffer means a wake-up is pending already.
    void ring() const;
    bool attached() const { return sock_ != kNone; }

private:
    static constexpr uintptr_t kNone = ~uintptr_t{0};  // INVALID_SOCKET, and -1 on POSIX
    uintptr_t sock_ = kNone;
};

}  // namespace pyllama::engine
