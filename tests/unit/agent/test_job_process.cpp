// agent::JobProcess: a job's process as the daemon runs it (agent/daemon/job_process.hpp). Real
// processes: sandgate-test-child and /bin/sh.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <thread>

#include "agent/daemon/job_process.hpp"
#include "common/fd.hpp"
#include "tests/support/processes.hpp"
#include "tests/support/temp_dir.hpp"

using namespace std::chrono_literals;

namespace {

agent::JobExit wait_exit(agent::JobProcess& process) {
    auto exit = process.wait_for(30s);
    REQUIRE(exit);
    return *exit;
}

// Waits (bounded) until no process carries `marker`; the scan races the kernel's teardown of
// a SIGKILLed tree by a few milliseconds.
bool gone_soon(const std::string& marker) {
    for (int i = 0; i < 200; ++i) {
        if (tests::processes_with(marker).empty()) return true;
        std::this_thread::sleep_for(10ms);
    }
    return false;
}

}  // namespace

TEST_CASE("a job's output is appended to its log; stdin is /dev/null; only 0-2 reach it") {
    const auto dir = tests::make_temp_dir("jobproc");
    const auto log = dir / "logs/job.log";
    tests::write_file(log, "before\n");
    // An fd of the agent's without O_CLOEXEC (its database, its socket) must not leak.
    common::Fd leaked(::open("/dev/null", O_RDONLY));
    REQUIRE(leaked);
    auto process = agent::JobProcess::start({"/bin/sh", "-c",
                                             "echo out; echo err >&2; cat; "
                                             "ls /proc/self/fd | tr '\\n' ' '; echo"},
                                            {{"PATH", "/usr/bin:/bin"}}, log);
    REQUIRE(process);
    const auto exit = wait_exit(*process);
    CHECK(exit.exit_code == 0);
    const auto text = tests::read_file(log);
    CHECK(text.rfind("before\nout\nerr\n", 0) == 0);
    // ls's own fd 3 (its directory) is the only one above 2.
    CHECK(text.find("0 1 2 3 \n") != std::string::npos);
}

TEST_CASE("the job gets exactly the environment it is given, in its own session") {
    const auto dir = tests::make_temp_dir("jobproc");
    auto process =
        agent::JobProcess::start({SANDGATE_TEST_CHILD, "env"}, {{"ONLY", "this"}}, dir / "env.log");
    REQUIRE(process);
    CHECK(wait_exit(*process).exit_code == 0);
    CHECK(tests::read_file(dir / "env.log") == "ONLY=this\n");
    auto sid = agent::JobProcess::start({SANDGATE_TEST_CHILD, "sid"}, {}, dir / "sid.log");
    REQUIRE(sid);
    const pid_t pid = sid->pid();
    CHECK(wait_exit(*sid).exit_code == 0);
    const auto same = std::to_string(pid);
    CHECK(tests::read_file(dir / "sid.log") == same + " " + same + " " + same + "\n");
}

TEST_CASE("when the leader exits, what it left running in its group is killed") {
    const auto dir = tests::make_temp_dir("jobproc");
    const auto marker = tests::unique_marker();
    // Non-interactive sh: the background child stays in the job's process group.
    auto process = agent::JobProcess::start(
        {"/bin/sh", "-c", "\"$0\" ignore-term \"$1\" & exit 3", SANDGATE_TEST_CHILD, marker}, {},
        dir / "job.log");
    REQUIRE(process);
    for (int i = 0; i < 500 && tests::processes_with(marker).empty(); ++i)
        std::this_thread::sleep_for(10ms);
    REQUIRE_FALSE(tests::processes_with(marker).empty());
    CHECK(wait_exit(*process).exit_code == 3);
    CHECK(gone_soon(marker));
}

TEST_CASE("signal_group reaches the whole group; the exit says which signal ended it") {
    const auto dir = tests::make_temp_dir("jobproc");
    const auto marker = tests::unique_marker();
    auto process = agent::JobProcess::start(
        {"/bin/sh", "-c", "\"$0\" sleep 300 \"$1\" & wait", SANDGATE_TEST_CHILD, marker}, {},
        dir / "job.log");
    REQUIRE(process);
    CHECK_FALSE(process->wait_for(100ms));  // still running: no exit yet
    process->signal_group(SIGTERM);
    const auto exit = wait_exit(*process);
    CHECK_FALSE(exit.exit_code);
    CHECK(exit.signal == SIGTERM);
    CHECK(gone_soon(marker));
    CHECK(process->poll());  // reaped: poll keeps answering, nothing is signalled
}

TEST_CASE("destroying an unreaped job kills its group") {
    const auto dir = tests::make_temp_dir("jobproc");
    const auto marker = tests::unique_marker();
    {
        auto process = agent::JobProcess::start(
            {"/bin/sh", "-c", "\"$0\" ignore-term \"$1\" & wait", SANDGATE_TEST_CHILD, marker}, {},
            dir / "job.log");
        REQUIRE(process);
        for (int i = 0; i < 500 && tests::processes_with(marker).empty(); ++i)
            std::this_thread::sleep_for(10ms);
        REQUIRE_FALSE(tests::processes_with(marker).empty());
    }
    CHECK(gone_soon(marker));
}

TEST_CASE("a job command that cannot be started exits 127; a bare name is refused") {
    const auto dir = tests::make_temp_dir("jobproc");
    auto missing = agent::JobProcess::start({(dir / "no-such-binary").string()}, {}, {});
    REQUIRE(missing);
    CHECK(wait_exit(*missing).exit_code == 127);
    auto bare = agent::JobProcess::start({"sh"}, {}, {});
    REQUIRE_FALSE(bare);
    CHECK(bare.error().kind == common::ErrorKind::invalid_input);
    auto unwritable = agent::JobProcess::start({"/bin/true"}, {}, "/proc/self/no/such/log");
    CHECK_FALSE(unwritable);
}
