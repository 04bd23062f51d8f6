// github::Reporter end to end against the stand-in server: the final state of every run, the
// annotations across batches, reruns, statuses, the journal when GitHub is down, dead agents.

#include <simdjson.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <thread>

#include "github/check_runs.hpp"
#include "github/journal.hpp"
#include "tests/fake_github/fake_github.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

using namespace std::chrono_literals;
using github::Conclusion;
using github::Delivery;

github::HttpClient make_client(const std::string& url, int attempts = 3) {
    github::ClientOptions options;
    options.api_url = url;
    options.max_attempts = attempts;
    options.clock = github::Clock{[] { return std::chrono::system_clock::now(); },
                                  [](std::chrono::milliseconds) {}};
    auto client = github::HttpClient::create(
        options, std::make_shared<github::StaticToken>(tests::k_fake_token));
    REQUIRE(client.has_value());
    return *client;
}

github::Reporter make_reporter(const std::string& url,
                               std::optional<std::filesystem::path> journal = std::nullopt,
                               github::ReportAs as = github::ReportAs::checks, int attempts = 3) {
    github::ReporterOptions options;
    options.repository = github::Repository::parse("octo/demo").value();
    options.details_url = "https://ci.example/jobs/1";
    options.report_as = as;
    options.journal_dir = std::move(journal);
    auto reporter = github::Reporter::create(make_client(url, attempts), options);
    REQUIRE(reporter.has_value());
    return *reporter;
}

github::JobReport make_report(std::string job = "build", std::size_t annotations = 0) {
    github::JobReport report;
    report.workflow = "CI";
    report.workflow_path = ".github/workflows/ci.yml";
    report.job = std::move(job);
    report.job_key = "ci.yml#" + report.job;
    report.sha = "0123456789abcdef0123456789abcdef01234567";
    report.started_at = std::chrono::system_clock::now();
    for (std::size_t i = 0; i < annotations; ++i) {
        github::Annotation note;
        note.path = "src/file" + std::to_string(i) + ".cpp";
        note.start_line = note.end_line = static_cast<int>(i) + 1;
        note.start_column = 3;
        note.end_column = 9;
        note.title = "problem " + std::to_string(i);
        note.level =
            i % 3 == 0 ? github::AnnotationLevel::failure : github::AnnotationLevel::warning;
        note.message = "message " + std::to_string(i);
        report.annotations.push_back(note);
    }
    return report;
}

github::JobReport completed(github::JobReport report, Conclusion conclusion) {
    report.status = github::JobStatus::completed;
    report.conclusion = conclusion;
    report.completed_at = std::chrono::system_clock::now();
    github::StepReport checkout;
    checkout.name = "Checkout";
    checkout.exit_code = 0;
    checkout.duration = 300ms;
    checkout.bytes_out = 10;
    github::StepReport test;
    test.name = "Run tests";
    test.conclusion = conclusion;
    test.exit_code = conclusion == Conclusion::success ? 0 : 1;
    test.duration = 4200ms;
    test.bytes_out = 300000;
    test.bytes_err = 12;
    test.stdout_truncated = true;
    test.skip_markers = 3;
    test.skip_reasons = {"no cgroup", "no /proc"};
    report.steps = {checkout, test};
    if (conclusion != Conclusion::success) {
        report.exit_code = 1;
        report.failing_step = "Run tests";
        report.log_tail = "FAILED test_x\n```\nassertion failed\n";
    }
    return report;
}

struct State {
    std::string text;
    simdjson::dom::parser parser;
    simdjson::dom::element root;
    explicit State(const tests::FakeGitHub& server) : text(server.state()) {
        root = parser.parse(text);
    }
    simdjson::dom::array runs() { return root["check_runs"].get_array(); }
    simdjson::dom::array statuses() { return root["statuses"].get_array(); }
};

std::string str(simdjson::dom::element element) {
    return std::string(std::string_view(element.get_string()));
}

// Method and annotation count of each API request the server saw.
std::vector<std::pair<std::string, std::size_t>> requests_with_annotations(
    const tests::FakeGitHub& server) {
    const std::string body = server.requests();
    simdjson::dom::parser parser;
    std::vector<std::pair<std::string, std::size_t>> out;
    for (auto request : parser.parse(body)["requests"].get_array()) {
        std::size_t count = 0;
        const std::string payload = str(request["body"]);
        if (!payload.empty()) {
            simdjson::dom::parser inner;
            simdjson::dom::array notes;
            if (inner.parse(payload)["output"]["annotations"].get_array().get(notes) ==
                simdjson::SUCCESS) {
                count = notes.size();
            }
        }
        out.emplace_back(str(request["method"]), count);
    }
    return out;
}

}  // namespace

TEST_CASE("a job's run is created in_progress, then concluded with 120 annotations in batches") {
    tests::FakeGitHub server;
    auto reporter = make_reporter(server.url());
    auto report = make_report("build", 120);
    REQUIRE(reporter.start(report).value() == Delivery::sent);
    {
        State state(server);
        REQUIRE(state.runs().size() == 1);
        auto run = state.runs().at(0);
        CHECK(str(run["status"]) == "in_progress");
        CHECK(str(run["name"]) == "CI / build");
        CHECK(str(run["external_id"]) == "ci.yml#build");
        CHECK(str(run["details_url"]) == "https://ci.example/jobs/1");
        CHECK(str(run["output"]["title"]) == "running");
    }
    REQUIRE(reporter.finish(completed(report, Conclusion::failure)).value() == Delivery::sent);

    State state(server);
    REQUIRE(state.runs().size() == 1);
    auto run = state.runs().at(0);
    CHECK(str(run["status"]) == "completed");
    CHECK(str(run["conclusion"]) == "failure");
    CHECK(str(run["output"]["title"]) == "exit 1 · stdout truncated · 3 skipped under wrap");
    CHECK_THAT(str(run["output"]["summary"]), Catch::Contains("| 2 | Run tests | failure | 1 |"));
    CHECK_THAT(str(run["output"]["text"]),
               Catch::Contains("````\nFAILED test_x\n```\nassertion failed\n````"));
    CHECK(run["annotations"].get_array().size() == 120);
    CHECK(str(run["annotations"].at(119)["title"]) == "problem 119");
    CHECK(run["annotations"].at(0)["start_column"].get_int64().value() == 3);

    // GET (lookup), POST, then PATCHes carrying 50, 50 and 20 annotations.
    auto requests = requests_with_annotations(server);
    REQUIRE(requests.size() == 5);
    CHECK(requests[0].first == "GET");
    CHECK(requests[1].first == "POST");
    CHECK(requests[2] == std::pair<std::string, std::size_t>{"PATCH", 50});
    CHECK(requests[3] == std::pair<std::string, std::size_t>{"PATCH", 50});
    CHECK(requests[4] == std::pair<std::string, std::size_t>{"PATCH", 20});
    CHECK(reporter.check_run_id(report) == run["id"].get_int64().value());
}

TEST_CASE("a rerun of the same job key updates its run, even from a new reporter") {
    tests::FakeGitHub server;
    auto report = make_report("test");
    {
        auto first = make_reporter(server.url());
        REQUIRE(first.start(report).has_value());
        REQUIRE(first.finish(completed(report, Conclusion::failure)).has_value());
    }
    auto second = make_reporter(server.url());  // another process: no id cached
    REQUIRE(second.start(report).value() == Delivery::sent);
    {
        State state(server);
        REQUIRE(state.runs().size() == 1);
        CHECK(str(state.runs().at(0)["status"]) == "in_progress");
    }
    REQUIRE(second.finish(completed(report, Conclusion::success)).has_value());
    // A different job is a different run.
    auto other = make_report("lint");
    REQUIRE(second.finish(completed(other, Conclusion::skipped)).has_value());

    State state(server);
    REQUIRE(state.runs().size() == 2);
    CHECK(str(state.runs().at(0)["name"]) == "CI / test");
    CHECK(str(state.runs().at(0)["conclusion"]) == "success");
    CHECK(str(state.runs().at(0)["output"]["title"]) ==
          "passed · stdout truncated · 3 skipped under wrap");
    CHECK(str(state.runs().at(1)["name"]) == "CI / lint");
    CHECK(str(state.runs().at(1)["status"]) == "completed");
    CHECK(str(state.runs().at(1)["conclusion"]) == "skipped");
}

TEST_CASE("cancelled and timed-out jobs are concluded; the name template applies") {
    tests::FakeGitHub server;
    github::ReporterOptions options;
    options.repository = github::Repository::parse("octo/demo").value();
    options.check_name_template = "gate: {job} @ {short_sha}";
    auto reporter = github::Reporter::create(make_client(server.url()), options);
    REQUIRE(reporter.has_value());
    auto slow = make_report("slow");
    auto stop = make_report("stop");
    REQUIRE(reporter->start(slow).has_value());
    REQUIRE(reporter->start(stop).has_value());
    REQUIRE(reporter->finish(completed(slow, Conclusion::timed_out)).has_value());
    REQUIRE(reporter->finish(completed(stop, Conclusion::cancelled)).has_value());
    State state(server);
    REQUIRE(state.runs().size() == 2);
    CHECK(str(state.runs().at(0)["name"]) == "gate: slow @ 0123456");
    CHECK(str(state.runs().at(0)["conclusion"]) == "timed_out");
    CHECK_THAT(str(state.runs().at(0)["output"]["title"]), Catch::StartsWith("timed out"));
    CHECK(str(state.runs().at(1)["conclusion"]) == "cancelled");
    CHECK(state.runs().at(1)["details_url"].is_null());

    options.check_name_template = "{workflow} / {nope}";
    auto bad = github::Reporter::create(make_client(server.url()), options);
    REQUIRE_FALSE(bad.has_value());
    CHECK_THAT(bad.error().message, Catch::Contains("{nope}"));
    CHECK_FALSE(github::Repository::parse("no-slash").has_value());
    CHECK_FALSE(github::Repository::parse("a/b/c").has_value());
}

TEST_CASE("outputs beyond GitHub's limits are cut to fit and accepted") {
    tests::FakeGitHub server;
    auto reporter = make_reporter(server.url());
    auto report = completed(make_report("huge", 3), Conclusion::failure);
    for (int i = 0; i < 3000; ++i) {
        github::StepReport step;
        step.name = "step " + std::to_string(i) + std::string(40, 'x');
        report.steps.push_back(step);
    }
    report.log_tail = std::string(200'000, 'y') + "\xff\xfe" + "end\n";
    report.annotations[0].title = std::string(400, 't');
    report.annotations[1].message = std::string(100'000, 'm');
    report.annotations[2].start_line = 9;
    report.annotations[2].end_line = 4;  // reversed, with columns: must be repaired
    REQUIRE(reporter.finish(report).value() == Delivery::sent);
    State state(server);
    auto run = state.runs().at(0);
    CHECK(str(run["output"]["summary"]).size() <= 65535);
    CHECK_THAT(str(run["output"]["summary"]), Catch::Contains("more steps not shown"));
    CHECK(str(run["output"]["text"]).size() <= 65535);
    CHECK_THAT(str(run["output"]["text"]), Catch::Contains("end\n"));
    CHECK(str(run["annotations"].at(0)["title"]).size() == 255);
    CHECK(run["annotations"].get_array().size() == 3);
}

TEST_CASE("--report-as status posts pending, then the final state") {
    tests::FakeGitHub server;
    auto reporter = make_reporter(server.url(), std::nullopt, github::ReportAs::status);
    auto report = make_report("build");
    REQUIRE(reporter.start(report).has_value());
    REQUIRE(reporter.finish(completed(report, Conclusion::failure)).has_value());
    auto cancelled = make_report("other");
    REQUIRE(reporter.finish(completed(cancelled, Conclusion::cancelled)).has_value());
    State state(server);
    CHECK(state.runs().size() == 0);
    REQUIRE(state.statuses().size() == 3);
    CHECK(str(state.statuses().at(0)["state"]) == "pending");
    CHECK(str(state.statuses().at(1)["state"]) == "failure");
    CHECK(str(state.statuses().at(1)["context"]) == "CI / build");
    CHECK(str(state.statuses().at(1)["target_url"]) == "https://ci.example/jobs/1");
    CHECK_THAT(str(state.statuses().at(1)["description"]), Catch::StartsWith("exit 1"));
    CHECK(str(state.statuses().at(2)["state"]) == "error");
}

TEST_CASE("a report GitHub refuses still concludes the run") {
    tests::FakeGitHub server;
    auto reporter = make_reporter(server.url());
    auto report = make_report("build", 2);
    REQUIRE(reporter.start(report).has_value());
    server.inject(R"([{"kind":"422","match":"/check-runs/"}])");
    auto finished = reporter.finish(completed(report, Conclusion::failure));
    REQUIRE_FALSE(finished.has_value());
    CHECK(finished.error().kind == common::ErrorKind::invalid_input);
    State state(server);
    auto run = state.runs().at(0);
    CHECK(str(run["status"]) == "completed");
    CHECK(str(run["conclusion"]) == "failure");
    CHECK_THAT(str(run["output"]["summary"]), Catch::Contains("GitHub refused the full report"));
}

TEST_CASE("reports that fail while GitHub is down are journaled and replayed; nothing is lost") {
    auto dir = tests::make_temp_dir("journal");
    int port = 0;
    std::string url;
    {
        tests::FakeGitHub first;
        port = first.port();
        url = first.url();
    }  // GitHub is down from here
    auto reporter = make_reporter(url, dir, github::ReportAs::checks, 2);
    auto report = make_report("build", 70);
    CHECK(reporter.start(report).value() == Delivery::journaled);
    CHECK(reporter.finish(completed(report, Conclusion::failure)).value() == Delivery::journaled);
    auto entries = github::Journal::open(dir).value().entries().value();
    REQUIRE(entries.size() == 1);  // the finish superseded the start
    CHECK(entries[0].phase == github::JournalPhase::finishing);

    tests::FakeGitHub server(std::vector<std::string>{tests::k_fake_token}, port);  // back up
    // Faults on the way back are retried by the client.
    server.inject(R"([{"kind":"500","count":2,"match":"/check-runs/"}])");
    auto replayed = make_reporter(url, dir).replay();
    REQUIRE(replayed.has_value());
    CHECK(replayed->kept == 0);
    CHECK(replayed->sent == 1);
    CHECK(github::Journal::open(dir).value().entries().value().empty());

    State state(server);
    REQUIRE(state.runs().size() == 1);
    CHECK(str(state.runs().at(0)["conclusion"]) == "failure");
    CHECK(state.runs().at(0)["annotations"].get_array().size() == 70);
}

TEST_CASE("a partly sent report resumes after its last batch, without duplicates") {
    auto dir = tests::make_temp_dir("journal");
    tests::FakeGitHub server;
    auto reporter = make_reporter(server.url(), dir, github::ReportAs::checks, 2);
    auto report = make_report("build", 120);
    REQUIRE(reporter.start(report).has_value());
    // The first PATCH (conclusion + 50) lands, then the next batch fails past the retries.
    server.inject(R"([{"kind":"slow","delay":0,"match":"/check-runs/"},)"
                  R"({"kind":"502","count":2,"match":"/check-runs/"}])");
    CHECK(reporter.finish(completed(report, Conclusion::failure)).value() == Delivery::journaled);
    auto entries = github::Journal::open(dir).value().entries().value();
    REQUIRE(entries.size() == 1);
    CHECK(entries[0].annotations_sent == 50);
    {
        State state(server);
        CHECK(str(state.runs().at(0)["status"]) == "completed");
        CHECK(state.runs().at(0)["annotations"].get_array().size() == 50);
    }
    auto result = reporter.replay();
    REQUIRE(result.has_value());
    CHECK(result->sent == 1);
    State state(server);
    CHECK(state.runs().at(0)["annotations"].get_array().size() == 120);
}

TEST_CASE("a job whose agent died gets its run concluded as cancelled on replay") {
    auto dir = tests::make_temp_dir("journal");
    tests::FakeGitHub server;
    auto report = make_report("orphan");
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {  // the agent: starts the job, then dies without finishing it
        auto reporter = make_reporter(server.url(), dir);
        const bool ok = reporter.start(report).has_value();
        ::_exit(ok ? 0 : 1);
    }
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    REQUIRE(WIFEXITED(status));
    REQUIRE(WEXITSTATUS(status) == 0);
    {
        State state(server);
        REQUIRE(state.runs().size() == 1);
        CHECK(str(state.runs().at(0)["status"]) == "in_progress");
    }
    // A job that is still running in this process is left alone by the same replay.
    auto reporter = make_reporter(server.url(), dir);
    auto live = make_report("live");
    REQUIRE(reporter.start(live).has_value());
    auto result = reporter.replay();
    REQUIRE(result.has_value());
    CHECK(result->sent == 1);
    CHECK(result->skipped == 1);
    State state(server);
    REQUIRE(state.runs().size() == 2);
    CHECK(str(state.runs().at(0)["conclusion"]) == "cancelled");
    CHECK_THAT(str(state.runs().at(0)["output"]["text"]), Catch::Contains("stopped before"));
    CHECK(str(state.runs().at(1)["status"]) == "in_progress");
}

TEST_CASE("concurrent jobs each get exactly one run") {
    tests::FakeGitHub server;
    auto reporter = make_reporter(server.url());
    std::vector<std::thread> threads;
    std::atomic<int> failures{0};
    for (int i = 0; i < 6; ++i) {
        threads.emplace_back([&, i] {
            auto report = make_report("job" + std::to_string(i), 60);
            if (!reporter.start(report) ||
                !reporter.finish(completed(report, Conclusion::success))) {
                ++failures;
            }
        });
    }
    for (auto& thread : threads) thread.join();
    CHECK(failures == 0);
    State state(server);
    REQUIRE(state.runs().size() == 6);
    for (auto run : state.runs()) {
        CHECK(str(run["conclusion"]) == "success");
        CHECK(run["annotations"].get_array().size() == 60);
    }
}
