#pragma once
// Starting one command: fork (clone3, straight into the run's cgroup), then in the child
// (async-signal-safe steps only) join any further (v1) cgroups and a given network namespace,
// setsid, put stdio and the inherited fds in place, mark every other fd close-on-exec, reset
// signal mask and dispositions, chdir, set the resource limits and execve with exactly the
// given environment. For a wrapper started by root it also binds the paths the wrapper needs
// into a private "portal" (see SpawnSpec::portal), drops to an unprivileged host identity and
// joins a fresh session keyring.
// An O_CLOEXEC error pipe carries the failing step's errno back, so "not found" (ENOENT) and
// "not executable" (EACCES, ENOEXEC) are told apart exactly, before any output is read.
//
// With Supervision::subreaper a per-run reaper process sits between the caller and the
// command (reaper.hpp): it is PR_SET_CHILD_SUBREAPER, so orphans of the command's tree are
// adopted by it rather than by the caller, which keeps concurrent runs in one process apart.

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "sandbox/access/safe_access.hpp"
#include "sandbox/base.hpp"
#include "sandbox/process/run.hpp"

namespace sandbox {

enum class Supervision {
    direct,     // the command is our child (its tree is held by a cgroup or a pid namespace)
    subreaper,  // a per-run reaper process is our child and the command is its child
};

// A resource limit the command gets between fork and exec (setrlimit, soft = hard = value):
// the command and everything it starts are bounded from their first instruction, the caller
// never is. No launcher process or shell is involved.
struct ResourceLimit {
    int resource = 0;  // RLIMIT_NPROC, RLIMIT_AS, ...
    std::uint64_t value = 0;
};

// When the caller learns that the command could not be started (a step before exec failed).
enum class ExecCheck {
    // spawn() waits until the command has exec'd or failed, and returns the failure.
    before_return,
    // spawn() returns at once and the failure comes from reap() (ExitInfo::not_started): the
    // caller does not sleep once for the exec and once for the exit. A child that fails before
    // exec writes nothing to its stdio and exits at once, so a caller that drains its output
    // until the exit loses nothing. Direct supervision only (before_return otherwise).
    at_reap,
};

struct SpawnSpec {
    std::vector<std::string> argv;  // argv[0] is looked up on env's PATH unless it has a '/'
    Environment env;
    std::filesystem::path cwd;  // empty: the caller's
    int stdin_fd = -1;          // become the child's 0, 1, 2; not owned, must be valid
    int stdout_fd = -1;
    int stderr_fd = -1;
    std::vector<int> inherited_fds;  // dup'ed to 3, 4, ...; not owned
    int cgroup_fd = -1;  // >= 0: a cgroup directory the child starts in (CLONE_INTO_CGROUP)
    // Open (O_WRONLY) cgroup.procs files of v1 hierarchies the child writes itself into before
    // anything else; not owned. A failed write fails the spawn (nothing runs unbounded).
    std::vector<int> join_cgroup_procs;
    std::vector<ResourceLimit> rlimits;  // set in the child just before exec
    // >= 0: a network namespace the child joins (setns) before anything but its cgroups; not
    // owned. A failed join fails the spawn (nothing runs in the caller's network instead).
    int netns_fd = -1;
    Supervision supervision = Supervision::direct;
    ExecCheck exec_check = ExecCheck::before_return;
    // Set: the child drops to this uid/gid with no supplementary groups (raw setgroups,
    // setresgid, setresuid: every capability goes with root) after its chdir, just before
    // exec. The parent-death signal is set after the drop (a credential change clears it).
    std::optional<Owner> identity;
    // The child joins a new anonymous session keyring before exec (after the drop, so the
    // keyring is the new identity's): nothing of the caller's keyrings is possessed. ENOSYS
    // (no keyrings, or a seccomp filter: inside sandgate's own wrap) is no error.
    bool fresh_session_keyring = false;
    // Paths the wrapper must bind but `identity` may not reach (a worktree under /root): each
    // fd (O_PATH, open in the caller, not owned) is bind-mounted at portal_dir/<index> in a
    // mount namespace of the child's own (private: nothing propagates back), on a tmpfs over
    // portal_dir, before the drop; the wrapper is told those paths. Empty: no namespace.
    struct PortalEntry {
        int fd = -1;
        bool directory = true;
    };
    std::vector<PortalEntry> portal;
    std::string portal_dir;
};

struct SpawnError {
    int errno_value = 0;
    std::string message;  // "cannot execute 'x': No such file or directory"
};

// How the command ended.
struct ExitInfo {
    std::optional<int> exit_code;
    std::optional<int> signal;
    // ExecCheck::at_reap: the command never started (exit_code and signal are then empty).
    std::optional<SpawnError> not_started;
};

// The process we forked (the command itself, or its reaper). Owns it: the destructor kills
// (SIGKILL) and reaps it when reap() was not called, so no zombie or orphan is left on any
// path.
class Child {
public:
    Child(pid_t pid, Fd pidfd, Fd status_fd, Supervision supervision);
    // ExecCheck::at_reap: the read end of the child's error pipe, read by reap(), and the
    // spec the failure messages name.
    void check_exec_at_reap(Fd error_fd, const SpawnSpec& spec);
    Child(Child&& other) noexcept;
    Child& operator=(Child&&) = delete;
    Child(const Child&) = delete;
    ~Child();

    pid_t pid() const { return m_pid; }
    Supervision supervision() const { return m_supervision; }
    // A pidfd: readable once the forked process has exited (for the reaper: once the whole
    // tree is gone). Until reap() the pid cannot be reused, so signalling it is safe.
    int wait_fd() const { return m_pidfd.get(); }
    // Sends `sig` to the forked process; ignored once it has exited.
    void signal(int sig) const;
    // Reaps the forked process (call when wait_fd() is readable; blocks otherwise) and says
    // how the command ended. For the reaper, the command's status is what it relayed.
    Expected<ExitInfo> reap();

private:
    pid_t m_pid = -1;
    Fd m_pidfd;
    Fd m_status_fd;  // subreaper: the reaper writes the command's wait status here
    Supervision m_supervision;
    bool m_reaped = false;
    Fd m_error_fd;          // ExecCheck::at_reap only
    std::string m_program;  // for its messages
    std::filesystem::path m_cwd;
};

std::expected<Child, SpawnError> spawn(const SpawnSpec& spec);

// A pidfd of `pid` (pidfd_open); invalid when it cannot be had. The caller makes sure the pid
// cannot have been recycled: its own child before it reaps it, or its child's child while
// that child, which alone may reap it, runs.
Fd open_pidfd(pid_t pid);

}  // namespace sandbox
