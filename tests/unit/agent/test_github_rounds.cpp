// The daemon's side of its GitHub traffic (agent/daemon/github_rounds.hpp) with a stand-in worker
// program: when rounds start and with what arguments, that one outliving its deadline is
// killed, that nothing is started while draining or without a GitHub token, that failing
// rounds back off.
#include <sys/stat.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <thread>

#include "agent/daemon/github_rounds.hpp"
#include "tests/support/temp_dir.hpp"

using namespace std::chrono_literals;

namespace {

struct Setup {
    std::filesystem::path dir = tests::make_temp_dir("github-rounds");
    agent::AgentConfig config;
    std::unique_ptr<agent::JobQueue> queue;

    Setup() {
        config.state_dir = dir / "state";
        config.source = dir / "agent.yaml";
        config.repositories = {"octo/gate"};
        config.poll_interval = std::chrono::hours(1);
        std::ofstream(dir / "token") << "t\n";
        config.github_token_file = dir / "token";
        auto opened = agent::open_sqlite_queue(agent::default_queue_path(config.state_dir));
        REQUIRE(opened.has_value());
        queue = std::move(*opened);
    }

    // A worker program: appends its arguments to `args`, then runs `then`.
    std::filesystem::path worker(const std::string& then) const {
        const auto path = dir / "worker.sh";
        std::ofstream(path) << "#!/bin/sh\necho \"$@\" >> " << (dir / "args").string() << "\n"
                            << then << "\n";
        ::chmod(path.c_str(), 0755);
        return path;
    }

    void owe_report() const {
        agent::JobSpec spec;
        spec.key = {"octo/gate", std::string(40, 'a'), "", 1};
        auto job = queue->submit(spec);
        REQUIRE(job.has_value());
        REQUIRE(queue->add_report(job->job.id, "start", "{}").has_value());
    }
};

// Ticks until a round ends (a bug that never ends one hangs the test).
void until_round_ends(agent::GitHubRounds& rounds) {
    while (!rounds.tick(agent::Draining::no)) std::this_thread::sleep_for(10ms);
}

}  // namespace

TEST_CASE(
    "github rounds: a poll round when due, a report round when a report is owed, one at a time") {
    Setup setup;
    agent::GitHubRounds rounds(setup.config, *setup.queue, setup.worker("exit 0"));
    CHECK_FALSE(rounds.tick(agent::Draining::no));
    REQUIRE(rounds.running());
    until_round_ends(rounds);
    CHECK_FALSE(rounds.running());
    // Polled a moment ago, nothing owed, no journal: nothing to do.
    CHECK_FALSE(rounds.tick(agent::Draining::no));
    CHECK_FALSE(rounds.running());

    setup.owe_report();
    rounds.wake();
    rounds.tick(agent::Draining::no);
    REQUIRE(rounds.running());
    until_round_ends(rounds);
    // The stand-in never delivers the owed report, so the round that ended with exit 0 may
    // already have been followed by another (a real round marks what it sent): only the first
    // two rounds are certain.
    const auto args = tests::read_file(setup.dir / "args");
    const std::string first_two = "agent-github --config " + setup.config.source.string() +
                                  " --poll\n" + "agent-github --config " +
                                  setup.config.source.string() + "\n";
    CHECK(args.substr(0, first_two.size()) == first_two);
}

TEST_CASE("github rounds: a round past its deadline is killed; none starts a poll while draining") {
    Setup setup;
    agent::GitHubRounds draining(setup.config, *setup.queue, setup.worker("exec sleep 1000"));
    draining.tick(agent::Draining::yes);
    CHECK_FALSE(draining.running());  // nothing owed, and no polling while draining

    agent::GitHubRounds rounds(setup.config, *setup.queue, setup.worker("exec sleep 1000"), 100ms);
    rounds.tick(agent::Draining::no);
    REQUIRE(rounds.running());
    until_round_ends(rounds);  // the sleep outlives the deadline: only the kill ends it
    CHECK_FALSE(rounds.running());
}

TEST_CASE("github rounds: without a GitHub token, owed reports are dropped and no round starts") {
    Setup setup;
    setup.config.github_token_file.reset();
    setup.owe_report();
    agent::GitHubRounds rounds(setup.config, *setup.queue, setup.worker("exit 0"));
    rounds.tick(agent::Draining::no);
    CHECK_FALSE(rounds.running());
    auto due = setup.queue->due_reports(10);
    REQUIRE(due.has_value());
    CHECK(due->empty());
    CHECK_FALSE(std::filesystem::exists(setup.dir / "args"));
}

namespace {

std::size_t rounds_started(const Setup& setup) {
    const auto args = tests::read_file(setup.dir / "args");
    return static_cast<std::size_t>(std::count(args.begin(), args.end(), '\n'));
}

}  // namespace

TEST_CASE(
    "github rounds: a worker that keeps failing backs off; wake-ups and owed reports do "
    "not start it again meanwhile") {
    Setup setup;
    setup.owe_report();  // always due: the stand-in never delivers it
    agent::GitHubRounds rounds(setup.config, *setup.queue, setup.worker("exit 3"));
    // A webhook's job or a queued report wakes the rounds at every tick for 4 s. Backing off
    // 1 s, 2 s, 4 s allows at most 3 starts; without a backoff a round started after each
    // failure (hundreds).
    const auto until = std::chrono::steady_clock::now() + 4s;
    while (std::chrono::steady_clock::now() < until) {
        rounds.wake();
        rounds.tick(agent::Draining::no);
        std::this_thread::sleep_for(10ms);
    }
    CHECK(rounds_started(setup) >= 1);
    CHECK(rounds_started(setup) <= 6);
    CHECK(rounds.backoff() >= agent::k_round_backoff_first);
}

TEST_CASE("github rounds: a round that exits 0 ends the backoff") {
    Setup setup;
    const auto ok = setup.dir / "ok";
    agent::GitHubRounds rounds(setup.config, *setup.queue,
                               setup.worker("test -e " + ok.string() + " || exit 3"));
    rounds.tick(agent::Draining::no);  // the poll round
    REQUIRE(rounds.running());
    until_round_ends(rounds);
    CHECK(rounds.backoff() == agent::k_round_backoff_first);
    std::ofstream(ok) << "";
    setup.owe_report();
    rounds.wake();
    // The next round waits out the backoff, then succeeds (a bug that never starts it hangs).
    until_round_ends(rounds);
    CHECK(rounds.backoff() == std::chrono::seconds(0));
    CHECK(rounds_started(setup) >= 2);
}

TEST_CASE(
    "github rounds: finish waits for a worker that ends within the grace, kills one that "
    "outlives it") {
    Setup setup;
    // Ends by itself: finish returns once it has exited (waiting out the grace would hang
    // the test for ten minutes).
    agent::GitHubRounds ending(setup.config, *setup.queue, setup.worker("sleep 0.2; exit 0"));
    ending.tick(agent::Draining::no);
    REQUIRE(ending.running());
    ending.finish(std::chrono::seconds(600));
    CHECK_FALSE(ending.running());

    agent::GitHubRounds stuck(setup.config, *setup.queue, setup.worker("exec sleep 1000"));
    stuck.tick(agent::Draining::no);
    REQUIRE(stuck.running());
    stuck.finish(std::chrono::seconds(1));
    CHECK_FALSE(stuck.running());
}
