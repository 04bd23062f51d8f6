// The agent's sandbox verbs over its HTTP API (agent/api_sandboxes): create, exec, get and
// destroy with refusals as 409, and an exec cancelled by id or by the client hanging up, in a
// bwrap sandbox and unwrapped.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <simdjson.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <thread>

#include "agent/api/api.hpp"
#include "sandbox/broker/broker_protocol.hpp"
#include "tests/support/api_fixture.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/wrap_detect.hpp"

using namespace std::chrono_literals;
using tests::api::Fixture;
using tests::api::http;
using tests::api::k_sha;
using tests::api::parse;
using tests::api::Reply;

TEST_CASE("sandbox verbs over the API, with refusals as 409") {
    Fixture f;
    const std::string identity = std::string(R"({"repository":"octo/repo","sha":")") + k_sha +
                                 R"(","run_id":5,"attempt":1,"job_id":"build"})";
    auto created =
        f.call("POST", "/v1/sandboxes", R"({"identity":)" + identity + R"(,"ttl_s":60})");
    REQUIRE(created.status == 201);
    simdjson::dom::parser parser;
    const std::string id(parse(parser, created.body)["id"].get_string().value());
    CHECK(f.call("POST", "/v1/sandboxes", R"({"identity":)" + identity + "}").status == 409);
    CHECK(f.call("POST", "/v1/sandboxes", R"({"identity":{"sha":"x"}})").status == 400);

    auto ran = f.call(
        "POST", "/v1/sandboxes/" + id + "/exec",
        R"({"identity":)" + identity + R"(,"shell":"wc -c","stdin_text":"api-stdin-secret"})");
    REQUIRE(ran.status == 200);
    CHECK(ran.body.find("api-stdin-secret") == std::string::npos);
    std::string_view head;
    REQUIRE(parse(parser, ran.body).at_pointer("/result/out/head_b64").get(head) ==
            simdjson::SUCCESS);
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
namespace {

constexpr const char* k_token = "exec-cancel-token";

// The API on 127.0.0.1 (bearer token) with sandboxes in `mode` and a job record that receives
// their evidence.
struct TcpFixture : tests::api::ApiStack {
    std::filesystem::path dir = tests::make_temp_dir("api-exec");
    std::uint16_t port = 0;
    std::int64_t job = 0;

    explicit TcpFixture(sandbox::SandboxMode mode) {
        open(dir);
        agent::JobSpec spec;
        spec.key = {"octo/repo", k_sha, "", 1};
        job = queue->submit(spec)->job.id;
        agent::ApiConfig config;
        config.token = k_token;
        config.sandbox_policy.mode = mode;
        serve(dir, std::move(config), agent::listen_loopback(0, &port), 1 << 20);
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
        auto created = call(
            "POST", "/v1/sandboxes",
            R"({"identity":)" + identity() + R"(,"ttl_s":600,"job":)" + std::to_string(job) + "}");
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
            if (event.kind == "exec" || event.kind == "exec_cancel")
                bodies.push_back(event.body_json);
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

bool contains(const std::vector<std::string>& bodies,
              std::initializer_list<std::string_view> parts) {
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
    std::thread client([&] {
        answer = f.call("POST", "/v1/sandboxes/" + id + "/exec", f.stubborn_exec("step-1"));
    });
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
    auto after = f.call(
        "POST", "/v1/sandboxes/" + id + "/exec",
        R"({"identity":)" + f.identity() +
            R"x(,"shell":"p=$(cat started); test ! -e /proc/$p || grep -q '^State:.Z' /proc/$p/status"})x");
    REQUIRE(after.status == 200);
    CHECK(parse(parser, after.body).at_pointer("/result/exit_code").get_int64().value() == 0);
    CHECK(f.call("GET", "/v1/sandboxes/" + id).body.find(R"("running_exec":null)") !=
          std::string::npos);

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
    CHECK(f.call("POST", "/v1/sandboxes/" + id + "/exec", f.stubborn_exec("no/slash")).status ==
          400);

    const auto events = f.exec_events();
    CHECK(contains(events,
                   {R"("exec_id":"step-1")", R"("error":"cancelled")", R"("cancelled_by":"api")"}));
    CHECK(contains(events, {R"("exec_id":"step-1")", R"("cancel":"cancel_requested")"}));
    CHECK(contains(events, {R"("exec_id":"step-1")", R"("cancel":"finished")"}));
    CHECK(contains(events, {R"("exec_id":"never-ran")", R"("cancel":"unknown")"}));
    CHECK(f.call("DELETE", "/v1/sandboxes/" + id).status == 200);
}

// A client sends an exec by hand on a raw connection and closes it mid-step.
void cancel_by_hangup(TcpFixture& f) {
    auto [id, root] = f.create();
    const std::string body = f.stubborn_exec("left");
    const std::string request =
        "POST /v1/sandboxes/" + id +
        "/exec HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        "Authorization: Bearer " +
        std::string(k_token) +
        "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
        "\r\n\r\n" + body;
    {
        common::Fd client(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
        REQUIRE(client);
        sockaddr_in address{};
        address.sin_family = AF_INET;
        address.sin_port = htons(f.port);
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        REQUIRE(::connect(client.get(), reinterpret_cast<const sockaddr*>(&address),
                          sizeof(address)) == 0);
        REQUIRE(::write(client.get(), request.data(), request.size()) ==
                static_cast<ssize_t>(request.size()));
        REQUIRE(eventually([&] { return std::filesystem::exists(root / "started"); }));
        CHECK(f.call("GET", "/v1/sandboxes/" + id).body.find(R"("running_exec":"left")") !=
              std::string::npos);
    }  // the client hangs up here
    REQUIRE(eventually([&] {
        return contains(f.exec_events(),
                        {R"("exec_id":"left")", R"("cancelled_by":"client_hangup")"});
    }));
    CHECK(contains(f.exec_events(), {R"("exec_id":"left")", R"("error":"cancelled")"}));
    REQUIRE(eventually([&] {
        return f.call("GET", "/v1/sandboxes/" + id).body.find(R"("state":"ready")") !=
               std::string::npos;
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
