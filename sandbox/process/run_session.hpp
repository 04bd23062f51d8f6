#pragma once
// The poll loop of one spawned run (internal to sandbox::run): feeds stdin, drains stdout and
// stderr into bounded captures (and the request's observer), enforces the deadline, notices
// the main child's exit through its pidfd, then has the rest of the tree killed and waits,
// bounded, until it is gone and the pipes are drained.
//
// Ownership: the session owns the parent's ends of the three pipes; the request, the child and
// the tree belong to the caller and must outlive the session. Errors are not returned: what
// happened (exit, signal, timeout, captures, markers) is written into the RunResult by loop().

#include <poll.h>

#include <chrono>
#include <cstddef>
#include <optional>

#include "sandbox/base.hpp"
#include "sandbox/process/capture.hpp"
#include "sandbox/process/run.hpp"
#include "sandbox/process/run_tree.hpp"
#include "sandbox/process/spawn.hpp"

namespace sandbox {

class RunSession {
    using Clock = std::chrono::steady_clock;

public:
    // wrap_status: the wrapper's status channel (WrapPlan::status, read end), or -1. It is
    // polled, never read (diagnose_wrap_failure reads it after the run).
    RunSession(const RunRequest& request, Child& child, const RunTree& tree, Fd out, Fd err, Fd in,
               int wrap_status = -1)
        : m_request(request),
          m_child(child),
          m_tree(tree),
          m_out(std::move(out)),
          m_err(std::move(err)),
          m_in(std::move(in)),
          m_wrap_status(wrap_status),
          m_out_capture(request.output_limit),
          m_err_capture(request.output_limit) {
        const auto now = Clock::now();
        if (request.timeout) m_deadline = now + *request.timeout;
        if (!request.stdin_text || request.stdin_text->empty()) m_in.reset();
    }

    void loop(RunResult& result);
    bool cancelled() const { return m_cancelled; }

private:
    // Where each watched fd sits in a poll set (-1: not in it).
    struct Slots {
        int out = -1, err = -1, in = -1, child = -1, cancel = -1, adopted = -1, status = -1;
    };
    enum class Watch { exit_only, exit_and_output };
    int gather(pollfd* fds, Slots& at, Watch watch) const;
    void stop_tree(Clock::time_point now);
    void read_from(Fd& fd, Stream stream);
    void on_output_ready(short revents, Fd& fd, Stream stream);
    void end_stream(Fd& fd);
    void feed_stdin();
    void on_main_exit(RunResult& result);
    void watch_wrap_init();
    bool wrap_init_gone();
    bool awaiting_exit_only() const;
    void on_clock(Clock::time_point now);
    std::optional<Clock::duration> poll_timeout(Clock::time_point now) const;
    bool finished(Clock::time_point now) const;

    const RunRequest& m_request;
    Child& m_child;
    const RunTree& m_tree;
    Fd m_out;
    Fd m_err;
    Fd m_in;
    Fd m_adopted;  // after the exit: RunTree::adopted_pidfd(), while the tree is not dead
    // The wrapper's pid 1 (bwrap's init of the sandbox's pid namespace): the run is over only
    // once it has exited, which the kernel lets it do only after every other process of the
    // namespace is gone. Found when the status channel first speaks (the namespaces exist).
    int m_wrap_status = -1;  // polled until it speaks, then -1
    Fd m_wrap_init;          // a pidfd of that pid 1, until it has exited
    std::size_t m_in_done = 0;
    StreamCapture m_out_capture;
    StreamCapture m_err_capture;
    std::optional<Clock::time_point> m_deadline;
    std::optional<Clock::time_point> m_kill_at;
    std::optional<Clock::time_point> m_exited_at;  // main child exited, tree killed
    std::optional<Clock::time_point> m_dead_at;    // whole tree gone
    // cgroup.events notifications are rate-limited by the kernel (one per ~10 ms per file, so
    // "populated 0" comes late after a short run, e.g. while bwrap's pid 1 tears its mount
    // namespace down): after the exit the leaf is re-checked on a short, growing interval too.
    // The last holder of the output pipes is usually the leaf's last process (bwrap's pid 1):
    // its files are released just before it leaves the cgroup, so EOF on both restarts the
    // interval from a few microseconds.
    void recheck_soon() {
        m_recheck = std::chrono::microseconds(10);
        m_recheck_at = Clock::now();
    }
    Clock::duration m_recheck = std::chrono::microseconds(100);
    Clock::time_point m_recheck_at;
    bool m_timed_out = false;
    bool m_cancelled = false;
};

}  // namespace sandbox
