// The per-run cgroup leaf, on this machine's real cgroup2 hierarchy.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>

#include "sandbox/cgroup.hpp"
#include "sandbox/fd.hpp"
#include "sandbox/spawn.hpp"
#include "tests/support/processes.hpp"
#include "tests/support/wrap_detect.hpp"

TEST_CASE("a leaf holds a spawned tree, kills it whole and is removed") {
    SKIP_UNDER_WRAP("no writable cgroup2 inside the wrap");
    auto cgroup = sandbox::Cgroup::create();
    REQUIRE(cgroup);
    const std::filesystem::path path = cgroup->path();
    CHECK(std::filesystem::is_directory(path));
    CHECK_FALSE(cgroup->populated());

    const std::string marker = tests::unique_marker();
    sandbox::Fd null(::open("/dev/null", O_RDWR | O_CLOEXEC));
    sandbox::SpawnSpec spec;
    spec.stdin_fd = spec.stdout_fd = spec.stderr_fd = null.get();
    spec.argv = {SANDGATE_TEST_CHILD, "double-fork", marker};
    spec.cgroup_fd = cgroup->dir_fd();
    auto child = sandbox::spawn(spec);
    REQUIRE(child);
    CHECK(child->reap()->exit_code == 0);
    // The double-forked grandchild lives on, re-parented away, but still in the leaf.
    CHECK(cgroup->populated());
    CHECK(tests::processes_with(marker).size() == 1);
    CHECK(cgroup->signal_all(0) == 1);
    cgroup->kill();
    for (int i = 0; i < 1000 && cgroup->populated(); ++i) ::usleep(10000);
    CHECK_FALSE(cgroup->populated());
    CHECK(tests::processes_with(marker).empty());
    { auto gone = std::move(*cgroup); }
    CHECK_FALSE(std::filesystem::exists(path));
}
