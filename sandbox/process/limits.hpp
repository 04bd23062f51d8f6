#pragma once
// Resource limits of a wrapped run: memory, process count, /tmp and /dev/shm size.
//
// Mechanism, strongest first: the run's own cgroup2 leaf (sandbox::run creates one per run
// and starts the command in it with CLONE_INTO_CGROUP) when the memory/pids controllers are
// delegated to our cgroup; otherwise, for an explicit --memory/--pids only, a per-run cgroup in
// the v1 memory/pids hierarchy when writable; otherwise rlimits (RLIMIT_AS for memory,
// RLIMIT_NPROC for processes). RLIMIT_NPROC counts per host uid, and as root the sandbox's
// host uid is shared by every concurrent run (see "RLIMIT_NPROC and the shared sandbox uid" at
// the end): as root only a pids cgroup bounds a fork bomb. /tmp and /dev/shm: tmpfs `size=`.
//
// Defaults: pids 4096 where the run's cgroup2 leaf or (unprivileged) RLIMIT_NPROC can enforce
// it; no memory limit unless --memory is given (a default RLIMIT_AS breaks runtimes that reserve
// address space); /tmp 1 GiB. v1 cgroups are used only when a limit is asked for explicitly:
// joining one (a write to cgroup.procs) waits for an RCU grace period, 10-25 ms per run. An
// explicitly requested limit that no mechanism can enforce fails the plan (unavailable).
//
// Nothing is exec'd for the limits: the process core (SpawnSpec::rlimits, join_cgroup_procs,
// the leaf's limit files) applies them to the wrapper between fork and exec, so that bwrap and
// everything below it are bounded from the first instruction.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "sandbox/base.hpp"
#include "sandbox/process/run.hpp"
#include "sandbox/process/spawn.hpp"

namespace sandbox {

enum class LimitMechanism { none, cgroup2, cgroup1, rlimit };

struct LimitPlan {
    std::uint64_t tmp_size = 0;
    std::optional<std::uint64_t> memory;
    std::optional<std::uint64_t> pids;
    LimitMechanism memory_by = LimitMechanism::none;
    LimitMechanism pids_by = LimitMechanism::none;
    // v1 cgroup directories to create (name decided at plan time), each with its limit files.
    std::vector<std::pair<std::filesystem::path, std::vector<std::pair<std::string, std::string>>>>
        cgroups;
    // Limit files for the run's own cgroup2 leaf (written by sandbox::run before the spawn).
    std::vector<std::pair<std::string, std::string>> cgroup2_files;

    nlohmann::ordered_json describe() const;
};

// Owns the run's v1 cgroups: removes them (killing anything left in them) when destroyed.
class LimitResources {
public:
    LimitResources(std::vector<std::filesystem::path> dirs, std::vector<Fd> procs)
        : m_dirs(std::move(dirs)), m_procs(std::move(procs)) {}
    LimitResources(const LimitResources&) = delete;
    LimitResources& operator=(const LimitResources&) = delete;
    ~LimitResources();

    // The cgroups' cgroup.procs, open for writing (SpawnSpec::join_cgroup_procs); handed over once.
    std::vector<Fd> take_procs() { return std::move(m_procs); }

private:
    std::vector<std::filesystem::path> m_dirs;
    std::vector<Fd> m_procs;
};

// Decides the limits and how each is enforced on this machine. `cgroup` is the run's
// CgroupUse: with CgroupUse::never there is no leaf to put cgroup2 limits in. Fails closed
// (unavailable) for an explicit --memory/--pids nothing here can enforce; invalid_input for a
// zero limit.
Expected<LimitPlan> plan_limits(const Policy& policy, CgroupUse cgroup = CgroupUse::automatic);

// Creates the planned v1 cgroups, writes their limits and opens their cgroup.procs. Their
// parents are first swept of cgroups left by sandgate processes that are gone (once per
// process each: remove_stale_leaves_once), as for the cgroup2 leaf.
Expected<std::unique_ptr<LimitResources>> apply_limits(const LimitPlan& plan);

// The rlimits the plan asks of the process core (SpawnSpec::rlimits).
std::vector<ResourceLimit> rlimits_of(const LimitPlan& plan);

std::string_view to_string(LimitMechanism mechanism);

// Where a cgroup could be made here (for doctor): "cgroup2", "cgroup1" or "none", per
// controller.
LimitMechanism cgroup_mechanism_for(std::string_view controller);

}  // namespace sandbox

// RLIMIT_NPROC and the shared sandbox uid. RLIMIT_NPROC counts every process of the run's real
// host uid, so it bounds one run only where that uid is the run's alone: unprivileged, sandgate's
// own user (and there it counts sandgate's other processes too). As root it is not used (an
// explicit --pids without a pids cgroup is refused): the bwrap arm runs the sandbox as an
// unprivileged host identity (identity.hpp: 65534:65534 unless --sandbox-user says otherwise)
// that every concurrent sandbox on the host shares, so a per-run RLIMIT_NPROC would count the
// other runs' processes too, and one run's fork bomb would starve them all. A distinct uid
// leased per run from a range would make it a per-run bound as root too; not built: a dedicated
// --sandbox-user per agent keeps agents apart, and the run's pids cgroup is the bound.
