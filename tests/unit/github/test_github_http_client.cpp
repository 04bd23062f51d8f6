// github::HttpClient against the real stand-in server (tests/fake_github/server.py).

#include <simdjson.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <catch2/catch.hpp>
#include <mutex>
#include <sstream>

#include "github/http_client.hpp"
#include "tests/fake_github/fake_github.hpp"

namespace {

using namespace std::chrono_literals;
using github::Method;

// Records the delays the retry loop asks for instead of sleeping them.
struct FakeSleeps {
    std::mutex mutex;
    std::vector<std::chrono::milliseconds> delays;
    github::Clock clock() {
        return github::Clock{[] { return std::chrono::system_clock::now(); },
                             [this](std::chrono::milliseconds delay) {
                                 std::lock_guard lock(mutex);
                                 delays.push_back(delay);
                             }};
    }
};

github::HttpClient make_client(const tests::FakeGitHub& server, FakeSleeps& sleeps,
                               std::string token = tests::k_fake_token,
                               std::string base_suffix = "") {
    github::ClientOptions options;
    options.api_url = server.url() + base_suffix;
    options.clock = sleeps.clock();
    options.request_timeout = 1500ms;
    auto client = github::HttpClient::create(
        options, std::make_shared<github::StaticToken>(std::move(token)));
    REQUIRE(client.has_value());
    return *client;
}

// The API requests the server saw (control calls excluded).
std::vector<std::string> request_lines(const tests::FakeGitHub& server) {
    simdjson::dom::parser parser;
    std::string body = server.requests();
    std::vector<std::string> lines;
    for (auto request : parser.parse(body)["requests"].get_array()) {
        lines.emplace_back(std::string_view(request["request_line"].get_string()));
    }
    return lines;
}

const std::string k_status_body = R"({"state":"pending","context":"ci / build"})";
const std::string k_status_path = "/repos/octo/demo/statuses/0123456789abcdef";

}  // namespace

TEST_CASE("every request carries GitHub's headers and the bearer token") {
    tests::FakeGitHub server;
    FakeSleeps sleeps;
    auto client = make_client(server, sleeps);
    auto response = client.request(Method::post, k_status_path, k_status_body);
    REQUIRE(response.has_value());
    CHECK(response->status == 201);
    CHECK(response->header("X-RateLimit-Limit") == "5000");

    simdjson::dom::parser parser;
    std::string body = server.requests();
    auto request = parser.parse(body)["requests"].at(0);
    auto headers = request["headers"];
    CHECK(std::string_view(headers["Accept"].get_string()) == "application/vnd.github+json");
    CHECK(std::string_view(headers["X-GitHub-Api-Version"].get_string()) == "2022-11-28");
    CHECK(std::string_view(headers["User-Agent"].get_string()).starts_with("sandgate/"));
    CHECK(std::string_view(headers["Authorization"].get_string()) ==
          std::string("Bearer ") + tests::k_fake_token);
    CHECK(sleeps.delays.empty());
}

TEST_CASE("an Enterprise Server base URL (/api/v3) is honoured") {
    tests::FakeGitHub server;
    FakeSleeps sleeps;
    auto client = make_client(server, sleeps, tests::k_fake_token, "/api/v3/");
    CHECK(client.api_url() == server.url() + "/api/v3");
    auto response = client.request(Method::get, "/repos/octo/demo/commits/abc/check-runs");
    REQUIRE(response.has_value());
    CHECK(request_lines(server).at(0) ==
          "GET /api/v3/repos/octo/demo/commits/abc/check-runs HTTP/1.1");
}

TEST_CASE("transient faults are retried once each with backoff, then succeed") {
    struct Case {
        std::string fault;
        std::chrono::milliseconds min_delay;
    };
    auto [fault, min_delay] =
        GENERATE(Case{R"({"kind":"500"})", github::k_backoff_initial},
                 Case{R"({"kind":"502"})", github::k_backoff_initial},
                 Case{R"({"kind":"429","retry_after":7})", 7000ms},
                 Case{R"({"kind":"secondary","retry_after":3})", 3000ms},
                 Case{R"({"kind":"secondary"})", github::k_rate_limit_fallback},
                 Case{R"({"kind":"primary","reset_in":30})", 20000ms},
                 Case{R"({"kind":"slow","delay":4})", github::k_backoff_initial},
                 Case{R"({"kind":"reset"})", github::k_backoff_initial});
    CAPTURE(fault);
    tests::FakeGitHub server;
    FakeSleeps sleeps;
    auto client = make_client(server, sleeps);
    server.inject("[" + fault + "]");
    auto response = client.request(Method::post, k_status_path, k_status_body);
    REQUIRE(response.has_value());
    CHECK(response->status == 201);
    CHECK(request_lines(server).size() == 2);
    REQUIRE(sleeps.delays.size() == 1);
    CHECK(sleeps.delays[0] >= min_delay);
    CHECK(sleeps.delays[0] <= github::k_rate_limit_max_wait);
}

TEST_CASE("backoff doubles per attempt up to the cap, and the client gives up") {
    tests::FakeGitHub server;
    FakeSleeps sleeps;
    github::ClientOptions options;
    options.api_url = server.url();
    options.clock = sleeps.clock();
    options.max_attempts = 4;
    auto client = github::HttpClient::create(
        options, std::make_shared<github::StaticToken>(tests::k_fake_token));
    REQUIRE(client.has_value());
    server.inject(R"([{"kind":"500","count":10}])");
    auto response = client->request(Method::post, k_status_path, k_status_body);
    REQUIRE_FALSE(response.has_value());
    CHECK(response.error().kind == common::ErrorKind::transient);
    CHECK_THAT(response.error().message, Catch::Contains("500") &&
                                             Catch::Contains("Server Error") &&
                                             Catch::Contains("gave up after 4 attempts"));
    CHECK(request_lines(server).size() == 4);
    CHECK(sleeps.delays == std::vector<std::chrono::milliseconds>{1000ms, 2000ms, 4000ms});
    CHECK(github::backoff_delay(20, 1000ms, github::k_backoff_cap) == github::k_backoff_cap);
}

TEST_CASE("401, 404 and 422 are not retried and carry GitHub's message") {
    tests::FakeGitHub server;
    FakeSleeps sleeps;
    SECTION("401 bad credentials") {
        auto client = make_client(server, sleeps, "ghp_wrongTOKENvalue");
        auto response = client.request(Method::post, k_status_path, k_status_body);
        REQUIRE_FALSE(response.has_value());
        CHECK(response.error().kind == common::ErrorKind::permanent);
        CHECK_THAT(response.error().message, Catch::Contains("401: Bad credentials"));
    }
    SECTION("404 not found") {
        auto client = make_client(server, sleeps);
        auto response = client.request(Method::patch, "/repos/octo/demo/check-runs/77",
                                       R"({"status":"in_progress"})");
        REQUIRE_FALSE(response.has_value());
        CHECK(response.error().kind == common::ErrorKind::permanent);
        CHECK_THAT(response.error().message,
                   Catch::Contains("PATCH /repos/octo/demo/check-runs/77") &&
                       Catch::Contains("404: Not Found"));
    }
    SECTION("422 from the schema") {
        auto client = make_client(server, sleeps);
        auto response = client.request(Method::post, k_status_path, R"({"state":"maybe"})");
        REQUIRE_FALSE(response.has_value());
        CHECK(response.error().kind == common::ErrorKind::invalid_input);
        CHECK_THAT(response.error().message,
                   Catch::Contains("422: Invalid request.") && Catch::Contains("maybe"));
    }
    CHECK(request_lines(server).size() == 1);
    CHECK(sleeps.delays.empty());
}

namespace {

// Renews every refused token with another the server does not know either (a revoked App).
class RenewingTokens final : public common::TokenProvider {
public:
    common::Expected<std::string> token() override {
        return "ghs_unknownToken" + std::to_string(m_count);
    }
    common::Renewal refused(std::string_view) override {
        ++m_count;
        return common::Renewal::minted;
    }
    int m_count = 0;
};

}  // namespace

TEST_CASE("a refused token is renewed once, at once; a 401 with the renewed one is final") {
    tests::FakeGitHub server;
    FakeSleeps sleeps;
    github::ClientOptions options;
    options.api_url = server.url();
    options.clock = sleeps.clock();
    auto tokens = std::make_shared<RenewingTokens>();
    auto client = github::HttpClient::create(options, tokens);
    REQUIRE(client.has_value());
    auto response = client->request(Method::post, k_status_path, k_status_body);
    REQUIRE_FALSE(response.has_value());
    CHECK(response.error().kind == common::ErrorKind::permanent);
    CHECK_THAT(response.error().message,
               Catch::Contains("401: Bad credentials") && !Catch::Contains("ghs_unknown"));
    CHECK(tokens->m_count == 1);
    CHECK(request_lines(server).size() == 2);
    CHECK(sleeps.delays.empty());  // no backoff before the renewed attempt
}

TEST_CASE("a rate limit longer than the wait budget fails at once as transient") {
    tests::FakeGitHub server;
    FakeSleeps sleeps;
    auto client = make_client(server, sleeps);
    server.inject(R"([{"kind":"primary","reset_in":3600}])");
    auto response = client.request(Method::post, k_status_path, k_status_body);
    REQUIRE_FALSE(response.has_value());
    CHECK(response.error().kind == common::ErrorKind::transient);
    CHECK_THAT(response.error().message, Catch::Contains("rate limit"));
    CHECK(request_lines(server).size() == 1);
    CHECK(sleeps.delays.empty());
}

TEST_CASE("a server that is gone is a transient error after the retries") {
    int port = 0;
    {
        tests::FakeGitHub server;
        port = server.port();
    }
    FakeSleeps sleeps;
    github::ClientOptions options;
    options.api_url = "http://127.0.0.1:" + std::to_string(port);
    options.clock = sleeps.clock();
    options.max_attempts = 3;
    auto client = github::HttpClient::create(
        options, std::make_shared<github::StaticToken>(tests::k_fake_token));
    REQUIRE(client.has_value());
    auto response = client->request(Method::get, "/repos/octo/demo/commits/abc/check-runs");
    REQUIRE_FALSE(response.has_value());
    CHECK(response.error().kind == common::ErrorKind::transient);
    CHECK(sleeps.delays.size() == 2);
}

TEST_CASE("the token never reaches a URL, a request line, an error or a log") {
    std::ostringstream log;
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(log);
    auto logger = std::make_shared<spdlog::logger>("capture", sink);
    logger->set_level(spdlog::level::trace);
    auto previous = spdlog::default_logger();
    spdlog::set_default_logger(logger);

    tests::FakeGitHub server;
    FakeSleeps sleeps;
    auto client = make_client(server, sleeps);
    server.inject(R"([{"kind":"500"},{"kind":"reset"},{"kind":"429","retry_after":1}])");
    std::vector<std::string> errors;
    REQUIRE(client.request(Method::post, k_status_path, k_status_body).has_value());
    auto bad = client.request(Method::post, k_status_path, R"({"state":"nope"})");
    REQUIRE_FALSE(bad.has_value());
    errors.push_back(bad.error().message);
    // A path that embeds the token is refused before anything is sent.
    auto leak = client.request(Method::get, std::string("/repos/o/r?t=") + tests::k_fake_token);
    REQUIRE_FALSE(leak.has_value());
    CHECK(leak.error().message.find(tests::k_fake_token) == std::string::npos);
    spdlog::set_default_logger(previous);

    CHECK_THAT(log.str(), Catch::Contains("retrying"));
    CHECK(log.str().find(tests::k_fake_token) == std::string::npos);
    for (const auto& error : errors) CHECK(error.find(tests::k_fake_token) == std::string::npos);
    for (const auto& line : request_lines(server)) {
        CHECK(line.find(tests::k_fake_token) == std::string::npos);
    }
    CHECK(github::redact("a ghp_x b ghp_x", "ghp_x") == "a *** b ***");
}

TEST_CASE("API base URLs are checked") {
    CHECK(github::normalize_api_url("https://api.github.com/").value() == "https://api.github.com");
    CHECK(github::normalize_api_url("https://ghe.example/api/v3").value() ==
          "https://ghe.example/api/v3");
    for (std::string bad : {"ftp://x", "api.github.com", "https://user:tok@h/api/v3",
                            "https:///path", "https://h/?q=1"}) {
        CAPTURE(bad);
        auto result = github::normalize_api_url(bad);
        REQUIRE_FALSE(result.has_value());
        CHECK(result.error().kind == common::ErrorKind::invalid_input);
        CHECK(result.error().message.find("user:tok@") == std::string::npos);
    }
}

TEST_CASE("retry advice reads GitHub's rate-limit headers") {
    const auto now = std::chrono::system_clock::time_point(std::chrono::seconds(1'000'000));
    github::Response response;
    response.status = 403;
    response.body = R"({"message":"Resource not accessible by integration"})";
    CHECK_FALSE(github::advise_retry(response, now).retry);
    response.headers = {{"x-ratelimit-remaining", "0"}, {"x-ratelimit-reset", "1000100"}};
    auto advice = github::advise_retry(response, now);
    CHECK(advice.retry);
    CHECK(advice.wait == 101000ms);
    response.headers = {{"retry-after", "12"}};
    CHECK(github::advise_retry(response, now).wait == 12000ms);
    response.status = 422;
    CHECK_FALSE(github::advise_retry(response, now).retry);
    response.status = 503;
    CHECK(github::advise_retry(response, now).retry);
    CHECK(
        github::github_error_message(
            R"({"message":"Validation Failed","errors":[{"field":"head_sha","code":"missing"}]})") ==
        "Validation Failed (head_sha)");
    CHECK(github::url_encode("ci / build") == "ci%20%2F%20build");
}
