// agent/sandboxes/leg_sandboxes: one persistent sandbox per job leg for run and gate by hand.
// Real bwrap and real brokers: the steps of a leg share the sandbox (its /tmp), legs do not
// share one, the sandbox ends with the leg, and every step the sandbox cannot take runs in a
// wrap of its own.
#include <catch2/catch.hpp>
#include <chrono>
#include <future>
#include <set>
#include <thread>

#include "agent/sandboxes/leg_sandboxes.hpp"
#include "sandbox/process/cancel.hpp"
#include "sandbox/process/run.hpp"
#include "tests/support/processes.hpp"
#include "tests/support/run_helpers.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/wrap_detect.hpp"

using namespace std::chrono_literals;

namespace {

// A leg's directories: its workspace (the sandbox's root) and its kept scratch (HOME).
struct Leg {
    std::filesystem::path dir;
    std::filesystem::path workspace = dir / "work" / "repo";
    std::filesystem::path scratch = dir / "scratch";
    explicit Leg(std::filesystem::path base) : dir(std::move(base)) {
        std::filesystem::create_directories(workspace);
    }
    sandbox::RunRequest step(const std::string& script) const {
        sandbox::RunRequest request;
        request.argv = {"bash", "-c", script};
        request.cwd = workspace;
        request.env = sandbox::child_environment(sandbox::current_environment(), {}, {});
        request.policy.writable = {workspace};
        request.policy.scratch = scratch;
        request.timeout = 120s;
        return request;
    }
};

std::string posture(const sandbox::RunResult& result) {
    return sandbox::posture_text(result);
}

class Collect final : public sandbox::OutputObserver {
public:
    void on_output(sandbox::Stream, std::string_view chunk) override { text.append(chunk); }
    std::string text;
};

}  // namespace

TEST_CASE("a leg's steps share one sandbox, which ends with the leg") {
    SKIP_UNDER_WRAP("a nested bubblewrap cannot start inside the suite's wrap");
    auto dir = tests::make_temp_dir("legs");
    auto legs = agent::LegSandboxes::create("octo/repo", "", SANDGATE_BINARY);
    REQUIRE(legs);
    Leg leg(dir / "a");
    auto executor = (*legs)->open_leg("build", leg.workspace);
    REQUIRE(executor);
    CHECK((*legs)->alive() == 0);  // started by the first step, not before
    Collect live;
    auto first = leg.step("echo kept > /tmp/mark; echo $$ > pid; echo hello");
    first.observer = &live;
    auto one = executor->run(first);
    CHECK(one.exit_status() == 0);
    CHECK(live.text == "hello\n");  // given once, as written (not again from the reply)
    CHECK(posture(one).find("\"sandbox\":\"job\"") != std::string::npos);
    CHECK((*legs)->alive() == 1);
    // The wrap's own /tmp is a tmpfs: only the same sandbox still has the file.
    auto two = executor->run(leg.step("cat /tmp/mark"));
    CHECK(two.exit_status() == 0);
    CHECK(two.out.head == "kept\n");
    CHECK((*legs)->alive() == 1);
    executor.reset();
    CHECK((*legs)->alive() == 0);
}

TEST_CASE("parallel legs get a sandbox each") {
    SKIP_UNDER_WRAP("a nested bubblewrap cannot start inside the suite's wrap");
    auto dir = tests::make_temp_dir("legs");
    auto legs = agent::LegSandboxes::create("", "", SANDGATE_BINARY);
    REQUIRE(legs);
    Leg a(dir / "a"), b(dir / "b");
    auto run_leg = [&](const Leg& leg, const std::string& name) {
        auto executor = (*legs)->open_leg(name, leg.workspace);
        auto wrote = executor->run(leg.step("echo " + name + " > /tmp/leg"));
        auto read = executor->run(leg.step("cat /tmp/leg"));
        return wrote.exit_status() == 0 ? read.out.head : std::string("failed");
    };
    auto first = std::async(std::launch::async, run_leg, std::cref(a), "first");
    auto second = std::async(std::launch::async, run_leg, std::cref(b), "second");
    CHECK(first.get() == "first\n");
    CHECK(second.get() == "second\n");
    CHECK((*legs)->alive() == 0);
}

TEST_CASE("a step the leg's sandbox cannot take runs in a wrap of its own") {
    SKIP_UNDER_WRAP("a nested bubblewrap cannot start inside the suite's wrap");
    auto dir = tests::make_temp_dir("legs");
    auto legs = agent::LegSandboxes::create("octo/repo", "abc", SANDGATE_BINARY);
    REQUIRE(legs);
    Leg leg(dir / "a");
    auto executor = (*legs)->open_leg("build", leg.workspace);
    REQUIRE(executor->run(leg.step("echo kept > /tmp/mark")).exit_status() == 0);
    const auto in_leg = [&](const sandbox::RunResult& result) {
        return posture(result).find("\"sandbox\":\"job\"") != std::string::npos;
    };

    // Another posture (one more read-only bind): a fresh wrap, without the leg's /tmp.
    auto other = leg.step("test ! -e /tmp/mark");
    tests::write_file(dir / "shown/file", "x");
    other.policy.read_only.push_back(dir / "shown");
    auto ran = executor->run(other);
    INFO((ran.error ? ran.error->message : std::string()) << ran.err.head);
    CHECK(ran.exit_status() == 0);
    CHECK_FALSE(in_leg(ran));

    // A working directory outside the leg's root.
    auto outside = leg.step("test ! -e /tmp/mark");
    outside.cwd = dir;
    outside.policy.read_only = {};
    ran = executor->run(outside);
    CHECK_FALSE(in_leg(ran));

    // The host's own process (--sandbox off) is never sent to the sandbox.
    auto off = leg.step("echo off");
    off.policy.mode = sandbox::SandboxMode::off;
    ran = executor->run(off);
    CHECK(ran.out.head == "off\n");
    CHECK_FALSE(in_leg(ran));

    // While a (background) step holds the sandbox, another one gets a wrap of its own instead
    // of waiting for a step that may never end.
    const auto marker = tests::unique_marker();
    auto token = sandbox::CancelToken::create();
    REQUIRE(token);
    auto hold = leg.step("touch held; exec -a " + marker + " sleep 600");
    hold.cancel = &*token;
    hold.kill_grace = 200ms;
    auto holder = std::async(std::launch::async, [&] { return executor->run(hold); });
    while (!std::filesystem::exists(leg.workspace / "held") ||
           tests::processes_with(marker).empty())
        std::this_thread::sleep_for(10ms);
    ran = executor->run(leg.step("test ! -e /tmp/mark"));
    CHECK(ran.exit_status() == 0);
    CHECK_FALSE(in_leg(ran));
    // The held step is stopped through the sandbox, as a cancel or timeout stops one.
    token->cancel();
    const auto held = holder.get();
    REQUIRE(held.error);
    CHECK(held.error->kind == sandbox::RunErrorKind::cancelled);
    CHECK(in_leg(held));
    CHECK(tests::processes_with(marker).empty());
    executor.reset();
    CHECK((*legs)->alive() == 0);
}

TEST_CASE("same_posture tells apart every field a sandbox is made with") {
    sandbox::Policy made;
    made.writable = {"/w"};
    made.scratch = "/s";
    CHECK(agent::same_posture(made, made));
    auto changed = [&](auto&& change) {
        sandbox::Policy step = made;
        change(step);
        return !agent::same_posture(made, step);
    };
    CHECK(changed([](sandbox::Policy& p) { p.network = sandbox::NetworkMode::host; }));
    CHECK(changed([](sandbox::Policy& p) { p.writable.push_back("/x"); }));
    CHECK(changed([](sandbox::Policy& p) { p.read_only.push_back("/x"); }));
    CHECK(changed([](sandbox::Policy& p) { p.hide.push_back("/x"); }));
    CHECK(changed([](sandbox::Policy& p) { p.scratch = "/other"; }));
    CHECK(changed([](sandbox::Policy& p) { p.memory_bytes = 1; }));
    CHECK(changed([](sandbox::Policy& p) { p.pids = 1; }));
    CHECK(changed([](sandbox::Policy& p) { p.host_identity = sandbox::Owner{1000, 1000}; }));
    CHECK(changed([](sandbox::Policy& p) {
        p.binds.push_back({"/a", "/b", sandbox::Access::read_only});
    }));
    CHECK(changed([](sandbox::Policy& p) { p.egress.push_back({"example.org", 443}); }));
}

TEST_CASE("sandgate run gives each matrix leg a sandbox its steps share") {
    SKIP_UNDER_WRAP("a nested bubblewrap cannot start inside the suite's wrap");
    auto dir = tests::make_temp_dir("legs-run");
    // Step 2 passes only where step 1's /tmp (the wrap's own tmpfs) is still there and no other
    // leg wrote it; step 3 names the leg's network namespace.
    tests::write_file(dir / ".github/workflows/ci.yml", R"WF(on: push
jobs:
  legs:
    runs-on: ubuntu-latest
    strategy:
      matrix:
        leg: [one, two, three]
    steps:
      - run: echo ${{ matrix.leg }} > /tmp/leg
      - run: test "$(cat /tmp/leg)" = "${{ matrix.leg }}"
      - run: echo "leg ${{ matrix.leg }} in $(readlink /proc/self/ns/net)."
)WF");
    auto ran = tests::run_sandgate(dir, {"run", "--sandbox", "bwrap"});
    INFO(ran.output);
    CHECK(ran.exit_code == 0);
    std::set<std::string> namespaces;
    for (const char* leg : {"one", "two", "three"}) {
        const std::string prefix = std::string("leg ") + leg + " in ";
        const auto at = ran.output.find(prefix);
        REQUIRE(at != std::string::npos);
        const auto start = at + prefix.size();
        namespaces.insert(ran.output.substr(start, ran.output.find('.', start) - start));
    }
    CHECK(namespaces.size() == 3);
    std::error_code ec;
    CHECK(namespaces.count(std::filesystem::read_symlink("/proc/self/ns/net", ec).string()) == 0);
}
