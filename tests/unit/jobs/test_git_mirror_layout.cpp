// The mirror cache's layout (jobs/git/git_mirror_layout.hpp): one scope per repository holding its
// mirror and its submodules' mirrors, locks outside every scope, submodule remotes that would
// read outside the scope refused, and the flat layout of earlier versions adopted. Real
// repositories made with the git CLI, local-path and file:// remotes.
#include <openssl/evp.h>

#include <algorithm>
#include <catch2/catch.hpp>

#include "jobs/git/git_mirror.hpp"
#include "jobs/git/git_mirror_layout.hpp"
#include "jobs/git/git_url.hpp"
#include "tests/helpers/git_fixture.hpp"
#include "tests/support/temp_dir.hpp"

namespace fs = std::filesystem;
using tests::sh;

namespace {

jobs::MirrorRequest request_for(const std::string& remote, const std::string& sha,
                                const std::string& scope = "") {
    jobs::MirrorRequest request;
    request.remote = remote;
    request.sha = sha;
    request.scope = scope;
    return request;
}

std::string name_of(const std::string& remote) {
    return jobs::mirror_dir_name(*jobs::parse_remote(remote));
}

// Every path below `dir`, relative to it, sorted; not descending into mirrors (*.git).
std::vector<std::string> tree(const fs::path& dir) {
    std::vector<std::string> out;
    for (auto it = fs::recursive_directory_iterator(dir); it != fs::recursive_directory_iterator();
         ++it) {
        out.push_back(it->path().lexically_relative(dir).string());
        if (it->path().extension() == ".git") it.disable_recursion_pending();
    }
    std::sort(out.begin(), out.end());
    return out;
}

}  // namespace

TEST_CASE("each repository's mirrors live in its own scope, its submodules' included") {
    const auto dir = tests::make_temp_dir("layout");
    const std::string app = tests::make_repo(dir / "app", {{"a.txt", "app\n"}});
    const std::string lib = tests::make_repo(dir / "lib", {{"l.txt", "lib\n"}});
    const jobs::MirrorCache cache(dir / "state");
    const fs::path mirrors = dir / "state/mirrors";
    const std::string app_url = "file://" + (dir / "app").string();

    auto own = cache.ensure_commit(request_for(app_url, app));
    REQUIRE(own);
    const fs::path scope = mirrors / name_of(app_url);
    CHECK(own->scope == scope);
    CHECK(own->gitdir == scope / "repo.git");
    CHECK(own->scope_remote.key == own->remote.key);

    // lib as app's submodule: in app's scope; lib as a repository of its own: its own scope.
    auto module = cache.ensure_commit(request_for((dir / "lib").string(), lib, app_url));
    REQUIRE(module);
    CHECK(module->event == jobs::MirrorEvent::cloned);
    CHECK(module->scope == scope);
    CHECK(module->gitdir == scope / "modules" / (name_of((dir / "lib").string()) + ".git"));
    CHECK(module->scope_remote.key == own->remote.key);
    auto alone = cache.ensure_commit(request_for((dir / "lib").string(), lib));
    REQUIRE(alone);
    CHECK(alone->event == jobs::MirrorEvent::cloned);  // mirrored twice: disk for isolation
    CHECK(alone->gitdir == mirrors / name_of((dir / "lib").string()) / "repo.git");
    // A repository naming itself as its submodule's remote reads its own mirror.
    auto self = cache.ensure_commit(request_for((dir / "app").string(), app, app_url));
    REQUIRE(self);
    CHECK(self->gitdir == own->gitdir);

    // The scope holds mirrors only; the locks lie beside the scopes, in no scope.
    CHECK(tree(scope) == std::vector<std::string>{"modules",
                                                  "modules/" + module->gitdir.filename().string(),
                                                  "repo.git"});
    const std::string app_name = scope.filename().string();
    const std::string lib_name = name_of((dir / "lib").string());
    CHECK(tree(mirrors / "locks") == std::vector<std::string>{app_name + "." + lib_name + ".lock",
                                                              app_name + ".lock",
                                                              lib_name + ".lock"});

    // What the agent binds for a job of `app`: the same directory, physical, made on demand.
    auto bound = cache.scope_dir(app_url);
    REQUIRE(bound);
    CHECK(*bound == fs::canonical(scope));
    const std::string other_url = "file://" + (dir / "not-yet").string();
    auto fresh = cache.scope_dir(other_url);
    REQUIRE(fresh);
    CHECK(fs::is_directory(*fresh));
    CHECK(fresh->filename() == name_of(other_url));
    auto bad = cache.scope_dir("git@example.com:o/r.git");
    REQUIRE_FALSE(bad);
    CHECK(bad.error().kind == common::ErrorKind::invalid_input);
}

TEST_CASE("a submodule remote that would read outside its scope is refused before any fetch") {
    const auto dir = tests::make_temp_dir("layout");
    const std::string app = tests::make_repo(dir / "app", {{"a.txt", "app\n"}});
    const std::string secret = tests::make_repo(dir / "secret", {{"s.txt", "private\n"}});
    const jobs::MirrorCache cache(dir / "state");
    auto other = cache.ensure_commit(request_for((dir / "secret").string(), secret));
    REQUIRE(other);
    const std::string app_url = (dir / "app").string();
    const fs::path app_scope = dir / "state/mirrors" / name_of(app_url);

    // Another repository's mirror (or anything else in the state directory) as a submodule.
    for (const std::string& url :
         {other->gitdir.string(), "file://" + other->gitdir.string(),
          (dir / "state/mirrors/../mirrors" / other->scope.filename() / "repo.git").string()}) {
        INFO(url);
        auto refused = cache.ensure_commit(request_for(url, secret, app_url));
        REQUIRE_FALSE(refused);
        CHECK(refused.error().kind == common::ErrorKind::invalid_input);
        CHECK_THAT(refused.error().message, Catch::Contains("inside the state directory"));
    }
    // Through a symlink outside the state directory.
    fs::create_directory_symlink(other->gitdir, dir / "link.git");
    auto linked = cache.ensure_commit(request_for((dir / "link.git").string(), secret, app_url));
    REQUIRE_FALSE(linked);
    CHECK(linked.error().kind == common::ErrorKind::invalid_input);
    // A local path under an https repository: git's protocol.file.allow=user, offline.
    auto local = cache.ensure_commit(
        request_for((dir / "secret").string(), secret, "https://example.invalid/o/app.git"));
    REQUIRE_FALSE(local);
    CHECK(local.error().kind == common::ErrorKind::invalid_input);
    CHECK_THAT(local.error().message, Catch::Contains("protocol.file.allow"));
    CHECK_FALSE(fs::exists(app_scope / "modules"));
    // A local submodule of a local repository, outside the state directory, is fine.
    auto fine = cache.ensure_commit(request_for((dir / "secret").string(), secret, app_url));
    REQUIRE(fine);
    CHECK(fine->scope == app_scope);
    (void)app;
}

TEST_CASE(
    "mirrors of the flat layout of earlier versions are moved into the first scope that asks") {
    const auto dir = tests::make_temp_dir("layout");
    const std::string sha = tests::make_repo(dir / "origin", {{"a.txt", "a\n"}});
    const std::string url = (dir / "origin").string();
    const fs::path mirrors = dir / "state/mirrors";
    // A mirror as the flat layout had it: <name>.git beside <name>.lock, and a crash's leftover.
    {
        const jobs::MirrorCache elsewhere(dir / "elsewhere");
        auto made = elsewhere.ensure_commit(request_for(url, sha));
        REQUIRE(made);
        fs::create_directories(mirrors);
        fs::rename(made->gitdir, mirrors / (name_of(url) + ".git"));
    }
    const fs::path legacy = mirrors / (name_of(url) + ".git");
    tests::write_file(mirrors / (name_of(url) + ".lock"), "");
    fs::create_directories(mirrors / (name_of(url) + ".git.tmp-abc123/objects"));
    const std::string other = tests::make_repo(dir / "other", {{"o.txt", "o\n"}});

    const jobs::MirrorCache cache(dir / "state");
    auto adopted = cache.ensure_commit(request_for(url, sha));
    REQUIRE(adopted);
    CHECK(adopted->event == jobs::MirrorEvent::none);  // moved, trusted, not cloned
    CHECK(adopted->gitdir == mirrors / name_of(url) / "repo.git");
    CHECK_FALSE(fs::exists(legacy));
    CHECK_FALSE(fs::exists(mirrors / (name_of(url) + ".lock")));
    CHECK_FALSE(fs::exists(mirrors / (name_of(url) + ".git.tmp-abc123")));
    CHECK(sh("git --git-dir=" + adopted->gitdir.string() + " cat-file -t " + sha) == "commit");

    // Another scope wanting the same remote (as a submodule) clones its own.
    auto module = cache.ensure_commit(request_for(url, sha, (dir / "other").string()));
    REQUIRE(module);
    CHECK(module->event == jobs::MirrorEvent::cloned);
    CHECK(module->scope == mirrors / name_of((dir / "other").string()));
    (void)other;
}

TEST_CASE(
    "mirror names keep the flat layout's hash (OpenSSL's SHA-256 of the key then), so old mirrors "
    "are found") {
    for (const char* text :
         {"https://github.com/octo/app.git", "file:///srv/git/lib", "http://host:8080/a/b/"}) {
        auto remote = jobs::parse_remote(text);
        REQUIRE(remote);
        unsigned char digest[EVP_MAX_MD_SIZE];
        unsigned int size = 0;
        REQUIRE(EVP_Digest(remote->key.data(), remote->key.size(), digest, &size, EVP_sha256(),
                           nullptr) == 1);
        std::string hex;
        for (unsigned int i = 0; i < 8; ++i)
            hex += "0123456789abcdef"[digest[i] >> 4], hex += "0123456789abcdef"[digest[i] & 15];
        const std::string name = jobs::mirror_dir_name(*remote);
        CHECK(name.substr(name.size() - 17) == "-" + hex);
    }
}
