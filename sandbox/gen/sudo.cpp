// sandgate's `sudo` inside the bwrap wrap (sandbox/wrap/shims.hpp): runs a command as root of a
// user namespace of the sandbox's own, with no host privilege at all.
//
//   sudo [-E] [-H] [-n] [-S] [-k] [-u root] [--] [NAME=VALUE...] COMMAND [ARGS...]
//
// The sandbox's user namespace maps one uid (the step's, 1000) to the sandbox's unprivileged
// host uid, and an unprivileged bwrap cannot map a second one: there is no uid 0 beside the
// step's. So this program makes a child user namespace (unshare(CLONE_NEWUSER), the one
// namespace the wrap's seccomp filter lets a step make; seccomp_policy.cpp says why) that maps
// uid and gid 0 to the step's own, denies setgroups, and execs COMMAND (searched in PATH as
// execvp does). Inside, `id -u` is 0 and a file the command creates is root's; outside it is
// the sandbox's host uid's, as every file the step writes. Root of that namespace owns no
// other namespace (the filter refuses every other one), so its capabilities reach only what
// the step's uid owns already: no host privilege, no kernel surface a step lacks.
//
// The environment is kept as it is (as -E keeps it: the step's environment is all the sandbox
// has, and sudo's secure_path would only hide the wrap's tools); HOME stays the sandbox's
// scratch home (-H accepted: the sandbox has no /root to give). `-u` names root only: the
// sandbox has no other user. Already root (sudo under sudo): COMMAND runs as it is.
//
// Freestanding (gen/freestanding.hpp); built and embedded by sandbox/CMakeLists.txt.

#include "freestanding.hpp"

namespace {

using namespace freestanding;

constexpr long k_clone_newuser = 0x10000000;
constexpr long k_at_fdcwd = -100;
constexpr long k_o_wronly = 1, k_o_cloexec = 02000000;

[[noreturn]] void refuse(const char* first, const char* second = "", const char* third = "") {
    say(2, "sudo: ");
    say(2, first);
    say(2, second);
    say(2, third);
    say(2, "\n");
    leave(1);
}

bool is_root_name(const char* user) {
    return same(user, "root") || same(user, "0") || same(user, "#0");
}

void check_user(const char* user) {
    if (!is_root_name(user))
        refuse("-u ", user,
               ": the sandbox has only root (uid 0 of its own user namespace); sandgate runs no "
               "command as another user");
}

// A NAME=VALUE argument before the command (sudo sets it in the command's environment).
bool is_assignment(const char* arg) {
    if (*arg == '=' || *arg == '\0') return false;
    for (const char* c = arg; *c != '\0'; ++c) {
        if (*c == '=') return true;
        const bool word = (*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') || *c == '_' ||
                          (c != arg && *c >= '0' && *c <= '9');
        if (!word) return false;
    }
    return false;
}

bool same_name(const char* a, const char* b) {  // NAME=... against NAME=...
    while (*a != '=' && *a == *b) ++a, ++b;
    return *a == '=' && *b == '=';
}

void write_file(const char* path, const char* text, unsigned long size) {
    const long fd =
        sys(k_openat, k_at_fdcwd, reinterpret_cast<long>(path), k_o_wronly | k_o_cloexec);
    if (fd < 0) refuse("cannot become root in the sandbox: opening ", path);
    const long written = sys(k_write, fd, reinterpret_cast<long>(text), static_cast<long>(size));
    sys(k_close, fd);
    if (written != static_cast<long>(size))
        refuse("cannot become root in the sandbox: writing ", path);
}

void map_root(const char* path, long outer) {
    char line[32] = {'0', ' '};
    unsigned long at = put_number(line, 2, outer);
    line[at++] = ' ';
    line[at++] = '1';
    line[at++] = '\n';
    write_file(path, line, at);
}

// Makes the child user namespace and maps 0 to the caller's uid and gid.
void become_root() {
    const long uid = sys(k_getuid);
    const long gid = sys(k_getgid);
    if (uid == 0) return;  // root already (sudo under sudo)
    if (sys(k_unshare, k_clone_newuser) != 0)
        refuse(
            "cannot become root in the sandbox: unshare(CLONE_NEWUSER) was refused (a wrap "
            "older than this sudo, or a kernel without user namespaces)");
    write_file("/proc/self/setgroups", "deny\n", 5);
    map_root("/proc/self/uid_map", uid);
    map_root("/proc/self/gid_map", gid);
}

}  // namespace

extern "C" [[noreturn]] void freestanding_main(long* stack) {
    const long argc = stack[0];
    char** argv = reinterpret_cast<char**>(stack + 1);
    char** envp = argv + argc + 1;
    long at = 1;
    for (; at < argc; ++at) {
        const char* arg = argv[at];
        if (arg[0] != '-' || arg[1] == '\0') break;
        if (same(arg, "--")) {
            ++at;
            break;
        }
        if (arg[1] == '-') {
            const char* name = arg + 2;
            if (same(name, "preserve-env") || same(name, "set-home") ||
                same(name, "non-interactive") || same(name, "stdin") ||
                same(name, "reset-timestamp"))
                continue;
            const char* prefix = "preserve-env=";
            unsigned long i = 0;
            while (prefix[i] != '\0' && name[i] == prefix[i]) ++i;
            if (prefix[i] == '\0') continue;
            if (same(name, "user")) {
                if (at + 1 >= argc) refuse("--user needs a user name");
                check_user(argv[++at]);
                continue;
            }
            prefix = "user=";
            i = 0;
            while (prefix[i] != '\0' && name[i] == prefix[i]) ++i;
            if (prefix[i] == '\0') {
                check_user(name + i);
                continue;
            }
            refuse("option ", arg, " is not supported inside sandgate's sandbox");
        }
        for (const char* flag = arg + 1; *flag != '\0'; ++flag) {
            if (*flag == 'E' || *flag == 'H' || *flag == 'n' || *flag == 'S' || *flag == 'k')
                continue;
            if (*flag == 'u') {
                if (flag[1] != '\0') {
                    check_user(flag + 1);
                } else {
                    if (at + 1 >= argc) refuse("-u needs a user name");
                    check_user(argv[++at]);
                }
                break;
            }
            char option[3] = {'-', *flag, '\0'};
            refuse("option ", option, " is not supported inside sandgate's sandbox");
        }
    }
    // NAME=VALUE arguments join the environment, replacing the same names.
    long first_assignment = at;
    while (at < argc && is_assignment(argv[at])) ++at;
    if (at >= argc) {
        say(2, "usage: sudo [-E] [-H] [-n] [-u root] [--] [NAME=VALUE...] COMMAND [ARGS...]\n");
        leave(1);
    }
    unsigned long envc = 0;
    while (envp[envc] != nullptr) ++envc;
    if (envc > 65536) refuse("the environment is too large");
    char* env[envc + static_cast<unsigned long>(at - first_assignment) + 1];
    unsigned long count = 0;
    for (unsigned long i = 0; i < envc; ++i) {
        bool replaced = false;
        for (long a = first_assignment; a < at; ++a)
            replaced = replaced || same_name(envp[i], argv[a]);
        if (!replaced) env[count++] = envp[i];
    }
    for (long a = first_assignment; a < at; ++a) env[count++] = argv[a];
    env[count] = nullptr;
    become_root();
    const long error = exec_search(argv + at, env);
    refuse(argv[at], error == -k_eacces ? ": permission denied" : ": command not found");
}
