// sandgate-status-init: the payload's parent inside the bwrap wrap, there to say how it ended.
//
//   sandgate-status-init FD PROGRAM ARGS...
//
// bwrap reports its payload's end as an exit code only (its monitor and its pid 1 fold a
// death by signal N into 128+N, and --json-status-fd carries that number): the wrap could not
// tell `kill -9` from `exit 137`. This program runs PROGRAM (searched in PATH as execvp does)
// as its child, waits for it and writes "exit N\n" or "signal N\n" to FD before exiting with
// the same status bwrap would have reported (N, or 128+N). FD is close-on-exec here, so the
// payload never holds it. The signals a tree kill sends first (TERM, INT, HUP, QUIT) are
// ignored here once the payload runs, so that the report outlives a graceful stop; KILL
// ends both, and the run then knows it killed them.
//
// Freestanding (no libc: a few hundred bytes, copied into every wrap): raw system calls for
// x86-64 and aarch64. Built and embedded by sandbox/CMakeLists.txt (status_init_program.cpp).

#include "freestanding.hpp"

namespace {

using namespace freestanding;

constexpr long k_sigchld = 17;
constexpr long k_f_setfd = 2, k_fd_cloexec = 1;
constexpr long k_sig_block = 0, k_sig_setmask = 2;

// "exit N\n" / "signal N\n".
void report(long fd, const char* word, long n) {
    char line[32];
    unsigned long at = 0;
    for (const char* w = word; *w != '\0'; ++w) line[at++] = *w;
    line[at++] = ' ';
    at = put_number(line, at, n);
    line[at++] = '\n';
    sys(k_write, fd, reinterpret_cast<long>(line), static_cast<long>(at));
}

// Runs the payload (execvp's search) or says why it cannot, with execvp's statuses.
[[noreturn]] void exec_payload(char** argv, char** envp) {
    const long error = exec_search(argv, envp);
    say(2, "sandgate: cannot run ");
    say(2, argv[0]);
    say(2, error == -k_eacces ? ": permission denied\n" : ": not found\n");
    leave(error == -k_enoent ? 127 : 126);
}

struct KernelSigaction {
    long handler;
    unsigned long flags;
    long restorer;
    unsigned long mask;
};

}  // namespace

extern "C" [[noreturn]] void freestanding_main(long* stack) {
    const long argc = stack[0];
    char** argv = reinterpret_cast<char**>(stack + 1);
    char** envp = argv + argc + 1;
    long fd = -1;
    if (argc < 3 || !parse_fd(argv[1], fd)) {
        say(2, "usage: sandgate-status-init FD PROGRAM ARGS...\n");
        leave(125);
    }
    sys(k_fcntl, fd, k_f_setfd, k_fd_cloexec);
    unsigned long all = ~0UL, previous = 0;
    sys(k_sigprocmask, k_sig_block, reinterpret_cast<long>(&all), reinterpret_cast<long>(&previous),
        8);
    const long pid = sys(k_clone, k_sigchld, 0, 0, 0);
    if (pid == 0) {
        sys(k_sigprocmask, k_sig_setmask, reinterpret_cast<long>(&previous), 0, 8);
        exec_payload(argv + 2, envp);
    }
    if (pid < 0) {
        say(2, "sandgate: cannot start the payload (fork)\n");
        leave(125);
    }
    const KernelSigaction ignore{1 /* SIG_IGN */, 0, 0, 0};
    const long graceful[] = {1 /* HUP */, 2 /* INT */, 3 /* QUIT */, 15 /* TERM */};
    for (long signal : graceful) sys(k_sigaction, signal, reinterpret_cast<long>(&ignore), 0, 8);
    sys(k_sigprocmask, k_sig_setmask, reinterpret_cast<long>(&previous), 0, 8);
    int status = 0;
    for (;;) {
        const long waited = syscall6(k_wait4, pid, reinterpret_cast<long>(&status), 0, 0, 0, 0);
        if (waited == pid) break;
        if (waited != -k_eintr) leave(125);
    }
    const int signal = status & 0x7f;
    if (signal == 0) {
        const long code = (status >> 8) & 0xff;
        report(fd, "exit", code);
        leave(code);
    }
    report(fd, "signal", signal);
    sys(k_close, fd);
    leave(128 + signal);
}
