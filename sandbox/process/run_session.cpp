// RunSession: one ppoll loop over the output pipes, stdin, the child's pidfd, the cancel
// token, the wrapper's status channel and (after the exit) the leaf's cgroup.events, an
// adopted child's pidfd and the wrapper's pid 1's.
#include "sandbox/process/run_session.hpp"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "sandbox/process/reaper.hpp"

namespace sandbox {
namespace {

using Clock = std::chrono::steady_clock;
// How long a killed cgroup may take to empty before the run stops waiting for it.
constexpr std::chrono::seconds k_cgroup_empty_deadline{10};

// Writes to the child's stdin without letting an early exit of the child raise SIGPIPE in
// this process: SIGPIPE is blocked in this thread for the write and a pending one consumed.
ssize_t write_no_sigpipe(int fd, const char* data, std::size_t size) {
    sigset_t pipe_set;
    sigset_t old;
    ::sigemptyset(&pipe_set);
    ::sigaddset(&pipe_set, SIGPIPE);
    ::pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
    const ssize_t n = ::write(fd, data, size);
    const int saved = errno;
    if (n < 0 && saved == EPIPE && !::sigismember(&old, SIGPIPE)) {
        const timespec zero{0, 0};
        ::sigtimedwait(&pipe_set, nullptr, &zero);
    }
    ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
    errno = saved;
    return n;
}

int wait_ready(pollfd* fds, int count, std::optional<Clock::duration> wait) {
    timespec wait_spec{};
    if (wait) {
        const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(*wait).count();
        wait_spec = {static_cast<time_t>(ns / 1'000'000'000),
                     static_cast<long>(ns % 1'000'000'000)};
    }
    return ::ppoll(fds, static_cast<nfds_t>(count), wait ? &wait_spec : nullptr, nullptr);
}

}  // namespace

void RunSession::read_from(Fd& fd, Stream stream) {
    StreamCapture& capture = stream == Stream::out ? m_out_capture : m_err_capture;
    // Read until the pipe is empty (EAGAIN) before polling again: while output flows, each
    // read finds the writer's next chunk and the ppoll per chunk is saved (it cost 0.1x of a
    // 1 GiB stream's throughput). At most 64 reads (16 MiB) per turn, so the other stream,
    // stdin and the clock are served between turns; a child blocked writing the other stream
    // stops this one, which ends the turn too.
    // The bytes are read straight into the capture's head or ring (no copy in between).
    for (int round = 0; round < 64; ++round) {
        const std::span<char> buffer = capture.read_buffer();
        const ssize_t n = ::read(fd.get(), buffer.data(), buffer.size());
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) return;
        if (n <= 0) {  // EOF (or an error, which ends the stream the same way)
            end_stream(fd);
            return;
        }
        const std::string_view chunk = capture.commit(static_cast<std::size_t>(n));
        if (m_request.observer != nullptr) m_request.observer->on_output(stream, chunk);
    }
}

// A pipe polls POLLIN while it holds bytes and POLLHUP once no writer is left: POLLHUP alone
// is an empty pipe at its end, so no read (and no capture buffer) is needed to see the EOF.
void RunSession::on_output_ready(short revents, Fd& fd, Stream stream) {
    if ((revents & POLLIN) != 0) {
        read_from(fd, stream);
    } else if (revents != 0) {
        end_stream(fd);
    }
}

void RunSession::end_stream(Fd& fd) {
    fd.reset();
    if (m_exited_at && !m_out && !m_err) recheck_soon();
}

void RunSession::feed_stdin() {
    const std::string& text = *m_request.stdin_text;
    const ssize_t n =
        write_no_sigpipe(m_in.get(), text.data() + m_in_done, text.size() - m_in_done);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (n < 0) {  // EPIPE: the child closed its stdin; the rest is not wanted
        m_in.reset();
        return;
    }
    m_in_done += static_cast<std::size_t>(n);
    if (m_in_done == text.size()) m_in.reset();  // EOF for the child
}

void RunSession::on_main_exit(RunResult& result) {
    m_tree.after_exit(m_child);
    auto exit = m_child.reap();
    if (!exit) {
        result.error = RunError{RunErrorKind::spawn_failed, exit.error().message, 0};
    } else if (exit->not_started) {
        result.error = RunError{RunErrorKind::spawn_failed, exit->not_started->message,
                                exit->not_started->errno_value};
    } else {
        result.exit_code = exit->exit_code;
        result.signal = exit->signal;
    }
    m_in.reset();
    m_exited_at = Clock::now();
    m_recheck_at = *m_exited_at + m_recheck;
}

// bwrap writes its first status once it has cloned its pid 1, and its monitor (our child)
// reaps that pid 1 only once it has exited: while the monitor runs, its child list names it.
// A pid 1 that died before this look leaves no pidfd, and the run ends as it did before.
void RunSession::watch_wrap_init() {
    m_wrap_status = -1;
    const pid_t init = any_child(m_child.pid());
    if (init > 0) m_wrap_init = open_pidfd(init);
}

// Its pidfd is dropped once readable: no pidfd left means gone (or never known).
bool RunSession::wrap_init_gone() {
    if (m_wrap_init) {
        pollfd item{m_wrap_init.get(), POLLIN, 0};
        if (::poll(&item, 1, 0) == 1) m_wrap_init.reset();
    }
    return !m_wrap_init;
}

// After the exit, while the tree's last process (an adopted child, or the wrapper's pid 1) is
// still leaving, only its exit is waited for: the sandbox's processes are gone by then, so the
// pipes are at EOF and drained on the next turn without a wait, and the run ends on one wake
// instead of two (EOF comes shortly before pid 1 leaves).
bool RunSession::awaiting_exit_only() const {
    return m_exited_at && !m_dead_at && (m_adopted || m_wrap_init);
}

void RunSession::on_clock(Clock::time_point now) {
    if (m_exited_at) {
        if (!m_dead_at &&
            ((m_tree.dead() && wrap_init_gone()) || now >= *m_exited_at + k_cgroup_empty_deadline))
            m_dead_at = now;
        if (!m_dead_at && !m_adopted) m_adopted = m_tree.adopted_pidfd();
        if (!m_dead_at && now >= m_recheck_at) {
            m_recheck = std::min<Clock::duration>(m_recheck * 2, std::chrono::milliseconds(20));
            m_recheck_at = now + m_recheck;
        }
        return;
    }
    if (m_deadline && !m_timed_out && !m_cancelled && now >= *m_deadline) {
        m_timed_out = true;
        stop_tree(now);
    }
    if (m_kill_at && now >= *m_kill_at) {
        m_tree.kill(m_child);
        m_kill_at.reset();
    }
}

// Timeout and cancellation end a run the same way: TERM (and CONT) now, KILL after the grace.
void RunSession::stop_tree(Clock::time_point now) {
    m_tree.terminate(m_child);
    m_kill_at = now + m_request.kill_grace;
}

std::optional<Clock::duration> RunSession::poll_timeout(Clock::time_point now) const {
    std::optional<Clock::time_point> next;
    const auto consider = [&](std::optional<Clock::time_point> at) {
        if (at && (!next || *at < *next)) next = at;
    };
    if (!m_exited_at) {
        if (!m_timed_out && !m_cancelled) consider(m_deadline);
        consider(m_kill_at);
    } else if (!m_dead_at) {
        consider(m_recheck_at);  // re-check populated (POLLPRI helps, but late)
    } else {
        consider(*m_dead_at + k_drain_deadline);
    }
    if (!next) return std::nullopt;
    return std::clamp<Clock::duration>(*next - now, Clock::duration::zero(),
                                       std::chrono::seconds(60));
}

bool RunSession::finished(Clock::time_point now) const {
    if (!m_dead_at) return false;
    return (!m_out && !m_err) || now >= *m_dead_at + k_drain_deadline;
}

int RunSession::gather(pollfd* fds, Slots& at, Watch watch) const {
    int count = 0;
    const bool with_output = watch == Watch::exit_and_output;
    if (with_output && m_out) {
        at.out = count;
        fds[count++] = {m_out.get(), POLLIN, 0};
    }
    if (with_output && m_err) {
        at.err = count;
        fds[count++] = {m_err.get(), POLLIN, 0};
    }
    if (m_in) {
        at.in = count;
        fds[count++] = {m_in.get(), POLLOUT, 0};
    }
    if (!m_exited_at) {
        at.child = count;
        fds[count++] = {m_child.wait_fd(), POLLIN, 0};
    }
    if (!m_exited_at && !m_timed_out && !m_cancelled && m_request.cancel != nullptr) {
        at.cancel = count;
        fds[count++] = {m_request.cancel->fd(), POLLIN, 0};
    }
    if (m_exited_at && !m_dead_at && m_tree.cgroup())
        fds[count++] = {m_tree.cgroup()->events_fd(), POLLPRI, 0};
    if (m_exited_at && !m_dead_at && m_adopted) {
        at.adopted = count;
        fds[count++] = {m_adopted.get(), POLLIN, 0};
    }
    if (!m_exited_at && m_wrap_status >= 0) {
        at.status = count;
        fds[count++] = {m_wrap_status, POLLIN, 0};
    }
    // Only to wake up: the next on_clock asks wrap_init_gone().
    if (m_exited_at && !m_dead_at && m_wrap_init) fds[count++] = {m_wrap_init.get(), POLLIN, 0};
    return count;
}

void RunSession::loop(RunResult& result) {
    for (;;) {
        auto now = Clock::now();
        on_clock(now);
        if (finished(now)) break;
        pollfd fds[8];
        Slots at;
        const int count =
            gather(fds, at, awaiting_exit_only() ? Watch::exit_only : Watch::exit_and_output);
        const int ready = wait_ready(fds, count, poll_timeout(now));
        if (ready < 0 && errno != EINTR) break;
        if (ready <= 0) continue;
        if (at.out >= 0) on_output_ready(fds[at.out].revents, m_out, Stream::out);
        if (at.err >= 0) on_output_ready(fds[at.err].revents, m_err, Stream::err);
        if (at.in >= 0 && fds[at.in].revents != 0) {
            if (fds[at.in].revents & (POLLERR | POLLHUP)) {
                m_in.reset();
            } else {
                feed_stdin();
            }
        }
        if (at.child >= 0 && fds[at.child].revents != 0) on_main_exit(result);
        // Exited: the next on_clock reaps it, and looks for another child if one is left.
        if (at.adopted >= 0 && fds[at.adopted].revents != 0) m_adopted.reset();
        if (at.status >= 0 && fds[at.status].revents != 0) watch_wrap_init();
        if (at.cancel >= 0 && fds[at.cancel].revents != 0 && !m_exited_at) {
            m_cancelled = true;
            stop_tree(Clock::now());
        }
    }
    // The drain deadline passed with a pipe still open: its writer is outside the tree.
    m_out.reset();
    m_err.reset();
    result.timed_out = m_timed_out;
    result.out = m_out_capture.result();
    result.err = m_err_capture.result();
    result.skip_markers = m_out_capture.markers() + m_err_capture.markers();
}

}  // namespace sandbox
