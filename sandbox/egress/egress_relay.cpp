// The egress relay (see egress_relay.hpp).
#include "sandbox/egress/egress_relay.hpp"

#include <fcntl.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

namespace sandbox {
namespace {

constexpr int k_pipe_bytes = 256 * 1024;
constexpr std::size_t k_buffer_bytes = 64 * 1024;

bool would_block(int error) {
    return error == EAGAIN || error == EWOULDBLOCK || error == EINTR;
}

}  // namespace

Expected<EgressRelay> EgressRelay::make() {
    EgressRelay relay;
    relay.m_out.count_pending =
        true;  // a forwarded head goes to the destination; CONNECT's 200 is ours
    for (Way* way : {&relay.m_out, &relay.m_in}) {
        int fds[2];
        if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0)
            return fail(ErrorKind::unavailable, errno_message("pipe2 for an egress relay"));
        way->pipe_read = Fd(fds[0]);
        way->pipe_write = Fd(fds[1]);
        ::fcntl(fds[1], F_SETPIPE_SZ, k_pipe_bytes);  // best effort: fewer wake-ups
        const int size = ::fcntl(fds[1], F_GETPIPE_SZ);
        way->capacity = size > 0 ? static_cast<std::size_t>(size) : 65536;
    }
    return relay;
}

EgressRelay::Step EgressRelay::flush(Way& way, int sink, std::string& error) {
    if (!way.pending.empty()) {
        const ssize_t n =
            ::send(sink, way.pending.data(), way.pending.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
            if (would_block(errno)) return Step::blocked;
            error = errno_message("send");
            return Step::failed;
        }
        way.pending.erase(0, static_cast<std::size_t>(n));
        if (way.count_pending) way.moved += static_cast<std::uint64_t>(n);
        return Step::progress;
    }
    if (way.held == 0) return Step::blocked;
    ssize_t n;
    if (way.buffer) {
        n = ::send(sink, way.buffer.get() + way.buffer_start, way.held,
                   MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) way.buffer_start += static_cast<std::size_t>(n);
    } else {
        n = ::splice(way.pipe_read.get(), nullptr, sink, nullptr, way.held,
                     SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
    }
    if (n < 0) {
        if (would_block(errno)) return Step::blocked;
        error = errno_message("relaying");
        return Step::failed;
    }
    way.held -= static_cast<std::size_t>(n);
    way.moved += static_cast<std::uint64_t>(n);
    if (way.held == 0) way.buffer_start = 0;
    return n > 0 ? Step::progress : Step::blocked;
}

EgressRelay::Step EgressRelay::fill(Way& way, int source, std::string& error) {
    if (!way.wants_read()) return Step::blocked;
    ssize_t n;
    if (way.buffer) {
        const std::size_t room = way.capacity - way.buffer_start - way.held;
        if (room == 0) return Step::blocked;
        n = ::recv(source, way.buffer.get() + way.buffer_start + way.held, room, MSG_DONTWAIT);
    } else {
        n = ::splice(source, nullptr, way.pipe_write.get(), nullptr, way.capacity - way.held,
                     SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
        if (n < 0 && errno == EINVAL && way.held == 0) {
            // This kernel (or sandbox) cannot splice these sockets: a fixed buffer instead.
            way.buffer = std::make_unique<char[]>(k_buffer_bytes);
            way.capacity = k_buffer_bytes;
            return fill(way, source, error);
        }
    }
    if (n < 0) {
        if (would_block(errno)) return Step::blocked;
        error = errno_message("reading");
        return Step::failed;
    }
    if (n == 0) way.eof = true;
    way.held += static_cast<std::size_t>(n);
    return Step::progress;
}

PumpState EgressRelay::pump(int step, int destination, std::uint64_t budget, std::string& error) {
    const std::uint64_t start = m_out.moved + m_in.moved;
    for (int round = 0; round < 64; ++round) {
        bool progress = false;
        struct Pair {
            Way& way;
            int source;
            int sink;
        };
        for (Pair pair : {Pair{m_out, step, destination}, Pair{m_in, destination, step}}) {
            for (Step s : {flush(pair.way, pair.sink, error), fill(pair.way, pair.source, error)}) {
                if (s == Step::failed) return PumpState::failed;
                progress = progress || s == Step::progress;
            }
            if (pair.way.eof && !pair.way.wants_write() && !pair.way.shut) {
                ::shutdown(pair.sink, SHUT_WR);
                pair.way.shut = true;
            }
        }
        if (m_out.shut && m_in.shut) return PumpState::finished;
        if (!progress || m_out.moved + m_in.moved - start >= budget) break;
    }
    return PumpState::open;
}

short EgressRelay::step_events() const {
    short events = 0;
    if (m_out.wants_read()) events |= POLLIN;
    if (m_in.wants_write()) events |= POLLOUT;
    return events;
}

short EgressRelay::destination_events() const {
    short events = 0;
    if (m_in.wants_read()) events |= POLLIN;
    if (m_out.wants_write()) events |= POLLOUT;
    return events;
}

}  // namespace sandbox
