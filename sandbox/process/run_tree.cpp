#include "sandbox/process/run_tree.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "sandbox/process/reaper.hpp"

namespace sandbox {
namespace {

// Whether a sweep kills the children it finds alive or only reaps: under the wrap the one left
// is bwrap's pid 1, which leaves by itself once bwrap has (--die-with-parent) and takes the
// namespace with it; killing from outside would only compete with that teardown for the CPU.
enum class KillLeft { no, yes };

// Reaper::caller, once the main child is reaped: reaps what died and, while any child is
// left, SIGKILLs every descendant of this process (__WALL: clone children with another exit
// signal too). True once no child is left. No child at all (ECHILD) means no descendant
// either: orphans are re-parented to us before their parent's exit shows, so the common step
// that leaves nothing behind costs one waitpid and no walk of /proc. The kill comes before the
// next wait, so a fork racing the sweep is caught by the next call (the new process is
// re-parented to us, its killed parent forks no more).
bool sweep_caller_tree(KillLeft kill_left) {
    bool killed = kill_left == KillLeft::no;
    for (;;) {
        int status = 0;
        const pid_t pid = ::waitpid(-1, &status, WNOHANG | __WALL);
        if (pid > 0 || (pid < 0 && errno == EINTR)) continue;
        if (pid < 0) return errno == ECHILD;
        if (killed) return false;  // killed ones are reaped on a later call
        signal_descendants(::getpid(), SIGKILL, Resume::no);
        killed = true;
    }
}

bool caller_is_subreaper() {
    int flag = 0;
    return ::prctl(PR_GET_CHILD_SUBREAPER, &flag) == 0 && flag != 0;
}

}  // namespace

void RunTree::terminate(const Child& child) const {
    if (supervision() == Supervision::subreaper) return child.signal(k_reaper_terminate);
    if (m_cgroup) {
        m_cgroup->signal_all(SIGTERM);
        m_cgroup->signal_all(SIGCONT);
        return;
    }
    if (m_kind == TreeKill::pidns) {
        // Everything below the wrapper: the namespace's init (bwrap's pid 1 drops the TERM, it
        // has no handler and signals from outside reach an init only through one) and the
        // command's tree, all of which lives in the namespace. Not the wrapper itself (nor, for
        // the same reason, the caller's other descendants): its death would take the namespace
        // down at once through --die-with-parent, leaving the command no grace.
        signal_descendants(child.pid(), SIGTERM, Resume::yes);
        return;
    }
    ::kill(-child.pid(), SIGTERM);
    ::kill(-child.pid(), SIGCONT);
    child.signal(SIGTERM);
    if (m_holder == Holder::caller) signal_descendants(::getpid(), SIGTERM, Resume::yes);
}

void RunTree::kill(const Child& child) const {
    if (supervision() == Supervision::subreaper) return child.signal(k_reaper_kill);
    if (m_cgroup) return m_cgroup->kill();
    ::kill(-child.pid(), SIGKILL);
    child.signal(SIGKILL);
    if (m_holder == Holder::caller) signal_descendants(::getpid(), SIGKILL, Resume::no);
}

void RunTree::after_exit(const Child& child) const {
    if (supervision() == Supervision::subreaper) return;  // the reaper already swept the tree
    // The exited child has left the leaf already (cgroup_exit comes before the exit
    // notification); an empty leaf cannot gain a process, nothing inside is left to fork.
    if (m_cgroup) {
        if (m_cgroup->populated()) m_cgroup->kill();
        return;
    }
    // With the caller as the subreaper the rest of the tree is killed by dead()'s sweep.
    ::kill(-child.pid(), SIGKILL);
}

bool RunTree::dead() const {
    if (m_cgroup && m_cgroup->populated()) return false;
    if (m_holder != Holder::caller) return true;
    return sweep_caller_tree(m_kind == TreeKill::pidns ? KillLeft::no : KillLeft::yes);
}

Fd RunTree::adopted_pidfd() const {
    if (m_holder != Holder::caller) return Fd();
    const pid_t child = any_child(::getpid());
    // Our child until we reap it, so the pid cannot have been recycled.
    if (child <= 0) return Fd();
    return open_pidfd(child);
}

// Picks the mechanism: a cgroup leaf when allowed and possible, else what the wrap provides
// (a pid namespace), else the caller as the subreaper (Reaper::caller), else a per-run one.
RunTree choose_tree(const RunRequest& request, const WrapPlan* plan) {
    // Never trusted blindly: without the attribute, orphans would escape to init.
    const auto holder = request.reaper == Reaper::caller && caller_is_subreaper()
                            ? RunTree::Holder::caller
                            : RunTree::Holder::own;
    // Under the wrap the pid namespace takes the whole tree down with its init, so a leaf only
    // pays for itself when it carries the run's cgroup2 limits: making one, starting the wrap
    // in it and waiting for the namespace's teardown before rmdir cost ~0.35 ms per run.
    const bool pidns = plan != nullptr && plan->tree_kill == TreeKill::pidns;
    if (request.cgroup == CgroupUse::automatic && (!pidns || !plan->cgroup2_limits.empty())) {
        if (auto cgroup = Cgroup::create())
            return RunTree(TreeKill::cgroup, std::move(*cgroup), holder);
    }
    if (pidns) return RunTree(TreeKill::pidns, {}, holder);
    return RunTree(TreeKill::subreaper, {}, holder);
}

// Writes the wrap's cgroup2 limits (pids.max, memory.max) into the run's leaf before anything
// starts in it. memory.swap.max is best effort: swap accounting may be off.
Expected<void> write_leaf_limits(const RunTree& tree, const WrapPlan& plan) {
    if (plan.cgroup2_limits.empty()) return {};
    if (!tree.cgroup())
        return fail(ErrorKind::unavailable,
                    "the pids/memory limits need the run's own cgroup, and none could be created");
    for (const auto& [file, value] : plan.cgroup2_limits) {
        Fd fd(::openat(tree.cgroup()->dir_fd(), file.c_str(), O_WRONLY | O_CLOEXEC));
        const bool written = fd && ::write(fd.get(), value.data(), value.size()) ==
                                       static_cast<ssize_t>(value.size());
        if (!written && file != "memory.swap.max")
            return fail(ErrorKind::unavailable,
                        errno_message("cannot set " + (tree.cgroup()->path() / file).string() +
                                      " to " + value));
    }
    return {};
}

Expected<void> make_caller_subreaper() {
    if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0)
        return fail(ErrorKind::unavailable, errno_message("prctl(PR_SET_CHILD_SUBREAPER)"));
    return {};
}

}  // namespace sandbox
