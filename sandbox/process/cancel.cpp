#include "sandbox/process/cancel.hpp"

#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

namespace sandbox {

Expected<CancelToken> CancelToken::create() {
    Fd fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!fd) return fail(ErrorKind::unavailable, errno_message("eventfd"));
    return CancelToken(std::move(fd), Fd());
}

Expected<CancelToken> CancelToken::create_linked(const CancelToken& parent) {
    auto own = SANDGATE_TRY(create());
    // An epoll fd polls readable while any fd in its set is: level-triggered, and neither
    // eventfd is ever read, so once either token fires the watch stays readable. The parent's
    // fd() may itself be an epoll fd (a chain of links); epoll nests.
    Fd watch(::epoll_create1(EPOLL_CLOEXEC));
    if (!watch) return fail(ErrorKind::unavailable, errno_message("epoll_create1"));
    for (const int fd : {own.m_event.get(), parent.fd()}) {
        epoll_event event{};
        event.events = EPOLLIN;
        event.data.fd = fd;
        if (::epoll_ctl(watch.get(), EPOLL_CTL_ADD, fd, &event) != 0)
            return fail(ErrorKind::unavailable, errno_message("epoll_ctl"));
    }
    return CancelToken(std::move(own.m_event), std::move(watch));
}

Expected<void> CancelToken::fire_on_hangup(int socket) {
    if (!m_watch) {
        Fd watch(::epoll_create1(EPOLL_CLOEXEC));
        if (!watch) return fail(ErrorKind::unavailable, errno_message("epoll_create1"));
        epoll_event own{};
        own.events = EPOLLIN;
        own.data.fd = m_event.get();
        if (::epoll_ctl(watch.get(), EPOLL_CTL_ADD, m_event.get(), &own) != 0)
            return fail(ErrorKind::unavailable, errno_message("epoll_ctl"));
        m_watch = std::move(watch);
    }
    // EPOLLRDHUP alone: the epoll fd turns readable on the peer's shutdown(SHUT_WR) or close,
    // not on data it sends (a pipelined request must not cancel the step).
    epoll_event event{};
    event.events = EPOLLRDHUP;
    event.data.fd = socket;
    if (::epoll_ctl(m_watch.get(), EPOLL_CTL_ADD, socket, &event) != 0)
        return fail(ErrorKind::unavailable, errno_message("epoll_ctl"));
    return {};
}

void CancelToken::cancel() const noexcept {
    // The counter only grows and nobody reads it, so the fd stays readable for good. EAGAIN
    // (the counter at its maximum) means it is readable already.
    const std::uint64_t one = 1;
    const int saved = errno;  // a signal handler must leave errno as it found it
    [[maybe_unused]] const ssize_t n = ::write(m_event.get(), &one, sizeof one);
    errno = saved;
}

bool CancelToken::cancelled() const noexcept {
    pollfd pfd{fd(), POLLIN, 0};
    return ::poll(&pfd, 1, 0) == 1;
}

}  // namespace sandbox
