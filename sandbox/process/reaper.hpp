#pragma once
// The per-run subreaper (the tree-kill mechanism where no writable cgroup2 exists). A forked
// process that sets PR_SET_CHILD_SUBREAPER, forks the command and then only waits: every
// orphan of the command's tree (a double-forked daemon, a setsid'ed grandchild) is re-parented
// to it, so once the command exits it SIGKILLs and reaps whatever remains, over and over, until
// it has no child left; then it writes the command's wait status to the caller and exits. The
// caller therefore knows the tree is gone when the reaper's pidfd becomes readable.
//
// Why a process of its own rather than PR_SET_CHILD_SUBREAPER on the caller: the attribute is
// process-wide, so concurrent runs in one agent would adopt each other's orphans and could not
// tell them apart, and sweeping them would need waitpid(-1), stealing other children. One
// reaper per run keeps every run's orphans under its own reaper.
//
// Control, by signal to the reaper: k_reaper_terminate sends SIGTERM then SIGCONT to every
// descendant; k_reaper_kill (or the caller's death, via PR_SET_PDEATHSIG) SIGKILLs the tree.
// Everything here runs in a child forked from a possibly multi-threaded process: raw system
// calls only, no allocation, no locks.

#include <signal.h>
#include <sys/types.h>

namespace sandbox {

inline constexpr int k_reaper_terminate = SIGUSR1;
inline constexpr int k_reaper_kill = SIGUSR2;

// Where a child reports a failed step before exec: written whole to the error pipe.
struct ChildFailure {
    int stage = 0;  // a ChildStage
    int errno_value = 0;
};

enum ChildStage : int {
    stage_cgroup = 1,
    stage_setsid,
    stage_fds,
    stage_chdir,
    stage_exec,
    stage_subreaper,
    stage_fork,
    stage_rlimit,
    stage_netns,
    stage_portal,
    stage_identity,
    stage_keyring
};

// Writes `failure` to fd (async-signal-safe).
void report_child_failure(int fd, int stage, int errno_value);

// The reaper's body. `start_command` runs in the command's child and never returns.
// Never returns.
[[noreturn]] void reaper_main(pid_t caller, int status_fd, int error_fd,
                              void (*start_command)(const void*), const void* arg);

// Sends `sig` to every descendant of `root` (not root), found through
// /proc/PID/task/TID/children; Resume::yes sends SIGCONT after it, so that stopped processes
// see it. Returns how many were signalled. Async-signal-safe; a fork racing the walk is caught
// by the callers' repeated sweeps.
enum class Resume { no, yes };
int signal_descendants(pid_t root, int sig, Resume resume);

// A child of `parent` (any of its threads'), or -1 when it has none; read from /proc.
pid_t any_child(pid_t parent);

}  // namespace sandbox
