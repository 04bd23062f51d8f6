#pragma once
// Resource limits of a wrapped run: memory, process count, /tmp size.
//
// Mechanism, strongest first: a per-run cgroup (cgroup2 with the memory/pids controllers
// delegated to our cgroup, else the v1 memory and pids hierarchies when writable), otherwise
// rlimits (RLIMIT_AS for memory, RLIMIT_NPROC for processes). RLIMIT_NPROC is not enforced for
// processes whose real uid is the host's root: under a user namespace created by root the
// sandbox uid maps to host uid 0, so as root only a pids cgroup bounds a fork bomb. The /tmp
// size is the tmpfs's own `size=`.
//
// Defaults: pids 4096 where a cgroup (or, unprivileged, RLIMIT_NPROC) can enforce it; no
// memory limit unless --memory is given (a default RLIMIT_AS breaks runtimes that reserve
// address space, and joining a v1 memory cgroup costs milliseconds per run); /tmp 1 GiB. An
// explicitly requested limit that no mechanism can enforce fails the plan (unavailable).
//
// The cgroup is entered and the rlimits set by a constant launcher (`/bin/sh -c` with a fixed
// script; the values are positional arguments, never spliced into the script) that then execs
// bwrap, so that bwrap and everything below it are bounded from the first instruction.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sandbox/error.hpp"
#include "sandbox/run.hpp"

namespace sandbox {

enum class LimitMechanism { none, cgroup2, cgroup1, rlimit };

struct LimitPlan {
    std::uint64_t tmp_size = 0;
    std::optional<std::uint64_t> memory;
    std::optional<std::uint64_t> pids;
    LimitMechanism memory_by = LimitMechanism::none;
    LimitMechanism pids_by = LimitMechanism::none;
    // cgroup directories to create (name decided at plan time), each with its limit files.
    std::vector<std::pair<std::filesystem::path, std::vector<std::pair<std::string, std::string>>>>
        cgroups;

    nlohmann::ordered_json describe() const;
};

// Removes the run's cgroups (killing anything left in them) when destroyed.
class LimitResources {
public:
    explicit LimitResources(std::vector<std::filesystem::path> dirs) : m_dirs(std::move(dirs)) {}
    LimitResources(const LimitResources&) = delete;
    LimitResources& operator=(const LimitResources&) = delete;
    ~LimitResources();

private:
    std::vector<std::filesystem::path> m_dirs;
};

// Decides the limits and how each is enforced on this machine. Fails closed (unavailable) for
// an explicit --memory/--pids nothing here can enforce; invalid_input for a zero limit.
Expected<LimitPlan> plan_limits(const Policy& policy);

// Creates the planned cgroups and writes their limits.
Expected<std::unique_ptr<LimitResources>> apply_limits(const LimitPlan& plan);

// Prefixes `argv` with the launcher when the plan needs one; otherwise returns it unchanged.
std::vector<std::string> wrap_with_limits(const LimitPlan& plan, std::vector<std::string> argv);

std::string_view to_string(LimitMechanism mechanism);

// Where a cgroup could be made here (for doctor): "cgroup2", "cgroup1" or "none", per
// controller.
LimitMechanism cgroup_mechanism_for(std::string_view controller);

}  // namespace sandbox
