// sandbox/run_tree: how a run's tree is held and stopped. Under the bwrap wrap the pid
// namespace is the tree kill and a cgroup leaf is made only to carry cgroup2 limits; a timeout
// still gives the command's tree its TERM and grace before the KILL. (Without the wrap, the
// leaf and the subreaper are exercised by test_run.cpp.)
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "sandbox/process/cgroup.hpp"
#include "sandbox/process/limits.hpp"
#include "sandbox/process/run.hpp"
#include "tests/support/processes.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/wrap_detect.hpp"
#include "tests/support/wrap_spawn.hpp"

using namespace std::chrono_literals;

namespace {

// The helper child, run inside the wrap from its build directory (bound read-only).
sandbox::RunRequest wrapped_child(const std::filesystem::path& cwd, std::vector<std::string> args) {
    std::vector<std::string> argv = {SANDGATE_TEST_CHILD};
    argv.insert(argv.end(), args.begin(), args.end());
    auto request = tests::request_in(cwd, std::move(argv));
    request.policy.read_only = {std::filesystem::path(SANDGATE_TEST_CHILD).parent_path()};
    return request;
}

// Leaves of this process under the cgroup2 base, live ones included.
std::vector<std::string> own_leaves() {
    std::vector<std::string> leaves;
    const auto base = sandbox::Cgroup::base();
    if (!base) return leaves;
    const std::string prefix = "sandgate-" + std::to_string(::getpid()) + "-";
    for (const auto& entry : std::filesystem::directory_iterator(*base)) {
        const std::string name = entry.path().filename().string();
        if (name.starts_with(prefix)) leaves.push_back(name);
    }
    return leaves;
}

}  // namespace

TEST_CASE(
    "under the wrap the pid namespace takes the tree down; a leaf only carries cgroup2 limits") {
    SKIP_UNDER_WRAP("nested bwrap cannot mount a new /proc");
    const auto dir = tests::make_temp_dir("run-tree");
    const std::string marker = tests::unique_marker();
    const auto request = wrapped_child(dir, {"double-fork", marker});
    const auto limits = sandbox::plan_limits(request.policy, request.cgroup);
    REQUIRE(limits);
    const auto result = sandbox::run(request);
    INFO("sandbox: " << sandbox::posture_text(result));
    REQUIRE_FALSE(result.error);
    CHECK(result.exit_code == 0);
    CHECK(result.err.bytes > 0);  // the daemonized grandchild did start
    CHECK(tests::processes_with(marker).empty());
    const bool leaf = !limits->cgroup2_files.empty() && sandbox::Cgroup::base().has_value();
    CHECK(result.tree_kill == (leaf ? sandbox::TreeKill::cgroup : sandbox::TreeKill::pidns));
    CHECK(own_leaves().empty());
}

TEST_CASE("a timeout under the wrap TERMs the command's tree, then KILLs what ignores it") {
    SKIP_UNDER_WRAP("nested bwrap cannot mount a new /proc");
    const auto dir = tests::make_temp_dir("run-tree");

    // The TERM reaches the command itself (not only the wrapper, whose death would kill the
    // namespace at once): its trap runs and says so. A long grace: were the TERM lost, the test
    // would hang for ten minutes rather than pass.
    auto polite = tests::request_in(
        dir, {"/bin/sh", "-c",
              "trap 'echo got-term; exit 3' TERM; echo ready; while :; do sleep 1; done"});
    polite.timeout = 500ms;
    polite.kill_grace = 600s;
    auto result = sandbox::run(polite);
    CHECK(result.timed_out);
    CHECK(result.exit_status() == 124);
    CHECK(result.out.head == "ready\ngot-term\n");

    // A tree that ignores TERM (the command and a grandchild) is killed after the grace.
    const std::string stubborn_marker = tests::unique_marker();
    auto stubborn = wrapped_child(dir, {"ignore-term", stubborn_marker});
    stubborn.timeout = 500ms;
    stubborn.kill_grace = 500ms;
    result = sandbox::run(stubborn);
    CHECK(result.timed_out);
    CHECK(result.exit_status() == 124);
    CHECK(result.out.head == "ready\n");
    CHECK(tests::processes_with(stubborn_marker).empty());

    const std::string tree_marker = tests::unique_marker();
    auto tree = wrapped_child(dir, {"term-tree", tree_marker});
    tree.timeout = 500ms;
    tree.kill_grace =
        600s;  // the command dies of the TERM; its TERM-ignoring child goes with the namespace
    result = sandbox::run(tree);
    CHECK(result.timed_out);
    CHECK(tests::processes_with(tree_marker).empty());
}
