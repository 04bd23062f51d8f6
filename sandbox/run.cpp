// run(): validate, plan the wrap, open the pipes, pick the tree-kill mechanism, spawn, then
// hand over to the run's session (run_session.cpp: the poll loop), and classify how it ended.
#include "sandbox/run.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <expected>

#include "sandbox/cgroup.hpp"
#include "sandbox/run_session.hpp"
#include "sandbox/run_tree.hpp"
#include "sandbox/spawn.hpp"
#include "sandbox/wrap.hpp"

namespace sandbox {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int k_pipe_size = 1024 * 1024;

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

// The three pipes of a run: the child's ends go to the spawn, the parent's to the session.
struct RunPipes {
    Fd stdin_parent;  // empty unless there is stdin text to feed
    Fd stdin_child;   // the pipe's read end, or /dev/null
    Pipe out;
    Pipe err;
};

// Our end non-blocking, the child's blocking: made non-blocking whole, the write end set
// back (one fcntl instead of a get and a set; O_NONBLOCK lives in each end's own file).
Expected<Pipe> output_pipe() {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) return fail(ErrorKind::permanent, errno_message("pipe2"));
    Pipe pipe{Fd(fds[0]), Fd(fds[1])};
    if (::fcntl(pipe.write.get(), F_SETFL, 0) != 0)
        return fail(ErrorKind::permanent, errno_message("fcntl(F_SETFL) on an output pipe"));
    ::fcntl(pipe.read.get(), F_SETPIPE_SZ, k_pipe_size);  // fewer wake-ups; best effort
    return pipe;
}

Expected<RunPipes> open_pipes(const RunRequest& request) {
    RunPipes pipes;
    if (request.stdin_text && !request.stdin_text->empty()) {
        auto in = make_pipe();
        if (!in) return std::unexpected(in.error());
        set_nonblocking(in->write.get());
        pipes.stdin_parent = std::move(in->write);
        pipes.stdin_child = std::move(in->read);
    } else {
        pipes.stdin_child = Fd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
        if (!pipes.stdin_child) return fail(ErrorKind::permanent, errno_message("open /dev/null"));
    }
    auto out = output_pipe();
    if (!out) return std::unexpected(out.error());
    auto err = output_pipe();
    if (!err) return std::unexpected(err.error());
    pipes.out = std::move(*out);
    pipes.err = std::move(*err);
    return pipes;
}

// The wrap's plan, or nothing for --sandbox off; a refusal says whether the request was at
// fault (invalid_request) or the machine (sandbox_unavailable).
std::expected<std::optional<WrapPlan>, RunResult> plan_for(const RunRequest& request) {
    if (request.policy.mode == SandboxMode::off) return std::nullopt;
    auto planned = plan_wrap(request);
    if (!planned)
        return std::unexpected(refused(planned.error().kind == ErrorKind::invalid_input
                                           ? RunErrorKind::invalid_request
                                           : RunErrorKind::sandbox_unavailable,
                                       planned.error().message));
    return std::optional<WrapPlan>(std::move(*planned));
}

SpawnSpec spawn_spec(const RunRequest& request, const WrapPlan* plan, const RunPipes& pipes,
                     const RunTree& tree) {
    SpawnSpec spec;
    spec.argv = plan ? plan->argv : request.argv;
    spec.env = plan ? plan->env : request.env;
    spec.cwd = request.cwd;
    spec.stdin_fd = pipes.stdin_child.get();
    spec.stdout_fd = pipes.out.write.get();
    spec.stderr_fd = pipes.err.write.get();
    if (plan) {
        for (const auto& fd : plan->inherited_fds) spec.inherited_fds.push_back(fd.get());
        for (const auto& fd : plan->join_cgroups) spec.join_cgroup_procs.push_back(fd.get());
        spec.rlimits = plan->rlimits;
    }
    spec.cgroup_fd = tree.cgroup() ? tree.cgroup()->dir_fd() : -1;
    spec.supervision = tree.supervision();
    spec.exec_check = ExecCheck::at_reap;  // one sleep (for the exit), not two
    return spec;
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

// After the loop: a wrapper that failed before the payload, a cancel or a timeout becomes the
// run's error (a non-zero exit of the payload is an outcome, not an error).
void classify_end(const RunRequest& request, WrapPlan* plan, const RunSession& session,
                  RunResult& result) {
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
}

// Spawns the command (the wrapper, when there is a plan) and runs the session to its end.
void spawn_and_watch(const RunRequest& request, WrapPlan* plan, RunPipes pipes,
                     const RunTree& tree, RunResult& result) {
    auto child = spawn(spawn_spec(request, plan, pipes, tree));
    // The child holds its own copies now; ours must go, or EOF would never come.
    std::vector<Fd> handed_over;
    handed_over.push_back(std::move(pipes.stdin_child));
    handed_over.push_back(std::move(pipes.out.write));
    handed_over.push_back(std::move(pipes.err.write));
    if (plan) {
        for (auto& fd : plan->inherited_fds) handed_over.push_back(std::move(fd));
        for (auto& fd : plan->join_cgroups) handed_over.push_back(std::move(fd));
        plan->inherited_fds.clear();
        plan->join_cgroups.clear();
    }
    close_all(handed_over);
    if (!child) {
        result.error = RunError{RunErrorKind::spawn_failed, child.error().message,
                                child.error().errno_value};
        return;
    }
    // The wrapper's pid 1 is watched through its status channel, unless we adopt it anyway.
    const int wrap_status = plan && plan->status && !tree.adopts_orphans() ? plan->status.get() : -1;
    RunSession session(request, *child, tree, std::move(pipes.out.read),
                       std::move(pipes.err.read), std::move(pipes.stdin_parent), wrap_status);
    session.loop(result);
    classify_end(request, plan, session, result);
}

}  // namespace

RunResult run(const RunRequest& request) {
    const auto start = Clock::now();
    if (auto reason = invalid_reason(request)) return refused(RunErrorKind::invalid_request, *reason);
    if (request.cancel != nullptr && request.cancel->cancelled())
        return refused(RunErrorKind::cancelled, "cancelled before it started");
    auto plan = plan_for(request);
    if (!plan) return std::move(plan.error());
    WrapPlan* const wrap = *plan ? &**plan : nullptr;

    RunResult result;
    if (wrap) {
        result.sandbox = std::move(wrap->description);
    }
    auto pipes = open_pipes(request);
    if (!pipes) return refused(RunErrorKind::spawn_failed, pipes.error().message);
    const RunTree tree = choose_tree(request, wrap);
    result.tree_kill = tree.kind();
    if (wrap) {
        if (auto limited = write_leaf_limits(tree, *wrap); !limited)
            return refused(RunErrorKind::sandbox_unavailable, limited.error().message);
    }
    spawn_and_watch(request, wrap, std::move(*pipes), tree, result);
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

std::string posture_text(const RunResult& result) {
    return result.sandbox_json.empty() ? result.sandbox.dump() : result.sandbox_json;
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
