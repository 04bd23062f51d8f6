// The per-run subreaper: orphans come back to it and die with the tree.
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "common/fd.hpp"
#include "sandbox/process/reaper.hpp"
#include "sandbox/process/spawn.hpp"
#include "tests/support/processes.hpp"

TEST_CASE("the reaper exits only once every orphan of the command is dead") {
    const std::string marker = tests::unique_marker();
    common::Fd null(::open("/dev/null", O_RDWR | O_CLOEXEC));
    sandbox::SpawnSpec spec;
    spec.stdin_fd = spec.stdout_fd = spec.stderr_fd = null.get();
    spec.argv = {SANDGATE_TEST_CHILD, "double-fork", marker};
    spec.supervision = sandbox::Supervision::subreaper;
    auto child = sandbox::spawn(spec);
    REQUIRE(child);
    auto exit = child->reap();  // blocks until the reaper is gone
    REQUIRE(exit);
    CHECK(exit->exit_code == 0);
    CHECK(tests::processes_with(marker).empty());
}

TEST_CASE("terminate sends TERM to every descendant; kill finishes the TERM-proof ones") {
    const std::string marker = tests::unique_marker();
    int out[2];
    REQUIRE(::pipe2(out, O_CLOEXEC) == 0);
    common::Fd out_read(out[0]);
    common::Fd out_write(out[1]);
    common::Fd null(::open("/dev/null", O_RDWR | O_CLOEXEC));
    sandbox::SpawnSpec spec;
    spec.stdin_fd = spec.stderr_fd = null.get();
    spec.stdout_fd = out_write.get();
    spec.argv = {SANDGATE_TEST_CHILD, "term-tree", marker};
    spec.supervision = sandbox::Supervision::subreaper;
    auto child = sandbox::spawn(spec);
    REQUIRE(child);
    out_write.reset();
    char buf[16] = {};
    REQUIRE(::read(out_read.get(), buf, 6) == 6);  // "ready\n": the grandchild is up
    CHECK(tests::processes_with(marker).size() == 2);
    child->signal(sandbox::k_reaper_terminate);
    // The command dies of TERM; the reaper then SIGKILLs the TERM-ignoring grandchild.
    auto exit = child->reap();
    REQUIRE(exit);
    CHECK(exit->signal == SIGTERM);
    CHECK(tests::processes_with(marker).empty());
}

TEST_CASE("signal_descendants reaches grandchildren") {
    const std::string marker = tests::unique_marker();
    common::Fd null(::open("/dev/null", O_RDWR | O_CLOEXEC));
    sandbox::SpawnSpec spec;
    spec.stdin_fd = spec.stdout_fd = spec.stderr_fd = null.get();
    spec.argv = {"/bin/sh", "-c",
                 std::string(SANDGATE_TEST_CHILD) + " forever " + marker + " & wait"};
    auto child = sandbox::spawn(spec);
    REQUIRE(child);
    // sh's own command line carries the marker too: wait for the grandchild as well.
    while (tests::processes_with(marker).size() < 2) ::usleep(10000);
    CHECK(sandbox::signal_descendants(::getpid(), 0, sandbox::Resume::no) >= 2);
    sandbox::signal_descendants(child->pid(), SIGKILL, sandbox::Resume::no);
    CHECK(child->reap()->exit_code.has_value());  // sh's `wait` returns once its child is killed
    CHECK(tests::processes_with(marker).empty());
}
