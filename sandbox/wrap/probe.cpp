#include "sandbox/wrap/probe.hpp"

#include <fcntl.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <vector>

#include "sandbox/base.hpp"

namespace sandbox {
namespace {

constexpr std::string_view k_default_path = "/usr/local/bin:/usr/bin:/bin";

bool is_executable_file(const std::filesystem::path& candidate) {
    struct stat st {};
    if (::stat(candidate.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
    return ::access(candidate.c_str(), X_OK) == 0;
}

int unshare_probe(void*) {
    // A user namespace, then, as its root, a uts and a pid namespace: what the sysctls and
    // container seccomp profiles refuse, and what Ubuntu's AppArmor restriction refuses (it lets
    // the user namespace be made but takes the capabilities away inside). No mount namespace
    // (copying the host's mount table to tear it down again is the expensive part) and no
    // network namespace; bwrap still fails closed if one of those were refused.
    if (::unshare(CLONE_NEWUSER) != 0) return errno == EPERM || errno == EACCES ? 1 : 2;
    return ::unshare(CLONE_NEWUTS | CLONE_NEWPID) == 0
               ? 0
               : (errno == EPERM || errno == EACCES ? 1 : 2);
}

// Asks for the namespaces in a throwaway child rather than in this process: unshare
// (CLONE_NEWUSER) is refused in a multi-threaded process anyway, and the namespaces must not
// leak into the agent. CLONE_VM | CLONE_VFORK on a small stack, like posix_spawn: no copy of
// this (large) process's page tables.
Expected<void> probe_namespaces() {
    constexpr std::size_t k_stack = 64 * 1024;
    auto stack = std::make_unique<char[]>(k_stack);
    const pid_t pid =
        ::clone(unshare_probe, stack.get() + k_stack, CLONE_VM | CLONE_VFORK | SIGCHLD, nullptr);
    if (pid < 0) return fail(ErrorKind::unavailable, errno_message("clone for the userns probe"));
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return {};
    std::string message =
        "user namespaces are refused on this machine, so bwrap cannot build "
        "the sandbox";
    if (read_small_file("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == "1")
        message +=
            " (kernel.apparmor_restrict_unprivileged_userns=1: allow bwrap with an "
            "AppArmor profile, or set `sysctl kernel.apparmor_restrict_unprivileged_userns=0`)";
    else if (read_small_file("/proc/sys/kernel/unprivileged_userns_clone") == "0")
        message += " (kernel.unprivileged_userns_clone=0: set it to 1)";
    else if (read_small_file("/proc/sys/user/max_user_namespaces") == "0")
        message += " (user.max_user_namespaces=0: raise it)";
    else
        message +=
            " (a container or seccomp profile may forbid unshare; run on a host or a "
            "privileged runner, or see `sandgate doctor`)";
    message += "; or pass --sandbox off explicitly to run unwrapped";
    return fail(ErrorKind::unavailable, std::move(message));
}

std::vector<std::vector<std::string>> mountinfo_lines() {
    std::vector<std::vector<std::string>> lines;
    std::ifstream in("/proc/self/mountinfo");
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream fields(line);
        std::vector<std::string> words;
        for (std::string word; fields >> word;) words.push_back(word);
        lines.push_back(std::move(words));
    }
    return lines;
}

Expected<void> probe_seccomp() {
    // PR_GET_SECCOMP fails with EINVAL when the kernel has no seccomp at all; actions_avail
    // lists "errno" only with CONFIG_SECCOMP_FILTER.
    if (::prctl(PR_GET_SECCOMP, 0, 0, 0, 0) < 0)
        return fail(ErrorKind::unavailable,
                    "this kernel has no seccomp support (CONFIG_SECCOMP_FILTER), so the syscall "
                    "filter cannot be loaded; use a kernel with seccomp or --sandbox off "
                    "explicitly");
    auto actions = read_small_file("/proc/sys/kernel/seccomp/actions_avail");
    if (actions && actions->find("errno") == std::string::npos)
        return fail(ErrorKind::unavailable,
                    "seccomp cannot return errno here (actions_avail: " + *actions + ")");
    return {};
}

}  // namespace

std::optional<std::filesystem::path> find_on_path(std::string_view name,
                                                  std::string_view path_list) {
    if (name.empty()) return std::nullopt;
    if (name.find('/') != std::string_view::npos) {
        if (is_executable_file(std::filesystem::path(name))) return std::filesystem::path(name);
        return std::nullopt;
    }
    std::vector<std::string_view>
        tried;  // a directory listed twice (PATH often has some) is looked in once
    std::size_t start = 0;
    while (start <= path_list.size()) {
        std::size_t end = path_list.find(':', start);
        if (end == std::string_view::npos) end = path_list.size();
        const std::string_view dir = path_list.substr(start, end - start);
        start = end + 1;
        if (std::find(tried.begin(), tried.end(), dir) != tried.end()) continue;
        tried.push_back(dir);
        std::filesystem::path candidate = dir.empty() ? std::string(".") : std::string(dir);
        candidate /= name;
        if (is_executable_file(candidate)) return candidate;
    }
    return std::nullopt;
}

std::string host_path_list() {
    const char* path = std::getenv("PATH");
    return path && *path ? std::string(path) : std::string(k_default_path);
}

Expected<std::filesystem::path> find_bwrap() {
    if (auto found = find_on_path("bwrap", host_path_list())) {
        std::error_code ec;
        auto absolute = std::filesystem::absolute(*found, ec);
        return ec ? *found : absolute;
    }
    return fail(ErrorKind::unavailable,
                "bwrap (bubblewrap) is not on PATH: install it (`apt-get install bubblewrap`) or "
                "pass --sandbox off explicitly to run unwrapped");
}

Expected<void> check_user_namespaces() {
    static std::once_flag once;
    static Expected<void> cached;
    std::call_once(once, [] { cached = probe_namespaces(); });
    return cached;
}

Expected<void> check_seccomp() {
    // The kernel's answer does not change while this process lives: asked once.
    static std::once_flag once;
    static Expected<void> cached;
    std::call_once(once, [] { cached = probe_seccomp(); });
    return cached;
}

std::optional<std::string> read_small_file(const std::filesystem::path& path) {
    // Plain read(2): an ifstream's buffer, sentry and locale cost more than the file itself,
    // and the cgroup probe of every `sandgate exec` reads one of these.
    Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
    if (!fd) return std::nullopt;
    std::string text;
    char buffer[4096];
    for (;;) {
        const ssize_t n = ::read(fd.get(), buffer, sizeof buffer);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return std::nullopt;
        if (n == 0) break;
        text.append(buffer, static_cast<std::size_t>(n));
    }
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
    return text;
}

std::optional<std::filesystem::path> cgroup2_mount() {
    // mountinfo: id parent major:minor root mountpoint options ... - fstype source super
    for (const auto& words : mountinfo_lines()) {
        for (std::size_t i = 6; i + 1 < words.size(); ++i) {
            if (words[i] == "-" && words[i + 1] == "cgroup2") return words[4];
        }
    }
    return std::nullopt;
}

std::optional<std::filesystem::path> cgroup1_mount(std::string_view controller) {
    for (const auto& words : mountinfo_lines()) {
        for (std::size_t i = 6; i + 3 < words.size(); ++i) {
            if (words[i] != "-" || words[i + 1] != "cgroup") continue;
            std::istringstream options(words[i + 3]);
            for (std::string option; std::getline(options, option, ',');) {
                if (option == controller) return words[4];
            }
        }
    }
    return std::nullopt;
}

}  // namespace sandbox
