#pragma once
// CancelToken: a one-shot "stop now" that sandbox::run watches alongside the child. Firing it
// is one write(2) to an eventfd, so a signal handler, another thread or a scheduler may call
// cancel() at any time, before or during a run; once fired it stays fired. A run that sees it
// ends like a timeout (SIGTERM and SIGCONT to the whole tree, SIGKILL after the kill grace)
// and reports RunErrorKind::cancelled (exit status 130).
//
// A linked token (create_linked) also counts as fired once its parent fires, so one run can
// watch two scopes through one fd: a matrix job's fail-fast and the whole run's interrupt.
//
// The token owns its fds; it is movable, not copyable, and must outlive the runs that watch
// it (RunRequest holds a non-owning pointer). A parent must outlive its linked tokens.

#include "sandbox/base.hpp"

namespace sandbox {

class CancelToken {
public:
    // Fails (ErrorKind::unavailable) only when no eventfd can be had (fd limit).
    static Expected<CancelToken> create();
    // A token fired by its own cancel() or by `parent`'s (parent -> child only: cancelling the
    // child leaves the parent alone). Its fd() is an epoll fd watching both; fails
    // (ErrorKind::unavailable) only at the fd limit.
    static Expected<CancelToken> create_linked(const CancelToken& parent);

    // Also counts as fired once the peer of the stream socket `socket` hangs up: shuts its
    // sending side down or closes it (EPOLLRDHUP; EPOLLHUP and EPOLLERR always count), never a
    // byte it sends. `socket` is not owned and must stay open while this token is watched; an
    // unlinked token gets its epoll watch here. Not thread-safe against a concurrent watch;
    // fails (ErrorKind::unavailable) only when epoll refuses (fd limit, not a socket).
    Expected<void> fire_on_hangup(int socket);

    // Async-signal-safe and thread-safe; idempotent.
    void cancel() const noexcept;
    // True once cancel() was called (on this token or on a parent it is linked to).
    bool cancelled() const noexcept;
    // Readable once cancelled (for poll); never read from by the run.
    int fd() const noexcept { return m_watch ? m_watch.get() : m_event.get(); }

private:
    CancelToken(Fd event, Fd watch) : m_event(std::move(event)), m_watch(std::move(watch)) {}
    Fd m_event;  // the eventfd cancel() writes
    Fd m_watch;  // linked tokens only: an epoll fd over m_event and the parent's fd()
};

}  // namespace sandbox
