#include "sandbox/process/limits.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "sandbox/process/cgroup.hpp"
#include "sandbox/wrap/probe.hpp"

namespace sandbox {
namespace {

constexpr std::uint64_t k_default_pids = 4096;
constexpr std::uint64_t k_default_tmp = 1ull << 30;
constexpr std::uint64_t k_min_memory = 64ull << 20;  // bwrap and a shell need a few MiB

std::atomic<unsigned> g_counter{0};

// Our own cgroup in the hierarchy `id` names ("0" for cgroup2, else a v1 controller list).
std::optional<std::string> own_cgroup(std::string_view controller) {
    std::ifstream in("/proc/self/cgroup");
    std::string line;
    while (std::getline(in, line)) {
        const auto first = line.find(':');
        const auto second = line.find(':', first + 1);
        if (first == std::string::npos || second == std::string::npos) continue;
        const std::string controllers = line.substr(first + 1, second - first - 1);
        const std::string path = line.substr(second + 1);
        if (controller.empty() ? controllers.empty() : false) return path;
        std::istringstream list(controllers);
        for (std::string item; std::getline(list, item, ',');) {
            if (!controller.empty() && item == controller) return path;
        }
    }
    return std::nullopt;
}

bool writable_dir(const std::filesystem::path& dir) {
    return ::access(dir.c_str(), W_OK) == 0;
}

// Whether the run's own cgroup2 leaf (created by sandbox::run under Cgroup::base()) will have
// `controller`: it must be enabled in the base's subtree_control.
// The controllers are read first: where none is delegated (the common case) that one read
// answers, without the writability checks.
bool leaf_has(std::string_view controller) {
    auto located = Cgroup::located_base();
    if (!located) return false;
    const auto enabled = read_small_file(*located / "cgroup.subtree_control");
    if (!enabled) return false;
    // Space-separated names ("cpu io memory pids"), no stream needed.
    std::string_view rest = *enabled;
    while (!rest.empty()) {
        const std::size_t end = std::min(rest.find(' '), rest.size());
        if (rest.substr(0, end) == controller) return Cgroup::base().has_value();
        rest.remove_prefix(std::min(end + 1, rest.size()));
    }
    return false;
}

// The v1 directory a per-run cgroup for `controller` would go in, if writable.
std::optional<std::filesystem::path> cgroup1_parent(std::string_view controller) {
    if (auto mount = cgroup1_mount(controller); mount) {
        if (auto own = own_cgroup(controller)) {
            const auto dir = *mount / std::filesystem::path(*own).relative_path();
            if (writable_dir(dir)) return dir;
        }
    }
    return std::nullopt;
}

std::filesystem::path& add_cgroup(LimitPlan& plan, const std::filesystem::path& dir) {
    for (auto& [path, files] : plan.cgroups) {
        if (path == dir) return path;
    }
    plan.cgroups.push_back({dir, {}});
    return plan.cgroups.back().first;
}

void add_limit_file(LimitPlan& plan, const std::filesystem::path& dir, std::string file,
                    std::string value) {
    add_cgroup(plan, dir);
    for (auto& [path, files] : plan.cgroups) {
        if (path == dir) files.emplace_back(std::move(file), std::move(value));
    }
}

void kill_members(const std::filesystem::path& dir) {
    std::ifstream procs(dir / "cgroup.procs");
    for (pid_t pid = 0; procs >> pid;) ::kill(pid, SIGKILL);
}

}  // namespace

std::string_view to_string(LimitMechanism mechanism) {
    switch (mechanism) {
        case LimitMechanism::none:
            return "none";
        case LimitMechanism::cgroup2:
            return "cgroup2";
        case LimitMechanism::cgroup1:
            return "cgroup1";
        case LimitMechanism::rlimit:
            return "rlimit";
    }
    return "none";
}

LimitMechanism cgroup_mechanism_for(std::string_view controller) {
    if (leaf_has(controller)) return LimitMechanism::cgroup2;
    return cgroup1_parent(controller) ? LimitMechanism::cgroup1 : LimitMechanism::none;
}

nlohmann::ordered_json LimitPlan::describe() const {
    nlohmann::ordered_json doc;
    doc["tmp_size"] = tmp_size;
    doc["memory"] = memory ? nlohmann::ordered_json(*memory) : nlohmann::ordered_json(nullptr);
    doc["memory_by"] = std::string(to_string(memory_by));
    doc["pids"] = pids ? nlohmann::ordered_json(*pids) : nlohmann::ordered_json(nullptr);
    doc["pids_by"] = std::string(to_string(pids_by));
    return doc;
}

Expected<LimitPlan> plan_limits(const Policy& policy, CgroupUse cgroup) {
    LimitPlan plan;
    plan.tmp_size = policy.tmp_size_bytes.value_or(k_default_tmp);
    if (plan.tmp_size == 0) return fail(ErrorKind::invalid_input, "--tmp-size: must be positive");
    if (policy.memory_bytes && *policy.memory_bytes < k_min_memory)
        return fail(ErrorKind::invalid_input, "--memory: at least 64M is needed to start the wrap");
    if (policy.pids && *policy.pids < 2)
        return fail(ErrorKind::invalid_input,
                    "--pids: at least 2 (the wrap's own init and the command)");
    const bool leaf = cgroup == CgroupUse::automatic;
    // A v1 per-run cgroup's name, made only when one is (getpid is a system call).
    std::string name;
    const auto v1_name = [&name]() -> const std::string& {
        if (name.empty())
            name = "sandgate-" + std::to_string(::getpid()) + "-" +
                   std::to_string(g_counter.fetch_add(1));
        return name;
    };
    // Memory: only when asked.
    if (!policy.memory_bytes) {
    } else if (leaf && leaf_has("memory")) {
        plan.memory = policy.memory_bytes;
        plan.memory_by = LimitMechanism::cgroup2;
        plan.cgroup2_files.emplace_back("memory.max", std::to_string(*plan.memory));
        plan.cgroup2_files.emplace_back("memory.swap.max", "0");
    } else if (auto parent = cgroup1_parent("memory")) {
        plan.memory = policy.memory_bytes;
        plan.memory_by = LimitMechanism::cgroup1;
        add_limit_file(plan, *parent / v1_name(), "memory.limit_in_bytes",
                       std::to_string(*plan.memory));
    } else {
        plan.memory = policy.memory_bytes;
        plan.memory_by = LimitMechanism::rlimit;
    }
    // Processes: the default only where it is cheap (the leaf, or RLIMIT_NPROC unprivileged).
    const std::uint64_t pids = policy.pids.value_or(k_default_pids);
    if (leaf && leaf_has("pids")) {
        plan.pids = pids;
        plan.pids_by = LimitMechanism::cgroup2;
        plan.cgroup2_files.emplace_back("pids.max", std::to_string(pids));
    } else if (::geteuid() != 0) {
        plan.pids = pids;
        plan.pids_by = LimitMechanism::rlimit;
    } else if (!policy.pids) {
        // Root without a delegated pids controller: no default bound (see the header).
    } else if (auto parent = cgroup1_parent("pids")) {
        plan.pids = pids;
        plan.pids_by = LimitMechanism::cgroup1;
        add_limit_file(plan, *parent / v1_name(), "pids.max", std::to_string(pids));
    } else {
        return fail(ErrorKind::unavailable,
                    "--pids cannot be enforced here: running as root (RLIMIT_NPROC does not apply "
                    "to uid 0) and no writable pids cgroup (cgroup2 with the pids controller "
                    "delegated, or the v1 pids hierarchy); run sandgate as an unprivileged user, "
                    "delegate a cgroup, or drop --pids");
    }
    return plan;
}

Expected<std::unique_ptr<LimitResources>> apply_limits(const LimitPlan& plan) {
    std::vector<std::filesystem::path> made;
    std::vector<Fd> procs;
    auto cleanup_on_error = [&](std::string message) {
        procs.clear();
        for (auto it = made.rbegin(); it != made.rend(); ++it) ::rmdir(it->c_str());
        return fail(ErrorKind::unavailable, std::move(message));
    };
    for (const auto& [dir, files] : plan.cgroups) {
        // Leaves of sandgate processes killed mid-run, as for the cgroup2 leaf.
        remove_stale_leaves_once(dir.parent_path());
        if (::mkdir(dir.c_str(), 0755) != 0)
            return cleanup_on_error(errno_message("creating cgroup " + dir.string()));
        made.push_back(dir);
        for (const auto& [file, value] : files) {
            std::ofstream out(dir / file);
            out << value;
            out.flush();
            if (!out)
                return cleanup_on_error("cannot set " + (dir / file).string() + " to " + value);
        }
        Fd fd(::open((dir / "cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC));
        if (!fd)
            return cleanup_on_error(errno_message("opening " + (dir / "cgroup.procs").string()));
        procs.push_back(std::move(fd));
    }
    return std::make_unique<LimitResources>(std::move(made), std::move(procs));
}

std::vector<ResourceLimit> rlimits_of(const LimitPlan& plan) {
    std::vector<ResourceLimit> limits;
    if (plan.pids_by == LimitMechanism::rlimit) limits.push_back({RLIMIT_NPROC, *plan.pids});
    if (plan.memory_by == LimitMechanism::rlimit) limits.push_back({RLIMIT_AS, *plan.memory});
    return limits;
}

LimitResources::~LimitResources() {
    // The pid namespace took everything down with bwrap; a cgroup stays busy until the last
    // member is reaped, so retry briefly after killing any straggler.
    for (auto it = m_dirs.rbegin(); it != m_dirs.rend(); ++it) {
        for (int attempt = 0; attempt < 200; ++attempt) {
            if (::rmdir(it->c_str()) == 0 || errno == ENOENT) break;
            if (errno != EBUSY) break;
            kill_members(*it);
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
    }
}

}  // namespace sandbox
