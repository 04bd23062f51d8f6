#pragma once
// CancelToken: a one-shot "stop now" that sandbox::run watches alongside the child. Firing it
// is one write(2) to an eventfd, so a signal handler, another thread or a scheduler may call
// cancel() at any time, before or during a run; once fired it stays fired. A run that sees it
// ends like a timeout (SIGTERM and SIGCONT to the whole tree, SIGKILL after the kill grace)
// and reports RunErrorKind::cancelled (exit status 130).
//
// The token owns its eventfd; it is movable, not copyable, and must outlive the runs that
// watch it (RunRequest holds a non-owning pointer).

#include "sandbox/error.hpp"
#include "sandbox/fd.hpp"

namespace sandbox {

class CancelToken {
public:
    // Fails (ErrorKind::unavailable) only when no eventfd can be had (fd limit).
    static Expected<CancelToken> create();

    // Async-signal-safe and thread-safe; idempotent.
    void cancel() const noexcept;
    // True once cancel() was called.
    bool cancelled() const noexcept;
    // Readable once cancelled (for poll); never read from by the run.
    int fd() const noexcept { return m_fd.get(); }

private:
    explicit CancelToken(Fd fd) : m_fd(std::move(fd)) {}
    Fd m_fd;
};

}  // namespace sandbox
