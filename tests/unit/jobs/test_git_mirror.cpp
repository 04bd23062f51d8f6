// The mirror cache: real repositories made with the git CLI, file:// and local-path remotes,
// git's http-backend over TLS on 127.0.0.1 for the credential callback, installation tokens
// minted again by the fake GitHub (which also serves the repository), concurrent callers, and
// mirrors damaged on purpose.
#include <catch2/catch.hpp>
#include <thread>

#include "github/auth.hpp"
#include "jobs/git/git_fetch.hpp"
#include "jobs/git/git_handles.hpp"
#include "jobs/git/git_mirror.hpp"
#include "jobs/git/git_url.hpp"
#include "tests/fake_github/fake_github.hpp"
#include "tests/helpers/git_fixture.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/wrap_detect.hpp"

namespace fs = std::filesystem;
using tests::sh;

namespace {

jobs::MirrorRequest request_for(const std::string& remote, const std::string& sha) {
    jobs::MirrorRequest request;
    request.remote = remote;
    request.sha = sha;
    return request;
}

fs::path only_pack(const fs::path& gitdir) {
    for (const auto& entry : fs::directory_iterator(gitdir / "objects/pack"))
        if (entry.path().extension() == ".pack") return entry.path();
    return {};
}

}  // namespace

TEST_CASE("a mirror is cloned once and fetched only when the SHA is missing") {
    const auto dir = tests::make_temp_dir("mirror");
    const std::string first = tests::make_repo(dir / "origin", {{"a.txt", "one\n"}});
    const jobs::MirrorCache cache(dir / "state");
    const std::string url = "file://" + (dir / "origin").string();

    auto mirror = cache.ensure_commit(request_for(url, first));
    REQUIRE(mirror);
    CHECK(mirror->event == jobs::MirrorEvent::cloned);
    CHECK(mirror->presence == jobs::CommitPresence::present);
    const auto scope = dir / "state/mirrors" / jobs::mirror_dir_name(*jobs::parse_remote(url));
    CHECK(mirror->gitdir == scope / "repo.git");
    CHECK(mirror->scope == scope);
    CHECK(fs::is_regular_file(dir / "state/mirrors/locks" / (scope.filename().string() + ".lock")));
    CHECK(fs::is_regular_file(mirror->gitdir / jobs::k_mirror_marker));
    CHECK(sh("git --git-dir=" + mirror->gitdir.string() + " cat-file -t " + first) == "commit");

    auto again = cache.ensure_commit(request_for(url, first));
    REQUIRE(again);
    CHECK(again->event == jobs::MirrorEvent::none);

    const std::string second = tests::commit_file(dir / "origin", "b.txt", "two\n");
    auto fetched = cache.ensure_commit(request_for(url, second));
    REQUIRE(fetched);
    CHECK(fetched->event == jobs::MirrorEvent::fetched);
    CHECK(fetched->presence == jobs::CommitPresence::present);

    // The plain path names the same remote, hence the same mirror.
    auto by_path = cache.ensure_commit(request_for((dir / "origin").string(), second));
    REQUIRE(by_path);
    CHECK(by_path->gitdir == mirror->gitdir);
    CHECK(by_path->event == jobs::MirrorEvent::none);
    // Nothing about the remote was written to the mirror's config.
    CHECK(
        tests::shell("git --git-dir=" + mirror->gitdir.string() + " config --get-regexp '^remote'")
            .out.empty());
}

TEST_CASE("pull request heads and merge-queue branches are mirrored") {
    const auto dir = tests::make_temp_dir("mirror");
    const fs::path origin = dir / "origin";
    tests::make_repo(origin, {{"a.txt", "one\n"}});
    const std::string pull = tests::commit_file(origin, "pr.txt", "pr\n");
    sh("git -C " + origin.string() + " update-ref refs/pull/7/head " + pull);
    sh("git -C " + origin.string() + " reset -q --hard HEAD~1");
    const std::string queued = tests::commit_file(origin, "q.txt", "q\n");
    sh("git -C " + origin.string() + " update-ref refs/heads/gh-readonly-queue/main/pr-7-" + pull +
       " " + queued);
    sh("git -C " + origin.string() + " reset -q --hard HEAD~1");
    const std::string custom = tests::commit_file(origin, "c.txt", "c\n");
    sh("git -C " + origin.string() + " update-ref refs/custom/thing " + custom);
    sh("git -C " + origin.string() + " reset -q --hard HEAD~1");

    const jobs::MirrorCache cache(dir / "state");
    auto by_pull = cache.ensure_commit(request_for(origin.string(), pull));
    REQUIRE(by_pull);
    CHECK(by_pull->presence == jobs::CommitPresence::present);
    auto by_queue = cache.ensure_commit(request_for(origin.string(), queued));
    REQUIRE(by_queue);
    CHECK(by_queue->presence == jobs::CommitPresence::present);
    // Outside the mirrored namespaces, a commit is found through --ref.
    auto without_ref = cache.ensure_commit(request_for(origin.string(), custom));
    REQUIRE(without_ref);
    auto with_ref_request = request_for(origin.string(), custom);
    with_ref_request.ref = "refs/custom/thing";
    auto with_ref = cache.ensure_commit(with_ref_request);
    REQUIRE(with_ref);
    CHECK(with_ref->presence == jobs::CommitPresence::present);
}

TEST_CASE("unknown SHAs, unreachable remotes and bad input are told apart") {
    const auto dir = tests::make_temp_dir("mirror");
    tests::make_repo(dir / "origin", {{"a.txt", "one\n"}});
    const jobs::MirrorCache cache(dir / "state");
    const std::string unknown(40, 'a');

    auto missing = cache.ensure_commit(request_for((dir / "origin").string(), unknown));
    REQUIRE(missing);
    CHECK(missing->presence == jobs::CommitPresence::missing);

    auto unreachable = cache.ensure_commit(request_for((dir / "nowhere").string(), unknown));
    REQUIRE_FALSE(unreachable);
    CHECK(unreachable.error().kind == common::ErrorKind::unavailable);
    CHECK_THAT(unreachable.error().message, Catch::Contains((dir / "nowhere").string()));
    // Nothing half-made is left behind for the failed remote: its lock, an empty scope.
    for (const auto& entry : fs::recursive_directory_iterator(dir / "state/mirrors")) {
        INFO(entry.path());
        if (entry.path().filename().string().find("nowhere") != std::string::npos)
            CHECK((entry.path().extension() == ".lock" || fs::is_empty(entry.path())));
    }

    auto refused_port = cache.ensure_commit(request_for("https://127.0.0.1:1/x/y.git", unknown));
    REQUIRE_FALSE(refused_port);
    CHECK(refused_port.error().kind == common::ErrorKind::unavailable);

    auto short_sha = cache.ensure_commit(request_for((dir / "origin").string(), "abc123"));
    REQUIRE_FALSE(short_sha);
    CHECK(short_sha.error().kind == common::ErrorKind::invalid_input);
    CHECK_THAT(short_sha.error().message, Catch::Contains("abc123"));

    auto ssh = cache.ensure_commit(request_for("git@github.com:o/r.git", unknown));
    REQUIRE_FALSE(ssh);
    CHECK(ssh.error().kind == common::ErrorKind::invalid_input);

    auto password =
        cache.ensure_commit(request_for("https://user:hunter2secret@example.com/o/r.git", unknown));
    REQUIRE_FALSE(password);
    CHECK(password.error().kind == common::ErrorKind::invalid_input);
    CHECK_THAT(password.error().message, !Catch::Contains("hunter2secret"));
}

TEST_CASE("mirror names are derived from the URL without credentials") {
    auto plain = jobs::parse_remote("https://github.com/Owner/Repo.git");
    auto with_user = jobs::parse_remote("https://someone@GitHub.com/Owner/Repo/");
    REQUIRE(plain);
    REQUIRE(with_user);
    CHECK(with_user->username == "someone");
    CHECK(with_user->fetch_url == "https://github.com/Owner/Repo/");
    CHECK(jobs::mirror_dir_name(*plain) == jobs::mirror_dir_name(*with_user));
    CHECK_THAT(jobs::mirror_dir_name(*with_user),
               Catch::StartsWith("Repo-") && !Catch::Contains("someone"));
    auto other = jobs::parse_remote("https://github.com/Owner/Other");
    REQUIRE(other);
    CHECK(jobs::mirror_dir_name(*other) != jobs::mirror_dir_name(*plain));
    auto odd = jobs::parse_remote("/tmp/../tmp/..weird name");
    REQUIRE(odd);
    CHECK_THAT(jobs::mirror_dir_name(*odd), Catch::StartsWith("weird_name-"));
}

TEST_CASE("concurrent callers share one mirror without corrupting it") {
    const auto dir = tests::make_temp_dir("mirror");
    const fs::path origin = dir / "origin";
    std::vector<std::string> shas = {tests::make_repo(origin, {{"a.txt", "1\n"}})};
    for (int i = 0; i < 3; ++i)
        shas.push_back(tests::commit_file(origin, "f" + std::to_string(i), "x"));
    const jobs::MirrorCache cache(dir / "state");
    std::vector<common::Expected<jobs::Mirror>> results(
        8, common::fail(common::ErrorKind::permanent, "not run"));
    {
        std::vector<std::jthread> threads;
        for (std::size_t i = 0; i < results.size(); ++i)
            threads.emplace_back([&, i] {
                results[i] =
                    cache.ensure_commit(request_for(origin.string(), shas[i % shas.size()]));
            });
    }
    int cloned = 0;
    for (const auto& result : results) {
        INFO((result ? std::string() : result.error().message));
        REQUIRE(result);
        CHECK(result->presence == jobs::CommitPresence::present);
        cloned += result->event == jobs::MirrorEvent::cloned ? 1 : 0;
    }
    CHECK(cloned == 1);
    CHECK(
        tests::shell("git --git-dir=" + results[0]->gitdir.string() + " fsck --no-dangling").code ==
        0);
}

TEST_CASE("a damaged mirror is re-cloned, never trusted") {
    const auto dir = tests::make_temp_dir("mirror");
    const fs::path origin = dir / "origin";
    const std::string sha =
        tests::make_repo(origin, {{"a.txt", std::string(10000, 'a')}, {"b.txt", "b\n"}});
    const jobs::MirrorCache cache(dir / "state");
    auto first = cache.ensure_commit(request_for(origin.string(), sha));
    REQUIRE(first);
    const fs::path gitdir = first->gitdir;

    SECTION("half-written: no completion marker") {
        fs::remove(gitdir / jobs::k_mirror_marker);
    }
    SECTION("not a repository any more") {
        tests::write_file(gitdir / "HEAD", "garbage\n");
        fs::remove_all(gitdir / "refs");
    }
    SECTION("its pack is gone while refs still name the commit") {
        for (const auto& entry : fs::directory_iterator(gitdir / "objects/pack"))
            fs::remove(entry.path());
    }
    SECTION("its pack is truncated") {
        const fs::path pack = only_pack(gitdir);
        REQUIRE_FALSE(pack.empty());
        fs::permissions(pack, fs::perms::owner_write, fs::perm_options::add);
        fs::resize_file(pack, fs::file_size(pack) / 2);
    }
    auto repaired = cache.ensure_commit(request_for(origin.string(), sha));
    REQUIRE(repaired);
    CHECK(repaired->event == jobs::MirrorEvent::recloned);
    CHECK(repaired->presence == jobs::CommitPresence::present);
    CHECK(repaired->gitdir == gitdir);
    CHECK(tests::shell("git --git-dir=" + gitdir.string() + " fsck --no-dangling").code == 0);
    // No leftovers of the swap.
    int entries = 0;
    for ([[maybe_unused]] const auto& entry : fs::directory_iterator(gitdir.parent_path()))
        ++entries;
    CHECK(entries == 1);  // the mirror alone in its scope (its lock lies outside)
}

TEST_CASE("https: the token goes through the credential callback only") {
    SKIP_UNDER_WRAP("python3's TLS server and openssl need the host's /usr/lib and a free port");
    const auto dir = tests::make_temp_dir("https");
    const fs::path served = dir / "served";
    const std::string sha = tests::make_repo(dir / "work", {{"a.txt", "secret code\n"}});
    sh("git clone -q --bare " + (dir / "work").string() + " " + (served / "repo.git").string());
    sh("openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=localhost -addext "
       "subjectAltName=DNS:localhost -keyout " +
       (dir / "key.pem").string() + " -out " + (dir / "cert.pem").string() + " 2>/dev/null");
    REQUIRE(jobs::set_tls_ca_file((dir / "cert.pem").string()));
    const std::string token = "ghs_TestToken0123456789abcdef";
    tests::GitHttpServer server(served, token, dir / "cert.pem", dir / "key.pem");
    const std::string url = "https://localhost:" + std::to_string(server.port()) + "/repo.git";
    const jobs::MirrorCache cache(dir / "state");

    auto anonymous = cache.ensure_commit(request_for(url, sha));
    REQUIRE_FALSE(anonymous);
    CHECK(anonymous.error().kind == common::ErrorKind::unavailable);
    CHECK_THAT(anonymous.error().message, Catch::Contains("localhost"));

    auto wrong = request_for(url, sha);
    wrong.token = jobs::GitToken{"ghs_wrong"};
    auto refused = cache.ensure_commit(wrong);
    REQUIRE_FALSE(refused);
    CHECK(refused.error().kind == common::ErrorKind::unavailable);
    CHECK_THAT(refused.error().message,
               Catch::Contains("authentication") && !Catch::Contains("ghs_wrong"));

    auto right = request_for(url, sha);
    right.token = jobs::GitToken{token};
    auto mirror = cache.ensure_commit(right);
    REQUIRE(mirror);
    CHECK(mirror->presence == jobs::CommitPresence::present);
    CHECK(mirror->event == jobs::MirrorEvent::cloned);
    CHECK(tests::files_containing(dir / "state", token).empty());
    CHECK(tests::files_containing(dir / "state", "ghs_").empty());

    // An unknown commit over https: fetched for, then reported missing (not an error).
    auto unknown = right;
    unknown.sha = std::string(40, 'b');
    auto missing = cache.ensure_commit(unknown);
    REQUIRE(missing);
    CHECK(missing->presence == jobs::CommitPresence::missing);
    CHECK(tests::files_containing(dir / "state", token).empty());
}

TEST_CASE("http with basic auth: the callback answers once, for the remote's host only") {
    SKIP_UNDER_WRAP("the python3 http server needs a free port on the host's loopback");
    const auto dir = tests::make_temp_dir("http");
    const fs::path served = dir / "served";
    const std::string sha = tests::make_repo(dir / "work", {{"a.txt", "code\n"}});
    sh("git clone -q --bare " + (dir / "work").string() + " " + (served / "repo.git").string());
    tests::GitHttpServer server(served, "plain-token");
    const jobs::MirrorCache cache(dir / "state");
    auto request =
        request_for("http://127.0.0.1:" + std::to_string(server.port()) + "/repo.git", sha);
    request.token = jobs::GitToken{"plain-token"};
    auto mirror = cache.ensure_commit(request);
    REQUIRE(mirror);
    CHECK(mirror->presence == jobs::CommitPresence::present);
    CHECK(tests::files_containing(dir / "state", "plain-token").empty());
}

TEST_CASE("an installation token the server expired is minted again for the next fetch") {
    const auto dir = tests::make_temp_dir("refresh");
    const std::string first = tests::make_repo(dir / "work", {{"a.txt", "one\n"}});
    const fs::path bare = dir / "served/octo/demo.git";
    sh("git clone -q --bare " + (dir / "work").string() + " " + bare.string());
    sh("openssl genrsa -traditional -out " + (dir / "app.pem").string() + " 2048 2>/dev/null");
    tests::FakeGitHub server(std::vector<std::string>{}, 0,
                             {"--git-root", (dir / "served").string()});
    github::ClientOptions options;
    options.api_url = server.url();
    options.max_attempts = 2;
    options.backoff_initial = std::chrono::milliseconds(1);
    auto source = github::InstallationTokenSource::create(options, {"1", dir / "app.pem", "9"},
                                                          github::git_read_scope("demo"));
    REQUIRE(source);
    const jobs::MirrorCache cache(dir / "state");
    auto request = request_for(server.url() + "/octo/demo.git", first);
    request.token = jobs::GitToken{std::shared_ptr<common::TokenProvider>(*source)};
    REQUIRE(cache.ensure_commit(request));
    const std::string token = (*source)->token().value();

    // An hour later by GitHub's clock: the token this side still caches is refused (401), a new
    // one is minted and the fetch goes on. A fixed token would fail here.
    const std::string second = tests::commit_file(dir / "work", "b.txt", "two\n");
    sh("git -C " + (dir / "work").string() + " push -q " + bare.string() + " HEAD:refs/heads/late");
    server.configure(R"({"advance_clock": 3700})");
    request.sha = second;
    auto late = cache.ensure_commit(request);
    REQUIRE(late);
    CHECK(late->event == jobs::MirrorEvent::fetched);
    CHECK(late->presence == jobs::CommitPresence::present);
    CHECK((*source)->token().value() != token);
    auto fixed = request;
    fixed.token = jobs::GitToken{token};
    fixed.sha = tests::commit_file(dir / "work", "c.txt", "three\n");
    sh("git -C " + (dir / "work").string() + " push -q " + bare.string() + " HEAD:refs/heads/late");
    auto stale = cache.ensure_commit(fixed);
    REQUIRE_FALSE(stale);
    CHECK_THAT(stale.error().message, Catch::Contains("authentication") && !Catch::Contains(token));

    // GitHub failing as the token is minted again: the fetch fails, naming the remote and
    // the minting, transient; nothing is fetched anonymously.
    server.configure(R"({"advance_clock": 3700})");
    server.inject(R"([{"kind": "500", "match": "access_tokens", "count": 2}])");
    auto third = request;
    third.sha = fixed.sha;
    auto failed = cache.ensure_commit(third);
    REQUIRE_FALSE(failed);
    CHECK(failed.error().kind == common::ErrorKind::transient);
    CHECK_THAT(failed.error().message,
               Catch::Contains(server.url() + "/octo/demo.git") &&
                   Catch::Contains("installation token for installation 9") &&
                   Catch::Contains("500"));
    CHECK(tests::files_containing(dir / "state", "ghs_").empty());
}
