// Which remote may receive the gate's git token: the decision on many URL shapes, then git's
// http-backend on 127.0.0.1 recording every Authorization header, to see that a pull request's
// submodules (on the same server) and a redirect to another host never receive the token.
#include <catch2/catch.hpp>
#include <sstream>

#include "jobs/git/git_credentials.hpp"
#include "jobs/git/git_mirror.hpp"
#include "jobs/git/git_url.hpp"
#include "jobs/git/git_workspace.hpp"
#include "tests/helpers/git_fixture.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/wrap_detect.hpp"

namespace fs = std::filesystem;
using jobs::TokenDecision;
using tests::sh;

namespace {

jobs::RemoteUrl remote(const std::string& text) {
    auto parsed = jobs::parse_remote(text);
    REQUIRE(parsed);
    return *parsed;
}

TokenDecision decide(const std::string& gated, const std::string& target) {
    return jobs::token_decision(remote(gated), target);
}

// path -> every password seen for it ("-" when none), from git_http_server.py's --auth-log.
std::vector<std::pair<std::string, std::string>> auth_log(const fs::path& file) {
    std::vector<std::pair<std::string, std::string>> lines;
    if (!fs::exists(file)) return lines;
    std::istringstream in(tests::read_file(file));
    std::string path, password;
    while (in >> path >> password) lines.emplace_back(path, password);
    return lines;
}

}  // namespace

TEST_CASE("the token goes to the gated repository, however its URL is spelt") {
    const std::string gated = "https://github.com/Gated-Org/Repo.git";
    for (const std::string same :
         {"https://github.com/Gated-Org/Repo.git", "https://github.com/Gated-Org/Repo",
          "https://github.com/Gated-Org/Repo/", "https://github.com/Gated-Org/Repo.git/",
          "https://GitHub.COM/gated-org/REPO", "https://github.com:443/Gated-Org/Repo",
          "https://x-access-token@github.com/Gated-Org/Repo.git",
          "https://someone@github.com/gated-org/repo"}) {
        INFO(same);
        CHECK(decide(gated, same) == TokenDecision::send);
    }
    // A relative submodule URL that comes back to the gated repository is the gated repository.
    CHECK(decide(gated, jobs::resolve_submodule_url(gated, "../Repo")) == TokenDecision::send);
    CHECK(decide(gated, jobs::resolve_submodule_url(gated, "./../../Gated-Org/Repo.git")) ==
          TokenDecision::send);
}

TEST_CASE("every other URL is fetched without the token") {
    const std::string gated = "https://github.com/Gated-Org/Repo.git";
    for (const std::string other :
         {"https://github.com/victim-org/private-repo",   // another repository, same host
          "https://github.com/Gated-Org/other-repo.git",  // same owner
          "https://github.com/Gated-Org/Repo-private",    // a name that starts alike
          "https://github.com/Gated-Org/Repo/sub",        // below the repository's path
          "https://github.com/Gated-Org",                 // the owner alone
          "https://github.com/",                          // the host alone
          "http://github.com/Gated-Org/Repo.git",         // plain http
          "https://github.com:8443/Gated-Org/Repo.git",   // another port
          "https://gitlab.com/Gated-Org/Repo.git",        // another host
          "https://github.com.evil.example/Gated-Org/Repo",
          "https://github.com@evil.example/Gated-Org/Repo",  // userinfo, then another host
          "https://user:pass@github.com/Gated-Org/Repo",     // a password: refused outright
          "https://github.com/Gated-Org/Repo/%2e%2e/%2e%2e/victim-org/private-repo",
          "https://github.com/Gated-Org/Repo/../../victim-org/private-repo",
          "https://github.com/Gated-Org/%2e%2e/victim-org/private-repo",
          "https://github.com/Gated-Org/%52epo",  // escapes are never decoded: fail closed
          "https://github.com/Gated-Org//Repo",
          "https://github.com/Gated-Org/./Repo",
          "https://github.com/Gated-Org/Repo?x=/victim-org/private-repo",
          "https://github.com/Gated-Org/Repo#frag",
          "https://github.com/Gated-Org/Repo.git.git",
          "ssh://git@github.com/Gated-Org/Repo.git",
          "git@github.com:Gated-Org/Repo.git",
          "file:///srv/git/Repo.git",
          "/srv/git/Gated-Org/Repo.git",
          ""}) {
        INFO(other);
        CHECK(decide(gated, other) == TokenDecision::withhold);
    }
    // Relative submodule URLs resolve against the gated repository, then are judged like any.
    CHECK(decide(gated, jobs::resolve_submodule_url(gated, "../other-repo")) ==
          TokenDecision::withhold);
    CHECK(decide(gated, jobs::resolve_submodule_url(gated, "../../victim-org/private-repo")) ==
          TokenDecision::withhold);
    CHECK(decide(gated, jobs::resolve_submodule_url(gated, "./sub")) == TokenDecision::withhold);
    CHECK(decide(gated, jobs::resolve_submodule_url(gated, "../Repo/../../victim-org/x")) ==
          TokenDecision::withhold);
}

TEST_CASE("ports, schemes and case outside github.com") {
    const std::string gated = "http://127.0.0.1:8080/o/r.git";
    CHECK(decide(gated, "http://127.0.0.1:8080/o/r") == TokenDecision::send);
    CHECK(decide(gated, "http://127.0.0.1:8080/O/R") ==
          TokenDecision::withhold);  // case counts here
    CHECK(decide(gated, "http://127.0.0.1/o/r") == TokenDecision::withhold);
    CHECK(decide(gated, "http://127.0.0.1:8081/o/r") == TokenDecision::withhold);
    CHECK(decide(gated, "https://127.0.0.1:8080/o/r") == TokenDecision::withhold);
    CHECK(decide(gated, "http://localhost:8080/o/r") ==
          TokenDecision::withhold);  // another name, same machine
    CHECK(decide("http://git.example/o/r", "http://git.example:80/o/r.git") == TokenDecision::send);
    CHECK(decide("https://git.example/o/r", "https://git.example:80/o/r") ==
          TokenDecision::withhold);
    CHECK(decide("https://[::1]:8443/o/r", "https://[::1]:8443/o/r.git") == TokenDecision::send);
    CHECK(decide("https://[::1]:8443/o/r", "https://[::1]/o/r") == TokenDecision::withhold);
    // A local gated repository has no token to give.
    const auto dir = tests::make_temp_dir("local-gated");
    CHECK(decide(dir.string(), dir.string()) == TokenDecision::withhold);
    CHECK(jobs::token_decision(remote(gated), remote("http://127.0.0.1:8080/o/r/")) ==
          TokenDecision::send);
    CHECK_THAT(jobs::withheld_note(remote(gated)),
               Catch::Contains("only sent to the gated repository http://127.0.0.1:8080/o/r.git"));
}

TEST_CASE("over http: a pull request's submodules never see the token") {
    SKIP_UNDER_WRAP("the python3 http server needs a free port on the host's loopback");
    const auto dir = tests::make_temp_dir("creds-submodules");
    const fs::path served = dir / "served";
    const std::string token = "ghs_GatedOnlyToken0123456789";
    const fs::path log = dir / "auth.log";
    tests::GitHttpServer server(served, token, {}, {}, {"--auth-log", log.string()});
    const std::string base = "http://127.0.0.1:" + std::to_string(server.port());

    // Two private repositories on the same server (the token could read both) and a pull
    // request naming them as submodules: one relative, one absolute.
    const std::string lib = tests::make_repo(dir / "lib", {{"lib.txt", "lib\n"}});
    const std::string victim =
        tests::make_repo(dir / "victim", {{"secret.txt", "victim's secret\n"}});
    sh("git clone -q --bare " + (dir / "lib").string() + " " + (served / "lib.git").string());
    sh("git clone -q --bare " + (dir / "victim").string() + " " +
       (served / "victim-org/private.git").string());
    tests::make_repo(dir / "top", {{".gitmodules",
                                    "[submodule \"lib\"]\n\tpath = lib\n\turl = ../lib.git\n"
                                    "[submodule \"victim\"]\n\tpath = victim\n\turl = " +
                                        base + "/victim-org/private.git\n"}});
    sh("cd " + (dir / "top").string() + " && git update-index --add --cacheinfo 160000," + lib +
       ",lib && git update-index --add --cacheinfo 160000," + victim +
       ",victim && git commit -qm submodules");
    const std::string top = sh("git -C " + (dir / "top").string() + " rev-parse HEAD");
    sh("git clone -q --bare " + (dir / "top").string() + " " + (served / "repo.git").string());

    const jobs::MirrorCache cache(dir / "state");
    jobs::GitCheckoutRequest request;
    request.source.remote = base + "/repo.git";
    request.source.sha = top;
    request.source.token = jobs::GitToken{token};
    request.path = dir / "checkout";
    request.submodules = jobs::SubmoduleMode::top;
    auto done = jobs::checkout_commit(cache, request);
    REQUIRE_FALSE(done);  // the submodules are private: anonymous fetches are refused
    CHECK(done.error().kind == common::ErrorKind::unavailable);
    CHECK_THAT(done.error().message,
               Catch::Matches("submodule (lib|victim): .*") &&
                   Catch::Contains("only sent to the gated repository " + base + "/repo.git") &&
                   !Catch::Contains(token));

    // The prefetch of the submodules' mirrors: each one left out, none fetched with the token.
    auto mirror = cache.ensure_commit(request.source);
    REQUIRE(mirror);
    CHECK(jobs::submodule_mirrors(cache, *mirror, request.source.token).empty());

    const auto lines = auth_log(log);
    bool gated_saw_token = false, submodules_asked = false;
    for (const auto& [path, password] : lines) {
        INFO(path << " " << password);
        if (path.starts_with("/repo.git/")) {
            gated_saw_token = gated_saw_token || password == token;
        } else {
            CHECK((path.starts_with("/lib.git/") || path.starts_with("/victim-org/private.git/")));
            CHECK(password == "-");
            submodules_asked = true;
        }
    }
    CHECK(gated_saw_token);
    CHECK(submodules_asked);  // the submodules were asked for, anonymously
    CHECK(tests::files_containing(dir / "state", token).empty());
}

TEST_CASE("over http: a redirect to another host is not followed with the token") {
    SKIP_UNDER_WRAP("the python3 http server needs a free port on the host's loopback");
    const auto dir = tests::make_temp_dir("creds-redirect");
    const std::string token = "ghs_RedirectToken0123456789";
    const std::string sha = tests::make_repo(dir / "work", {{"a.txt", "code\n"}});
    sh("git clone -q --bare " + (dir / "work").string() + " " +
       (dir / "elsewhere/repo.git").string());
    tests::GitHttpServer elsewhere(dir / "elsewhere", token, {}, {},
                                   {"--auth-log", (dir / "elsewhere.log").string()});
    // "localhost" is another host name than "127.0.0.1" to libgit2, though the same machine.
    const std::string target = "http://localhost:" + std::to_string(elsewhere.port()) + "/repo.git";
    fs::create_directories(dir / "gated");
    tests::GitHttpServer gated(
        dir / "gated", token, {}, {},
        {"--auth-log", (dir / "gated.log").string(), "--redirect", "/moved.git=" + target});
    const jobs::MirrorCache cache(dir / "state");
    jobs::MirrorRequest request;
    request.remote = "http://127.0.0.1:" + std::to_string(gated.port()) + "/moved.git";
    request.sha = sha;
    request.token = jobs::GitToken{token};
    auto mirror = cache.ensure_commit(request);
    REQUIRE_FALSE(mirror);
    CHECK(mirror.error().kind == common::ErrorKind::unavailable);
    CHECK_FALSE(auth_log(dir / "gated.log").empty());  // the redirect was answered
    for (const auto& [path, password] : auth_log(dir / "elsewhere.log")) {
        INFO(path);
        CHECK(password != token);
    }
    CHECK(auth_log(dir / "elsewhere.log").empty());  // libgit2 refused to follow
}
