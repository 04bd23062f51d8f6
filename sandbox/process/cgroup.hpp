#pragma once
// A per-run cgroup v2 leaf: the strongest tree-kill mechanism. The command joins it before
// exec (SpawnSpec::cgroup_fd), so everything it ever forks is inside, whatever it does
// with sessions and parents; `cgroup.kill` then SIGKILLs all of it at once.
//
// The leaf is created under the cgroup this process belongs to, in the cgroup2 mount found in
// /proc/self/mountinfo (e.g. /sys/fs/cgroup or, on hybrid hosts, /sys/fs/cgroup/unified).
// Where that is not writable (an unprivileged user without delegation, inside the wrap),
// create() fails with ErrorKind::unavailable and run() falls back to the subreaper.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>

#include "sandbox/base.hpp"

namespace sandbox {

// Removes leaves left behind by sandgate processes that are gone (killed, or ended by a
// signal while a run was in flight): sandgate-<pid>-<n> directories under `parent` (the
// cgroup2 base, or a v1 hierarchy's directory where limits.cpp makes its per-run cgroups)
// whose pid no longer exists and which are older than `min_age`. A leaf that still holds
// processes is refused by rmdir and stays for a later sweep. Returns how many were removed.
int remove_stale_leaves(const std::filesystem::path& parent, std::chrono::seconds min_age);

// remove_stale_leaves(parent, one minute), at most once per process for each parent: what
// creating a leaf there runs first. Skipped (and not counted as the once) while `parent` has
// no subdirectory at all (its link count is 2: one stat instead of a listing).
void remove_stale_leaves_once(const std::filesystem::path& parent);

class Cgroup {
public:
    // Creates sandgate-<pid>-<n>, unique per run in this process.
    static Expected<Cgroup> create();
    // The directory new leaves are created in, or unavailable (cached after the first call).
    static Expected<std::filesystem::path> base();
    // Where base() is, writable or not (cached): enough to ask which controllers a leaf would
    // get before paying for the writability checks.
    static Expected<std::filesystem::path> located_base();
    // remove_stale_leaves under base() (0 without one). create() sweeps once per process.
    static int remove_stale(std::chrono::seconds min_age);

    Cgroup(Cgroup&&) noexcept = default;
    Cgroup& operator=(Cgroup&&) = delete;
    Cgroup(const Cgroup&) = delete;
    // Kills what is left, waits (bounded) for the leaf to empty and removes it.
    ~Cgroup();

    const std::filesystem::path& path() const { return m_path; }
    int dir_fd() const { return m_dir.get(); }        // for clone3's CLONE_INTO_CGROUP
    int events_fd() const { return m_events.get(); }  // poll POLLPRI: "populated" changed
    // Sends sig to every process in the leaf (read from cgroup.procs). Returns how many.
    int signal_all(int sig) const;
    // SIGKILLs every process in the leaf (cgroup.kill; a signal_all loop before Linux 5.14).
    void kill() const;
    // True while any process is in the leaf (cgroup.events "populated 1").
    bool populated() const;

private:
    explicit Cgroup(std::filesystem::path path, Fd dir, Fd events);
    void kill_and_wait() const;
    std::filesystem::path m_path;
    Fd m_dir;
    Fd m_events;
};

}  // namespace sandbox
