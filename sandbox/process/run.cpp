// run(): validate, plan the wrap, open the pipes, pick the tree-kill mechanism, spawn, then
// hand over to the run's session (run_session.cpp: the poll loop), and classify how it ended.
#include "sandbox/process/run.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <exception>
#include <expected>
#include <system_error>
#include <thread>

#include "sandbox/process/cgroup.hpp"
#include "sandbox/process/run_session.hpp"
#include "sandbox/process/run_tree.hpp"
#include "sandbox/process/spawn.hpp"
#include "sandbox/wrap/payload_status.hpp"
#include "sandbox/wrap/wrap.hpp"

namespace sandbox {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int k_pipe_size = 1024 * 1024;

RunResult refused(RunErrorKind kind, std::string message) {
    RunResult result;
    result.error = RunError{kind, std::move(message), 0};
    return result;
}

bool has_nul(std::string_view text) {
    return text.find('\0') != std::string_view::npos;
}

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
        return "--allow-egress " + describe(request.policy.egress.front()) +
               ": --sandbox off cannot restrict egress (everything is reachable); use a sandbox "
               "or drop --allow-egress";
    if (request.policy.network == NetworkMode::host && !request.policy.egress.empty())
        return "--allow-egress " + describe(request.policy.egress.front()) +
               ": --network host reaches everything; use --network allowlist";
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

void set_nonblocking(int fd) {
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
}

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
    if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0)
        return fail(ErrorKind::permanent, errno_message("pipe2"));
    Pipe pipe{Fd(fds[0]), Fd(fds[1])};
    if (::fcntl(pipe.write.get(), F_SETFL, 0) != 0)
        return fail(ErrorKind::permanent, errno_message("fcntl(F_SETFL) on an output pipe"));
    ::fcntl(pipe.read.get(), F_SETPIPE_SZ, k_pipe_size);  // fewer wake-ups; best effort
    return pipe;
}

Expected<RunPipes> open_pipes(const RunRequest& request) {
    RunPipes pipes;
    if (request.stdin_text && !request.stdin_text->empty()) {
        auto in = SANDGATE_TRY(make_pipe());
        set_nonblocking(in.write.get());
        pipes.stdin_parent = std::move(in.write);
        pipes.stdin_child = std::move(in.read);
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

// A plan's refusal says whether the request was at fault (invalid_request) or the machine
// (sandbox_unavailable).
RunError plan_refusal(const Error& error) {
    return RunError{error.kind == ErrorKind::invalid_input ? RunErrorKind::invalid_request
                                                           : RunErrorKind::sandbox_unavailable,
                    error.message, 0};
}

// The wrap's plan, or nothing for --sandbox off. It may be pending: start_child completes it.
std::expected<std::optional<WrapPlan>, RunResult> plan_for(const RunRequest& request) {
    if (request.policy.mode == SandboxMode::off) return std::nullopt;
    auto planned = plan_wrap(request, PlanTiming::pending);
    if (!planned) {
        RunResult result;
        result.error = plan_refusal(planned.error());
        return std::unexpected(std::move(result));
    }
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
        spec.netns_fd = plan->netns.get();
        spec.identity = plan->identity;
        spec.fresh_session_keyring = plan->fresh_session_keyring;
        spec.portal_dir = plan->portal_dir;
        for (std::size_t i = 0; i < plan->portal_fds.size(); ++i)
            spec.portal.push_back({plan->portal_fds[i].get(), plan->portal_directories[i]});
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
        result.error =
            RunError{RunErrorKind::timeout, "timed out after " + describe(*request.timeout), 0};
        if (plan) run_on_timeout(*plan);
    }
}

RunError spawn_failure(const SpawnError& error) {
    return RunError{RunErrorKind::spawn_failed, error.message, error.errno_value};
}

// The pending part of the plan; an exception (no memory, say) is an error like the others,
// since it ends a helper thread.
Expected<void> complete_plan(const RunRequest& request, WrapPlan& plan) noexcept {
    try {
        return plan.pending->complete(request, plan);
    } catch (const std::exception& error) {
        return fail(ErrorKind::permanent, std::string("planning the wrap: ") + error.what());
    }
}

// Spawns `spec` while a helper thread completes the pending plan: the spawn holds this thread
// until bwrap has exec'd (vfork, ~0.2 ms), about what the rest of the plan takes, and bwrap
// then waits on its options socket. The spawn stays on this thread: a wrapper's
// --die-with-parent (PR_SET_PDEATHSIG) follows the thread that forked it, and the helper ends
// first. The helper takes no signal (it starts with all of them blocked): they stay with the
// threads that expect them. Without a thread to be had, the plan is completed after the spawn.
std::expected<Child, SpawnError> spawn_completing(const SpawnSpec& spec, const RunRequest& request,
                                                  WrapPlan& plan, Expected<void>& completed) {
    sigset_t all, previous;
    ::sigfillset(&all);
    ::pthread_sigmask(SIG_SETMASK, &all, &previous);
    std::optional<std::thread> helper;
    try {
        helper.emplace([&] { completed = complete_plan(request, plan); });
    } catch (const std::system_error&) {
    }
    ::pthread_sigmask(SIG_SETMASK, &previous, nullptr);
    auto spawned = spawn(spec);
    if (helper)
        helper->join();
    else
        completed = complete_plan(request, plan);
    return spawned;
}

// Spawns the command (the wrapper, when there is a plan), completing a pending plan meanwhile.
// A wrapper started for a payload the completed plan replaced (it cannot run inside) is killed,
// having been given nothing, before the replacement is started and gets the options. On a
// refusal the waiting wrapper is killed and reaped (~Child).
std::expected<Child, RunError> start_child(const RunRequest& request, WrapPlan* plan,
                                           const RunPipes& pipes, const RunTree& tree) {
    const SpawnSpec spec = spawn_spec(request, plan, pipes, tree);
    if (!plan || !plan->pending) {
        auto spawned = spawn(spec);
        if (!spawned) return std::unexpected(spawn_failure(spawned.error()));
        return std::move(*spawned);
    }
    Expected<void> completed;
    auto spawned = spawn_completing(spec, request, *plan, completed);
    if (!completed) return std::unexpected(plan_refusal(completed.error()));
    if (!spawned) return std::unexpected(spawn_failure(spawned.error()));
    std::optional<Child> child(std::move(*spawned));
    if (plan->argv != spec.argv) {
        child.reset();  // killed and reaped: it must not be the one that reads the options
        auto again = spawn(spawn_spec(request, plan, pipes, tree));
        if (!again) return std::unexpected(spawn_failure(again.error()));
        child.emplace(std::move(*again));
    }
    if (auto released = plan->pending->release(); !released)
        return std::unexpected(plan_refusal(released.error()));
    plan->pending.reset();
    return std::move(*child);
}

// Runs the started child's session to its end.
void watch(const RunRequest& request, WrapPlan* plan, Child child, RunPipes pipes,
           const RunTree& tree, RunResult& result) {
    // The child holds its own copies now; ours must go, or EOF would never come.
    std::vector<Fd> handed_over;
    handed_over.push_back(std::move(pipes.stdin_child));
    handed_over.push_back(std::move(pipes.out.write));
    handed_over.push_back(std::move(pipes.err.write));
    if (plan) {
        for (auto& fd : plan->inherited_fds) handed_over.push_back(std::move(fd));
        for (auto& fd : plan->join_cgroups) handed_over.push_back(std::move(fd));
        handed_over.push_back(std::move(plan->netns));
        plan->inherited_fds.clear();
        plan->join_cgroups.clear();
    }
    close_all(handed_over);
    // The wrapper's pid 1 is watched through its status channel, unless we adopt it anyway.
    const int wrap_status =
        plan && plan->status && !tree.adopts_orphans() ? plan->status.get() : -1;
    RunSession session(request, child, tree, std::move(pipes.out.read), std::move(pipes.err.read),
                       std::move(pipes.stdin_parent), wrap_status);
    session.loop(result);
    if (plan && plan->egress) result.egress = plan->egress->finish();  // the tree is gone
    if (plan) apply_payload_status(plan->payload_status, result);
    classify_end(request, plan, session, result);
}

}  // namespace

RunResult run(const RunRequest& request) {
    const auto start = Clock::now();
    if (auto reason = invalid_reason(request))
        return refused(RunErrorKind::invalid_request, *reason);
    if (request.cancel != nullptr && request.cancel->cancelled())
        return refused(RunErrorKind::cancelled, "cancelled before it started");
    auto plan = plan_for(request);
    if (!plan) return std::move(plan.error());
    WrapPlan* const wrap = *plan ? &**plan : nullptr;

    auto pipes = open_pipes(request);
    if (!pipes) return refused(RunErrorKind::spawn_failed, pipes.error().message);
    const RunTree tree = choose_tree(request, wrap);
    if (wrap) {
        if (auto limited = write_leaf_limits(tree, *wrap); !limited)
            return refused(RunErrorKind::sandbox_unavailable, limited.error().message);
    }
    auto child = start_child(request, wrap, *pipes, tree);
    // A refused plan is refused as before any start; a failed spawn is the run's outcome.
    if (!child && child.error().kind != RunErrorKind::spawn_failed)
        return refused(child.error().kind, child.error().message);
    RunResult result;
    if (wrap) result.sandbox = std::move(wrap->description);
    result.tree_kill = tree.kind();
    if (!child)
        result.error = std::move(child.error());
    else
        watch(request, wrap, std::move(*child), std::move(*pipes), tree, result);
    result.duration = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
    return result;
}

int RunResult::exit_status() const {
    if (error) {
        switch (error->kind) {
            case RunErrorKind::timeout:
                return 124;
            case RunErrorKind::cancelled:
                return k_cancelled_exit_status;
            case RunErrorKind::invalid_request:
            case RunErrorKind::sandbox_unavailable:
                return 125;
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

}  // namespace sandbox
