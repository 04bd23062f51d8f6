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

#if !defined(__x86_64__) && !defined(__aarch64__)
#error "sandgate-status-init: only x86-64 and aarch64 are supported"
#endif

namespace {

#if defined(__x86_64__)
enum : long { k_write = 1, k_close = 3, k_sigaction = 13, k_sigprocmask = 14, k_clone = 56, k_execve = 59,
              k_wait4 = 61, k_fcntl = 72, k_exit_group = 231 };

long syscall6(long n, long a, long b, long c, long d, long e, long f) {
    long result;
    register long r10 __asm__("r10") = d;
    register long r8 __asm__("r8") = e;
    register long r9 __asm__("r9") = f;
    __asm__ volatile("syscall"
                     : "=a"(result)
                     : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                     : "rcx", "r11", "memory");
    return result;
}
#else
enum : long { k_write = 64, k_close = 57, k_sigaction = 134, k_sigprocmask = 135, k_clone = 220, k_execve = 221,
              k_wait4 = 260, k_fcntl = 25, k_exit_group = 94 };

long syscall6(long n, long a, long b, long c, long d, long e, long f) {
    register long x8 __asm__("x8") = n;
    register long x0 __asm__("x0") = a;
    register long x1 __asm__("x1") = b;
    register long x2 __asm__("x2") = c;
    register long x3 __asm__("x3") = d;
    register long x4 __asm__("x4") = e;
    register long x5 __asm__("x5") = f;
    __asm__ volatile("svc #0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5) : "memory");
    return x0;
}
#endif

long sys(long n, long a = 0, long b = 0, long c = 0, long d = 0) { return syscall6(n, a, b, c, d, 0, 0); }

constexpr long k_sigchld = 17;
constexpr long k_f_setfd = 2, k_fd_cloexec = 1;
constexpr long k_sig_block = 0, k_sig_setmask = 2;
constexpr long k_enoent = 2, k_eintr = 4, k_enoexec = 8, k_eacces = 13, k_enotdir = 20;

[[noreturn]] void leave(long status) {
    for (;;) sys(k_exit_group, status);
}

unsigned long length(const char* text) {
    unsigned long n = 0;
    while (text[n] != '\0') ++n;
    return n;
}

void say(long fd, const char* text) { sys(k_write, fd, reinterpret_cast<long>(text), static_cast<long>(length(text))); }

bool parse_fd(const char* text, long& fd) {
    fd = 0;
    if (*text == '\0') return false;
    for (; *text != '\0'; ++text) {
        if (*text < '0' || *text > '9' || fd > 100000) return false;
        fd = fd * 10 + (*text - '0');
    }
    return true;
}

// "exit N\n" / "signal N\n".
void report(long fd, const char* word, long n) {
    char line[32];
    unsigned long at = 0;
    for (const char* w = word; *w != '\0'; ++w) line[at++] = *w;
    line[at++] = ' ';
    char digits[12];
    int count = 0;
    do {
        digits[count++] = static_cast<char>('0' + n % 10);
        n /= 10;
    } while (n > 0);
    while (count > 0) line[at++] = digits[--count];
    line[at++] = '\n';
    sys(k_write, fd, reinterpret_cast<long>(line), static_cast<long>(at));
}

const char* path_of(char** envp) {
    for (char** e = envp; *e != nullptr; ++e) {
        const char* v = *e;
        if (v[0] == 'P' && v[1] == 'A' && v[2] == 'T' && v[3] == 'H' && v[4] == '=') return v + 5;
    }
    return "/bin:/usr/bin";  // execvp's default
}

// execve, and for a file the kernel cannot run (no #! line) /bin/sh with it, as execvp does.
long run(const char* file, char** argv, char** envp) {
    long error = sys(k_execve, reinterpret_cast<long>(file), reinterpret_cast<long>(argv), reinterpret_cast<long>(envp));
    if (error != -k_enoexec) return error;
    unsigned long argc = 0;
    while (argv[argc] != nullptr) ++argc;
    if (argc > 65536) return error;
    char* shell_argv[argc + 2];
    shell_argv[0] = const_cast<char*>("sh");
    shell_argv[1] = const_cast<char*>(file);
    for (unsigned long i = 1; i <= argc; ++i) shell_argv[i + 1] = argv[i];
    sys(k_execve, reinterpret_cast<long>("/bin/sh"), reinterpret_cast<long>(shell_argv), reinterpret_cast<long>(envp));
    return error;
}

// execvp: a name with a slash as is, else each PATH entry in turn; EACCES is remembered.
[[noreturn]] void exec_payload(char** argv, char** envp) {
    const char* name = argv[0];
    bool slash = false;
    for (const char* c = name; *c != '\0'; ++c) slash = slash || *c == '/';
    long error = -k_enoent;
    if (slash || *name == '\0') {
        error = run(name, argv, envp);
    } else {
        bool denied = false;
        const unsigned long name_length = length(name);
        for (const char* p = path_of(envp);;) {
            const char* end = p;
            while (*end != '\0' && *end != ':') ++end;
            char candidate[4096];
            unsigned long at = 0;
            const unsigned long dir_length = static_cast<unsigned long>(end - p);
            if (dir_length + name_length + 2 < sizeof candidate) {
                for (const char* c = p; c < end; ++c) candidate[at++] = *c;
                if (at == 0) candidate[at++] = '.';
                candidate[at++] = '/';
                for (unsigned long i = 0; i < name_length; ++i) candidate[at++] = name[i];
                candidate[at] = '\0';
                error = run(candidate, argv, envp);
                if (error == -k_eacces) denied = true;
                else if (error != -k_enoent && error != -k_enotdir) break;
            }
            if (*end == '\0') break;
            p = end + 1;
        }
        if (denied && (error == -k_enoent || error == -k_enotdir)) error = -k_eacces;
    }
    say(2, "sandgate: cannot run ");
    say(2, name);
    say(2, error == -k_eacces ? ": permission denied\n" : ": not found\n");
    leave(error == -k_enoent || error == -k_enotdir ? 127 : 126);
}

struct KernelSigaction {
    long handler;
    unsigned long flags;
    long restorer;
    unsigned long mask;
};

}  // namespace

extern "C" [[noreturn]] void status_init_main(long* stack) {
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
    sys(k_sigprocmask, k_sig_block, reinterpret_cast<long>(&all), reinterpret_cast<long>(&previous), 8);
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

// The entry point: the kernel's initial stack (argc, argv..., envp...) to status_init_main.
#if defined(__x86_64__)
__asm__(".text\n.global _start\n_start:\n xor %rbp, %rbp\n mov %rsp, %rdi\n and $-16, %rsp\n call status_init_main\n hlt\n");
#else
__asm__(".text\n.global _start\n_start:\n mov x29, #0\n mov x0, sp\n bl status_init_main\n brk #0\n");
#endif

// What the compiler may call even in a freestanding build.
extern "C" void* memset(void* target, int value, unsigned long size) {
    auto* bytes = static_cast<unsigned char*>(target);
    for (unsigned long i = 0; i < size; ++i) bytes[i] = static_cast<unsigned char>(value);
    return target;
}

extern "C" void* memcpy(void* target, const void* source, unsigned long size) {
    auto* out = static_cast<unsigned char*>(target);
    const auto* in = static_cast<const unsigned char*>(source);
    for (unsigned long i = 0; i < size; ++i) out[i] = in[i];
    return target;
}
