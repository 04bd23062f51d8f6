#pragma once
// What the wrap's freestanding programs share (gen/status_init.cpp, gen/sudo.cpp,
// gen/egress_forwarder.cpp): raw system
// calls for x86-64 and aarch64, a few string helpers, execvp's search, and the entry point
// that hands the kernel's initial stack to `freestanding_main`. No libc: each program is a few
// KB, copied into every wrap. Include it from one translation unit per program only.

#if !defined(__x86_64__) && !defined(__aarch64__)
#error "sandgate's freestanding programs support only x86-64 and aarch64"
#endif

namespace freestanding {

#if defined(__x86_64__)
enum : long {
    k_write = 1,
    k_close = 3,
    k_sigaction = 13,
    k_sigprocmask = 14,
    k_socket = 41,
    k_recvfrom = 45,
    k_sendmsg = 46,
    k_bind = 49,
    k_listen = 50,
    k_setsockopt = 54,
    k_clone = 56,
    k_execve = 59,
    k_wait4 = 61,
    k_fcntl = 72,
    k_getuid = 102,
    k_getgid = 104,
    k_openat = 257,
    k_unshare = 272,
    k_ppoll = 271,
    k_accept4 = 288,
    k_close_range = 436,
    k_exit_group = 231
};

inline long syscall6(long n, long a, long b, long c, long d, long e, long f) {
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
enum : long {
    k_write = 64,
    k_close = 57,
    k_sigaction = 134,
    k_sigprocmask = 135,
    k_socket = 198,
    k_bind = 200,
    k_listen = 201,
    k_setsockopt = 208,
    k_recvfrom = 207,
    k_sendmsg = 211,
    k_clone = 220,
    k_execve = 221,
    k_wait4 = 260,
    k_fcntl = 25,
    k_getuid = 174,
    k_getgid = 176,
    k_openat = 56,
    k_unshare = 97,
    k_ppoll = 73,
    k_accept4 = 242,
    k_close_range = 436,
    k_exit_group = 94
};

inline long syscall6(long n, long a, long b, long c, long d, long e, long f) {
    register long x8 __asm__("x8") = n;
    register long x0 __asm__("x0") = a;
    register long x1 __asm__("x1") = b;
    register long x2 __asm__("x2") = c;
    register long x3 __asm__("x3") = d;
    register long x4 __asm__("x4") = e;
    register long x5 __asm__("x5") = f;
    __asm__ volatile("svc #0"
                     : "+r"(x0)
                     : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
                     : "memory");
    return x0;
}
#endif

inline long sys(long n, long a = 0, long b = 0, long c = 0, long d = 0, long e = 0, long f = 0) {
    return syscall6(n, a, b, c, d, e, f);
}

constexpr long k_enoent = 2, k_eintr = 4, k_enoexec = 8, k_eacces = 13, k_enotdir = 20;

[[noreturn]] inline void leave(long status) {
    for (;;) sys(k_exit_group, status);
}

inline unsigned long length(const char* text) {
    unsigned long n = 0;
    while (text[n] != '\0') ++n;
    return n;
}

inline bool same(const char* a, const char* b) {
    while (*a != '\0' && *a == *b) ++a, ++b;
    return *a == *b;
}

// A file descriptor number given on the command line (decimal, at most 100000).
inline bool parse_fd(const char* text, long& fd) {
    fd = 0;
    if (*text == '\0') return false;
    for (; *text != '\0'; ++text) {
        if (*text < '0' || *text > '9' || fd > 100000) return false;
        fd = fd * 10 + (*text - '0');
    }
    return true;
}

inline void say(long fd, const char* text) {
    sys(k_write, fd, reinterpret_cast<long>(text), static_cast<long>(length(text)));
}

// Appends the decimal digits of n (>= 0) at out[at...]; returns the new end.
inline unsigned long put_number(char* out, unsigned long at, long n) {
    char digits[20];
    int count = 0;
    do {
        digits[count++] = static_cast<char>('0' + n % 10);
        n /= 10;
    } while (n > 0);
    while (count > 0) out[at++] = digits[--count];
    return at;
}

inline const char* path_of(char** envp) {
    for (char** e = envp; *e != nullptr; ++e) {
        const char* v = *e;
        if (v[0] == 'P' && v[1] == 'A' && v[2] == 'T' && v[3] == 'H' && v[4] == '=') return v + 5;
    }
    return "/bin:/usr/bin";  // execvp's default
}

// execve, and for a file the kernel cannot run (no #! line) /bin/sh with it, as execvp does.
inline long run(const char* file, char** argv, char** envp) {
    long error = sys(k_execve, reinterpret_cast<long>(file), reinterpret_cast<long>(argv),
                     reinterpret_cast<long>(envp));
    if (error != -k_enoexec) return error;
    unsigned long argc = 0;
    while (argv[argc] != nullptr) ++argc;
    if (argc > 65536) return error;
    char* shell_argv[argc + 2];
    shell_argv[0] = const_cast<char*>("sh");
    shell_argv[1] = const_cast<char*>(file);
    for (unsigned long i = 1; i <= argc; ++i) shell_argv[i + 1] = argv[i];
    sys(k_execve, reinterpret_cast<long>("/bin/sh"), reinterpret_cast<long>(shell_argv),
        reinterpret_cast<long>(envp));
    return error;
}

// execvp: a name with a slash as is, else each PATH entry in turn; EACCES is remembered.
// Returns only on failure: -errno (-ENOENT when nothing was found, -EACCES when something
// found could not be run).
inline long exec_search(char** argv, char** envp) {
    const char* name = argv[0];
    bool slash = false;
    for (const char* c = name; *c != '\0'; ++c) slash = slash || *c == '/';
    if (slash || *name == '\0') return run(name, argv, envp);
    long error = -k_enoent;
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
            if (error == -k_eacces)
                denied = true;
            else if (error != -k_enoent && error != -k_enotdir)
                break;
        }
        if (*end == '\0') break;
        p = end + 1;
    }
    if (denied && (error == -k_enoent || error == -k_enotdir)) error = -k_eacces;
    if (error == -k_enotdir) error = -k_enoent;
    return error;
}

}  // namespace freestanding

extern "C" [[noreturn]] void freestanding_main(long* stack);

// The entry point: the kernel's initial stack (argc, argv..., envp...) to freestanding_main.
#if defined(__x86_64__)
__asm__(
    ".text\n.global _start\n_start:\n xor %rbp, %rbp\n mov %rsp, %rdi\n and $-16, %rsp\n call "
    "freestanding_main\n hlt\n");
#else
__asm__(
    ".text\n.global _start\n_start:\n mov x29, #0\n mov x0, sp\n bl freestanding_main\n brk #0\n");
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
