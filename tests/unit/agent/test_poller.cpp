// The poller against the GitHub stand-in (tests/fake_github/server.py) on 127.0.0.1: merge
// queue branches and open pull requests become jobs, conditional requests spare the rate
// limit, vanished merge-queue branches cancel their jobs.
#include <simdjson.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <set>
#include <string>

#include "agent/daemon/poll_state.hpp"
#include "agent/daemon/poller.hpp"
#include "tests/fake_github/fake_github.hpp"
#include "tests/support/postgres.hpp"
#include "tests/support/temp_dir.hpp"

using namespace std::chrono_literals;

namespace {

std::string sha_of(char digit) {
    return std::string(40, digit);
}

github::HttpClient client_for(const tests::FakeGitHub& server) {
    github::ClientOptions options;
    options.api_url = server.url();
    options.max_attempts = 3;
    options.backoff_initial = 10ms;
    auto client = github::HttpClient::create(
        options, std::make_shared<github::StaticToken>(tests::k_fake_token));
    REQUIRE(client.has_value());
    return *client;
}

std::unique_ptr<agent::JobQueue> open_queue() {
    auto queue = agent::open_sqlite_queue(tests::make_temp_dir("poller") / "jobs.sqlite3");
    REQUIRE(queue.has_value());
    return std::move(*queue);
}

// How many of this process's descriptors are open on `file`.
int descriptors_open_on(const std::filesystem::path& file) {
    const auto target = std::filesystem::canonical(file);
    int count = 0;
    for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
        std::error_code ec;
        if (std::filesystem::read_symlink(entry.path(), ec) == target) ++count;
    }
    return count;
}

std::vector<agent::Job> all_jobs(agent::JobQueue& queue) {
    auto jobs = queue.list({});
    REQUIRE(jobs.has_value());
    return *jobs;
}

// The API requests the server recorded (control calls excluded): method+target, status,
// If-None-Match sent.
struct Seen {
    std::string target;
    std::int64_t status = 0;
    bool conditional = false;
};
std::vector<Seen> requests(const tests::FakeGitHub& server) {
    simdjson::dom::parser parser;
    const std::string text = server.requests();
    simdjson::dom::element root;
    REQUIRE(parser.parse(text).get(root) == simdjson::SUCCESS);
    std::vector<Seen> out;
    for (auto item : root["requests"].get_array()) {
        Seen seen;
        seen.target = std::string(std::string_view(item["target"]));
        std::int64_t status = 0;
        if (item["status"].get(status) == simdjson::SUCCESS) seen.status = status;
        simdjson::dom::element value;
        seen.conditional = item["headers"]["If-None-Match"].get(value) == simdjson::SUCCESS;
        out.push_back(seen);
    }
    return out;
}

}  // namespace

TEST_CASE("poller: queue branches and labelled pull requests become jobs; 304 queues nothing") {
    tests::FakeGitHub server;
    server.post("/_control/repo", R"({"repo":"octo/gate",
        "pulls":[{"number":7,"sha":")" +
                                      sha_of('a') + R"(","labels":["merge-gate"],
                  "base":"release","base_sha":")" +
                                      sha_of('e') + R"("},
                 {"number":8,"sha":")" +
                                      sha_of('b') + R"(","labels":["other"]}],
        "refs":[{"ref":"refs/heads/gh-readonly-queue/main/pr-7-)" +
                                      sha_of('a') + R"(","sha":")" + sha_of('c') + R"("}]})");
    auto queue = open_queue();
    agent::Poller poller(client_for(server), *queue, {{"octo/gate"}, "merge-gate"});

    auto first = poller.poll_once();
    CHECK(first.errors.empty());
    CHECK(first.submitted == 2);
    CHECK(first.not_modified == 0);
    auto jobs = all_jobs(*queue);
    REQUIRE(jobs.size() == 2);
    CHECK(jobs[0].spec.event == "merge_group");
    CHECK(jobs[0].spec.key.sha == sha_of('c'));
    CHECK(jobs[0].spec.ref == "refs/heads/gh-readonly-queue/main/pr-7-" + sha_of('a'));
    CHECK(jobs[0].spec.source == "poll");
    // The group's base, as its ref names it, and the pull request's: the gate's
    // --base-sha/--base-ref.
    CHECK(jobs[0].spec.payload_json ==
          R"({"base_sha":")" + sha_of('a') + R"(","base_ref":"refs/heads/main"})");
    CHECK(jobs[1].spec.payload_json ==
          R"({"pull_request":7,"base_sha":")" + sha_of('e') + R"(","base_ref":"release"})");
    CHECK(jobs[1].spec.event == "pull_request");
    CHECK(jobs[1].spec.key.sha == sha_of('a'));
    CHECK(jobs[1].spec.ref == "refs/pull/7/head");
    CHECK(jobs[1].spec.key.workflow_job.empty());

    auto second = poller.poll_once();
    CHECK(second.errors.empty());
    CHECK(second.requests == 2);
    CHECK(second.not_modified == 2);
    CHECK(second.submitted == 0);
    CHECK(second.duplicates == 0);
    CHECK(all_jobs(*queue).size() == 2);
    const auto seen = requests(server);
    REQUIRE(seen.size() == 4);
    CHECK_FALSE(seen[0].conditional);
    CHECK_FALSE(seen[1].conditional);
    CHECK(seen[2].conditional);
    CHECK(seen[2].status == 304);
    CHECK(seen[3].conditional);
    CHECK(seen[3].status == 304);
    CHECK(seen[1].target == "/repos/octo/gate/pulls?state=open&per_page=100");

    // A new push to the labelled pull request: the listing changes, one new job.
    server.post("/_control/repo", R"({"repo":"octo/gate",
        "pulls":[{"number":7,"sha":")" +
                                      sha_of('d') + R"(","labels":["merge-gate"]}]})");
    auto third = poller.poll_once();
    CHECK(third.not_modified == 1);
    CHECK(third.submitted == 1);
    CHECK(all_jobs(*queue).back().spec.key.sha == sha_of('d'));
}

TEST_CASE("poller: a webhook's job is not queued twice; a vanished queue branch cancels its job") {
    tests::FakeGitHub server;
    const std::string branch = "refs/heads/gh-readonly-queue/main/pr-1-" + sha_of('1');
    server.post("/_control/repo", R"({"repo":"octo/gate","pulls":[],
        "refs":[{"ref":")" + branch + R"(","sha":")" +
                                      sha_of('e') + R"("}]})");
    auto queue = open_queue();
    agent::JobSpec webhook;
    webhook.key = {"octo/gate", sha_of('e'), "", 1};
    webhook.ref = branch;
    webhook.event = "merge_group";
    webhook.source = "webhook";
    REQUIRE(queue->submit(webhook).has_value());
    agent::Poller poller(client_for(server), *queue, {{"octo/gate"}, std::nullopt});

    auto first = poller.poll_once();
    CHECK(first.submitted == 0);
    CHECK(first.duplicates == 1);

    server.post("/_control/repo", R"({"repo":"octo/gate","refs":[]})");
    auto second = poller.poll_once();
    CHECK(second.errors.empty());
    CHECK(second.cancelled == 1);
    auto jobs = all_jobs(*queue);
    REQUIRE(jobs.size() == 1);
    CHECK(jobs[0].state == agent::JobState::cancelled);
    CHECK(jobs[0].reason.find("merge-queue branch is gone") != std::string::npos);
}

TEST_CASE("poller: every page of pull requests is read, each page conditional") {
    tests::FakeGitHub server;
    std::string pulls;
    for (int number = 1; number <= 130; ++number) {
        char hex[41];
        std::snprintf(hex, sizeof hex, "%040x", number);
        pulls += std::string(pulls.empty() ? "" : ",") + R"({"number":)" + std::to_string(number) +
                 R"(,"sha":")" + hex + R"("})";
    }
    server.post("/_control/repo", R"({"repo":"octo/big","pulls":[)" + pulls + "]}");
    auto queue = open_queue();
    agent::Poller poller(client_for(server), *queue, {{"octo/big"}, std::nullopt});
    auto first = poller.poll_once();
    CHECK(first.errors.empty());
    CHECK(first.requests == 3);  // branches, pulls page 1, pulls page 2
    CHECK(first.submitted == 130);
    auto second = poller.poll_once();
    CHECK(second.requests == 3);
    CHECK(second.not_modified == 3);
    CHECK(second.submitted == 0);
}

TEST_CASE(
    "poller: a fresh poller over the same queue file still sends If-None-Match, follows "
    "the remembered next page and sees a vanished queue branch") {
    // The agent polls from a new process each round (agent/daemon/github_rounds.hpp): what one
    // round learnt must reach the next through the SQLite file, not memory.
    tests::FakeGitHub server;
    std::string pulls;
    for (int number = 1; number <= 101; ++number) {  // two pages
        char hex[41];
        std::snprintf(hex, sizeof hex, "%040x", number);
        pulls += std::string(pulls.empty() ? "" : ",") + R"({"number":)" + std::to_string(number) +
                 R"(,"sha":")" + hex + R"("})";
    }
    const std::string branch = "refs/heads/gh-readonly-queue/main/pr-1-" + sha_of('1');
    server.post("/_control/repo", R"({"repo":"octo/gate","pulls":[)" + pulls + R"(],
        "refs":[{"ref":")" + branch + R"(","sha":")" +
                                      sha_of('e') + R"("}]})");
    const auto file = tests::make_temp_dir("poller-rounds") / "jobs.sqlite3";
    auto round = [&] {  // as agent/daemon/github_worker.cpp opens the file
        auto store = agent::open_sqlite_store(file);
        REQUIRE(store.has_value());
        agent::Poller poller(client_for(server), *store->queue, *store->poll_state,
                             {{"octo/gate"}, std::nullopt});
        return poller.poll_once();
    };
    const auto first = round();
    CHECK(first.errors.empty());
    CHECK(first.requests == 3);  // branches, pulls page 1, pulls page 2
    CHECK(first.submitted == 102);

    const auto second = round();
    CHECK(second.errors.empty());
    CHECK(second.requests == 3);  // page 2 reached through the stored next link
    CHECK(second.not_modified == 3);
    CHECK(second.submitted == 0);
    const auto seen = requests(server);
    REQUIRE(seen.size() == 6);
    for (std::size_t i = 3; i < 6; ++i) {
        CHECK(seen[i].conditional);
        CHECK(seen[i].status == 304);
    }

    server.post("/_control/repo", R"({"repo":"octo/gate","refs":[]})");
    const auto third = round();
    CHECK(third.errors.empty());
    CHECK(third.cancelled == 1);
    auto queue = agent::open_sqlite_queue(file);
    REQUIRE(queue.has_value());
    auto merge_group = (*queue)->list({agent::JobState::cancelled, "octo/gate", sha_of('e')});
    REQUIRE(merge_group.has_value());
    REQUIRE(merge_group->size() == 1);
    CHECK(merge_group->front().reason.find("merge-queue branch is gone") != std::string::npos);
    // And a branch seen gone is not cancelled twice.
    const auto fourth = round();
    CHECK(fourth.cancelled == 0);
}

TEST_CASE(
    "poll state: a round's queue and poll state share one connection; set_branches "
    "replaces a repository's set whole") {
    const auto file = tests::make_temp_dir("poll-state") / "jobs.sqlite3";
    auto store = agent::open_sqlite_store(file);
    REQUIRE(store.has_value());
    CHECK(descriptors_open_on(file) == 1);  // one connection (each one holds the file open)
    auto& state = *store->poll_state;
    const std::set<std::string> three = {sha_of('a'), sha_of('b'), sha_of('c')};
    REQUIRE(state.set_branches("octo/gate", three).has_value());
    REQUIRE(state.set_branches("octo/other", {sha_of('f')}).has_value());
    CHECK(state.branches("octo/gate").value() == three);
    REQUIRE(state.set_branches("octo/gate", {sha_of('b'), sha_of('d')}).has_value());
    CHECK(state.branches("octo/gate").value() == std::set<std::string>{sha_of('b'), sha_of('d')});
    CHECK(state.branches("octo/other").value() == std::set<std::string>{sha_of('f')});
    // Committed to the file: a later round sees it.
    auto reopened = agent::open_sqlite_poll_state(file);
    REQUIRE(reopened.has_value());
    CHECK((*reopened)->branches("octo/gate").value() ==
          std::set<std::string>{sha_of('b'), sha_of('d')});
}

TEST_CASE("poller: a rate limit is waited out by the client; a missing repository is an error") {
    tests::FakeGitHub server;
    server.post("/_control/repo",
                R"({"repo":"octo/gate","pulls":[{"number":2,"sha":")" + sha_of('f') + R"("}]})");
    server.inject(R"([{"kind":"primary","match":"/pulls","count":1,"reset_in":1}])");
    auto queue = open_queue();
    agent::Poller poller(client_for(server), *queue, {{"octo/missing", "octo/gate"}, std::nullopt});
    auto stats = poller.poll_once();
    REQUIRE(stats.errors.size() == 2);  // branches and pulls of octo/missing
    CHECK(stats.errors[0].find("octo/missing") == 0);
    CHECK(stats.errors[0].find("404") != std::string::npos);
    CHECK(stats.submitted == 1);
    const auto seen = requests(server);
    bool limited = false;
    for (const auto& request : seen) limited = limited || request.status == 403;
    CHECK(limited);
}

TEST_CASE(
    "poll state in a pool's PostgreSQL: shared by the agents; one agent polls a "
    "repository at a time, at most once per interval") {
    REQUIRE_POSTGRES(pg);
    tests::FakeGitHub server;
    server.post("/_control/repo", R"({"repo":"octo/gate","pulls":[{"number":4,"sha":")" +
                                      sha_of('4') + R"("}],
        "refs":[{"ref":"refs/heads/gh-readonly-queue/main/pr-4-)" +
                                      sha_of('4') + R"(","sha":")" + sha_of('5') + R"("}]})");
    agent::PostgresOptions options;
    options.url = pg->url(pg->fresh_database());
    auto a = agent::open_postgres_store(options);  // two agents of the pool
    auto b = agent::open_postgres_store(options);
    REQUIRE((a.has_value() && b.has_value()));

    auto turn = a->poll_state->take_turn("octo/gate", 1h);
    REQUIRE(turn.has_value());
    REQUIRE(*turn);
    auto busy = b->poll_state->take_turn("octo/gate", 0ms);
    REQUIRE(busy.has_value());
    CHECK_FALSE(*busy);  // a polls it now: its advisory lock
    auto other = b->poll_state->take_turn("octo/other", 1h);
    CHECK((other.has_value() && *other));  // another repository is free
    other->reset();
    turn->reset();
    auto soon = b->poll_state->take_turn("octo/gate", 1h);
    REQUIRE(soon.has_value());
    CHECK_FALSE(*soon);  // free, but polled within the interval
    auto due = b->poll_state->take_turn("octo/gate", 0ms);
    CHECK((due.has_value() && *due));
    due->reset();

    // What one agent's round learnt (ETags, merge-queue heads) the other's uses.
    agent::Poller first(client_for(server), *a->queue, *a->poll_state,
                        {{"octo/gate"}, std::nullopt, 0ms});
    const auto one = first.poll_once();
    CHECK(one.errors.empty());
    CHECK(one.submitted == 2);
    agent::Poller second(client_for(server), *b->queue, *b->poll_state,
                         {{"octo/gate"}, std::nullopt, 0ms});
    const auto two = second.poll_once();
    CHECK(two.errors.empty());
    CHECK(two.requests == 2);
    CHECK(two.not_modified == 2);
    CHECK(two.submitted == 0);
    server.post("/_control/repo", R"({"repo":"octo/gate","refs":[]})");
    const auto three = first.poll_once();
    CHECK(three.cancelled == 1);  // the head b's round saw last is gone
    agent::Poller paced(client_for(server), *b->queue, *b->poll_state,
                        {{"octo/gate"}, std::nullopt, 1h});
    const auto four = paced.poll_once();
    CHECK(four.skipped == 1);
    CHECK(four.requests == 0);
}

TEST_CASE("poller: next_link keeps to the API base") {
    github::Response response;
    response.headers = {
        {"link",
         R"(<http://h/api/v3/repos/o/r/pulls?page=2>; rel="next", <http://h/api/v3/repos/o/r/pulls?page=5>; rel="last")"}};
    CHECK(agent::next_link(response, "http://h/api/v3") == "/repos/o/r/pulls?page=2");
    CHECK_FALSE(agent::next_link(response, "http://other").has_value());
    response.headers = {{"link", R"(<http://h/x?page=1>; rel="prev")"}};
    CHECK_FALSE(agent::next_link(response, "http://h").has_value());
}
