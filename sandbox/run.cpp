// run(): validate, plan the wrap, pick the tree-kill mechanism, spawn, then one poll loop
// that feeds stdin, drains stdout/stderr, enforces the deadline and notices the child's exit
// through its pidfd; after that exit the rest of the tree is killed and the pipes drained.
#include "sandbox/run.hpp"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <memory>

#include "sandbox/capture.hpp"
#include "sandbox/cgroup.hpp"
#include "sandbox/run_tree.hpp"
#include "sandbox/spawn.hpp"
#include "sandbox/wrap.hpp"

namespace sandbox {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int k_pipe_size = 1024 * 1024;
// How long a killed cgroup may take to empty before the run stops waiting for it.
constexpr std::chrono::seconds k_cgroup_empty_deadline{10};

RunResult refused(RunErrorKind kind, std::string message) {
    RunResult result;
    result.error = RunError{kind, std::move(message), 0};
    return result;
}

bool has_nul(std::string_view text) { return text.find('\0') != std::string_view::npos; }

std::optional<std::string> invalid_reason(const RunRequest& request) {
    if (request.argv.empty() || request.argv.front().empty()) return "empty argv: nothing to run";
    for (const auto& arg : request.argv)
        if (has_nul(arg)) return "an argument contains a NUL byte";
    for (const auto& [name, value] : request.env)
        if (name.empty() || name.find('=') != std::string::npos || has_nul(name) || has_nul(value))
            return "invalid environment variable name '" + name + "'";
    if (request.stdin_text && request.stdin_text->size() > k_max_stdin_bytes)
        return "stdin is " + std::to_string(request.stdin_text->size()) + " bytes, more than " +
               std::to_string(k_max_stdin_bytes);
    if (request.output_limit > k_max_output_limit)
        return "output limit " + std::to_string(request.output_limit) + " is more than " +
               std::to_string(k_max_output_limit);
    if (request.policy.mode == SandboxMode::off && !request.policy.egress.empty())
        return "--allow-egress " + request.policy.egress.front().host +
               ": --sandbox off cannot restrict egress (everything is reachable); use a sandbox "
               "or drop --allow-egress";
    if (!request.cwd.empty()) {
        std::error_code ec;
        if (!std::filesystem::is_directory(request.cwd, ec))
            return "working directory '" + request.cwd.string() + "' is not a directory";
    }
    return std::nullopt;
}

std::string describe(std::chrono::milliseconds duration) {
    const auto ms = duration.count();
    return ms % 1000 == 0 ? std::to_string(ms / 1000) + "s" : std::to_string(ms) + "ms";
}

struct Pipe {
    Fd read;
    Fd write;
};

Expected<Pipe> make_pipe() {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return fail(ErrorKind::permanent, errno_message("pipe2"));
    return Pipe{Fd(fds[0]), Fd(fds[1])};
}

void set_nonblocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

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

// The poll loop of one spawned run.
class Session {
public:
    Session(const RunRequest& request, Child& child, const RunTree& tree, Fd out, Fd err, Fd in)
        : m_request(request), m_child(child), m_tree(tree), m_out(std::move(out)),
          m_err(std::move(err)), m_in(std::move(in)), m_out_capture(request.output_limit),
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
        int out = -1, err = -1, in = -1, child = -1, cancel = -1;
    };
    int gather(pollfd* fds, Slots& at, bool with_output) const;
    void stop_tree(Clock::time_point now);
    void read_from(Fd& fd, Stream stream);
    void on_output_ready(short revents, Fd& fd, Stream stream);
    void end_stream(Fd& fd);
    void feed_stdin();
    void on_main_exit(RunResult& result);
    void on_clock(Clock::time_point now);
    std::optional<Clock::duration> poll_timeout(Clock::time_point now) const;
    bool finished(Clock::time_point now) const;

    const RunRequest& m_request;
    Child& m_child;
    const RunTree& m_tree;
    Fd m_out;
    Fd m_err;
    Fd m_in;
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

void Session::read_from(Fd& fd, Stream stream) {
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
void Session::on_output_ready(short revents, Fd& fd, Stream stream) {
    if ((revents & POLLIN) != 0) {
        read_from(fd, stream);
    } else if (revents != 0) {
        end_stream(fd);
    }
}

void Session::end_stream(Fd& fd) {
    fd.reset();
    if (m_exited_at && !m_out && !m_err) recheck_soon();
}

void Session::feed_stdin() {
    const std::string& text = *m_request.stdin_text;
    const ssize_t n = write_no_sigpipe(m_in.get(), text.data() + m_in_done, text.size() - m_in_done);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (n < 0) {  // EPIPE: the child closed its stdin; the rest is not wanted
        m_in.reset();
        return;
    }
    m_in_done += static_cast<std::size_t>(n);
    if (m_in_done == text.size()) m_in.reset();  // EOF for the child
}

void Session::on_main_exit(RunResult& result) {
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

void Session::on_clock(Clock::time_point now) {
    if (m_exited_at) {
        if (!m_dead_at && (m_tree.dead() || now >= *m_exited_at + k_cgroup_empty_deadline))
            m_dead_at = now;
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
void Session::stop_tree(Clock::time_point now) {
    m_tree.terminate(m_child);
    m_kill_at = now + m_request.kill_grace;
}

std::optional<Clock::duration> Session::poll_timeout(Clock::time_point now) const {
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
    return std::clamp<Clock::duration>(*next - now, Clock::duration::zero(), std::chrono::seconds(60));
}

bool Session::finished(Clock::time_point now) const {
    if (!m_dead_at) return false;
    return (!m_out && !m_err) || now >= *m_dead_at + k_drain_deadline;
}

int Session::gather(pollfd* fds, Slots& at, bool with_output) const {
    int count = 0;
    if (with_output && m_out) { at.out = count; fds[count++] = {m_out.get(), POLLIN, 0}; }
    if (with_output && m_err) { at.err = count; fds[count++] = {m_err.get(), POLLIN, 0}; }
    if (m_in) { at.in = count; fds[count++] = {m_in.get(), POLLOUT, 0}; }
    if (!m_exited_at) { at.child = count; fds[count++] = {m_child.wait_fd(), POLLIN, 0}; }
    if (!m_exited_at && !m_timed_out && !m_cancelled && m_request.cancel != nullptr) {
        at.cancel = count;
        fds[count++] = {m_request.cancel->fd(), POLLIN, 0};
    }
    if (m_exited_at && !m_dead_at && m_tree.cgroup())
        fds[count++] = {m_tree.cgroup()->events_fd(), POLLPRI, 0};
    return count;
}

int wait_ready(pollfd* fds, int count, std::optional<Clock::duration> wait) {
    timespec wait_spec{};
    if (wait) {
        const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(*wait).count();
        wait_spec = {static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
    }
    return ::ppoll(fds, static_cast<nfds_t>(count), wait ? &wait_spec : nullptr, nullptr);
}

void Session::loop(RunResult& result) {
    for (;;) {
        auto now = Clock::now();
        on_clock(now);
        if (finished(now)) break;
        pollfd fds[6];
        Slots at;
        const int count = gather(fds, at, true);
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

Expected<Fd> open_stdin(const RunRequest& request, Fd& parent_end) {
    if (request.stdin_text && !request.stdin_text->empty()) {
        auto pipe = make_pipe();
        if (!pipe) return std::unexpected(pipe.error());
        set_nonblocking(pipe->write.get());
        parent_end = std::move(pipe->write);
        return std::move(pipe->read);
    }
    Fd null(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    if (!null) return fail(ErrorKind::permanent, errno_message("open /dev/null"));
    return null;
}

Expected<Pipe> output_pipe() {
    auto pipe = make_pipe();
    if (!pipe) return pipe;
    ::fcntl(pipe->read.get(), F_SETPIPE_SZ, k_pipe_size);  // fewer wake-ups; best effort
    set_nonblocking(pipe->read.get());
    return pipe;
}

void run_on_timeout(const WrapPlan& plan) {
    if (plan.on_timeout_argv.empty()) return;
    RunRequest cleanup;
    cleanup.argv = plan.on_timeout_argv;
    cleanup.env = plan.env;
    cleanup.policy.mode = SandboxMode::off;
    cleanup.timeout = std::chrono::seconds(30);
    (void)run(cleanup);
}

}  // namespace

RunResult run(const RunRequest& request) {
    const auto start = Clock::now();
    if (auto reason = invalid_reason(request)) return refused(RunErrorKind::invalid_request, *reason);
    if (request.cancel != nullptr && request.cancel->cancelled())
        return refused(RunErrorKind::cancelled, "cancelled before it started");

    std::optional<WrapPlan> plan;
    if (request.policy.mode != SandboxMode::off) {
        auto planned = plan_wrap(request);
        if (!planned)
            return refused(planned.error().kind == ErrorKind::invalid_input
                               ? RunErrorKind::invalid_request
                               : RunErrorKind::sandbox_unavailable,
                           planned.error().message);
        plan = std::move(*planned);
    }

    RunResult result;
    if (plan) {
        result.sandbox = plan->description;
        result.sandbox_json = plan->description.dump();
    }
    Fd stdin_parent;
    auto stdin_child = open_stdin(request, stdin_parent);
    auto out = output_pipe();
    auto err = output_pipe();
    if (!stdin_child || !out || !err)
        return refused(RunErrorKind::spawn_failed,
                       !stdin_child ? stdin_child.error().message
                                    : (!out ? out.error().message : err.error().message));

    RunTree tree = choose_tree(request, plan ? &*plan : nullptr);
    result.tree_kill = tree.kind();
    if (plan) {
        if (auto limited = write_leaf_limits(tree, *plan); !limited)
            return refused(RunErrorKind::sandbox_unavailable, limited.error().message);
    }
    SpawnSpec spec;
    spec.argv = plan ? plan->argv : request.argv;
    spec.env = plan ? plan->env : request.env;
    spec.cwd = request.cwd;
    spec.stdin_fd = stdin_child->get();
    spec.stdout_fd = out->write.get();
    spec.stderr_fd = err->write.get();
    if (plan) {
        for (const auto& fd : plan->inherited_fds) spec.inherited_fds.push_back(fd.get());
        for (const auto& fd : plan->join_cgroups) spec.join_cgroup_procs.push_back(fd.get());
        spec.rlimits = plan->rlimits;
    }
    spec.cgroup_fd = tree.cgroup() ? tree.cgroup()->dir_fd() : -1;
    spec.supervision = tree.supervision();
    spec.exec_check = ExecCheck::at_reap;  // one sleep (for the exit), not two

    auto child = spawn(spec);
    // The child holds its own copies now; ours must go, or EOF would never come.
    stdin_child->reset();
    out->write.reset();
    err->write.reset();
    if (plan) {
        plan->inherited_fds.clear();
        plan->join_cgroups.clear();
    }
    if (!child) {
        result.error = RunError{RunErrorKind::spawn_failed, child.error().message,
                                child.error().errno_value};
        result.duration = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
        return result;
    }

    Session session(request, *child, tree, std::move(out->read), std::move(err->read),
                    std::move(stdin_parent));
    session.loop(result);
    if (plan && !session.cancelled() && !result.timed_out) {
        if (auto refused_by = diagnose_wrap_failure(*plan, result.exit_code)) {
            result.error = RunError{RunErrorKind::sandbox_unavailable, std::move(*refused_by), 0};
            result.exit_code.reset();  // the payload never ran
        }
    }
    if (session.cancelled()) {
        result.error = RunError{RunErrorKind::cancelled, "cancelled", 0};
    } else if (result.timed_out) {
        result.error = RunError{RunErrorKind::timeout,
                                "timed out after " + describe(*request.timeout), 0};
        if (plan) run_on_timeout(*plan);
    }
    result.duration = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
    return result;
}

int RunResult::exit_status() const {
    if (error) {
        switch (error->kind) {
            case RunErrorKind::timeout: return 124;
            case RunErrorKind::cancelled: return k_cancelled_exit_status;
            case RunErrorKind::invalid_request:
            case RunErrorKind::sandbox_unavailable: return 125;
            case RunErrorKind::spawn_failed:
                if (error->errno_value == ENOENT || error->errno_value == ENOTDIR) return 127;
                if (error->errno_value != 0) return 126;
                return 125;
        }
    }
    if (timed_out) return 124;
    if (exit_code) return *exit_code;
    if (signal) return 128 + *signal;
    return 125;
}

std::string_view to_string(SandboxMode mode) {
    switch (mode) {
        case SandboxMode::off: return "off";
        case SandboxMode::bwrap: return "bwrap";
        case SandboxMode::container: return "container";
    }
    return "off";
}

std::string_view to_string(NetworkMode mode) { return mode == NetworkMode::none ? "none" : "host"; }

std::string_view to_string(TreeKill kill) {
    switch (kill) {
        case TreeKill::cgroup: return "cgroup";
        case TreeKill::subreaper: return "subreaper";
        case TreeKill::pidns: return "pidns";
    }
    return "subreaper";
}

std::string_view to_string(RunErrorKind kind) {
    switch (kind) {
        case RunErrorKind::timeout: return "timeout";
        case RunErrorKind::spawn_failed: return "spawn_failed";
        case RunErrorKind::invalid_request: return "invalid_request";
        case RunErrorKind::sandbox_unavailable: return "sandbox_unavailable";
        case RunErrorKind::cancelled: return "cancelled";
    }
    return "spawn_failed";
}

}  // namespace sandbox
