#pragma once
// The byte relay of one allowed egress connection (internal to egress_proxy.cpp): the step's
// socket and the destination's, both non-blocking, and a pipe per direction that splice(2)
// moves the bytes through (no copy to user space; nothing held beyond the pipe's capacity).
// Where splice cannot be used on these sockets (EINVAL), a fixed 64 KiB buffer per direction
// takes the pipe's place.

#include <poll.h>

#include <cstdint>
#include <memory>
#include <string>

#include "sandbox/base.hpp"

namespace sandbox {

enum class PumpState { open, finished, failed };

class EgressRelay {
public:
    // Two pipes (and nothing else); unavailable when they cannot be had.
    static Expected<EgressRelay> make();

    // Bytes to deliver before any relayed one: to the destination (a forwarded head, and what
    // the step sent after its head) and to the step (CONNECT's "200 Connection established").
    void queue_out(std::string bytes) { m_out.pending += bytes; }
    void queue_in(std::string bytes) { m_in.pending += bytes; }

    // Moves what can be moved without blocking, both ways; half-closes a side whose peer
    // finished sending. finished once both ways have ended, failed on a socket error
    // (`error` then says which). At most about `budget` bytes are moved per call.
    PumpState pump(int step, int destination, std::uint64_t budget, std::string& error);

    // The poll events each socket needs for the relay to go on.
    short step_events() const;
    short destination_events() const;

    // step -> destination, a forwarded head included; destination -> step, without the
    // proxy's own "200 Connection established".
    std::uint64_t bytes_out() const { return m_out.moved; }
    std::uint64_t bytes_in() const { return m_in.moved; }

private:
    struct Way {
        Fd pipe_read;
        Fd pipe_write;
        std::size_t capacity = 0;
        std::size_t held = 0;            // bytes in the pipe (or the buffer)
        std::unique_ptr<char[]> buffer;  // the fallback when splice is refused
        std::size_t buffer_start = 0;
        std::string pending;
        bool eof = false;   // the source has finished sending
        bool shut = false;  // the sink has been half-closed
        std::uint64_t moved = 0;
        bool count_pending = false;  // whether `pending` bytes count in `moved`
        bool wants_read() const { return !eof && pending.empty() && held < capacity; }
        bool wants_write() const { return !pending.empty() || held > 0; }
    };
    enum class Step { progress, blocked, failed };
    Step flush(Way& way, int sink, std::string& error);
    Step fill(Way& way, int source, std::string& error);

    Way m_out;
    Way m_in;
};

}  // namespace sandbox
