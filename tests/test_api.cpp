#include <catch2/catch.hpp>

#include <curl/curl.h>
#include <simdjson.h>
#include <sys/stat.h>

#include <fstream>
#include <memory>
#include <thread>

#include "agent/api.hpp"
#include "agent/http_server.hpp"
#include "agent/job_store.hpp"
#include "agent/sandbox_manager.hpp"
#include "github/webhook.hpp"
#include "sandbox/broker_protocol.hpp"
#include "sandbox/unix_socket.hpp"
#include "tests/support/temp_dir.hpp"

using namespace std::chrono_literals;

namespace {

constexpr const char* k_sha = "0123456789abcdef0123456789abcdef01234567";
constexpr const char* k_secret = "It's a Secret to Everybody";

struct CurlDeleter {
    void operator()(CURL* curl) const { curl_easy_cleanup(curl); }
};
struct ListDeleter {
    void operator()(curl_slist* list) const { curl_slist_free_all(list); }
};

struct Reply {
    long status = 0;
    std::string body;
};

std::size_t append(char* data, std::size_t size, std::size_t count, void* out) {
    static_cast<std::string*>(out)->append(data, size * count);
    return size * count;
}

// One HTTP request, to a unix socket (when `socket` is set) or a 127.0.0.1 URL.
Reply http(const std::string& method, const std::string& url, const std::string& body = "",
           std::vector<std::string> headers = {}, const std::filesystem::path& socket = {}) {
    std::unique_ptr<CURL, CurlDeleter> curl(curl_easy_init());
    std::unique_ptr<curl_slist, ListDeleter> list;
    for (const auto& header : headers) list.reset(curl_slist_append(list.release(), header.c_str()));
    Reply reply;
    curl_easy_setopt(curl.get(), CURLOPT_URL, url.c_str());
    if (!socket.empty()) curl_easy_setopt(curl.get(), CURLOPT_UNIX_SOCKET_PATH, socket.c_str());
    curl_easy_setopt(curl.get(), CURLOPT_CUSTOMREQUEST, method.c_str());
    if (method == "POST") {
        curl_easy_setopt(curl.get(), CURLOPT_POSTFIELDS, body.c_str());
        curl_easy_setopt(curl.get(), CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
    }
    curl_easy_setopt(curl.get(), CURLOPT_HTTPHEADER, list.get());
    curl_easy_setopt(curl.get(), CURLOPT_WRITEFUNCTION, append);
    curl_easy_setopt(curl.get(), CURLOPT_WRITEDATA, &reply.body);
    curl_easy_setopt(curl.get(), CURLOPT_TIMEOUT, 120L);
    REQUIRE(curl_easy_perform(curl.get()) == CURLE_OK);
    curl_easy_getinfo(curl.get(), CURLINFO_RESPONSE_CODE, &reply.status);
    return reply;
}

// An API on a unix socket with a queue and a sandbox manager in a temp dir.
struct Fixture {
    std::filesystem::path dir = tests::make_temp_dir("api");
    std::unique_ptr<agent::JobQueue> queue;
    std::unique_ptr<agent::SandboxManager> sandboxes;
    std::unique_ptr<agent::Api> api;
    std::unique_ptr<agent::HttpServer> server;
    std::filesystem::path socket = dir / "run" / "api.sock";

    explicit Fixture(agent::ApiConfig config = {}) {
        queue = std::move(*agent::open_sqlite_queue(dir / "q.db"));
        sandboxes = std::make_unique<agent::SandboxManager>(
            agent::ManagerConfig{dir / "state", SANDGATE_BINARY, queue.get(), 30s});
        config.log_dir = dir / "logs";
        config.sandbox_policy.mode = sandbox::SandboxMode::off;  // bwrap: see test_broker
        api = std::make_unique<agent::Api>(std::move(config), *queue, *sandboxes);
        std::filesystem::create_directories(socket.parent_path());
        ::chmod(socket.parent_path().c_str(), 0700);
        auto listener = sandbox::listen_unix(socket);
        REQUIRE(listener);
        auto started = agent::HttpServer::start(
            std::move(*listener), [this](const agent::HttpRequest& r) { return api->handle(r); },
            8 << 20);
        REQUIRE(started);
        server = std::move(*started);
    }
    Reply call(const std::string& method, const std::string& path, const std::string& body = "",
               std::vector<std::string> headers = {}) {
        return http(method, "http://localhost" + path, body, std::move(headers), socket);
    }
};

simdjson::dom::element parse(simdjson::dom::parser& parser, const std::string& body) {
    simdjson::dom::element doc;
    REQUIRE(parser.parse(body).get(doc) == simdjson::SUCCESS);
    return doc;
}

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
    const std::string pr = R"({"action":"opened","number":7,"repository":{"full_name":"octo/repo"},)"
                           R"("pull_request":{"number":7,"labels":[{"name":"gate"}],)"
                           R"("head":{"sha":")" + sha + R"(","ref":"feature"},)"
                           R"("base":{"sha":")" + std::string(40, 'b') + R"(","ref":"main"}}})";
    auto unsigned_reply = f.call("POST", "/webhook", pr, {"X-GitHub-Event: pull_request"});
    CHECK(unsigned_reply.status == 401);
    auto forged = f.call("POST", "/webhook", pr,
                         {"X-GitHub-Event: pull_request",
                          "X-Hub-Signature-256: sha256=" + std::string(64, '0')});
    CHECK(forged.status == 401);
    CHECK(f.call("POST", "/webhook", pr, {"X-GitHub-Event: pull_request",
                                          "X-Hub-Signature-256: md5=abc"})
              .status == 401);
    CHECK(f.queue->list({})->empty());  // nothing was queued by unsigned deliveries

    auto accepted = f.call("POST", "/webhook", pr, {"X-GitHub-Event: pull_request", signed_header(pr)});
    CHECK(accepted.status == 201);
    auto jobs = *f.queue->list({});
    REQUIRE(jobs.size() == 1);
    CHECK(jobs[0].spec.ref == "refs/pull/7/head");
    CHECK(jobs[0].spec.event == "pull_request");
    CHECK(jobs[0].spec.payload_json.find("\"base_sha\":\"" + std::string(40, 'b') + "\"") != std::string::npos);

    std::string unlabeled = pr;
    unlabeled.replace(unlabeled.find("\"gate\""), 6, "\"wip\"");
    auto ignored = f.call("POST", "/webhook", unlabeled,
                          {"X-GitHub-Event: pull_request", signed_header(unlabeled)});
    CHECK(ignored.status == 200);
    CHECK(ignored.body.find("ignored") != std::string::npos);

    const std::string mg_sha = "89abcdef0123456789abcdef0123456789abcdef";
    const std::string group = R"({"action":"checks_requested","repository":{"full_name":"octo/repo"},)"
                              R"("merge_group":{"head_sha":")" + mg_sha +
                              R"(","head_ref":"refs/heads/gh-readonly-queue/main/pr-7-abc"}})";
    CHECK(f.call("POST", "/webhook", group, {"X-GitHub-Event: merge_group", signed_header(group)})
              .status == 201);
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
                              R"("check_suite":{"head_sha":")" + sha + R"(","head_branch":"feature"}})";
    CHECK(f.call("POST", "/webhook", rerun, {"X-GitHub-Event: check_suite", signed_header(rerun)})
              .status == 201);
    filter.sha = sha;
    auto attempts = *f.queue->list(filter);
    REQUIRE(attempts.size() == 2);
    CHECK(attempts[1].spec.key.attempt == 2);

    const std::string broken = R"({"action":"opened","repository":{"full_name":"octo/repo"}})";
    auto malformed = f.call("POST", "/webhook", broken,
                            {"X-GitHub-Event: pull_request", signed_header(broken)});
    CHECK(malformed.status == 400);
    CHECK(malformed.body.find("pull_request") != std::string::npos);
}

TEST_CASE("sandbox verbs over the API, with refusals as 409") {
    Fixture f;
    const std::string identity = std::string(R"({"repository":"octo/repo","sha":")") + k_sha +
                                 R"(","run_id":5,"attempt":1,"job_id":"build"})";
    auto created = f.call("POST", "/v1/sandboxes", R"({"identity":)" + identity + R"(,"ttl_s":60})");
    REQUIRE(created.status == 201);
    simdjson::dom::parser parser;
    const std::string id(parse(parser, created.body)["id"].get_string().value());
    CHECK(f.call("POST", "/v1/sandboxes", R"({"identity":)" + identity + "}").status == 409);
    CHECK(f.call("POST", "/v1/sandboxes", R"({"identity":{"sha":"x"}})").status == 400);

    auto ran = f.call("POST", "/v1/sandboxes/" + id + "/exec",
                      R"({"identity":)" + identity +
                          R"(,"shell":"wc -c","stdin_text":"api-stdin-secret"})");
    REQUIRE(ran.status == 200);
    CHECK(ran.body.find("api-stdin-secret") == std::string::npos);
    std::string_view head;
    REQUIRE(parse(parser, ran.body).at_pointer("/result/out/head_b64").get(head) == simdjson::SUCCESS);
    CHECK(sandbox::base64_decode(head) == "16\n");

    std::string other = identity;
    other.replace(other.find("\"build\""), 7, "\"test\"");
    auto refused = f.call("POST", "/v1/sandboxes/" + id + "/exec",
                          R"({"identity":)" + other + R"(,"argv":["true"]})");
    CHECK(refused.status == 409);
    CHECK(refused.body.find("\"refusal\":\"identity\"") != std::string::npos);
    CHECK(f.call("GET", "/v1/sandboxes/" + id).status == 200);
    CHECK(f.call("GET", "/metrics").body.find("sandgate_step_duration_seconds_count 1") !=
          std::string::npos);
    CHECK(f.call("DELETE", "/v1/sandboxes/" + id).status == 200);
    CHECK(f.call("DELETE", "/v1/sandboxes/" + id).status == 200);  // idempotent
    CHECK(f.call("GET", "/v1/sandboxes/" + id).status == 404);
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
