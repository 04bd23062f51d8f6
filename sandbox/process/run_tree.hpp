#pragma once
// The tree-kill mechanism of one sandbox::run, behind one interface (internal to run.cpp):
// the run's cgroup2 leaf, the wrap's pid namespace, or a subreaper (a per-run reaper process,
// or the caller itself under Reaper::caller). run() picks it with choose_tree, stops the tree
// through it on a timeout or a cancel, and asks it whether the tree is gone after the exit.

#include <optional>

#include "sandbox/base.hpp"
#include "sandbox/process/cgroup.hpp"
#include "sandbox/process/run.hpp"
#include "sandbox/process/spawn.hpp"
#include "sandbox/wrap/wrap.hpp"

namespace sandbox {

class RunTree {
public:
    enum class Holder { own, caller };  // caller: Reaper::caller (the subreaper is us)
    RunTree(TreeKill kind, std::optional<Cgroup> cgroup, Holder holder = Holder::own)
        : m_kind(kind), m_cgroup(std::move(cgroup)), m_holder(holder) {}
    TreeKill kind() const { return m_kind; }
    const std::optional<Cgroup>& cgroup() const { return m_cgroup; }
    // Reaper::caller: orphans (under the wrap, bwrap's pid 1) are re-parented to us and
    // waited for through adopted_pidfd().
    bool adopts_orphans() const { return m_holder == Holder::caller; }
    Supervision supervision() const {
        return m_kind == TreeKill::subreaper && m_holder == Holder::own ? Supervision::subreaper
                                                                        : Supervision::direct;
    }

    // SIGTERM then SIGCONT to the whole tree (stopped processes must see the TERM).
    void terminate(const Child& child) const;
    // SIGKILL to the whole tree.
    void kill(const Child& child) const;
    // The main child has exited (not yet reaped, so its pid and group cannot be recycled):
    // kills what is left of the tree.
    void after_exit(const Child& child) const;
    // After the main child was reaped. With the caller as the subreaper this also kills and
    // reaps what is left, orphans that a cgroup emptied included (they were re-parented to us
    // and would stay zombies). Non-blocking; called again until it says so.
    bool dead() const;
    // With the caller as the subreaper, once dead() said no: a pidfd of one child of ours that
    // is left (under the wrap, bwrap's pid 1, adopted when bwrap exited), readable when it has
    // exited, so that the wait for the tree needs no timer. Invalid otherwise.
    Fd adopted_pidfd() const;

private:
    TreeKill m_kind;
    std::optional<Cgroup> m_cgroup;
    Holder m_holder;
};

// A cgroup leaf when allowed and possible, else what the wrap provides (a pid namespace),
// else the caller as the subreaper (Reaper::caller), else a per-run one. `plan` may be null.
RunTree choose_tree(const RunRequest& request, const WrapPlan* plan);

// Writes the wrap's cgroup2 limits (pids.max, memory.max) into the run's leaf before anything
// starts in it; unavailable when there is no leaf or a limit cannot be set.
Expected<void> write_leaf_limits(const RunTree& tree, const WrapPlan& plan);

}  // namespace sandbox
