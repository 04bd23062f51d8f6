#pragma once
// One job's process, as the daemon runs it: its own process group, stdout and stderr appended
// to the job's log file, stdin /dev/null, no descriptor of the agent's but 0-2, and SIGKILL
// when the agent dies (PR_SET_PDEATHSIG), so that a restarted agent never finds its jobs
// still running unobserved. Started by sandbox::spawn (its own session, so the group's id is
// the leader's pid). Owned: destroying a JobProcess that has not been reaped kills its process
// group and reaps it. The group is always killed before the leader is reaped: a reaped
// leader's pid may be handed out again, and kill(-pid) would then reach a stranger's group.

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "common/fd.hpp"
#include "sandbox/process/run.hpp"
#include "sandbox/process/spawn.hpp"

namespace agent {

struct JobExit {
    std::optional<int> exit_code;
    std::optional<int> signal;
};

class JobProcess {
public:
    // `log_file` empty: stdout and stderr stay the agent's own (its helper processes).
    static common::Expected<JobProcess> start(const std::vector<std::string>& argv,
                                              const sandbox::Environment& env,
                                              const std::filesystem::path& log_file);
    JobProcess(JobProcess&& other) noexcept;
    JobProcess& operator=(JobProcess&&) = delete;
    JobProcess(const JobProcess&) = delete;
    ~JobProcess();

    pid_t pid() const { return m_pid; }
    // Non-blocking: the exit once the process has ended (reaping it), nullopt while it runs.
    std::optional<JobExit> poll();
    // Blocks until the process has ended (waiting on its pidfd) or `timeout` has passed: the
    // exit once ended (reaping it), nullopt on timeout. A signal does not cut the wait short.
    std::optional<JobExit> wait_for(std::chrono::milliseconds timeout);
    // Signals the whole process group (ignored once reaped).
    void signal_group(int sig) const;

private:
    explicit JobProcess(sandbox::Child child) : m_pid(child.pid()), m_child(std::move(child)) {}
    // Kills the group while the leader is unreaped (its pid, the group's id, cannot be
    // reused yet), then reaps the leader.
    JobExit kill_group_and_reap();
    pid_t m_pid = -1;
    // Engaged until reaped.
    std::optional<sandbox::Child> m_child;
};

}  // namespace agent
