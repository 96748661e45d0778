#include "engine/wake_socket.hpp"

#include <cerrno>
#include <system_error>

#ifdef _WIN32
#include <winsock2.h>
#else
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>
#endif

namespace pyllama::engine {

// The engine keeps its own duplicate so that Python closing (or the garbage collector
// finalizing) its socket object can never leave the engine writing to a reused handle.
void WakeSocket::attach(int64_t handle) {
    detach();
    if (handle < 0) return;
#ifdef _WIN32
    // Winsock is started: Python's socket module made this socket. WSADuplicateSocket
    // for our own process is how Python's socket.share()/fromshare() duplicate, too.
    WSAPROTOCOL_INFOW info{};
    const auto src = static_cast<SOCKET>(handle);
    if (WSADuplicateSocketW(src, GetCurrentProcessId(), &info) != 0) {
        throw std::system_error(WSAGetLastError(), std::system_category(), "WSADuplicateSocket");
    }
    const SOCKET dup = WSASocketW(FROM_PROTOCOL_INFO, FROM_PROTOCOL_INFO, FROM_PROTOCOL_INFO, &info, 0, 0);
    if (dup == INVALID_SOCKET) throw std::system_error(WSAGetLastError(), std::system_category(), "WSASocket");
    u_long nonblocking = 1;
    ioctlsocket(dup, FIONBIO, &nonblocking);
    sock_ = static_cast<uintptr_t>(dup);
#else
    const int dup = ::fcntl(static_cast<int>(handle), F_DUPFD_CLOEXEC, 0);
    if (dup < 0) throw std::system_error(errno, std::generic_category(), "dup");
    sock_ = static_cast<uintptr_t>(dup);
#endif
}

void WakeSocket::detach() {
    if (sock_ == kNone) return;
#ifdef _WIN32
    closesocket(static_cast<SOCKET>(sock_));
#else
    ::close(static_cast<int>(sock_));
#endif
    sock_ = kNone;
}

void WakeSocket::ring() const {
    if (sock_ == kNone) return;
    const char one = 1;
#ifdef _WIN32
    ::send(static_cast<SOCKET>(sock_), &one, 1, 0);
#else
    // MSG_NOSIGNAL: a reader that has gone must not SIGPIPE the process
    [[maybe_unused]] ssize_t w = ::send(static_cast<int>(sock_), &one, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
#endif
}

}  // namespace pyllama::engine
