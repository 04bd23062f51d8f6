#pragma once
// Test-only: spawns a WrapPlan directly (fds 3.. from plan.inherited_fds, plan.env, output
// captured), for exercising plan_wrap() independently of sandbox::run.

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "sandbox/process/spawn_child.hpp"
#include "sandbox/wrap/wrap.hpp"

namespace tests {

// A request for `argv` in `cwd` with a small fixed environment (PATH, LANG): the wrap's
// default posture, as the wrap's tests start from.
inline sandbox::RunRequest request_in(const std::filesystem::path& cwd,
                                      std::vector<std::string> argv) {
    sandbox::RunRequest request;
    request.argv = std::move(argv);
    request.cwd = cwd;
    request.env = {{"PATH", "/usr/local/bin:/usr/bin:/bin"}, {"LANG", "C.UTF-8"}};
    return request;
}

struct Spawned {
    int status = -1;  // exit code, or 128+signal
    std::string out;
    std::string err;
};

// A started plan: its process and our ends of its output pipes.
struct StartedPlan {
    pid_t pid = -1;
    int out = -1;
    int err = -1;
};

// Starts the plan's wrapper (stdin_text fed and closed) without waiting for it.
inline StartedPlan start_plan(sandbox::WrapPlan& plan, const std::string& stdin_text = {}) {
    int out[2], err[2], in[2];
    if (::pipe2(out, O_CLOEXEC) || ::pipe2(err, O_CLOEXEC) || ::pipe2(in, O_CLOEXEC)) return {};
    std::vector<char*> argv;
    for (auto& arg : plan.argv) argv.push_back(arg.data());
    argv.push_back(nullptr);
    std::vector<std::string> env_text;
    for (const auto& [k, v] : plan.env) env_text.push_back(k + "=" + v);
    std::vector<char*> envp;
    for (auto& e : env_text) envp.push_back(e.data());
    envp.push_back(nullptr);
    std::vector<int> portal_sources;
    std::vector<std::string> portal_targets;
    for (const auto& fd : plan.portal_fds) {
        portal_targets.push_back(plan.portal_dir + "/" + std::to_string(portal_sources.size()));
        portal_sources.push_back(fd.get());
    }
    const pid_t pid = ::fork();
    if (pid == 0) {
        // The limits and the network namespace the process core would apply
        // (sandbox/process/spawn.cpp), minus the run's leaf.
        if (plan.netns && ::setns(plan.netns.get(), CLONE_NEWNET) != 0) ::_exit(125);
        // As root, the portal and the host identity, as the process core does them.
        if (!plan.portal_fds.empty() &&
            !sandbox::enter_portal(plan.portal_dir.c_str(), portal_sources, portal_targets,
                                   plan.portal_directories))
            ::_exit(125);
        if (plan.identity && !sandbox::drop_identity(*plan.identity)) ::_exit(125);
        for (auto& fd : plan.join_cgroups)
            if (::write(fd.get(), "0", 1) != 1) ::_exit(125);
        for (const auto& limit : plan.rlimits) {
            const rlimit value{limit.value, limit.value};
            if (::setrlimit(static_cast<__rlimit_resource_t>(limit.resource), &value) != 0)
                ::_exit(125);
        }
        ::dup2(in[0], 0);
        ::dup2(out[1], 1);
        ::dup2(err[1], 2);
        // Move the inherited fds out of the way, then to 3, 4, ...
        std::vector<int> high;
        for (auto& fd : plan.inherited_fds) high.push_back(::fcntl(fd.get(), F_DUPFD_CLOEXEC, 100));
        for (std::size_t i = 0; i < high.size(); ++i) ::dup2(high[i], 3 + static_cast<int>(i));
        ::close_range(3 + static_cast<unsigned>(high.size()), ~0u, 0);
        ::execve(argv[0], argv.data(), envp.data());
        ::_exit(127);
    }
    ::close(out[1]);
    ::close(err[1]);
    ::close(in[0]);
    if (!stdin_text.empty()) (void)!::write(in[1], stdin_text.data(), stdin_text.size());
    ::close(in[1]);
    return {pid, out[0], err[0]};
}

// Collects a started plan's output until EOF and reaps it.
inline Spawned finish_plan(const StartedPlan& started) {
    Spawned result;
    if (started.pid < 0) return result;
    pollfd fds[2] = {{started.out, POLLIN, 0}, {started.err, POLLIN, 0}};
    int open = 2;
    char buffer[65536];
    while (open > 0) {
        ::poll(fds, 2, -1);
        for (int i = 0; i < 2; ++i) {
            if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP))) continue;
            const ssize_t n = ::read(fds[i].fd, buffer, sizeof buffer);
            if (n <= 0) {
                ::close(fds[i].fd);
                fds[i].fd = -1;
                --open;
            } else {
                (i == 0 ? result.out : result.err).append(buffer, static_cast<std::size_t>(n));
            }
        }
    }
    int status = 0;
    ::waitpid(started.pid, &status, 0);
    result.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return result;
}

inline Spawned spawn_plan(sandbox::WrapPlan& plan, const std::string& stdin_text = {}) {
    return finish_plan(start_plan(plan, stdin_text));
}

}  // namespace tests
