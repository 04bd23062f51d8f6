// spawn(): the child's descriptors, exec errors through the error pipe, both supervisions.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>

#include "common/fd.hpp"
#include "sandbox/process/spawn.hpp"
#include "tests/support/read_fd.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

struct Pipe {
    common::Fd read;
    common::Fd write;
};

Pipe make_pipe() {
    int fds[2];
    REQUIRE(::pipe2(fds, O_CLOEXEC) == 0);
    return {common::Fd(fds[0]), common::Fd(fds[1])};
}

using tests::read_to_eof;

}  // namespace

TEST_CASE("inherited fds land at 3, 4, ... and nothing else stays open") {
    const auto supervision =
        GENERATE(sandbox::Supervision::direct, sandbox::Supervision::subreaper);
    Pipe out = make_pipe();
    Pipe extra = make_pipe();
    common::Fd null(::open("/dev/null", O_RDWR | O_CLOEXEC));
    common::Fd leak(::open("/dev/null", O_RDONLY));  // no O_CLOEXEC: must still not leak
    sandbox::SpawnSpec spec;
    spec.argv = {SANDGATE_TEST_CHILD, "fds"};
    spec.stdin_fd = null.get();
    spec.stdout_fd = out.write.get();
    spec.stderr_fd = null.get();
    spec.inherited_fds = {extra.write.get(), extra.read.get()};
    spec.supervision = supervision;
    auto child = sandbox::spawn(spec);
    REQUIRE(child);
    out.write.reset();
    CHECK(read_to_eof(out.read.get()) == "0\n1\n2\n3\n4\n");
    auto exit = child->reap();
    REQUIRE(exit);
    CHECK(exit->exit_code == 0);
}

TEST_CASE("exec failures come back with their errno, from the right step") {
    const auto supervision =
        GENERATE(sandbox::Supervision::direct, sandbox::Supervision::subreaper);
    common::Fd null(::open("/dev/null", O_RDWR | O_CLOEXEC));
    sandbox::SpawnSpec spec;
    spec.stdin_fd = spec.stdout_fd = spec.stderr_fd = null.get();
    spec.supervision = supervision;
    spec.argv = {"sandgate-missing-program"};
    spec.env = {{"PATH", "/nonexistent:/usr/bin"}};
    auto missing = sandbox::spawn(spec);
    REQUIRE_FALSE(missing);
    CHECK(missing.error().errno_value == ENOENT);
    CHECK(missing.error().message.find("sandgate-missing-program") != std::string::npos);

    const auto dir = tests::make_temp_dir("spawn");
    tests::write_file(dir / "data", "#!/bin/sh\n");
    ::chmod((dir / "data").c_str(), 0644);
    spec.argv = {(dir / "data").string()};
    auto denied = sandbox::spawn(spec);
    REQUIRE_FALSE(denied);
    CHECK(denied.error().errno_value == EACCES);

    spec.argv = {"/bin/true"};
    spec.cwd = "/nonexistent-dir";
    auto no_cwd = sandbox::spawn(spec);
    REQUIRE_FALSE(no_cwd);
    CHECK(no_cwd.error().errno_value == 0);  // not an exec failure: 125, not 127
    CHECK(no_cwd.error().message.find("/nonexistent-dir") != std::string::npos);
}

TEST_CASE("the program is looked up on the child's PATH, not ours") {
    common::Fd null(::open("/dev/null", O_RDWR | O_CLOEXEC));
    sandbox::SpawnSpec spec;
    spec.stdin_fd = spec.stdout_fd = spec.stderr_fd = null.get();
    spec.argv = {"sandgate-test-child", "exit", "4"};
    spec.env = {{"PATH", std::filesystem::path(SANDGATE_TEST_CHILD).parent_path().string()}};
    auto child = sandbox::spawn(spec);
    REQUIRE(child);
    CHECK(child->reap()->exit_code == 4);
}

TEST_CASE("a Child that is dropped unreaped is killed and reaped") {
    common::Fd null(::open("/dev/null", O_RDWR | O_CLOEXEC));
    sandbox::SpawnSpec spec;
    spec.stdin_fd = spec.stdout_fd = spec.stderr_fd = null.get();
    spec.argv = {SANDGATE_TEST_CHILD, "sleep", "600"};
    pid_t pid = 0;
    {
        auto child = sandbox::spawn(spec);
        REQUIRE(child);
        pid = child->pid();
    }
    CHECK(::kill(pid, 0) == -1);  // gone and reaped (a zombie would still accept signal 0)
}

// ExecCheck::at_reap: spawn() returns before the exec; the same failures, with the same
// errno and step, come from reap() instead, and a command that started reports its exit.
TEST_CASE("exec failures checked at reap: same errno and step, exit status otherwise") {
    common::Fd null(::open("/dev/null", O_RDWR | O_CLOEXEC));
    sandbox::SpawnSpec spec;
    spec.stdin_fd = spec.stdout_fd = spec.stderr_fd = null.get();
    spec.exec_check = sandbox::ExecCheck::at_reap;
    spec.argv = {"sandgate-missing-program"};
    spec.env = {{"PATH", "/nonexistent:/usr/bin"}};
    auto missing = sandbox::spawn(spec);
    REQUIRE(missing);
    auto exit = missing->reap();
    REQUIRE(exit);
    REQUIRE(exit->not_started);
    CHECK(exit->not_started->errno_value == ENOENT);
    CHECK(exit->not_started->message.find("sandgate-missing-program") != std::string::npos);
    CHECK_FALSE(exit->exit_code);
    CHECK_FALSE(exit->signal);

    spec.argv = {"/bin/true"};
    spec.cwd = "/nonexistent-dir";
    auto no_cwd = sandbox::spawn(spec);
    REQUIRE(no_cwd);
    exit = no_cwd->reap();
    REQUIRE(exit);
    REQUIRE(exit->not_started);
    CHECK(exit->not_started->errno_value == 0);
    CHECK(exit->not_started->message.find("/nonexistent-dir") != std::string::npos);

    spec.cwd.clear();
    spec.argv = {SANDGATE_TEST_CHILD, "exit", "3"};
    auto started = sandbox::spawn(spec);
    REQUIRE(started);
    exit = started->reap();
    REQUIRE(exit);
    CHECK_FALSE(exit->not_started);
    CHECK(exit->exit_code == 3);
}

TEST_CASE("spawn sets the requested rlimits between fork and exec, the caller keeps its own") {
    rlimit before{};
    REQUIRE(::getrlimit(RLIMIT_NOFILE, &before) == 0);
    sandbox::SpawnSpec spec;
    spec.argv = {"/bin/sh", "-c", "ulimit -n; ulimit -v"};
    spec.env = {{"PATH", "/usr/bin:/bin"}};
    int out[2];
    REQUIRE(::pipe2(out, O_CLOEXEC) == 0);
    common::Fd read_end(out[0]);
    common::Fd write_end(out[1]);
    common::Fd null(::open("/dev/null", O_RDWR | O_CLOEXEC));
    spec.stdin_fd = null.get();
    spec.stdout_fd = write_end.get();
    spec.stderr_fd = null.get();
    spec.rlimits = {{RLIMIT_NOFILE, 77}, {RLIMIT_AS, 512ull << 20}};
    auto child = sandbox::spawn(spec);
    REQUIRE(child);
    write_end.reset();
    const std::string text = read_to_eof(read_end.get());
    auto exit = child->reap();
    REQUIRE(exit);
    CHECK(exit->exit_code == 0);
    CHECK(text == "77\n524288\n");
    rlimit after{};
    REQUIRE(::getrlimit(RLIMIT_NOFILE, &after) == 0);
    CHECK(after.rlim_cur == before.rlim_cur);
    // A limit the kernel refuses fails the spawn: nothing runs unbounded.
    spec.rlimits = {{RLIMIT_NOFILE, ~0ull}};
    rlimit hard{};
    ::getrlimit(RLIMIT_NOFILE, &hard);
    if (::geteuid() != 0 && hard.rlim_max != RLIM_INFINITY) CHECK_FALSE(sandbox::spawn(spec));
}

TEST_CASE("a netns_fd that is no network namespace fails the spawn; nothing runs elsewhere") {
    const auto dir = tests::make_temp_dir("spawn");
    Pipe not_a_namespace = make_pipe();
    common::Fd null(::open("/dev/null", O_RDWR | O_CLOEXEC));
    sandbox::SpawnSpec spec;
    spec.argv = {"/bin/sh", "-c", "echo ran > " + (dir / "ran").string()};
    spec.stdin_fd = spec.stdout_fd = spec.stderr_fd = null.get();
    spec.netns_fd = not_a_namespace.read.get();
    auto child = sandbox::spawn(spec);
    REQUIRE_FALSE(child);
    CHECK(child.error().errno_value == 0);  // set for the exec step only (126/127)
    // EINVAL; inside sandgate's own wrap its seccomp filter refuses setns first (EPERM).
    CHECK(child.error().message.starts_with("cannot join the run's network namespace: "));
    CHECK_FALSE(std::filesystem::exists(dir / "ran"));
}
