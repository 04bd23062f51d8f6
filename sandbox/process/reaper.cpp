#include "sandbox/process/reaper.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <initializer_list>

namespace sandbox {
namespace {

// Appends the decimal `value` to buf at *len (async-signal-safe snprintf substitute).
void append_number(char* buf, std::size_t& len, long value) {
    char digits[24];
    int n = 0;
    do {
        digits[n++] = static_cast<char>('0' + value % 10);
        value /= 10;
    } while (value > 0);
    while (n > 0) buf[len++] = digits[--n];
}

void append_text(char* buf, std::size_t& len, const char* text) {
    while (*text != '\0') buf[len++] = *text++;
}

// Calls fn(child) for each pid listed in /proc/<pid>/task/<tid>/children.
template <typename Fn>
void for_each_listed_child(pid_t pid, long tid, Fn&& fn) {
    char path[96];
    std::size_t len = 0;
    append_text(path, len, "/proc/");
    append_number(path, len, pid);
    append_text(path, len, "/task/");
    append_number(path, len, tid);
    append_text(path, len, "/children");
    path[len] = '\0';
    const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    char buf[4096];
    long current = -1;
    for (;;) {
        const ssize_t n = ::read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        for (ssize_t i = 0; i < n; ++i) {
            if (buf[i] >= '0' && buf[i] <= '9') {
                current = (current < 0 ? 0 : current * 10) + (buf[i] - '0');
            } else if (current >= 0) {
                fn(static_cast<pid_t>(current));
                current = -1;
            }
        }
    }
    if (current >= 0) fn(static_cast<pid_t>(current));
    ::close(fd);  // a raw fd: this runs in a forked child where no RAII type may allocate
}

// Calls fn(child) for every child of every thread of `pid`.
template <typename Fn>
void for_each_child(pid_t pid, Fn&& fn) {
    char path[64];
    std::size_t len = 0;
    append_text(path, len, "/proc/");
    append_number(path, len, pid);
    append_text(path, len, "/task");
    path[len] = '\0';
    const int dir = ::open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0) return;
    alignas(8) char buf[4096];
    for (;;) {
        const long n = ::syscall(SYS_getdents64, dir, buf, sizeof buf);
        if (n <= 0) break;
        for (long offset = 0; offset < n;) {
            const auto* entry = reinterpret_cast<const struct dirent64*>(buf + offset);
            offset += entry->d_reclen;
            long tid = 0;
            const char* name = entry->d_name;
            if (*name < '0' || *name > '9') continue;
            for (; *name >= '0' && *name <= '9'; ++name) tid = tid * 10 + (*name - '0');
            for_each_listed_child(pid, tid, fn);
        }
    }
    ::close(dir);
}

[[noreturn]] void reaper_exit(int status_fd, int status) {
    const char* data = reinterpret_cast<const char*>(&status);
    std::size_t done = 0;
    while (done < sizeof status) {
        const ssize_t n = ::write(status_fd, data + done, sizeof status - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        done += static_cast<std::size_t>(n);
    }
    ::_exit(0);
}

// fork() for a process that was itself made by a raw clone3 while other threads ran: glibc's
// fork() takes its atfork and malloc locks first, and a lock another thread of the caller held
// at clone time stays locked forever in this copy (the reaper hung there). The raw system
// call takes no lock; both sides only make system calls afterwards.
pid_t raw_fork() {
    clone_args args{};
    args.exit_signal = SIGCHLD;
    const long rc = ::syscall(SYS_clone3, &args, sizeof args);
    if (rc >= 0 || errno != ENOSYS) return static_cast<pid_t>(rc);
    return static_cast<pid_t>(::syscall(SYS_clone, SIGCHLD, nullptr, nullptr, nullptr, 0L));
}

void close_all_but(int keep) {
    if (keep > 0) ::close_range(0, static_cast<unsigned>(keep) - 1, 0);
    ::close_range(static_cast<unsigned>(keep) + 1, ~0U, 0);
}

}  // namespace

void report_child_failure(int fd, int stage, int errno_value) {
    const ChildFailure failure{stage, errno_value};
    // 8 bytes into an empty pipe: atomic, and the pipe is ours alone.
    [[maybe_unused]] const ssize_t n = ::write(fd, &failure, sizeof failure);
}

int signal_descendants(pid_t root, int sig, Resume resume) {
    // An explicit stack instead of recursion: deep chains of forks must not overflow ours.
    // A tree wider than the stack is finished by the callers' repeated sweeps.
    constexpr int k_capacity = 4096;
    pid_t stack[k_capacity];
    int size = 0;
    int signalled = 0;
    auto push = [&](pid_t child) {
        if (size < k_capacity) stack[size++] = child;
    };
    for_each_child(root, push);
    while (size > 0) {
        const pid_t pid = stack[--size];
        // Signal before listing: a SIGKILLed process forks no more, and its children are
        // re-parented to the reaper, where the next sweep finds them.
        if (::kill(pid, sig) == 0) ++signalled;
        if (resume == Resume::yes) ::kill(pid, SIGCONT);
        for_each_child(pid, push);
    }
    return signalled;
}

pid_t any_child(pid_t parent) {
    pid_t found = -1;
    for_each_child(parent, [&found](pid_t child) {
        if (found < 0) found = child;
    });
    return found;
}

void reaper_main(pid_t caller, int status_fd, int error_fd, void (*start_command)(const void*),
                 const void* arg) {
    // Every signal is blocked on entry (spawn() blocks them around fork) and stays blocked:
    // the reaper takes the few it cares about with sigwaitinfo, so none is ever lost between a
    // check and a wait. Dispositions inherited from the caller must not run here.
    struct sigaction default_action {};
    default_action.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; ++sig)
        if (sig != SIGKILL && sig != SIGSTOP) ::sigaction(sig, &default_action, nullptr);
    sigset_t wanted;
    ::sigemptyset(&wanted);
    // SIGINT and SIGHUP (a terminal's, sent to the caller's whole group) stay blocked and
    // unwanted: the caller decides (sandgate exec cancels the run and stops the tree itself).
    for (int sig : {SIGCHLD, k_reaper_terminate, k_reaper_kill, SIGTERM}) ::sigaddset(&wanted, sig);

    if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
        report_child_failure(error_fd, stage_subreaper, errno);
        ::_exit(125);
    }
    // When the caller dies, SIGTERM (waited for below) makes the reaper kill the tree.
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    bool killing = ::getppid() != caller;

    const pid_t command = raw_fork();
    if (command < 0) {
        report_child_failure(error_fd, stage_fork, errno);
        ::_exit(125);
    }
    if (command == 0) start_command(arg);
    close_all_but(status_fd);

    const pid_t self = ::getpid();
    int status = 0;
    bool command_done = false;
    for (;;) {
        for (;;) {
            int child_status = 0;
            const pid_t pid = ::waitpid(-1, &child_status, WNOHANG);
            if (pid > 0) {
                if (pid == command) {
                    status = child_status;
                    command_done = true;
                }
                continue;
            }
            if (pid < 0 && errno == EINTR) continue;
            if (pid < 0 && command_done) reaper_exit(status_fd, status);  // ECHILD: tree gone
            break;
        }
        if (command_done || killing) {
            if (!command_done) ::kill(-command, SIGKILL);  // its group, while its pid is ours
            signal_descendants(self, SIGKILL, Resume::no);
        }
        siginfo_t info;
        int sig = ::sigwaitinfo(&wanted, &info);
        if (sig < 0) continue;  // EINTR
        if (sig == k_reaper_terminate && !command_done) {
            ::kill(-command, SIGTERM);
            ::kill(-command, SIGCONT);
            signal_descendants(self, SIGTERM, Resume::yes);
        } else if (sig != SIGCHLD) {
            killing = true;
        }
    }
}

}  // namespace sandbox
