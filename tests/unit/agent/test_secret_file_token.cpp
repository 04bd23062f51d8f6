// agent/secret_file_token: the agent's GitHub token file, read again when GitHub refuses the
// token, against the fake GitHub (which knows only the replacement token).
#include <sys/stat.h>

#include <catch2/catch.hpp>

#include "agent/daemon/secret_file_token.hpp"
#include "github/http_client.hpp"
#include "tests/fake_github/fake_github.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

void write_secret(const std::filesystem::path& path, const std::string& token) {
    tests::write_file(path, token + "\n");
    REQUIRE(::chmod(path.c_str(), 0600) == 0);
}

}  // namespace

TEST_CASE("the token file is read again when GitHub refuses its token") {
    auto dir = tests::make_temp_dir("secret-token");
    write_secret(dir / "token", "ghs_oldTokenFromTheFile");
    auto source = agent::SecretFileToken::open(dir / "token");
    REQUIRE(source);
    CHECK((*source)->token().value() == "ghs_oldTokenFromTheFile");
    CHECK((*source)->refused("ghs_oldTokenFromTheFile") ==
          common::Renewal::none);  // unchanged file

    // A refresher replaced the file: the next refusal picks the new token up, and a request
    // refused with the old one is sent again with it.
    tests::FakeGitHub server(std::vector<std::string>{"ghs_newTokenFromTheFile"});
    write_secret(dir / "token", "ghs_newTokenFromTheFile");
    CHECK((*source)->token().value() == "ghs_oldTokenFromTheFile");  // read only on a refusal
    github::ClientOptions options;
    options.api_url = server.url();
    auto client = github::HttpClient::create(options, *source);
    REQUIRE(client);
    auto sent = client->request(github::Method::post, "/repos/o/r/statuses/abc",
                                R"({"state":"success","context":"gate"})");
    REQUIRE(sent);
    CHECK(sent->status == 201);
    CHECK((*source)->token().value() == "ghs_newTokenFromTheFile");
    CHECK_THAT(server.requests(),
               Catch::Contains("\"status\": 401") && Catch::Contains("\"status\": 201"));

    // The file emptied (a refresher half-way): the refusal stands, nothing empty is sent.
    tests::write_file(dir / "token", "");
    CHECK((*source)->refused("ghs_newTokenFromTheFile") ==
          common::Renewal::none);  // unreadable: the refusal stands
    CHECK((*source)->refused("ghs_someOlderToken") ==
          common::Renewal::minted);  // already replaced here

    auto missing = agent::SecretFileToken::open(dir / "absent");
    REQUIRE_FALSE(missing);
    CHECK(missing.error().kind == common::ErrorKind::invalid_input);
    CHECK_THAT(missing.error().message, Catch::Contains("absent"));
}
