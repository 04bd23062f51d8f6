// The agent's report sender (agent/daemon/daemon_reports.hpp) against the GitHub stand-in
// (tests/fake_github): the order of a job's reports under failures, and GitHub's own word on
// when to try again (Retry-After, the rate-limit headers) setting the queue's next attempt.
#include <simdjson.h>

#include <catch2/catch.hpp>
#include <string>
#include <thread>
#include <vector>

#include "agent/daemon/daemon_reports.hpp"
#include "tests/fake_github/check_runs.hpp"
#include "tests/fake_github/fake_github.hpp"
#include "tests/support/postgres.hpp"
#include "tests/support/temp_dir.hpp"

using namespace std::chrono_literals;

namespace {

struct Sent {
    std::string method, target, body;
    long status = 0;
};

// Every request the stand-in saw on a check-runs path, in order.
std::vector<Sent> check_run_requests(const tests::FakeGitHub& server) {
    simdjson::dom::parser parser;
    const std::string text = server.requests();
    simdjson::dom::element root;
    REQUIRE(parser.parse(text).get(root) == simdjson::SUCCESS);
    std::vector<Sent> out;
    for (auto item : root["requests"].get_array()) {
        Sent sent{std::string(std::string_view(item["method"])),
                  std::string(std::string_view(item["target"])),
                  std::string(std::string_view(item["body"])), 0};
        int64_t status = 0;
        if (item["status"].get(status) == simdjson::SUCCESS) sent.status = status;
        if (sent.target.find("check-runs") != std::string::npos) out.push_back(sent);
    }
    return out;
}

struct Setup {
    std::filesystem::path dir = tests::make_temp_dir("reports");
    agent::AgentConfig config;
    std::int64_t now = 0;  // the queue's clock; 0: the system's
    std::unique_ptr<agent::JobQueue> queue;

    Setup(const tests::FakeGitHub& server, const std::string& postgres_url) {
        config.id = "agent-r";
        config.state_dir = dir / "state";
        config.api_url = server.url();
        config.repositories = {"octo/gate"};
        tests::write_file(dir / "token", std::string(tests::k_fake_token) + "\n");
        std::filesystem::permissions(dir / "token", std::filesystem::perms::owner_read |
                                                        std::filesystem::perms::owner_write);
        config.github_token_file = dir / "token";
        agent::Clock clock = [this] { return now ? now : agent::system_now_ms(); };
        common::Expected<std::unique_ptr<agent::JobQueue>> opened =
            std::unexpected(common::Error{});
        if (postgres_url.empty()) {
            opened = agent::open_sqlite_queue(dir / "q.db", {10s, clock});
        } else {
            agent::PostgresOptions options;
            options.url = postgres_url;
            options.clock = clock;
            opened = agent::open_postgres_queue(options);
        }
        REQUIRE(opened.has_value());
        queue = std::move(*opened);
    }

    agent::ReportSender sender() {
        auto client = agent::agent_github_client(config);
        REQUIRE(client.has_value());
        return agent::ReportSender(config, *queue, std::move(*client));
    }

    // A job running under this agent, its start report queued.
    std::int64_t started_job(const std::string& sha) {
        agent::JobSpec spec;
        spec.key = {"octo/gate", sha, "", 1};
        spec.event = "pull_request";
        auto id = queue->submit(spec)->job.id;
        REQUIRE(*queue->claim(config.id, 60s, 100));
        REQUIRE(queue->add_report(id, "start", "{}"));
        return id;
    }
};

}  // namespace

// Each test case runs on both backends of the queue; `url` is empty for SQLite.
#define FOR_EACH_BACKEND(url)                                   \
    const bool postgres_ = GENERATE(false, true);               \
    INFO("backend: " << (postgres_ ? "postgresql" : "sqlite")); \
    std::string url;                                            \
    if (postgres_) {                                            \
        REQUIRE_POSTGRES(server_);                              \
        url = server_->url(server_->fresh_database());          \
    }

TEST_CASE(
    "reports: a start that failed and is overtaken by the job's end never reopens the "
    "concluded run") {
    FOR_EACH_BACKEND(url);
    tests::FakeGitHub server;
    Setup setup(server, url);
    auto sender = setup.sender();
    const auto id = setup.started_job(std::string(40, 'a'));
    // Both attempts of the client fail: the start stays owed, retried after a backoff.
    server.inject(R"([{"kind":"500","match":"check-runs","count":2}])");
    CHECK(sender.deliver_due().kept == 1);
    REQUIRE(setup.queue->complete(id, setup.config.id, agent::JobState::succeeded, "", "{}"));
    sender.deliver_due();                 // the conclusion
    std::this_thread::sleep_for(2500ms);  // past the start's backoff
    sender.deliver_due();
    sender.deliver_due();
    CHECK(tests::check_run_statuses(server) == std::vector<std::string>{"completed"});
    // Nothing after the conclusion put the run back in progress.
    const auto sent = check_run_requests(server);
    bool concluded = false;
    for (const auto& request : sent) {
        INFO(request.method << " " << request.target << " " << request.body);
        if (request.status >= 300) continue;
        if (concluded) CHECK(request.body.find("in_progress") == std::string::npos);
        if (request.body.find(R"("conclusion":"success")") != std::string::npos) concluded = true;
    }
    CHECK(concluded);
    CHECK(setup.queue->due_reports(10)->empty());
}

TEST_CASE(
    "reports: a 429's Retry-After sets the report's next attempt, past the queue's own "
    "backoff") {
    FOR_EACH_BACKEND(url);
    tests::FakeGitHub server;
    Setup setup(server, url);
    auto sender = setup.sender();
    setup.now = 50'000'000;
    setup.started_job(std::string(40, 'b'));
    server.inject(R"([{"kind":"429","match":"check-runs","count":4,"retry_after":20}])");
    const auto began = std::chrono::steady_clock::now();
    CHECK(sender.deliver_due().kept == 1);
    // Not slept through in the round (longer than the agent's client waits): the queue waits.
    CHECK(std::chrono::steady_clock::now() - began < 15s);
    setup.now += 15'000;  // past any backoff of the queue's own (1, 2, 4 s)
    CHECK(setup.queue->due_reports(10)->empty());
    setup.now += 6'000;
    CHECK(setup.queue->due_reports(10)->size() == 1);
}

TEST_CASE(
    "reports: an exhausted primary rate limit (x-ratelimit-reset) holds the queue until "
    "the reset") {
    FOR_EACH_BACKEND(url);
    tests::FakeGitHub server;
    Setup setup(server, url);
    auto sender = setup.sender();
    setup.now = 60'000'000;
    setup.started_job(std::string(40, 'c'));
    setup.started_job(std::string(40, 'd'));
    server.inject(R"([{"kind":"primary","match":"check-runs","count":4,"reset_in":40}])");
    CHECK(sender.deliver_due().kept == 2);
    // One request refused; the other report was not even tried (GitHub said when).
    std::size_t refused = 0;
    for (const auto& request : check_run_requests(server)) refused += request.status == 403;
    CHECK(refused <= 2);  // the client's two attempts at most, for the first report only
    setup.now += 30'000;
    CHECK(setup.queue->due_reports(10)->empty());
    setup.now += 12'000;
    CHECK(setup.queue->due_reports(10)->size() == 2);
}

TEST_CASE("reports: two agents' senders on one PostgreSQL queue send each report once, in order") {
    REQUIRE_POSTGRES(pg);
    tests::FakeGitHub server;
    const auto url = pg->url(pg->fresh_database());
    Setup first(server, url), second(server, url);
    constexpr int k_jobs = 12;
    std::vector<std::int64_t> ids;
    for (int i = 0; i < k_jobs; ++i) {
        char sha[41];
        std::snprintf(sha, sizeof sha, "%040x", i + 1);
        ids.push_back(first.started_job(sha));
    }
    auto deliver_all = [&] {
        auto a = first.sender();
        auto b = second.sender();
        std::thread other([&] { b.deliver_due(); });
        a.deliver_due();
        other.join();
    };
    deliver_all();  // the starts
    for (auto id : ids)
        REQUIRE(first.queue->complete(id, first.config.id, agent::JobState::failed, "x", "{}"));
    deliver_all();  // the conclusions
    CHECK(*first.queue->owed_reports(std::nullopt) == 0);
    std::size_t created = 0, concluded = 0;
    for (const auto& request : check_run_requests(server)) {
        if (request.method == "POST") ++created;
        if (request.method == "PATCH" &&
            request.body.find(R"("conclusion":"failure")") != std::string::npos)
            ++concluded;
    }
    CHECK(created == k_jobs);
    CHECK(concluded == k_jobs);
    CHECK(tests::check_run_statuses(server) == std::vector<std::string>(k_jobs, "completed"));
}
