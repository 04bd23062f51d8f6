// The per-run cgroup leaf, on this machine's real cgroup2 hierarchy, and the sweep of leaves
// left behind (cgroup2 and the v1 hierarchies the limits use).
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "common/fd.hpp"
#include "sandbox/process/cgroup.hpp"
#include "sandbox/process/limits.hpp"
#include "sandbox/process/spawn.hpp"
#include "tests/support/processes.hpp"
#include "tests/support/wrap_detect.hpp"

namespace {

// A pid that is certainly gone: a child we forked and reaped (its reuse within a test is
// unlikely), to name the leaves of a sandgate process that died.
pid_t reaped_pid() {
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) ::_exit(0);
    REQUIRE(::waitpid(pid, nullptr, 0) == pid);
    return pid;
}

}  // namespace

TEST_CASE("a leaf holds a spawned tree, kills it whole and is removed") {
    SKIP_UNDER_WRAP("no writable cgroup2 inside the wrap");
    auto cgroup = sandbox::Cgroup::create();
    REQUIRE(cgroup);
    const std::filesystem::path path = cgroup->path();
    CHECK(std::filesystem::is_directory(path));
    CHECK_FALSE(cgroup->populated());

    const std::string marker = tests::unique_marker();
    common::Fd null(::open("/dev/null", O_RDWR | O_CLOEXEC));
    sandbox::SpawnSpec spec;
    spec.stdin_fd = spec.stdout_fd = spec.stderr_fd = null.get();
    spec.argv = {SANDGATE_TEST_CHILD, "double-fork", marker};
    spec.cgroup_fd = cgroup->dir_fd();
    auto child = sandbox::spawn(spec);
    REQUIRE(child);
    CHECK(child->reap()->exit_code == 0);
    // The double-forked grandchild lives on, re-parented away, but still in the leaf. It may
    // still be inside its execve, whose /proc/PID/cmdline reads empty for a moment: wait for
    // it (a grandchild that never shows hangs the test rather than passing it).
    // The intermediate child (which carries the marker too) may also show for a moment before
    // it is gone: wait until the grandchild alone shows (at most 10 s).
    CHECK(cgroup->populated());
    std::size_t shown = 0;
    for (int i = 0; i < 10000 && (shown = tests::processes_with(marker).size()) != 1; ++i)
        ::usleep(1000);
    CHECK(shown == 1);
    CHECK(cgroup->signal_all(0) == 1);
    cgroup->kill();
    for (int i = 0; i < 1000 && cgroup->populated(); ++i) ::usleep(10000);
    CHECK_FALSE(cgroup->populated());
    CHECK(tests::processes_with(marker).empty());
    { auto gone = std::move(*cgroup); }
    CHECK_FALSE(std::filesystem::exists(path));
}

TEST_CASE("leaves of sandgate processes that are gone are swept; live, young and busy ones stay") {
    SKIP_UNDER_WRAP("no writable cgroup2 inside the wrap");
    auto base = sandbox::Cgroup::base();
    REQUIRE(base);
    const pid_t gone = reaped_pid();
    const auto stale = *base / ("sandgate-" + std::to_string(gone) + "-1");
    const auto busy = *base / ("sandgate-" + std::to_string(gone) + "-2");
    const auto mine = *base / ("sandgate-" + std::to_string(::getpid()) + "-999");
    const auto foreign = *base / "sandgate-notapid-1";
    for (const auto& dir : {stale, busy, mine, foreign})
        REQUIRE(std::filesystem::create_directory(dir));
    // The busy one holds a process.
    common::Fd busy_dir(::open(busy.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    common::Fd null(::open("/dev/null", O_RDWR | O_CLOEXEC));
    sandbox::SpawnSpec spec;
    spec.stdin_fd = spec.stdout_fd = spec.stderr_fd = null.get();
    spec.argv = {"/bin/sleep", "600"};
    spec.cgroup_fd = busy_dir.get();
    auto sleeper = sandbox::spawn(spec);
    REQUIRE(sleeper);
    CHECK(sandbox::Cgroup::remove_stale(std::chrono::hours(1)) == 0);  // all too young
    CHECK(std::filesystem::exists(stale));
    CHECK(sandbox::Cgroup::remove_stale(std::chrono::seconds(0)) >= 1);
    CHECK_FALSE(std::filesystem::exists(stale));
    CHECK(std::filesystem::exists(busy));     // rmdir refuses a populated leaf
    CHECK(std::filesystem::exists(mine));     // this process is alive
    CHECK(std::filesystem::exists(foreign));  // not a name sandgate makes
    sleeper->signal(SIGKILL);
    (void)sleeper->reap();
    for (int i = 0; i < 1000 && ::rmdir(busy.c_str()) != 0; ++i) ::usleep(10000);
    CHECK_FALSE(std::filesystem::exists(busy));
    for (const auto& dir : {mine, foreign}) CHECK(::rmdir(dir.c_str()) == 0);
}

TEST_CASE("v1 cgroups left by sandgate processes that are gone are swept like the cgroup2 leaves") {
    SKIP_UNDER_WRAP("no writable cgroup inside the wrap");
    // Where the limits would make a per-run v1 pids cgroup on this machine (root, no pids
    // controller in the cgroup2 leaf, the v1 pids hierarchy mounted and writable).
    sandbox::Policy policy;
    policy.pids = 64;
    auto plan = sandbox::plan_limits(policy, sandbox::CgroupUse::never);
    REQUIRE(plan);
    REQUIRE(plan->pids_by == sandbox::LimitMechanism::cgroup1);
    REQUIRE(plan->cgroups.size() == 1);
    const auto parent = plan->cgroups.front().first.parent_path();
    const pid_t gone = reaped_pid();
    const auto stale = parent / ("sandgate-" + std::to_string(gone) + "-1");
    const auto old_stale = parent / ("sandgate-" + std::to_string(gone) + "-2");
    const auto busy = parent / ("sandgate-" + std::to_string(gone) + "-3");
    const auto mine = parent / ("sandgate-" + std::to_string(::getpid()) + "-999");
    const auto foreign = parent / "sandgate-notapid-1";
    for (const auto& dir : {stale, old_stale, busy, mine, foreign})
        REQUIRE(std::filesystem::create_directory(dir));
    // Two minutes old (cgroupfs takes utimes): what the once-per-process sweep removes.
    const timespec two_minutes_ago[2] = {{::time(nullptr) - 120, 0}, {::time(nullptr) - 120, 0}};
    for (const auto& dir : {old_stale, busy, mine, foreign})
        REQUIRE(::utimensat(AT_FDCWD, dir.c_str(), two_minutes_ago, 0) == 0);
    // The busy one holds a process (v1: joined through cgroup.procs before exec).
    common::Fd procs(::open((busy / "cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC));
    REQUIRE(procs);
    common::Fd null(::open("/dev/null", O_RDWR | O_CLOEXEC));
    sandbox::SpawnSpec spec;
    spec.stdin_fd = spec.stdout_fd = spec.stderr_fd = null.get();
    spec.argv = {"/bin/sleep", "600"};
    spec.join_cgroup_procs = {procs.get()};
    auto sleeper = sandbox::spawn(spec);
    REQUIRE(sleeper);

    // Making the run's v1 cgroups sweeps their parent first (once per process): only the leaf
    // of a dead pid that is over a minute old and empty goes.
    auto made = sandbox::apply_limits(*plan);
    REQUIRE(made);
    CHECK(std::filesystem::is_directory(plan->cgroups.front().first));
    CHECK_FALSE(std::filesystem::exists(old_stale));
    CHECK(std::filesystem::exists(stale));    // too young
    CHECK(std::filesystem::exists(busy));     // rmdir refuses a populated cgroup
    CHECK(std::filesystem::exists(mine));     // this process is alive
    CHECK(std::filesystem::exists(foreign));  // not a name sandgate makes
    made->reset();                            // the run's own cgroup is removed as after a run
    CHECK_FALSE(std::filesystem::exists(plan->cgroups.front().first));
    CHECK(sandbox::remove_stale_leaves(parent, std::chrono::seconds(0)) >= 1);
    CHECK_FALSE(std::filesystem::exists(stale));
    CHECK(std::filesystem::exists(busy));
    sleeper->signal(SIGKILL);
    (void)sleeper->reap();
    for (int i = 0; i < 1000 && ::rmdir(busy.c_str()) != 0; ++i) ::usleep(10000);
    CHECK_FALSE(std::filesystem::exists(busy));
    for (const auto& dir : {mine, foreign}) CHECK(::rmdir(dir.c_str()) == 0);
}

namespace {

nlink_t links(const std::filesystem::path& dir) {
    struct stat st {};
    REQUIRE(::stat(dir.c_str(), &st) == 0);
    return st.st_nlink;
}

}  // namespace

// Cgroup::create() skips the sweep when the parent's link count says it has no subdirectory;
// that rests on cgroupfs counting 2 + subdirectories, checked here in a private directory.
TEST_CASE("a cgroup directory's link count is 2 plus its subdirectories") {
    SKIP_UNDER_WRAP("no writable cgroup2 inside the wrap");
    auto cgroup = sandbox::Cgroup::create();
    REQUIRE(cgroup);
    CHECK(links(cgroup->path()) == 2);
    const auto sub = cgroup->path() / "sub";
    REQUIRE(::mkdir(sub.c_str(), 0755) == 0);
    CHECK(links(cgroup->path()) == 3);
    REQUIRE(::rmdir(sub.c_str()) == 0);
    CHECK(links(cgroup->path()) == 2);
}

TEST_CASE("a `sandgate exec` that finds leaves besides its own sweeps the stale ones") {
    SKIP_UNDER_WRAP("no writable cgroup2 inside the wrap");
    auto base = sandbox::Cgroup::base();
    REQUIRE(base);
    const pid_t gone = reaped_pid();
    const auto stale = *base / ("sandgate-" + std::to_string(gone) + "-7");
    REQUIRE(std::filesystem::create_directory(stale));
    const timeval old[2] = {{::time(nullptr) - 7200, 0}, {::time(nullptr) - 7200, 0}};
    REQUIRE(::utimes(stale.c_str(), old) == 0);  // left two hours ago
    const pid_t exec = ::fork();
    REQUIRE(exec >= 0);
    if (exec == 0) {
        ::execl(SANDGATE_BINARY, "sandgate", "exec", "--sandbox", "off", "--", "/bin/true",
                nullptr);
        ::_exit(127);
    }
    int status = 0;
    REQUIRE(::waitpid(exec, &status, 0) == exec);
    CHECK(status == 0);
    const bool swept = !std::filesystem::exists(stale);
    if (!swept) ::rmdir(stale.c_str());
    CHECK(swept);
}

TEST_CASE("the leaves' parent is our own cgroup in the cgroup2 mount that mountinfo lists") {
    SKIP_UNDER_WRAP("no writable cgroup2 inside the wrap");
    // The model: the cgroup2 line of /proc/self/mountinfo and the 0:: line of /proc/self/cgroup
    // (Cgroup::base() looks in the usual places first and must agree with it).
    std::ifstream mounts("/proc/self/mountinfo");
    std::string line, mount_point, root;
    while (std::getline(mounts, line)) {
        const auto dash = line.find(" - cgroup2 ");
        if (dash == std::string::npos) continue;
        std::istringstream fields(line.substr(0, dash));
        std::string id, parent, devno;
        fields >> id >> parent >> devno >> root >> mount_point;
        break;
    }
    REQUIRE_FALSE(mount_point.empty());
    std::ifstream groups("/proc/self/cgroup");
    std::string own = "/";
    while (std::getline(groups, line))
        if (line.starts_with("0::")) own = line.substr(3);
    if (root != "/" && own.starts_with(root)) own.erase(0, root.size());
    const auto expected =
        std::filesystem::path(mount_point) / own.substr(own.starts_with('/') ? 1 : 0);
    auto base = sandbox::Cgroup::base();
    REQUIRE(base);
    CHECK(std::filesystem::equivalent(*base, expected));
}
