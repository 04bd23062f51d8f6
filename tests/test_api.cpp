#include <catch2/catch.hpp>

#include <curl/curl.h>
#include <simdjson.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

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
#include "tests/support/wrap_detect.hpp"

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

TEST_CASE("a submitted job may name its base: base_sha (40 hex) and base_ref, else a one-line 400") {
    Fixture f;
    const std::string base(40, 'b');
    const std::string job = std::string(R"({"repository":"octo/repo","sha":")") + k_sha + R"(","event":"pull_request",)";
    auto created = f.call("POST", "/v1/jobs", job + R"("base_sha":")" + base + R"(","base_ref":"main"})");
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
    CHECK(f.call("POST", "/v1/jobs", R"({"repository":"octo/repo","sha":")" + other + R"(","base_sha":")" +
                                         std::string(40, '0') + R"("})")
              .status == 201);

    for (const std::string& bad : std::vector<std::string>{R"("base_sha":"abc")", R"("base_sha":")" + std::string(40, 'B') + "\"",
                                                           R"("base_sha":")" + std::string(64, 'b') + "\"", R"("base_sha":7)"}) {
        auto refused = f.call("POST", "/v1/jobs", job + bad + "}");
        INFO(bad << " -> " << refused.body);
        CHECK(refused.status == 400);
        CHECK_THAT(refused.body, Catch::Contains("field base_sha: 40 lower-case hex digits"));
        simdjson::dom::parser error_parser;
        const std::string_view message = parse(error_parser, refused.body)["error"].get_string().value();
        CHECK(message.find('\n') == std::string_view::npos);  // one line
    }
    for (const std::string bad : {R"("base_ref":"")", R"("base_ref":"-x")", R"("base_ref":"a b")", R"("base_ref":[])"}) {
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
    CHECK(jobs[0].spec.payload_json == R"({"pull_request":7,"base_sha":")" + std::string(40, 'b') + R"(","base_ref":"main"})");

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
    // Its base: the payload's base_sha and base_ref (the head ref above names no SHA).
    const std::string group_base(40, 'd');
    const std::string full_group = R"({"action":"checks_requested","repository":{"full_name":"octo/repo"},)"
                                   R"("merge_group":{"head_sha":")" + std::string(40, 'e') +
                                   R"(","head_ref":"refs/heads/gh-readonly-queue/main/pr-8-abc",)"
                                   R"("base_sha":")" + group_base + R"(","base_ref":"refs/heads/main"}})";
    CHECK(f.call("POST", "/webhook", full_group, {"X-GitHub-Event: merge_group", signed_header(full_group)})
              .status == 201);
    agent::JobFilter by_sha;
    by_sha.sha = std::string(40, 'e');
    auto based = *f.queue->list(by_sha);
    REQUIRE(based.size() == 1);
    CHECK(based[0].spec.payload_json == R"({"base_sha":")" + group_base + R"(","base_ref":"refs/heads/main"})");
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

    // A check suite's push carries `before`: recorded for the gate's paths filters.
    const std::string pushed = "2123456789abcdef0123456789abcdef01234567";
    const std::string before(40, 'f');
    const std::string suite = R"({"action":"requested","repository":{"full_name":"octo/repo"},)"
                              R"("check_suite":{"head_sha":")" + pushed + R"(","head_branch":"main",)"
                              R"("before":")" + before + R"(","after":")" + pushed + R"("}})";
    CHECK(f.call("POST", "/webhook", suite, {"X-GitHub-Event: check_suite", signed_header(suite)}).status == 201);
    const std::string run_sha = "3123456789abcdef0123456789abcdef01234567";
    const std::string run = R"({"action":"rerequested","repository":{"full_name":"octo/repo"},)"
                            R"("check_run":{"head_sha":")" + run_sha + R"(","check_suite":{"head_branch":"main",)"
                            R"("before":")" + before + R"("}}})";
    CHECK(f.call("POST", "/webhook", run, {"X-GitHub-Event: check_run", signed_header(run)}).status == 201);
    for (const std::string& head : {pushed, run_sha}) {
        filter.sha = head;
        auto suite_jobs = *f.queue->list(filter);
        REQUIRE(suite_jobs.size() == 1);
        CHECK(suite_jobs[0].spec.event == "push");
        CHECK(suite_jobs[0].spec.payload_json == R"({"base_sha":")" + before + R"("})");
    }

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

namespace {

constexpr const char* k_token = "exec-cancel-token";

// The API on 127.0.0.1 (bearer token) with sandboxes in `mode` and a job record that receives
// their evidence.
struct TcpFixture {
    std::filesystem::path dir = tests::make_temp_dir("api-exec");
    std::unique_ptr<agent::JobQueue> queue;
    std::unique_ptr<agent::SandboxManager> sandboxes;
    std::unique_ptr<agent::Api> api;
    std::unique_ptr<agent::HttpServer> server;
    std::uint16_t port = 0;
    std::int64_t job = 0;

    explicit TcpFixture(sandbox::SandboxMode mode) {
        queue = std::move(*agent::open_sqlite_queue(dir / "q.db"));
        agent::JobSpec spec;
        spec.key = {"octo/repo", k_sha, "", 1};
        job = queue->submit(spec)->job.id;
        sandboxes = std::make_unique<agent::SandboxManager>(
            agent::ManagerConfig{dir / "state", SANDGATE_BINARY, queue.get(), 30s});
        agent::ApiConfig config;
        config.log_dir = dir / "logs";
        config.token = k_token;
        config.sandbox_policy.mode = mode;
        api = std::make_unique<agent::Api>(std::move(config), *queue, *sandboxes);
        auto listener = agent::listen_loopback(0, &port);
        REQUIRE(listener);
        auto started = agent::HttpServer::start(
            std::move(*listener), [this](const agent::HttpRequest& r) { return api->handle(r); },
            1 << 20);
        REQUIRE(started);
        server = std::move(*started);
    }
    Reply call(const std::string& method, const std::string& path, const std::string& body = "") {
        return http(method, "http://127.0.0.1:" + std::to_string(port) + path, body,
                    {std::string("Authorization: Bearer ") + k_token});
    }
    std::string identity() const {
        return std::string(R"({"repository":"octo/repo","sha":")") + k_sha +
               R"(","run_id":9,"attempt":1,"job_id":"build"})";
    }
    // A sandbox for the job; its id and the root its steps run in (bound from the host).
    std::pair<std::string, std::filesystem::path> create() {
        auto created = call("POST", "/v1/sandboxes",
                            R"({"identity":)" + identity() + R"(,"ttl_s":600,"job":)" +
                                std::to_string(job) + "}");
        REQUIRE(created.status == 201);
        simdjson::dom::parser parser;
        auto doc = parse(parser, created.body);
        return {std::string(doc["id"].get_string().value()),
                std::filesystem::path(std::string(doc["root"].get_string().value()))};
    }
    // The body of an exec that ignores SIGTERM (so does its sleep, which inherits the ignored
    // disposition), writes the sleep's pid to `started`, then waits far longer than any test.
    std::string stubborn_exec(const std::string& exec_id) const {
        return R"({"identity":)" + identity() + R"(,"exec_id":")" + exec_id +
               R"(","kill_grace_ms":500,"shell":"trap '' TERM; sleep 600 & echo $! > pid; mv pid started; wait"})";
    }
    std::vector<std::string> exec_events() const {
        std::vector<std::string> bodies;
        auto events = queue->events(job);
        REQUIRE(events);
        for (const auto& event : *events)
            if (event.kind == "exec" || event.kind == "exec_cancel") bodies.push_back(event.body_json);
        return bodies;
    }
};

// Waits (no timing assertion: a bug hangs until the bound and fails) until `done` holds.
template <typename Predicate>
bool eventually(Predicate done) {
    for (int i = 0; i < 12000; ++i) {
        if (done()) return true;
        std::this_thread::sleep_for(10ms);
    }
    return false;
}

bool contains(const std::vector<std::string>& bodies, std::initializer_list<std::string_view> parts) {
    for (const auto& body : bodies) {
        bool all = true;
        for (auto part : parts) all = all && body.find(part) != std::string::npos;
        if (all) return true;
    }
    return false;
}

void cancel_by_id(TcpFixture& f) {
    auto [id, root] = f.create();
    Reply answer;
    std::thread client([&] { answer = f.call("POST", "/v1/sandboxes/" + id + "/exec", f.stubborn_exec("step-1")); });
    REQUIRE(eventually([&] { return std::filesystem::exists(root / "started"); }));
    auto shown = f.call("GET", "/v1/sandboxes/" + id);
    CHECK(shown.body.find(R"("running_exec":"step-1")") != std::string::npos);
    auto cancel = f.call("POST", "/v1/sandboxes/" + id + "/execs/step-1/cancel");
    CHECK(cancel.status == 200);
    CHECK(cancel.body.find(R"("outcome":"cancel_requested")") != std::string::npos);
    client.join();  // returns only once the step, deaf to TERM, was killed after the grace
    REQUIRE(answer.status == 200);
    simdjson::dom::parser parser;
    auto doc = parse(parser, answer.body);
    CHECK(doc["exec_id"].get_string().value() == "step-1");
    CHECK(doc["cancelled_by"].get_string().value() == "api");
    CHECK(doc.at_pointer("/result/error/kind").get_string().value() == "cancelled");
    CHECK(doc.at_pointer("/result/exit_code").is_null());

    // Nothing of it is left: the sandbox takes the next command, and the sleep is dead (gone,
    // or a zombie of an init that reaps late: unwrapped, its parent is the machine's pid 1).
    auto after = f.call("POST", "/v1/sandboxes/" + id + "/exec",
                        R"({"identity":)" + f.identity() + R"x(,"shell":"p=$(cat started); test ! -e /proc/$p || grep -q '^State:.Z' /proc/$p/status"})x");
    REQUIRE(after.status == 200);
    CHECK(parse(parser, after.body).at_pointer("/result/exit_code").get_int64().value() == 0);
    CHECK(f.call("GET", "/v1/sandboxes/" + id).body.find(R"("running_exec":null)") != std::string::npos);

    // A finished exec: 409; an unknown one: 404 (also through DELETE); an unknown sandbox: 404.
    auto finished = f.call("POST", "/v1/sandboxes/" + id + "/execs/step-1/cancel");
    CHECK(finished.status == 409);
    CHECK(finished.body.find(R"("outcome":"finished")") != std::string::npos);
    CHECK(f.call("DELETE", "/v1/sandboxes/" + id + "/execs/step-1").status == 409);
    auto unknown = f.call("POST", "/v1/sandboxes/" + id + "/execs/never-ran/cancel");
    CHECK(unknown.status == 404);
    CHECK(unknown.body.find(R"("outcome":"unknown")") != std::string::npos);
    CHECK(f.call("DELETE", "/v1/sandboxes/" + id + "/execs/never-ran").status == 404);
    CHECK(f.call("POST", "/v1/sandboxes/sb-none/execs/step-1/cancel").status == 404);
    CHECK(f.call("POST", "/v1/sandboxes/" + id + "/execs/bad%20id/cancel").status == 400);
    // An exec id is never reused within a sandbox; a malformed one is refused.
    CHECK(f.call("POST", "/v1/sandboxes/" + id + "/exec", f.stubborn_exec("step-1")).status == 409);
    CHECK(f.call("POST", "/v1/sandboxes/" + id + "/exec", f.stubborn_exec("no/slash")).status == 400);

    const auto events = f.exec_events();
    CHECK(contains(events, {R"("exec_id":"step-1")", R"("error":"cancelled")", R"("cancelled_by":"api")"}));
    CHECK(contains(events, {R"("exec_id":"step-1")", R"("cancel":"cancel_requested")"}));
    CHECK(contains(events, {R"("exec_id":"step-1")", R"("cancel":"finished")"}));
    CHECK(contains(events, {R"("exec_id":"never-ran")", R"("cancel":"unknown")"}));
    CHECK(f.call("DELETE", "/v1/sandboxes/" + id).status == 200);
}

// A client sends an exec by hand on a raw connection and closes it mid-step.
void cancel_by_hangup(TcpFixture& f) {
    auto [id, root] = f.create();
    const std::string body = f.stubborn_exec("left");
    const std::string request = "POST /v1/sandboxes/" + id + "/exec HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                "Authorization: Bearer " + std::string(k_token) +
                                "\r\nContent-Type: application/json\r\nContent-Length: " +
                                std::to_string(body.size()) + "\r\n\r\n" + body;
    {
        sandbox::Fd client(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
        REQUIRE(client);
        sockaddr_in address{};
        address.sin_family = AF_INET;
        address.sin_port = htons(f.port);
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        REQUIRE(::connect(client.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)) == 0);
        REQUIRE(::write(client.get(), request.data(), request.size()) ==
                static_cast<ssize_t>(request.size()));
        REQUIRE(eventually([&] { return std::filesystem::exists(root / "started"); }));
        CHECK(f.call("GET", "/v1/sandboxes/" + id).body.find(R"("running_exec":"left")") != std::string::npos);
    }  // the client hangs up here
    REQUIRE(eventually([&] {
        return contains(f.exec_events(), {R"("exec_id":"left")", R"("cancelled_by":"client_hangup")"});
    }));
    CHECK(contains(f.exec_events(), {R"("exec_id":"left")", R"("error":"cancelled")"}));
    REQUIRE(eventually([&] {
        return f.call("GET", "/v1/sandboxes/" + id).body.find(R"("state":"ready")") != std::string::npos;
    }));
    CHECK(f.call("POST", "/v1/sandboxes/" + id + "/execs/left/cancel").status == 409);
    auto next = f.call("POST", "/v1/sandboxes/" + id + "/exec",
                       R"({"identity":)" + f.identity() + R"(,"argv":["true"]})");
    CHECK(next.status == 200);
    CHECK(next.body.find(R"("exec_id":"ex-)") != std::string::npos);  // an id chosen for it
    CHECK(f.call("DELETE", "/v1/sandboxes/" + id).status == 200);
}

}  // namespace

TEST_CASE("an exec in a bwrap sandbox is cancelled by id: TERM ignored, KILL after the grace") {
    SKIP_UNDER_WRAP("a nested bwrap cannot start inside the wrap");
    TcpFixture f(sandbox::SandboxMode::bwrap);
    cancel_by_id(f);
}

TEST_CASE("a client that hangs up mid-exec cancels its step in a bwrap sandbox") {
    SKIP_UNDER_WRAP("a nested bwrap cannot start inside the wrap");
    TcpFixture f(sandbox::SandboxMode::bwrap);
    cancel_by_hangup(f);
}

TEST_CASE("exec cancel by id and by hang-up, broker unwrapped (also inside the dogfood wrap)") {
    TcpFixture f(sandbox::SandboxMode::off);
    cancel_by_id(f);
    cancel_by_hangup(f);
}
