#include "sandbox/process/spawn.hpp"

#include <fcntl.h>
#include <linux/keyctl.h>
#include <linux/sched.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>

#include "sandbox/process/reaper.hpp"
#include "sandbox/process/spawn_child.hpp"

namespace sandbox {

// The portal: a mount namespace of the child's own whose mounts never propagate back (slave),
// a small tmpfs over portal_dir, and each source bound at an entry of it. Run as root, before
// the drop. The sources are the caller's fds, cloned as detached trees (open_tree) while the
// child is still in the caller's namespace, then attached in its own (move_mount): a bind by
// path from the caller's fds would be refused there (EINVAL, another namespace's mount), and
// nothing is resolved by path.
bool enter_portal(const char* portal_dir, const std::vector<int>& sources,
                  const std::vector<std::string>& targets, const std::vector<bool>& directories) {
    constexpr std::size_t k_max = 64;
    const std::size_t count = targets.size();
    int trees[k_max];
    if (count > k_max || sources.size() != count || directories.size() != count) {
        errno = E2BIG;
        return false;
    }
    for (std::size_t i = 0; i < count; ++i) {
        trees[i] = static_cast<int>(
            ::syscall(SYS_open_tree, sources[i], "",
                      OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE));
        if (trees[i] < 0) return false;
    }
    if (::unshare(CLONE_NEWNS) != 0) return false;
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr) != 0) return false;
    if (::mount("tmpfs", portal_dir, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                "mode=0755,size=64k") != 0)
        return false;
    for (std::size_t i = 0; i < count; ++i) {
        const char* target = targets[i].c_str();
        if (directories[i]) {
            if (::mkdir(target, 0755) != 0) return false;
        } else {
            const int fd = ::open(target, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
            if (fd < 0) return false;
            ::close(fd);
        }
        if (::syscall(SYS_move_mount, trees[i], "", AT_FDCWD, target, MOVE_MOUNT_F_EMPTY_PATH) != 0)
            return false;
        ::close(trees[i]);
    }
    return true;
}

// Raw system calls: they change this task's credentials only. glibc's wrappers would change
// every thread's, and after vfork_child the "threads" are the caller's.
bool drop_identity(const Owner& owner) {
    if (::syscall(SYS_setgroups, 0, nullptr) != 0) return false;
    if (::syscall(SYS_setresgid, owner.gid, owner.gid, owner.gid) != 0) return false;
    return ::syscall(SYS_setresuid, owner.uid, owner.uid, owner.uid) == 0;
}

namespace {

// glibc 2.36's <sys/pidfd.h> lacks extern "C", so its wrappers cannot be linked from C++.
int pidfd_send_signal(int pidfd, int sig) {
    return static_cast<int>(::syscall(SYS_pidfd_send_signal, pidfd, sig, nullptr, 0));
}

// Everything the child needs, built before fork: after fork only system calls on these.
struct ExecPlan {
    std::vector<std::string> candidates;  // execve these in order, as execvp would
    std::vector<std::string> env_strings;
    std::vector<char*> argv;
    std::vector<char*> envp;
    const char* cwd = nullptr;
    std::vector<int> sources;     // become fds 0, 1, 2, 3, ...
    int cgroup_procs_fd = -1;     // set only when clone3 could not place the child itself
    std::vector<int> join_procs;  // further (v1) cgroup.procs files to write "0" to
    std::vector<std::pair<int, rlimit>> rlimits;
    int netns_fd = -1;
    int error_fd = -1;
    pid_t caller = -1;
    bool drop = false;
    Owner identity;
    bool fresh_keyring = false;
    const char* portal_dir = nullptr;
    std::vector<int> portal_sources;          // O_PATH fds of the caller's
    std::vector<std::string> portal_targets;  // "<portal_dir>/<index>"
    std::vector<bool> portal_directories;
};

std::vector<std::string> exec_candidates(const std::string& program, const Environment& env) {
    if (program.find('/') != std::string::npos) return {program};
    // The child's PATH, not ours (glibc's execvpe would search the caller's).
    std::string path = "/usr/local/bin:/usr/bin:/bin";
    for (const auto& [name, value] : env)
        if (name == "PATH") path = value;
    std::vector<std::string> candidates;
    std::size_t start = 0;
    for (;;) {
        const std::size_t end = path.find(':', start);
        std::string dir = path.substr(start, end == std::string::npos ? end : end - start);
        if (dir.empty()) dir = ".";
        candidates.push_back(dir + "/" + program);
        if (end == std::string::npos) break;
        start = end + 1;
    }
    return candidates;
}

ExecPlan make_plan(const SpawnSpec& spec) {
    ExecPlan plan;
    plan.candidates = exec_candidates(spec.argv.front(), spec.env);
    for (const auto& [name, value] : spec.env) plan.env_strings.push_back(name + "=" + value);
    for (const auto& arg : spec.argv) plan.argv.push_back(const_cast<char*>(arg.c_str()));
    plan.argv.push_back(nullptr);
    for (auto& entry : plan.env_strings) plan.envp.push_back(entry.data());
    plan.envp.push_back(nullptr);
    if (!spec.cwd.empty()) plan.cwd = spec.cwd.c_str();
    plan.sources = {spec.stdin_fd, spec.stdout_fd, spec.stderr_fd};
    plan.sources.insert(plan.sources.end(), spec.inherited_fds.begin(), spec.inherited_fds.end());
    plan.join_procs = spec.join_cgroup_procs;
    plan.netns_fd = spec.netns_fd;
    for (const auto& limit : spec.rlimits) {
        const auto value = static_cast<rlim_t>(limit.value);
        plan.rlimits.push_back({limit.resource, rlimit{value, value}});
    }
    plan.caller = ::getpid();
    if (spec.identity) {
        plan.drop = true;
        plan.identity = *spec.identity;
    }
    plan.fresh_keyring = spec.fresh_session_keyring;
    if (!spec.portal.empty()) {
        plan.portal_dir = spec.portal_dir.c_str();
        for (std::size_t i = 0; i < spec.portal.size(); ++i) {
            plan.portal_sources.push_back(spec.portal[i].fd);
            plan.portal_targets.push_back(spec.portal_dir + "/" + std::to_string(i));
            plan.portal_directories.push_back(spec.portal[i].directory);
        }
    }
    return plan;
}

[[noreturn]] void child_fail(const ExecPlan& plan, int stage, int errno_value) {
    report_child_failure(plan.error_fd, stage, errno_value);
    ::_exit(127);
}

// Marks every fd >= first close-on-exec; close_range() where the kernel has it (5.11+).
void cloexec_from(int first) {
    if (::close_range(static_cast<unsigned>(first), ~0U, CLOSE_RANGE_CLOEXEC) == 0) return;
    struct rlimit limit {};
    rlim_t max = 65536;
    if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY)
        max = std::min<rlim_t>(limit.rlim_cur, 1 << 20);
    for (rlim_t fd = static_cast<rlim_t>(first); fd < max; ++fd)
        ::fcntl(static_cast<int>(fd), F_SETFD, FD_CLOEXEC);
}

// The command's side of the fork. Async-signal-safe only: the caller may be multi-threaded.
[[noreturn]] void exec_child(const void* arg) {
    // The plan lives in this process's own copy of memory after fork (changing it is private)
    // or, after vfork_child, in the suspended caller's, which no longer reads it.
    ExecPlan& plan = *const_cast<ExecPlan*>(static_cast<const ExecPlan*>(arg));
    // Join the run's cgroup first, so that nothing the command forks can start outside it.
    if (plan.cgroup_procs_fd >= 0 && ::write(plan.cgroup_procs_fd, "0", 1) != 1)
        child_fail(plan, stage_cgroup, errno);
    // Before the fds are moved: a procs fd may sit where stdio is about to go.
    for (const int fd : plan.join_procs)
        if (::write(fd, "0", 1) != 1) child_fail(plan, stage_cgroup, errno);
    if (plan.netns_fd >= 0 && ::setns(plan.netns_fd, CLONE_NEWNET) != 0)
        child_fail(plan, stage_netns, errno);
    if (::setsid() < 0) child_fail(plan, stage_setsid, errno);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // the caller's thread (or the reaper) died
    if (plan.portal_dir != nullptr && !enter_portal(plan.portal_dir, plan.portal_sources,
                                                    plan.portal_targets, plan.portal_directories))
        child_fail(plan, stage_portal, errno);

    // Copy every source above the targets first, so that dup2 cannot clobber one with another
    // (a source may already sit at 0..n-1), then put them in place. dup2 clears CLOEXEC.
    const int count = static_cast<int>(plan.sources.size());
    int moved[64];
    if (count > 64) child_fail(plan, stage_fds, EMFILE);
    plan.error_fd = ::fcntl(plan.error_fd, F_DUPFD_CLOEXEC, count);
    for (int i = 0; i < count; ++i) {
        moved[i] = ::fcntl(plan.sources[static_cast<std::size_t>(i)], F_DUPFD_CLOEXEC, count);
        if (moved[i] < 0) child_fail(plan, stage_fds, errno);
    }
    for (int i = 0; i < count; ++i)
        if (::dup2(moved[i], i) < 0) child_fail(plan, stage_fds, errno);
    cloexec_from(count);

    struct sigaction default_action {};
    default_action.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; ++sig)
        if (sig != SIGKILL && sig != SIGSTOP) ::sigaction(sig, &default_action, nullptr);
    sigset_t none;
    ::sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);

    if (plan.cwd != nullptr && ::chdir(plan.cwd) != 0) child_fail(plan, stage_chdir, errno);
    if (plan.drop) {
        if (!drop_identity(plan.identity)) child_fail(plan, stage_identity, errno);
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // cleared by the credential change
    }
    // Joining a new anonymous keyring fails only for memory or quota, or with EPERM from a
    // seccomp filter: inside a sandbox (sandgate's own wrap: the dogfood run) that refuses
    // keyctl, which has put us in a fresh keyring already. ENOSYS: no keyrings at all.
    if (plan.fresh_keyring && ::syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, nullptr) < 0 &&
        errno != ENOSYS && errno != EPERM)
        child_fail(plan, stage_keyring, errno);
    for (const auto& [resource, value] : plan.rlimits)
        if (::setrlimit(static_cast<__rlimit_resource_t>(resource), &value) != 0)
            child_fail(plan, stage_rlimit, errno);
    // execvp's search: keep going past missing entries, remember that one was not executable.
    bool denied = false;
    int last = ENOENT;
    for (const auto& candidate : plan.candidates) {
        ::execve(candidate.c_str(), plan.argv.data(), plan.envp.data());
        last = errno;
        if (last == EACCES) {
            denied = true;
        } else if (last != ENOENT && last != ENOTDIR && last != ESTALE && last != ENODEV &&
                   last != ETIMEDOUT) {
            break;
        }
    }
    child_fail(plan, stage_exec, denied && (last == ENOENT || last == ENOTDIR) ? EACCES : last);
}

std::string failure_message(const std::string& program, const std::filesystem::path& cwd,
                            const ChildFailure& failure) {
    const char* error = std::strerror(failure.errno_value);
    switch (failure.stage) {
        case stage_cgroup:
            return std::string("cannot join the run's cgroup: ") + error;
        case stage_setsid:
            return std::string("setsid failed: ") + error;
        case stage_fds:
            return std::string("cannot set up the child's descriptors: ") + error;
        case stage_chdir:
            return "cannot change directory to '" + cwd.string() + "': " + error;
        case stage_subreaper:
            return std::string("cannot become a subreaper: ") + error;
        case stage_fork:
            return std::string("fork failed: ") + error;
        case stage_rlimit:
            return std::string("cannot set the run's resource limits: ") + error;
        case stage_netns:
            return std::string("cannot join the run's network namespace: ") + error;
        case stage_portal:
            return std::string("cannot bind the run's paths for the sandbox's identity: ") + error;
        case stage_identity:
            return std::string("cannot drop to the sandbox's host identity: ") + error;
        case stage_keyring:
            return std::string("cannot join a fresh session keyring: ") + error;
        default:
            return "cannot execute '" + program + "': " + error;
    }
}

// What the child wrote to the error pipe before exec, once every write end is closed (exec
// or exit closed the child's): nothing when the command started.
std::optional<SpawnError> read_failure(int error_fd, const std::string& program,
                                       const std::filesystem::path& cwd) {
    ChildFailure failure;
    ssize_t n = 0;
    do {
        n = ::read(error_fd, &failure, sizeof failure);
    } while (n < 0 && errno == EINTR);
    if (n != sizeof failure) return std::nullopt;
    const int errno_value = failure.stage == stage_exec ? failure.errno_value : 0;
    return SpawnError{errno_value, failure_message(program, cwd, failure)};
}

// fork() through clone3: CLONE_PIDFD hands over the pidfd race-free, and CLONE_INTO_CGROUP
// starts the child inside its cgroup, which also spares the ~10 ms RCU grace period that a
// write to cgroup.procs costs (it takes cgroup_threadgroup_rwsem for writing). Where clone3
// is missing or filtered (old kernels, container seccomp profiles), fork() and pidfd_open(),
// and the child writes itself into cgroup.procs.
pid_t fork_child(int cgroup_fd, ExecPlan& plan, Fd& pidfd, Fd& procs) {
    int raw_pidfd = -1;
    clone_args args{};
    args.flags = CLONE_PIDFD | (cgroup_fd >= 0 ? CLONE_INTO_CGROUP : 0);
    args.pidfd = reinterpret_cast<std::uintptr_t>(&raw_pidfd);
    args.exit_signal = SIGCHLD;
    args.cgroup = cgroup_fd >= 0 ? static_cast<std::uint64_t>(cgroup_fd) : 0;
    const long rc = ::syscall(SYS_clone3, &args, sizeof args);
    if (rc == 0) return 0;
    if (rc > 0) {
        pidfd.reset(raw_pidfd);
        return static_cast<pid_t>(rc);
    }
    if (errno != ENOSYS && errno != EPERM && errno != EINVAL) return -1;
    if (cgroup_fd >= 0) {
        procs.reset(::openat(cgroup_fd, "cgroup.procs", O_WRONLY | O_CLOEXEC));
        plan.cgroup_procs_fd = procs.get();
    }
    const pid_t pid = ::fork();
    if (pid > 0) pidfd = open_pidfd(pid);  // ours until reaped: the pid cannot be recycled
    return pid;
}

int vfork_entry(void* plan) {
    exec_child(plan);
}

#if defined(__x86_64__)
// clone3(args) with CLONE_VM: the child starts on args->stack and runs fn(arg), then exits
// with its result; the parent gets the raw result (a pid, or -errno). glibc exports no clone3
// wrapper, and syscall() will not do: with CLONE_VM the child would return through the
// parent's stack frame. fn and arg wait in r8 and r9, which the syscall instruction keeps
// (the child starts with the parent's registers, rax = 0 and rsp = the new stack).
extern "C" long sandgate_clone3_vm(clone_args* args, std::size_t size, int (*fn)(void*), void* arg);
asm(R"(
    .pushsection .text
    .globl sandgate_clone3_vm
    .hidden sandgate_clone3_vm
    .type sandgate_clone3_vm, @function
sandgate_clone3_vm:
    .cfi_startproc
    mov %rdx, %r8
    mov %rcx, %r9
    mov $435, %eax
    syscall
    test %rax, %rax
    jz 1f
    ret
1:
    .cfi_undefined rip
    xor %ebp, %ebp
    mov %r9, %rdi
    call *%r8
    mov %eax, %edi
    mov $60, %eax
    syscall
    hlt
    .cfi_endproc
    .size sandgate_clone3_vm, .-sandgate_clone3_vm
    .popsection
)");
static_assert(SYS_clone3 == 435 && SYS_exit == 60);
#endif

// CLONE_VM | CLONE_VFORK | CLONE_INTO_CGROUP through clone3 (x86-64): the child starts in the
// run's cgroup without a copy of our page tables (see vfork_child). -1 with errno otherwise.
pid_t vfork_into_cgroup(ExecPlan& plan, int cgroup_fd, std::span<char> stack, Fd& pidfd) {
#if defined(__x86_64__)
    int raw_pidfd = -1;
    clone_args args{};
    args.flags = CLONE_VM | CLONE_VFORK | CLONE_PIDFD | CLONE_INTO_CGROUP;
    args.pidfd = reinterpret_cast<std::uintptr_t>(&raw_pidfd);
    args.exit_signal = SIGCHLD;
    args.cgroup = static_cast<std::uint64_t>(cgroup_fd);
    args.stack = reinterpret_cast<std::uintptr_t>(stack.data());
    args.stack_size = stack.size();
    const long rc = sandgate_clone3_vm(&args, sizeof args, vfork_entry, &plan);
    if (rc > 0) {
        pidfd.reset(raw_pidfd);
        return static_cast<pid_t>(rc);
    }
    errno = static_cast<int>(-rc);
    return -1;
#else
    (void)plan;
    (void)cgroup_fd;
    (void)stack;
    (void)pidfd;
    errno = ENOSYS;
    return -1;
#endif
}

// The command's fork when the caller needs no copy of its memory in the child (no reaper runs
// there): CLONE_VM | CLONE_VFORK on a stack of its own, as posix_spawn does, through clone3
// straight into the run's cgroup when there is one. No page table is copied, and neither side
// takes copy-on-write faults or tears a copy down at exec; in a long-lived broker that fork
// cost more than starting the command, and in `sandgate exec` it was a tenth of the overhead.
// The calling thread is suspended until the child execs or exits; every signal is blocked
// across it and the child resets its own (unshared) dispositions before unblocking any. The
// child writes only the plan's error_fd and its own stack. -1 with errno when clone refused it
// (the caller then forks).
pid_t vfork_child(ExecPlan& plan, int cgroup_fd, Fd& pidfd) {
    constexpr std::size_t k_stack = 64 * 1024;
    auto stack = std::make_unique_for_overwrite<char[]>(k_stack);  // untouched pages stay free
    if (cgroup_fd >= 0) return vfork_into_cgroup(plan, cgroup_fd, {stack.get(), k_stack}, pidfd);
    int raw_pidfd = -1;
    const pid_t pid = ::clone(vfork_entry, stack.get() + k_stack,
                              CLONE_VM | CLONE_VFORK | CLONE_PIDFD | SIGCHLD, &plan, &raw_pidfd);
    if (pid > 0) pidfd.reset(raw_pidfd);
    return pid;
}

}  // namespace

Child::Child(pid_t pid, Fd pidfd, Fd status_fd, Supervision supervision)
    : m_pid(pid),
      m_pidfd(std::move(pidfd)),
      m_status_fd(std::move(status_fd)),
      m_supervision(supervision) {}

Child::Child(Child&& other) noexcept
    : m_pid(std::exchange(other.m_pid, -1)),
      m_pidfd(std::move(other.m_pidfd)),
      m_status_fd(std::move(other.m_status_fd)),
      m_supervision(other.m_supervision),
      m_reaped(std::exchange(other.m_reaped, true)),
      m_error_fd(std::move(other.m_error_fd)),
      m_program(std::move(other.m_program)),
      m_cwd(std::move(other.m_cwd)) {}

void Child::check_exec_at_reap(Fd error_fd, const SpawnSpec& spec) {
    m_error_fd = std::move(error_fd);
    m_program = spec.argv.front();
    m_cwd = spec.cwd;
}

Child::~Child() {
    if (m_reaped || m_pid < 0) return;
    // The reaper takes its tree down with it; a direct child is killed alone (its tree is the
    // cgroup's or the pid namespace's business).
    signal(m_supervision == Supervision::subreaper ? k_reaper_kill : SIGKILL);
    (void)reap();
}

void Child::signal(int sig) const {
    if (m_pidfd.valid()) {
        pidfd_send_signal(m_pidfd.get(), sig);
    } else if (m_pid > 0) {
        ::kill(m_pid, sig);
    }
}

Expected<ExitInfo> Child::reap() {
    siginfo_t info{};
    int rc = 0;
    do {
        rc = m_pidfd.valid() ? ::waitid(P_PIDFD, static_cast<id_t>(m_pidfd.get()), &info, WEXITED)
                             : ::waitid(P_PID, static_cast<id_t>(m_pid), &info, WEXITED);
    } while (rc < 0 && errno == EINTR);
    if (rc < 0) return fail(ErrorKind::permanent, errno_message("waitid"));
    m_reaped = true;
    ExitInfo exit;
    if (m_supervision == Supervision::direct) {
        if (m_error_fd) {
            exit.not_started = read_failure(m_error_fd.get(), m_program, m_cwd);
            m_error_fd.reset();
            if (exit.not_started) return exit;
        }
        if (info.si_code == CLD_EXITED) {
            exit.exit_code = info.si_status;
        } else {
            exit.signal = info.si_status;
        }
        return exit;
    }
    int status = 0;
    ssize_t n = 0;
    do {
        n = ::read(m_status_fd.get(), &status, sizeof status);
    } while (n < 0 && errno == EINTR);
    if (n != sizeof status)
        return fail(ErrorKind::permanent, "the run's reaper ended without the command's status");
    if (WIFEXITED(status)) {
        exit.exit_code = WEXITSTATUS(status);
    } else {
        exit.signal = WTERMSIG(status);
    }
    return exit;
}

std::expected<Child, SpawnError> spawn(const SpawnSpec& spec) {
    if (spec.argv.empty()) return std::unexpected(SpawnError{0, "empty argv"});
    ExecPlan plan = make_plan(spec);
    int pipe_fds[2];
    if (::pipe2(pipe_fds, O_CLOEXEC) != 0)
        return std::unexpected(SpawnError{0, errno_message("pipe2")});
    Fd error_read(pipe_fds[0]);
    Fd error_write(pipe_fds[1]);
    Fd status_read;
    Fd status_write;
    if (spec.supervision == Supervision::subreaper) {
        if (::pipe2(pipe_fds, O_CLOEXEC) != 0)
            return std::unexpected(SpawnError{0, errno_message("pipe2")});
        status_read.reset(pipe_fds[0]);
        status_write.reset(pipe_fds[1]);
    }
    plan.error_fd = error_write.get();

    // Block every signal across fork so that no handler of ours runs in the child before it
    // resets dispositions; the child starts from an empty mask before exec.
    sigset_t all;
    sigset_t old;
    ::sigfillset(&all);
    ::pthread_sigmask(SIG_SETMASK, &all, &old);
    Fd pidfd;
    Fd procs;
    pid_t pid = -1;
    if (spec.supervision == Supervision::direct) pid = vfork_child(plan, spec.cgroup_fd, pidfd);
    if (pid < 0) pid = fork_child(spec.cgroup_fd, plan, pidfd, procs);
    if (pid == 0) {
        if (spec.supervision == Supervision::subreaper)
            reaper_main(plan.caller, status_write.get(), plan.error_fd, exec_child, &plan);
        exec_child(&plan);
    }
    const int fork_errno = errno;
    ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
    if (pid < 0) return std::unexpected(SpawnError{0, errno_message("fork", fork_errno)});
    error_write.reset();
    status_write.reset();

    Child child(pid, std::move(pidfd), std::move(status_read), spec.supervision);
    if (spec.exec_check == ExecCheck::at_reap && spec.supervision == Supervision::direct) {
        child.check_exec_at_reap(std::move(error_read), spec);
        return child;
    }
    if (auto failure = read_failure(error_read.get(), spec.argv.front(), spec.cwd)) {
        (void)child.reap();
        return std::unexpected(std::move(*failure));
    }
    return child;
}

Fd open_pidfd(pid_t pid) {
    return Fd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
}

}  // namespace sandbox
