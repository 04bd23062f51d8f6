#pragma once
// Fd owns one file descriptor and closes it on destruction (after ccache's util/fd.hpp).
// Move-only. Every descriptor sandgate opens lives in one of these; nothing calls close()
// by hand on an exit path.

#include <unistd.h>

#include <utility>
#include <vector>

namespace common {

class Fd {
public:
    Fd() = default;
    explicit Fd(int fd) : m_fd(fd) {}
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
    Fd(Fd&& other) noexcept : m_fd(other.release()) {}
    Fd& operator=(Fd&& other) noexcept {
        if (this != &other) reset(other.release());
        return *this;
    }
    ~Fd() { reset(); }

    int get() const { return m_fd; }
    int operator*() const { return m_fd; }
    bool valid() const { return m_fd >= 0; }
    explicit operator bool() const { return valid(); }

    // Gives up ownership without closing.
    int release() { return std::exchange(m_fd, -1); }

    // Closes the held descriptor (if any) and takes ownership of `fd`. EINTR from close() is
    // not retried: on Linux the descriptor is released either way.
    void reset(int fd = -1) {
        if (m_fd >= 0) ::close(m_fd);
        m_fd = fd;
    }

private:
    int m_fd = -1;
};

// Closes every descriptor in `fds` and empties it: each run of consecutive numbers with one
// close_range(2) (the two dozen fds a wrapped run hands its child are mostly adjacent), one
// close() per fd where the kernel lacks it.
void close_all(std::vector<Fd>& fds);

}  // namespace common
