// The bwrap arm's start before its plan is complete (sandbox/wrap/wrap_bwrap.cpp,
// PlanTiming::pending, and run()'s use of it): bwrap waits on its options socket, runs nothing
// until they are all there, and a stream cut short anywhere runs nothing. The plan's contents are
// checked in test_wrap.cpp.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "sandbox/process/run.hpp"
#include "sandbox/wrap/netns.hpp"
#include "sandbox/wrap/wrap.hpp"
#include "sandbox/wrap/wrap_bwrap.hpp"
#include "tests/support/capabilities.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/wrap_detect.hpp"
#include "tests/support/wrap_spawn.hpp"

namespace {

using tests::request_in;

// A payload that leaves a trace in the working directory (bound writable) when it runs.
sandbox::RunRequest marking_request(const std::filesystem::path& dir) {
    return request_in(dir, {"/bin/sh", "-c", "echo ran > ran; echo RAN"});
}

std::string packed(const std::vector<std::string>& options) {
    std::string text;
    for (const auto& option : options) {
        text += option;
        text.push_back('\0');
    }
    return text;
}

// The plan with `text` as its options (fd 3), in a fresh memfd.
void replace_options(sandbox::WrapPlan& plan, const std::string& text) {
    common::Fd memfd(::memfd_create("options", MFD_CLOEXEC));
    REQUIRE(memfd);
    REQUIRE(::pwrite(memfd.get(), text.data(), text.size(), 0) ==
            static_cast<ssize_t>(text.size()));
    plan.inherited_fds[0] = std::move(memfd);
}

// Every other child of this process (each thread's children list): none should be left.
std::string own_children() {
    std::string all;
    for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
        std::ifstream in(task.path() / "children");
        std::string line;
        std::getline(in, line);
        all += line;
    }
    return all;
}

bool exited(pid_t pid) {
    int status = 0;
    return ::waitpid(pid, &status, WNOHANG) == pid;
}

}  // namespace

TEST_CASE("bwrap given its options cut short anywhere runs nothing") {
    SKIP_UNDER_WRAP("nested user namespaces are disabled inside the wrap, so no plan can run");
    const auto dir = tests::make_temp_dir("wrap-cut");
    auto plan = sandbox::plan_wrap(marking_request(dir));
    REQUIRE(plan);
    auto options = sandbox::read_bwrap_options(*plan);
    REQUIRE(options);
    const std::string whole = packed(*options);
    // The control: the whole stream runs the payload.
    auto ran = tests::spawn_plan(*plan);
    CHECK(ran.status == 0);
    CHECK(ran.out == "RAN\n");
    REQUIRE(std::filesystem::exists(dir / "ran"));
    std::filesystem::remove(dir / "ran");
    // Cut at every option boundary, and inside every option, from nothing to all but the last
    // byte: bwrap refuses before it starts anything.
    std::vector<std::size_t> cuts;
    for (std::size_t at = 0; at < whole.size();) {
        cuts.push_back(at);
        const std::size_t end = whole.find('\0', at);
        if (end - at > 1) cuts.push_back(at + (end - at) / 2);
        at = end + 1;
    }
    cuts.push_back(whole.size() - 1);
    for (const std::size_t cut : cuts) {
        INFO("options cut after " << cut << " of " << whole.size() << " bytes");
        replace_options(*plan, whole.substr(0, cut));
        auto refused = tests::spawn_plan(*plan);
        CHECK(refused.status == 1);
        CHECK(refused.out.empty());
        CHECK(refused.err.starts_with("bwrap: "));
        CHECK_FALSE(std::filesystem::exists(dir / "ran"));
    }
}

TEST_CASE("a pending plan's bwrap waits for its options, and runs nothing if they never come") {
    SKIP_UNDER_WRAP("nested user namespaces are disabled inside the wrap, so no plan can run");
    const auto dir = tests::make_temp_dir("wrap-pending");
    const auto request = marking_request(dir);

    SECTION("released: it runs the payload then") {
        auto plan = sandbox::plan_wrap(request, sandbox::PlanTiming::pending);
        REQUIRE(plan);
        REQUIRE(plan->pending);
        const auto started = tests::start_plan(*plan);
        REQUIRE(started.pid > 0);
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        CHECK_FALSE(exited(started.pid));  // blocked on the options socket
        CHECK_FALSE(std::filesystem::exists(dir / "ran"));
        REQUIRE(plan->pending->complete(request, *plan));
        REQUIRE(plan->pending->release());
        const auto finished = tests::finish_plan(started);
        CHECK(finished.status == 0);
        CHECK(finished.out == "RAN\n");
        CHECK(std::filesystem::exists(dir / "ran"));
    }
    SECTION("dropped (as by a planner killed before it wrote them): bwrap refuses") {
        auto plan = sandbox::plan_wrap(request, sandbox::PlanTiming::pending);
        REQUIRE(plan);
        const auto started = tests::start_plan(*plan);
        REQUIRE(started.pid > 0);
        REQUIRE(plan->pending->complete(request, *plan));
        plan->pending.reset();  // our end of the socket closes: EOF on an empty stream
        const auto finished = tests::finish_plan(started);
        CHECK(finished.status == 1);
        CHECK(finished.out.empty());
        CHECK(finished.err.find("Specifying --hostname requires --unshare-uts") !=
              std::string::npos);
        CHECK_FALSE(std::filesystem::exists(dir / "ran"));
    }
}

TEST_CASE("under --network none a pending plan starts bwrap in a namespace of its own making") {
    SKIP_UNDER_WRAP("a working directory in the wrap's scratch cannot be planned for");
    const auto dir = tests::make_temp_dir("wrap-netns");
    auto request = request_in(dir, {"readlink", "/proc/self/ns/net"});
    const bool privileged = tests::has_cap_sys_admin();  // else bwrap makes it (--unshare-net)
    auto plan = sandbox::plan_wrap(request, sandbox::PlanTiming::pending);
    REQUIRE(plan);
    CHECK(plan->netns.valid() == privileged);
    auto complete = sandbox::plan_wrap(request);  // started as often as wanted: bwrap's own
    REQUIRE(complete);
    CHECK_FALSE(complete->netns);
    {
        sandbox::LoopbackNetns early;  // made by the caller: taken instead
        request.early_netns = &early;
        auto taking = sandbox::plan_wrap(request, sandbox::PlanTiming::pending);
        REQUIRE(taking);
        CHECK(taking->netns.valid() == privileged);
        CHECK_FALSE(early.take());
    }
    {
        sandbox::LoopbackNetns early;  // --network host: left untaken
        request.early_netns = &early;
        request.policy.network = sandbox::NetworkMode::host;
        auto host = sandbox::plan_wrap(request, sandbox::PlanTiming::pending);
        REQUIRE(host);
        CHECK_FALSE(host->netns);
        CHECK(early.take().valid() == privileged);
    }
    if (!privileged) return;
    // bwrap keeps the namespace it started in: the payload is in it.
    struct stat st {};
    REQUIRE(::fstat(plan->netns.get(), &st) == 0);
    const auto started = tests::start_plan(*plan);
    REQUIRE(plan->pending->complete(request_in(dir, {"readlink", "/proc/self/ns/net"}), *plan));
    REQUIRE(plan->pending->release());
    const auto finished = tests::finish_plan(started);
    INFO("stderr: " << finished.err);
    CHECK(finished.status == 0);
    CHECK(finished.out == "net:[" + std::to_string(st.st_ino) + "]\n");
}

TEST_CASE(
    "run(): a plan refused once bwrap has started, or whose payload is replaced, leaves no "
    "process") {
    SKIP_UNDER_WRAP("nested user namespaces are disabled inside the wrap, so no plan can run");
    const auto dir = tests::make_temp_dir("wrap-refused");
    std::filesystem::create_directory(dir / "real");
    std::filesystem::create_directory_symlink(dir / "real", dir / "link");

    SECTION("a working directory through a symlink: refused, nothing ran, nothing left") {
        auto request = marking_request(dir / "link");
        const auto result = sandbox::run(request);
        REQUIRE(result.error);
        CHECK(result.error->kind == sandbox::RunErrorKind::invalid_request);
        CHECK(result.error->message.find("symlink") != std::string::npos);
        CHECK_FALSE(result.exit_code);
        CHECK_FALSE(std::filesystem::exists(dir / "real" / "ran"));
        CHECK(own_children().empty());
    }
    SECTION(
        "a command not found inside: the stand-in payload says so, from a wrapper started anew") {
        const auto result = sandbox::run(request_in(dir / "real", {"no-such-command-sandgate"}));
        CHECK_FALSE(result.error);
        CHECK(result.exit_code == 127);
        CHECK(result.err.head.find("command not found inside the sandbox") != std::string::npos);
        CHECK(own_children().empty());
    }
}
