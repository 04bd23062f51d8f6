#include "sandbox/cancel.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

namespace sandbox {

Expected<CancelToken> CancelToken::create() {
    Fd fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!fd) return fail(ErrorKind::unavailable, errno_message("eventfd"));
    return CancelToken(std::move(fd));
}

void CancelToken::cancel() const noexcept {
    // The counter only grows and nobody reads it, so the fd stays readable for good. EAGAIN
    // (the counter at its maximum) means it is readable already.
    const std::uint64_t one = 1;
    const int saved = errno;  // a signal handler must leave errno as it found it
    [[maybe_unused]] const ssize_t n = ::write(m_fd.get(), &one, sizeof one);
    errno = saved;
}

bool CancelToken::cancelled() const noexcept {
    pollfd pfd{m_fd.get(), POLLIN, 0};
    return ::poll(&pfd, 1, 0) == 1;
}

}  // namespace sandbox
