// The agent's HTTP API: jobs (submit, dedup, list, get, cancel, logs, metrics), the bearer
// token on 127.0.0.1 and webhooks. Its sandbox verbs: tests/unit/agent/test_api_sandboxes.cpp.
#include <simdjson.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <thread>

#include "agent/api/api.hpp"
#include "github/webhook.hpp"
#include "tests/support/api_fixture.hpp"
#include "tests/support/temp_dir.hpp"

using namespace std::chrono_literals;
using tests::api::Fixture;
using tests::api::http;
using tests::api::k_sha;
using tests::api::parse;

namespace {

constexpr const char* k_secret = "It's a Secret to Everybody";

std::string signed_header(const std::string& body) {
    return "X-Hub-Signature-256: " + github::webhook_signature(k_secret, body);
}

}  // namespace

TEST_CASE("jobs over the unix-socket API: submit, dedup, list, get, cancel, metrics") {
    Fixture f;
    CHECK(f.call("GET", "/healthz").status == 200);
    const std::string body = std::string(R"({"repository":"octo/repo","sha":")") + k_sha +
                             R"(","workflow_job":"ci.yml/build"})";
    auto created = f.call("POST", "/v1/jobs", body);
    CHECK(created.status == 201);
    CHECK(f.call("POST", "/v1/jobs", body).status == 200);  // deduplicated
    simdjson::dom::parser parser;
    const auto id = parse(parser, created.body)["id"].get_int64().value();

    auto bad = f.call("POST", "/v1/jobs", R"({"repository":"octo/repo","sha":"xyz"})");
    CHECK(bad.status == 400);
    CHECK(bad.body.find("field sha") != std::string::npos);
    CHECK(f.call("POST", "/v1/jobs", "not json").status == 400);
    CHECK(f.call("GET", "/v1/jobs?state=bogus").status == 400);

    auto list = f.call("GET", "/v1/jobs?state=queued");
    CHECK(list.status == 200);
    CHECK(parse(parser, list.body)["jobs"].get_array().size() == 1);
    auto one = f.call("GET", "/v1/jobs/" + std::to_string(id));
    CHECK(one.status == 200);
    CHECK(one.body.find("\"workflow_job\":\"ci.yml/build\"") != std::string::npos);
    CHECK(f.call("GET", "/v1/jobs/999").status == 404);

    auto cancel = f.call("POST", "/v1/jobs/" + std::to_string(id) + "/cancel");
    CHECK(cancel.status == 200);
    CHECK(cancel.body.find("\"outcome\":\"cancelled\"") != std::string::npos);
    auto metrics = f.call("GET", "/metrics");
    CHECK(metrics.status == 200);
    CHECK(metrics.body.find("sandgate_jobs{state=\"cancelled\"} 1") != std::string::npos);
    CHECK(metrics.body.find("sandgate_sandboxes_alive 0") != std::string::npos);
    CHECK(f.call("GET", "/nowhere").status == 404);
}

TEST_CASE(
    "a submitted job may name its base: base_sha (40 hex) and base_ref, else a one-line 400") {
    Fixture f;
    const std::string base(40, 'b');
    const std::string job = std::string(R"({"repository":"octo/repo","sha":")") + k_sha +
                            R"(","event":"pull_request",)";
    auto created =
        f.call("POST", "/v1/jobs", job + R"("base_sha":")" + base + R"(","base_ref":"main"})");
    REQUIRE(created.status == 201);
    simdjson::dom::parser parser;
    auto payload = parse(parser, created.body)["payload"];
    CHECK(std::string_view(payload["base_sha"].get_string().value()) == base);
    CHECK(std::string_view(payload["base_ref"].get_string().value()) == "main");
    auto jobs = *f.queue->list({});
    REQUIRE(jobs.size() == 1);
    CHECK(jobs[0].spec.payload_json == R"({"base_sha":")" + base + R"(","base_ref":"main"})");

    // A new branch's push: 40 zeros.
    const std::string other = "1123456789abcdef0123456789abcdef01234567";
    CHECK(f.call("POST", "/v1/jobs",
                 R"({"repository":"octo/repo","sha":")" + other + R"(","base_sha":")" +
                     std::string(40, '0') + R"("})")
              .status == 201);

    for (const std::string& bad : std::vector<std::string>{
             R"("base_sha":"abc")", R"("base_sha":")" + std::string(40, 'B') + "\"",
             R"("base_sha":")" + std::string(64, 'b') + "\"", R"("base_sha":7)"}) {
        auto refused = f.call("POST", "/v1/jobs", job + bad + "}");
        INFO(bad << " -> " << refused.body);
        CHECK(refused.status == 400);
        CHECK_THAT(refused.body, Catch::Contains("field base_sha: 40 lower-case hex digits"));
        simdjson::dom::parser error_parser;
        const std::string_view message =
            parse(error_parser, refused.body)["error"].get_string().value();
        CHECK(message.find('\n') == std::string_view::npos);  // one line
    }
    for (const std::string bad :
         {R"("base_ref":"")", R"("base_ref":"-x")", R"("base_ref":"a b")", R"("base_ref":[])"}) {
        auto refused = f.call("POST", "/v1/jobs", job + bad + "}");
        INFO(bad << " -> " << refused.body);
        CHECK(refused.status == 400);
        CHECK_THAT(refused.body, Catch::Contains("field base_ref"));
    }
    CHECK(f.queue->list({})->size() == 2);  // nothing half-queued by the refusals
}

TEST_CASE("on 127.0.0.1 every route but /healthz needs the bearer token") {
    auto dir = tests::make_temp_dir("api");
    auto queue = std::move(*agent::open_sqlite_queue(dir / "q.db"));
    agent::SandboxManager sandboxes({dir / "state", SANDGATE_BINARY, queue.get(), 30s});
    agent::ApiConfig config;
    config.token = "t0ken-value";
    agent::Api api(config, *queue, sandboxes);
    std::uint16_t port = 0;
    auto listener = agent::listen_loopback(0, &port);
    REQUIRE(listener);
    auto server = agent::HttpServer::start(
        std::move(*listener), [&](const agent::HttpRequest& r) { return api.handle(r); }, 1 << 20);
    REQUIRE(server);
    const std::string base = "http://127.0.0.1:" + std::to_string(port);
    CHECK(http("GET", base + "/healthz").status == 200);
    CHECK(http("GET", base + "/v1/jobs").status == 401);
    CHECK(http("GET", base + "/metrics", "", {"Authorization: Bearer wrong"}).status == 401);
    CHECK(http("GET", base + "/v1/jobs", "", {"Authorization: Bearer t0ken-value-"}).status == 401);
    auto ok = http("GET", base + "/v1/jobs", "", {"Authorization: Bearer t0ken-value"});
    CHECK(ok.status == 200);
    CHECK(ok.body.find("t0ken") == std::string::npos);
    CHECK(agent::bearer_matches("Bearer abc", "abc"));
    CHECK_FALSE(agent::bearer_matches("Bearer abc", ""));
    CHECK(http("POST", base + "/v1/jobs", std::string(2 << 20, 'x'),
               {"Authorization: Bearer t0ken-value"})
              .status == 413);
}

TEST_CASE("webhooks: signatures checked, events turned into jobs and cancellations") {
    CHECK(github::webhook_signature(k_secret, "Hello, World!") ==
          "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17");
    agent::ApiConfig config;
    config.webhook_secret = k_secret;
    config.pr_label = "gate";
    Fixture f(config);
    const std::string sha = k_sha;
    const std::string pr =
        R"({"action":"opened","number":7,"repository":{"full_name":"octo/repo"},)"
        R"("pull_request":{"number":7,"labels":[{"name":"gate"}],)"
        R"("head":{"sha":")" +
        sha +
        R"(","ref":"feature"},)"
        R"("base":{"sha":")" +
        std::string(40, 'b') + R"(","ref":"main"}}})";
    auto unsigned_reply = f.call("POST", "/webhook", pr, {"X-GitHub-Event: pull_request"});
    CHECK(unsigned_reply.status == 401);
    auto forged = f.call(
        "POST", "/webhook", pr,
        {"X-GitHub-Event: pull_request", "X-Hub-Signature-256: sha256=" + std::string(64, '0')});
    CHECK(forged.status == 401);
    CHECK(f.call("POST", "/webhook", pr,
                 {"X-GitHub-Event: pull_request", "X-Hub-Signature-256: md5=abc"})
              .status == 401);
    CHECK(f.queue->list({})->empty());  // nothing was queued by unsigned deliveries

    auto accepted =
        f.call("POST", "/webhook", pr, {"X-GitHub-Event: pull_request", signed_header(pr)});
    CHECK(accepted.status == 201);
    auto jobs = *f.queue->list({});
    REQUIRE(jobs.size() == 1);
    CHECK(jobs[0].spec.ref == "refs/pull/7/head");
    CHECK(jobs[0].spec.event == "pull_request");
    CHECK(jobs[0].spec.payload_json ==
          R"({"pull_request":7,"base_sha":")" + std::string(40, 'b') + R"(","base_ref":"main"})");

    std::string unlabeled = pr;
    unlabeled.replace(unlabeled.find("\"gate\""), 6, "\"wip\"");
    auto ignored = f.call("POST", "/webhook", unlabeled,
                          {"X-GitHub-Event: pull_request", signed_header(unlabeled)});
    CHECK(ignored.status == 200);
    CHECK(ignored.body.find("ignored") != std::string::npos);

    const std::string mg_sha = "89abcdef0123456789abcdef0123456789abcdef";
    const std::string group =
        R"({"action":"checks_requested","repository":{"full_name":"octo/repo"},)"
        R"("merge_group":{"head_sha":")" +
        mg_sha + R"(","head_ref":"refs/heads/gh-readonly-queue/main/pr-7-abc"}})";
    CHECK(f.call("POST", "/webhook", group, {"X-GitHub-Event: merge_group", signed_header(group)})
              .status == 201);
    // Its base: the payload's base_sha and base_ref (the head ref above names no SHA).
    const std::string group_base(40, 'd');
    const std::string full_group =
        R"({"action":"checks_requested","repository":{"full_name":"octo/repo"},)"
        R"("merge_group":{"head_sha":")" +
        std::string(40, 'e') +
        R"(","head_ref":"refs/heads/gh-readonly-queue/main/pr-8-abc",)"
        R"("base_sha":")" +
        group_base + R"(","base_ref":"refs/heads/main"}})";
    CHECK(f.call("POST", "/webhook", full_group,
                 {"X-GitHub-Event: merge_group", signed_header(full_group)})
              .status == 201);
    agent::JobFilter by_sha;
    by_sha.sha = std::string(40, 'e');
    auto based = *f.queue->list(by_sha);
    REQUIRE(based.size() == 1);
    CHECK(based[0].spec.payload_json ==
          R"({"base_sha":")" + group_base + R"(","base_ref":"refs/heads/main"})");
    std::string destroyed = group;
    destroyed.replace(destroyed.find("checks_requested"), 16, "destroyed");
    destroyed.insert(1, R"("reason":"dequeued",)");
    auto cancel = f.call("POST", "/webhook", destroyed,
                         {"X-GitHub-Event: merge_group", signed_header(destroyed)});
    CHECK(cancel.status == 200);
    agent::JobFilter filter;
    filter.sha = mg_sha;
    auto group_jobs = *f.queue->list(filter);
    REQUIRE(group_jobs.size() == 1);
    CHECK(group_jobs[0].state == agent::JobState::cancelled);
    CHECK(group_jobs[0].reason.find("dequeued") != std::string::npos);

    const std::string rerun = R"({"action":"rerequested","repository":{"full_name":"octo/repo"},)"
                              R"("check_suite":{"head_sha":")" +
                              sha + R"(","head_branch":"feature"}})";
    CHECK(f.call("POST", "/webhook", rerun, {"X-GitHub-Event: check_suite", signed_header(rerun)})
              .status == 201);
    filter.sha = sha;
    auto attempts = *f.queue->list(filter);
    REQUIRE(attempts.size() == 2);
    CHECK(attempts[1].spec.key.attempt == 2);
    CHECK(attempts[1].spec.payload_json == "{}");  // a push's rerun takes no pull request's base

    // A check suite's push carries `before`: recorded for the gate's paths filters.
    const std::string pushed = "2123456789abcdef0123456789abcdef01234567";
    const std::string before(40, 'f');
    const std::string suite = R"({"action":"requested","repository":{"full_name":"octo/repo"},)"
                              R"("check_suite":{"head_sha":")" +
                              pushed +
                              R"(","head_branch":"main",)"
                              R"("before":")" +
                              before + R"(","after":")" + pushed + R"("}})";
    CHECK(f.call("POST", "/webhook", suite, {"X-GitHub-Event: check_suite", signed_header(suite)})
              .status == 201);
    const std::string run_sha = "3123456789abcdef0123456789abcdef01234567";
    const std::string run = R"({"action":"rerequested","repository":{"full_name":"octo/repo"},)"
                            R"("check_run":{"head_sha":")" +
                            run_sha +
                            R"(","check_suite":{"head_branch":"main",)"
                            R"("before":")" +
                            before + R"("}}})";
    CHECK(
        f.call("POST", "/webhook", run, {"X-GitHub-Event: check_run", signed_header(run)}).status ==
        201);
    for (const std::string& head : {pushed, run_sha}) {
        filter.sha = head;
        auto suite_jobs = *f.queue->list(filter);
        REQUIRE(suite_jobs.size() == 1);
        CHECK(suite_jobs[0].spec.event == "push");
        CHECK(suite_jobs[0].spec.payload_json == R"({"base_sha":")" + before + R"("})");
    }
    // A rerun whose webhook carries no `before` keeps the earlier attempt's base.
    const std::string bare = R"({"action":"rerequested","repository":{"full_name":"octo/repo"},)"
                             R"("check_run":{"head_sha":")" +
                             pushed + R"(","check_suite":{"head_branch":"main"}}})";
    CHECK(f.call("POST", "/webhook", bare, {"X-GitHub-Event: check_run", signed_header(bare)})
              .status == 201);
    filter.sha = pushed;
    auto reruns = *f.queue->list(filter);
    REQUIRE(reruns.size() == 2);
    CHECK(reruns[1].spec.key.attempt == 2);
    CHECK(reruns[1].spec.payload_json == R"({"base_sha":")" + before + R"("})");

    const std::string broken = R"({"action":"opened","repository":{"full_name":"octo/repo"}})";
    auto malformed =
        f.call("POST", "/webhook", broken, {"X-GitHub-Event: pull_request", signed_header(broken)});
    CHECK(malformed.status == 400);
    CHECK(malformed.body.find("pull_request") != std::string::npos);
}
TEST_CASE("a job's log is served, and followed until the job ends") {
    Fixture f;
    agent::JobSpec spec;
    spec.key = {"octo/repo", k_sha, "", 1};
    const auto id = f.queue->submit(spec)->job.id;
    REQUIRE(*f.queue->claim("me", 60s, 1));
    const auto log = agent::job_log_path(f.dir / "logs", id);
    tests::write_file(log, "line one\n");
    CHECK(f.call("GET", "/v1/jobs/" + std::to_string(id) + "/log").body == "line one\n");
    std::thread writer([&] {
        std::this_thread::sleep_for(300ms);
        std::ofstream(log, std::ios::app) << "line two\n";
        std::this_thread::sleep_for(300ms);
        REQUIRE(f.queue->complete(id, "me", agent::JobState::succeeded, "", "{}"));
    });
    auto followed = f.call("GET", "/v1/jobs/" + std::to_string(id) + "/log?follow=1");
    writer.join();
    CHECK(followed.body == "line one\nline two\n");
}
