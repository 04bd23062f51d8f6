#include "sandbox/wrap/doctor.hpp"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>

#include "sandbox/base.hpp"
#include "sandbox/process/limits.hpp"
#include "sandbox/wrap/identity.hpp"
#include "sandbox/wrap/probe.hpp"

extern char** environ;

namespace sandbox {
namespace {

// Runs `argv` with a clean environment and returns the first line of its output, or nullopt
// when it fails or does not answer within two seconds (a runtime waiting on a dead daemon).
std::optional<std::string> first_line_of(const std::vector<std::string>& argv) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return std::nullopt;
    Fd read_end(fds[0]);
    Fd write_end(fds[1]);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, write_end.get(), 1);
    posix_spawn_file_actions_adddup2(&actions, write_end.get(), 2);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    std::vector<char*> args;
    for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
    args.push_back(nullptr);
    std::string path_entry = "PATH=" + host_path_list();
    char* envp[] = {path_entry.data(), nullptr};
    pid_t pid = 0;
    const int rc = ::posix_spawn(&pid, args[0], &actions, nullptr, args.data(), envp);
    posix_spawn_file_actions_destroy(&actions);
    write_end.reset();
    if (rc != 0) return std::nullopt;
    std::string output;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    char buffer[4096];
    bool timed_out = false;
    for (;;) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) {
            timed_out = true;
            break;
        }
        pollfd p{read_end.get(), POLLIN, 0};
        if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
        const ssize_t n = ::read(read_end.get(), buffer, sizeof buffer);
        if (n <= 0) break;
        if (output.size() < 65536) output.append(buffer, static_cast<std::size_t>(n));
    }
    if (timed_out) ::kill(pid, SIGKILL);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (timed_out || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return std::nullopt;
    return output.substr(0, output.find('\n'));
}

DoctorCheck check_bwrap() {
    auto bwrap = find_bwrap();
    if (!bwrap) return {"bwrap", false, bwrap.error().message};
    auto version = first_line_of({bwrap->string(), "--version"});
    if (!version)
        return {"bwrap", false, bwrap->string() + " does not run (`bwrap --version` failed)"};
    return {"bwrap", true, *version + " at " + bwrap->string()};
}

DoctorCheck check_sysctl(const char* name, const char* path, const char* bad_value,
                         const char* advice) {
    auto value = read_small_file(path);
    if (!value) return {name, true, "not present on this kernel"};
    if (*value == bad_value) return {name, false, *value + ": " + advice};
    return {name, true, *value};
}

DoctorCheck check_cgroup2() {
    auto mount = cgroup2_mount();
    if (!mount)
        return {"cgroup2", false, "no cgroup2 hierarchy mounted (tree kill by pid namespace)"};
    const bool writable = ::access(mount->c_str(), W_OK) == 0;
    auto controllers = read_small_file(*mount / "cgroup.controllers");
    return {"cgroup2", writable,
            mount->string() + (writable ? " writable" : " not writable") + ", controllers: " +
                (controllers && !controllers->empty() ? *controllers : std::string("none"))};
}

DoctorCheck check_limit(const char* name, const char* controller, const char* fallback) {
    const auto mechanism = cgroup_mechanism_for(controller);
    if (mechanism == LimitMechanism::cgroup1 && std::string_view(controller) == "pids" &&
        ::geteuid() == 0)
        return {name, true,
                "per-run cgroup1 cgroup for an explicit --pids; no default process limit as root "
                "(joining a v1 cgroup costs an RCU grace period per run)"};
    if (mechanism != LimitMechanism::none)
        return {name, true, "per-run " + std::string(to_string(mechanism)) + " cgroup"};
    if (std::string_view(controller) == "pids" && ::geteuid() == 0)
        return {name, false,
                "no writable pids cgroup and RLIMIT_NPROC does not bind root: --pids is refused; "
                "delegate a cgroup or run as an unprivileged user"};
    return {name, true, fallback};
}

std::vector<DoctorCheck> container_checks() {
    std::vector<DoctorCheck> checks;
    for (const char* name : {"podman", "docker"}) {
        auto found = find_on_path(name, host_path_list());
        if (!found) {
            checks.push_back({name, false, "not on PATH"});
            continue;
        }
        auto version = first_line_of({found->string(), "--version"});
        // A client without a working engine is no runtime: `info` must answer.
        const bool engine = version && first_line_of({found->string(), "info"}).has_value();
        checks.push_back(
            {name, engine,
             (version ? *version : std::string("does not run")) + " at " + found->string() +
                 (engine ? "" : " (no working engine: `" + std::string(name) + " info` fails)")});
    }
    return checks;
}

}  // namespace

// Who the sandbox is on the host: as root an unprivileged identity of its own (threat row 34).
DoctorCheck check_host_identity(const std::optional<Owner>& identity) {
    Policy policy;
    policy.host_identity = identity;
    if (auto owner = sandbox_owner(policy))
        return {"host_identity", true,
                "sandgate is root: the sandbox runs as host uid:gid " + to_string(*owner) +
                    " (unprivileged, no supplementary groups; --sandbox-user to choose), which is "
                    "given the trees it may write"};
    return {"host_identity", true,
            "the sandbox runs as this user (uid " + std::to_string(::geteuid()) +
                "): sandgate is not root"};
}

DoctorReport run_doctor(const std::optional<Owner>& identity) {
    DoctorReport report;
    report.checks.push_back(check_bwrap());
    report.checks.push_back(check_host_identity(identity));
    report.checks.push_back(
        {"openat2", openat2_available(),
         openat2_available()
             ? "step-written files are reached beneath directory fds (RESOLVE_BENEATH, "
               "no symlinks, no magic links, no mount crossing)"
             : "this kernel has no openat2 (Linux 5.6+): sandgate refuses to read "
               "or write step-written files (file commands, hashFiles, matchers)"});
    auto userns = check_user_namespaces();
    report.checks.push_back({"user_namespaces", userns.has_value(),
                             userns ? "user, mount, pid, net, ipc and uts namespaces can be created"
                                    : userns.error().message});
    report.checks.push_back(check_sysctl(
        "apparmor_restrict_unprivileged_userns",
        "/proc/sys/kernel/apparmor_restrict_unprivileged_userns", "1",
        "unprivileged bwrap is blocked unless an AppArmor profile allows it; set "
        "`sysctl kernel.apparmor_restrict_unprivileged_userns=0` or add a profile for bwrap"));
    report.checks.push_back(check_sysctl("max_user_namespaces",
                                         "/proc/sys/user/max_user_namespaces", "0",
                                         "user namespaces are disabled; raise "
                                         "user.max_user_namespaces"));
    auto seccomp = check_seccomp();
    report.checks.push_back({"seccomp", seccomp.has_value(),
                             seccomp ? "filters can be loaded (" +
                                           read_small_file("/proc/sys/kernel/seccomp/actions_avail")
                                               .value_or("actions unknown") +
                                           ")"
                                     : seccomp.error().message});
    report.checks.push_back(check_cgroup2());
    report.checks.push_back(
        check_limit("memory_limit", "memory", "RLIMIT_AS (when --memory is given)"));
    report.checks.push_back(check_limit("pids_limit", "pids", "RLIMIT_NPROC"));
    const auto runtimes = container_checks();
    report.checks.insert(report.checks.end(), runtimes.begin(), runtimes.end());

    report.default_available = report.checks[0].ok && userns.has_value() && seccomp.has_value();
    bool runtime_found = false;
    for (const auto& check : runtimes) runtime_found = runtime_found || check.ok;
    report.strongest = report.default_available ? "bwrap" : runtime_found ? "container" : "off";
    return report;
}

nlohmann::ordered_json DoctorReport::to_json() const {
    nlohmann::ordered_json doc;
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const auto& check : checks)
        list.push_back({{"name", check.name}, {"ok", check.ok}, {"detail", check.detail}});
    doc["checks"] = std::move(list);
    doc["strongest_posture"] = strongest;
    doc["default_posture_available"] = default_available;
    return doc;
}

std::string DoctorReport::to_text() const {
    std::string text;
    for (const auto& check : checks) {
        std::string name = check.name;
        name.resize(std::max<std::size_t>(name.size(), 38), ' ');
        text += (check.ok ? "ok    " : "NO    ") + name + " " + check.detail + "\n";
    }
    text += "strongest posture: " + strongest + "\n";
    text += default_available ? "default posture (--sandbox bwrap --network none): available\n"
                              : "default posture (--sandbox bwrap --network none): NOT available\n";
    return text;
}

}  // namespace sandbox
