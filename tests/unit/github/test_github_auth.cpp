// github/auth: token files and variables, App JWTs (verified here with the public key), and
// installation tokens exchanged with and refreshed from the stand-in server.

#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <simdjson.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <stdlib.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <sstream>
#include <thread>

#include "github/auth.hpp"
#include "tests/fake_github/fake_github.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

using namespace std::chrono_literals;

struct BioDeleter {
    void operator()(BIO* bio) const { BIO_free(bio); }
};
struct MdCtxDeleter {
    void operator()(EVP_MD_CTX* ctx) const { EVP_MD_CTX_free(ctx); }
};

struct KeyPair {
    std::string private_pem;  // PKCS#1, as GitHub hands App keys out
    std::string public_pem;
};

KeyPair make_key_pair() {
    github::PrivateKey key(EVP_RSA_gen(2048));
    REQUIRE(key);
    std::unique_ptr<BIO, BioDeleter> priv(BIO_new(BIO_s_mem()));
    std::unique_ptr<BIO, BioDeleter> pub(BIO_new(BIO_s_mem()));
    REQUIRE(PEM_write_bio_PrivateKey_traditional(priv.get(), key.get(), nullptr, nullptr, 0,
                                                 nullptr, nullptr) == 1);
    REQUIRE(PEM_write_bio_PUBKEY(pub.get(), key.get()) == 1);
    auto drain = [](BIO* bio) {
        char* data = nullptr;
        const long size = BIO_get_mem_data(bio, &data);
        return std::string(data, static_cast<size_t>(size));
    };
    return {drain(priv.get()), drain(pub.get())};
}

std::string base64url_decode(std::string text) {
    for (char& c : text) {
        if (c == '-') c = '+';
        if (c == '_') c = '/';
    }
    const size_t pad = (4 - text.size() % 4) % 4;
    text.append(pad, '=');
    std::string out(text.size(), '\0');
    const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                  reinterpret_cast<const unsigned char*>(text.data()),
                                  static_cast<int>(text.size()));
    REQUIRE(n >= 0);
    out.resize(static_cast<size_t>(n) - pad);
    return out;
}

struct Claims {
    long long iat = 0;
    long long exp = 0;
    std::string iss;
};

// Splits and verifies a JWT with the PEM public key; returns its claims.
Claims verify_jwt(const std::string& jwt, const std::string& public_pem) {
    const auto first = jwt.find('.');
    const auto second = jwt.find('.', first + 1);
    REQUIRE(first != std::string::npos);
    REQUIRE(second != std::string::npos);
    const std::string header = base64url_decode(jwt.substr(0, first));
    const std::string payload = base64url_decode(jwt.substr(first + 1, second - first - 1));
    const std::string signature = base64url_decode(jwt.substr(second + 1));
    CHECK(header == R"({"alg":"RS256","typ":"JWT"})");

    std::unique_ptr<BIO, BioDeleter> bio(
        BIO_new_mem_buf(public_pem.data(), static_cast<int>(public_pem.size())));
    github::PrivateKey pub(PEM_read_bio_PUBKEY(bio.get(), nullptr, nullptr, nullptr));
    REQUIRE(pub);
    std::unique_ptr<EVP_MD_CTX, MdCtxDeleter> ctx(EVP_MD_CTX_new());
    REQUIRE(EVP_DigestVerifyInit(ctx.get(), nullptr, EVP_sha256(), nullptr, pub.get()) == 1);
    const std::string signed_part = jwt.substr(0, second);
    CHECK(EVP_DigestVerify(
              ctx.get(), reinterpret_cast<const unsigned char*>(signature.data()), signature.size(),
              reinterpret_cast<const unsigned char*>(signed_part.data()), signed_part.size()) == 1);

    simdjson::dom::parser parser;
    auto claims = parser.parse(payload);
    Claims out;
    out.iat = claims["iat"].get_int64();
    out.exp = claims["exp"].get_int64();
    out.iss = std::string(std::string_view(claims["iss"].get_string()));
    return out;
}

struct FakeClock {
    std::atomic<long long> offset_seconds{0};
    github::Clock clock() {
        return github::Clock{[this] {
                                 return std::chrono::system_clock::now() +
                                        std::chrono::seconds(offset_seconds.load());
                             },
                             [](std::chrono::milliseconds) {}};
    }
};

int issued_count(const tests::FakeGitHub& server) {
    simdjson::dom::parser parser;
    const std::string state = server.state();
    return static_cast<int>(parser.parse(state)["issued_tokens"].get_array().size());
}

// A GitHub App with its key on disk and a fake GitHub serving it: what the installation-token
// tests start from.
struct AppFixture {
    KeyPair pair = make_key_pair();
    std::filesystem::path dir = tests::make_temp_dir("app");
    tests::FakeGitHub server{std::vector<std::string>{}};
    github::ClientOptions options;
    AppFixture() {
        tests::write_file(dir / "app.pem", pair.private_pem);
        options.api_url = server.url();
    }
};

}  // namespace

TEST_CASE("a token comes from a file or a variable, trimmed, and errors name the source") {
    auto dir = tests::make_temp_dir("auth");
    tests::write_file(dir / "token", "  ghp_filetoken123 \n\nsecond line\n");
    CHECK(github::read_token_file(dir / "token").value() == "ghp_filetoken123");
    tests::write_file(dir / "empty", "\n  \n");
    auto empty = github::read_token_file(dir / "empty");
    REQUIRE_FALSE(empty.has_value());
    CHECK(empty.error().kind == common::ErrorKind::invalid_input);
    CHECK_THAT(empty.error().message, Catch::Contains((dir / "empty").string()));
    auto missing = github::read_token_file(dir / "nope");
    REQUIRE_FALSE(missing.has_value());
    CHECK_THAT(missing.error().message, Catch::Contains("--token-file"));

    ::setenv("SANDGATE_TEST_TOKEN_VAR", " ghp_envtoken ", 1);
    CHECK(github::read_token_env("SANDGATE_TEST_TOKEN_VAR").value() == "ghp_envtoken");
    ::unsetenv("SANDGATE_TEST_TOKEN_VAR");
    auto unset = github::read_token_env("SANDGATE_TEST_TOKEN_VAR");
    REQUIRE_FALSE(unset.has_value());
    CHECK_THAT(unset.error().message, Catch::Contains("SANDGATE_TEST_TOKEN_VAR"));
}

TEST_CASE("the App JWT is RS256, verifiable with the public key, iat 60 s back, exp < 10 min") {
    const KeyPair pair = make_key_pair();
    auto key = github::parse_private_key(pair.private_pem, "test key");
    REQUIRE(key.has_value());
    const auto now = std::chrono::system_clock::time_point(std::chrono::seconds(1'700'000'000));
    auto jwt = github::make_app_jwt("123456", key->get(), now);
    REQUIRE(jwt.has_value());
    const Claims claims = verify_jwt(*jwt, pair.public_pem);
    CHECK(claims.iat == 1'700'000'000 - 60);
    CHECK(claims.exp > 1'700'000'000);
    CHECK(claims.exp - 1'700'000'000 < 600);
    CHECK(claims.iss == "123456");

    // A tampered payload fails verification: the check above can fail.
    std::string forged = *jwt;
    const auto dot = forged.find('.');
    forged[dot + 3] = forged[dot + 3] == 'A' ? 'B' : 'A';
    std::unique_ptr<BIO, BioDeleter> bio(
        BIO_new_mem_buf(pair.public_pem.data(), static_cast<int>(pair.public_pem.size())));
    github::PrivateKey pub(PEM_read_bio_PUBKEY(bio.get(), nullptr, nullptr, nullptr));
    std::unique_ptr<EVP_MD_CTX, MdCtxDeleter> ctx(EVP_MD_CTX_new());
    EVP_DigestVerifyInit(ctx.get(), nullptr, EVP_sha256(), nullptr, pub.get());
    const auto second = forged.find('.', dot + 1);
    const std::string signature = base64url_decode(forged.substr(second + 1));
    CHECK(EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(signature.data()),
                           signature.size(), reinterpret_cast<const unsigned char*>(forged.data()),
                           second) != 1);

    CHECK(github::base64url("\xfb\xff") == "-_8");
    auto bad = github::parse_private_key("-----BEGIN NOTHING-----\n", "--app-key k.pem");
    REQUIRE_FALSE(bad.has_value());
    CHECK(bad.error().message == "--app-key k.pem: not a PEM private key");
}

TEST_CASE("an installation token is exchanged with a JWT, cached, and refreshed before expiry") {
    const KeyPair pair = make_key_pair();
    auto dir = tests::make_temp_dir("app");
    tests::write_file(dir / "app.pem", pair.private_pem);
    tests::FakeGitHub server(
        std::vector<std::string>{});  // no static token: only issued installation tokens work
    FakeClock fake;
    github::ClientOptions options;
    options.api_url = server.url();
    options.clock = fake.clock();
    auto source = github::InstallationTokenSource::create(options, {"4242", dir / "app.pem", "77"});
    REQUIRE(source.has_value());

    auto token = (*source)->token();
    REQUIRE(token.has_value());
    CHECK(token->starts_with("ghs_"));
    CHECK((*source)->token().value() == *token);
    CHECK(issued_count(server) == 1);

    // The token works for the repository API.
    auto client = github::HttpClient::create(options, *source);
    REQUIRE(client.has_value());
    REQUIRE(client
                ->request(github::Method::post, "/repos/o/r/statuses/abc",
                          R"({"state":"success","context":"gate"})")
                .has_value());

    // The JWT the server received verifies with the public key and names the App.
    simdjson::dom::parser parser;
    const std::string state = server.state();
    auto issued = parser.parse(state)["issued_tokens"].at(0);
    CHECK(std::string_view(issued["installation_id"].get_string()) == "77");
    const Claims claims =
        verify_jwt(std::string(std::string_view(issued["jwt"].get_string())), pair.public_pem);
    CHECK(claims.iss == "4242");

    fake.offset_seconds = 56 * 60;  // within five minutes of the hour's expiry
    auto refreshed = (*source)->token();
    REQUIRE(refreshed.has_value());
    CHECK(*refreshed != *token);
    CHECK(issued_count(server) == 2);
}

TEST_CASE("concurrent callers share one installation-token exchange") {
    AppFixture fixture;
    const auto& dir = fixture.dir;
    tests::FakeGitHub& server = fixture.server;
    const github::ClientOptions& options = fixture.options;
    auto source = github::InstallationTokenSource::create(options, {"1", dir / "app.pem", "9"});
    REQUIRE(source.has_value());
    std::vector<std::string> tokens(8);
    std::vector<std::thread> threads;
    for (size_t i = 0; i < tokens.size(); ++i) {
        threads.emplace_back([&, i] { tokens[i] = (*source)->token().value_or(""); });
    }
    for (auto& thread : threads) thread.join();
    for (const auto& token : tokens) CHECK(token == tokens[0]);
    CHECK_FALSE(tokens[0].empty());
    CHECK(issued_count(server) == 1);
}

TEST_CASE("a token with six minutes left is used, one with less than five is minted again") {
    AppFixture fixture;
    fixture.server.configure(R"({"token_ttl": 360})");  // expires_at six minutes ahead
    FakeClock fake;
    github::ClientOptions options = fixture.options;
    options.clock = fake.clock();
    auto source =
        github::InstallationTokenSource::create(options, {"1", fixture.dir / "app.pem", "9"});
    REQUIRE(source.has_value());
    const std::string first = (*source)->token().value();
    fake.offset_seconds = 30;
    CHECK((*source)->token().value() == first);  // five and a half minutes left: cached
    CHECK(issued_count(fixture.server) == 1);
    fake.offset_seconds =
        2 * 60;  // four minutes left: a new one (an hour's), once for eight callers
    fixture.server.configure(R"({"token_ttl": 3600})");
    std::vector<std::string> tokens(8);
    std::vector<std::thread> threads;
    for (size_t i = 0; i < tokens.size(); ++i)
        threads.emplace_back([&, i] { tokens[i] = (*source)->token().value_or(""); });
    for (auto& thread : threads) thread.join();
    for (const auto& token : tokens) CHECK(token == tokens[0]);
    CHECK(tokens[0].starts_with("ghs_"));
    CHECK(tokens[0] != first);
    CHECK(issued_count(fixture.server) == 2);
}

TEST_CASE("a token the server holds expired is refused, renewed once and the request sent again") {
    AppFixture fixture;
    auto source = github::InstallationTokenSource::create(fixture.options,
                                                          {"1", fixture.dir / "app.pem", "9"});
    REQUIRE(source.has_value());
    auto client = github::HttpClient::create(fixture.options, *source);
    REQUIRE(client.has_value());
    const std::string body =
        R"({"name":"gate","head_sha":"0123456789abcdef0123456789abcdef01234567","status":"in_progress"})";
    REQUIRE(client->request(github::Method::post, "/repos/o/r/check-runs", body).has_value());
    const std::string first = (*source)->token().value();
    // An hour later by the server's clock: the cached token still looks good here (its
    // expires_at is an hour ahead of this clock), but GitHub answers 401 Bad credentials.
    fixture.server.configure(R"({"advance_clock": 3700})");
    auto late = client->request(github::Method::post, "/repos/o/r/check-runs", body);
    REQUIRE(late.has_value());
    CHECK(late->status == 201);
    CHECK((*source)->token().value() != first);
    CHECK(issued_count(fixture.server) == 2);
    simdjson::dom::parser parser;
    const std::string requests = fixture.server.requests();
    std::vector<long long> statuses;
    for (auto request : parser.parse(requests)["requests"].get_array()) {
        if (std::string_view(request["target"].get_string()) != "/repos/o/r/check-runs") continue;
        statuses.push_back(request["status"].get_int64().value());
        if (statuses.size() == 2)
            CHECK(simdjson::to_string(request["headers"]).find(first) != std::string::npos);
    }
    CHECK(statuses == std::vector<long long>{201, 401, 201});

    // The App's installation gone: the renewal fails, and the request is refused once only.
    fixture.server.configure(R"({"advance_clock": 3700})");
    fixture.server.inject(R"([{"kind": "404", "match": "access_tokens", "count": 1}])");
    auto refused = client->request(github::Method::post, "/repos/o/r/check-runs", body);
    REQUIRE_FALSE(refused.has_value());
    CHECK(refused.error().kind == common::ErrorKind::permanent);
    CHECK_THAT(refused.error().message,
               Catch::Contains("installation token for installation 9") && Catch::Contains("404"));
}

namespace {

// The access-token exchanges the server answered (failed ones included).
int exchange_count(const tests::FakeGitHub& server) {
    simdjson::dom::parser parser;
    const std::string requests = server.requests();
    int count = 0;
    for (auto request : parser.parse(requests)["requests"].get_array())
        count +=
            std::string_view(request["target"].get_string()).ends_with("/access_tokens") ? 1 : 0;
    return count;
}

// The default logger's lines while alive.
struct LogCapture {
    std::ostringstream text;
    std::shared_ptr<spdlog::logger> previous = spdlog::default_logger();
    LogCapture() {
        auto logger = std::make_shared<spdlog::logger>(
            "capture", std::make_shared<spdlog::sinks::ostream_sink_mt>(text));
        spdlog::set_default_logger(logger);
    }
    ~LogCapture() { spdlog::set_default_logger(previous); }
};

}  // namespace

TEST_CASE(
    "a refresh that fails hands out the still-valid cached token with a warning; expired, it is an "
    "error") {
    AppFixture fixture;
    FakeClock fake;
    github::ClientOptions options = fixture.options;
    options.clock = fake.clock();
    options.max_attempts = 2;
    options.backoff_initial = std::chrono::milliseconds(1);
    auto source =
        github::InstallationTokenSource::create(options, {"1", fixture.dir / "app.pem", "9"});
    REQUIRE(source.has_value());
    auto client = github::HttpClient::create(options, *source);
    REQUIRE(client.has_value());
    const std::string body =
        R"({"name":"gate","head_sha":"0123456789abcdef0123456789abcdef01234567","status":"in_progress"})";
    const std::string first = (*source)->token().value();
    LogCapture log;

    // Two minutes left, by this clock and the server's: due for a refresh, which fails.
    fake.offset_seconds = 58 * 60;
    fixture.server.configure(R"({"advance_clock": 3480})");
    fixture.server.inject(R"([{"kind": "500", "match": "access_tokens", "count": 2}])");
    auto cached = (*source)->token();
    REQUIRE(cached.has_value());
    CHECK(*cached == first);
    CHECK(exchange_count(fixture.server) == 3);  // the first, then two failed attempts
    CHECK_THAT(log.text.str(), Catch::Contains("installation token for installation 9") &&
                                   Catch::Contains("500") && Catch::Contains("cached token") &&
                                   !Catch::Contains("ghs_"));
    // GitHub still takes it; within k_token_retry_interval nothing is minted meanwhile.
    auto sent = client->request(github::Method::post, "/repos/o/r/check-runs", body);
    REQUIRE(sent.has_value());
    CHECK(sent->status == 201);
    CHECK(exchange_count(fixture.server) == 3);

    // Later, still failing: tried again, the cached token still handed out.
    fake.offset_seconds = 58 * 60 + 31;
    fixture.server.inject(R"([{"kind": "500", "match": "access_tokens", "count": 2}])");
    CHECK((*source)->token().value_or("") == first);
    CHECK(exchange_count(fixture.server) == 5);

    // Expired: the failure surfaces, and nothing is half-cached for the next call.
    fake.offset_seconds = 61 * 60;
    fixture.server.configure(R"({"advance_clock": 180})");
    fixture.server.inject(R"([{"kind": "500", "match": "access_tokens", "count": 2}])");
    auto failed = (*source)->token();
    REQUIRE_FALSE(failed.has_value());
    CHECK(failed.error().kind == common::ErrorKind::transient);
    CHECK_THAT(failed.error().message,
               Catch::StartsWith("installation token for installation 9: ") &&
                   Catch::Contains("500") && !Catch::Contains("ghs_"));
    auto again = (*source)->token();  // GitHub is back
    REQUIRE(again.has_value());
    CHECK(*again != first);
    CHECK(issued_count(fixture.server) == 2);

    // A token the server refused (401: its clock says expired) is never handed out again, even
    // with time left by this clock: the failed renewal is the request's error.
    fixture.server.configure(R"({"advance_clock": 3700})");
    fixture.server.inject(R"([{"kind": "500", "match": "access_tokens", "count": 2}])");
    auto refused = client->request(github::Method::post, "/repos/o/r/check-runs", body);
    REQUIRE_FALSE(refused.has_value());
    CHECK_THAT(refused.error().message,
               Catch::Contains("installation token for installation 9") && Catch::Contains("500"));
    CHECK(issued_count(fixture.server) == 2);
}

TEST_CASE("App credentials are checked before anything is sent") {
    auto dir = tests::make_temp_dir("app");
    tests::write_file(dir / "bad.pem", "not a key");
    github::ClientOptions options;
    options.api_url = "http://127.0.0.1:9";
    auto bad_id = github::InstallationTokenSource::create(options, {"1", dir / "bad.pem", "x9"});
    REQUIRE_FALSE(bad_id.has_value());
    CHECK_THAT(bad_id.error().message, Catch::Contains("--installation-id"));
    auto bad_key = github::InstallationTokenSource::create(options, {"1", dir / "bad.pem", "9"});
    REQUIRE_FALSE(bad_key.has_value());
    CHECK(bad_key.error().message ==
          "--app-key " + (dir / "bad.pem").string() + ": not a PEM private key");
}

TEST_CASE("GitHub timestamps parse") {
    auto t = github::parse_github_time("2016-07-11T22:14:10Z");
    REQUIRE(t.has_value());
    CHECK(std::chrono::system_clock::to_time_t(*t) == 1468275250);
    CHECK(std::chrono::system_clock::to_time_t(
              github::parse_github_time("2016-07-11T23:14:10.123+01:00").value()) == 1468275250);
    CHECK_FALSE(github::parse_github_time("yesterday").has_value());
}

TEST_CASE("a git token is asked for one repository and contents:read, and held to it") {
    AppFixture fixture;
    const auto& dir = fixture.dir;
    tests::FakeGitHub& server = fixture.server;
    const github::ClientOptions& options = fixture.options;
    auto git = github::InstallationTokenSource::create(options, {"1", dir / "app.pem", "9"},
                                                       github::git_read_scope("gated"));
    REQUIRE(git.has_value());
    auto token = (*git)->token();
    REQUIRE(token.has_value());

    // The body sent is the one the OpenAPI description defines (the fake validates it).
    simdjson::dom::parser parser;
    const std::string state = server.state();
    auto issued = parser.parse(state)["issued_tokens"].at(0);
    CHECK(simdjson::to_string(issued["request"]) ==
          R"({"repositories":["gated"],"permissions":{"contents":"read"}})");

    // The git token cannot report, nor reach another repository.
    auto client = github::HttpClient::create(options, *git);
    REQUIRE(client.has_value());
    auto check = client->request(github::Method::post, "/repos/o/gated/check-runs",
                                 R"({"name":"gate","head_sha":"abc"})");
    REQUIRE_FALSE(check.has_value());
    CHECK_THAT(check.error().message, Catch::Contains("403"));
    auto other = client->request(github::Method::post, "/repos/o/other/statuses/abc",
                                 R"({"state":"success","context":"gate"})");
    REQUIRE_FALSE(other.has_value());
    CHECK_THAT(other.error().message, Catch::Contains("404"));

    // The reporting source of the same App is unscoped, and still creates check runs.
    auto rest = github::InstallationTokenSource::create(options, {"1", dir / "app.pem", "9"});
    REQUIRE(rest.has_value());
    auto rest_client = github::HttpClient::create(options, *rest);
    REQUIRE(rest_client.has_value());
    CHECK(rest_client
              ->request(github::Method::post, "/repos/o/gated/check-runs",
                        R"({"name":"gate","head_sha":"abc"})")
              .has_value());
    CHECK(rest_client
              ->request(github::Method::post, "/repos/o/other/statuses/abc",
                        R"({"state":"success","context":"gate"})")
              .has_value());
}

TEST_CASE("a token scope the server refuses or ignores is an error, never a broader token") {
    AppFixture fixture;
    const auto& dir = fixture.dir;
    tests::FakeGitHub& server = fixture.server;
    const github::ClientOptions& options = fixture.options;
    const github::AppCredentials app{"1", dir / "app.pem", "9"};
    auto make = [&](github::InstallationTokenScope scope) {
        auto source = github::InstallationTokenSource::create(options, app, std::move(scope));
        REQUIRE(source.has_value());
        return (*source)->token();
    };
    // Against the schema: a level outside read|write.
    auto bad_level = make({{"gated"}, {{"contents", "admin"}}});
    REQUIRE_FALSE(bad_level.has_value());
    CHECK(bad_level.error().kind == common::ErrorKind::invalid_input);
    CHECK_THAT(bad_level.error().message,
               Catch::Contains("installation 9") && Catch::Contains("422"));
    // Beyond what the App was granted.
    auto beyond = make({{"gated"}, {{"contents", "write"}}});
    REQUIRE_FALSE(beyond.has_value());
    CHECK_THAT(beyond.error().message, Catch::Contains("not granted"));
    // Over the 500 repositories GitHub takes.
    auto many = make({std::vector<std::string>(501, "r"), {{"contents", "read"}}});
    REQUIRE_FALSE(many.has_value());
    CHECK_THAT(many.error().message, Catch::Contains("500"));
    CHECK(issued_count(server) == 0);

    // A server that ignores the body hands out a broad token: refused, not used.
    server.post("/_control/config", R"({"ignore_token_scope": true})");
    auto ignored = make(github::git_read_scope("gated"));
    REQUIRE_FALSE(ignored.has_value());
    CHECK(ignored.error().kind == common::ErrorKind::permanent);
    CHECK_THAT(ignored.error().message, Catch::Contains("not limited to the repositories"));
    CHECK_THAT(ignored.error().message, !Catch::Contains("ghs_"));
}
