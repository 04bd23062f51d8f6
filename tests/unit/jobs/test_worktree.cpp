// Per-job worktrees: git works in them (also inside bwrap with the mirror read-only), shallow
// depth and submodules as actions/checkout, removal never follows a planted symlink, leases
// and the reaping of a crashed run's worktrees, and a mirror damaged under a checkout.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <sstream>

#include "jobs/git/git_handles.hpp"
#include "jobs/git/git_provider.hpp"
#include "jobs/git/git_remove.hpp"
#include "jobs/git/git_workspace.hpp"
#include "jobs/git/git_worktree.hpp"
#include "sandbox/process/run.hpp"
#include "tests/helpers/git_fixture.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/wrap_detect.hpp"

namespace fs = std::filesystem;
using tests::sh;

namespace {

jobs::GitCheckoutRequest checkout_request(const std::string& remote, const std::string& sha,
                                          const fs::path& path) {
    jobs::GitCheckoutRequest request;
    request.source.remote = remote;
    request.source.sha = sha;
    request.path = path;
    return request;
}

std::string git_in(const fs::path& worktree, const std::string& args) {
    return sh("git -C " + worktree.string() + " " + args);
}

}  // namespace

TEST_CASE("a worktree is the exact commit, detached, and git works in it") {
    const auto dir = tests::make_temp_dir("worktree");
    const fs::path origin = dir / "origin";
    tests::make_repo(origin, {{"README.md", "hello\n"}, {"src/main.c", "int main(){}\n"}});
    sh("cd " + origin.string() +
       " && printf '#!/bin/sh\\necho hi\\n' > run.sh && chmod +x run.sh && ln -s README.md link && "
       "git add -A && git commit -qm second");
    const std::string wanted = git_in(origin, "rev-parse HEAD");
    tests::commit_file(origin, "later.txt", "not in the worktree\n");

    const jobs::MirrorCache cache(dir / "state");
    jobs::WorktreeArea area(dir / "state");
    auto worktree = area.create("job");
    REQUIRE(worktree);
    auto request = checkout_request(origin.string(), wanted, worktree->path());
    request.source.ref = "main";
    auto done = jobs::checkout_commit(cache, request);
    REQUIRE(done);
    REQUIRE(done->mirror.presence == jobs::CommitPresence::present);
    REQUIRE(done->mirror_gitdirs.size() == 1);

    const fs::path path = worktree->path();
    CHECK(git_in(path, "rev-parse HEAD") == wanted);
    CHECK(tests::shell("git -C " + path.string() + " symbolic-ref -q HEAD").code != 0);  // detached
    CHECK(git_in(path, "status --porcelain").empty());
    CHECK(git_in(path, "rev-list --count HEAD") == "2");
    CHECK(git_in(path, "log --format=%s") == "second\ninitial");
    CHECK(git_in(path, "rev-parse origin/main") == wanted);
    CHECK(git_in(path, "remote get-url origin") == origin.string());
    CHECK(tests::read_file(path / "src/main.c") == "int main(){}\n");
    CHECK(fs::is_symlink(path / "link"));
    CHECK((fs::status(path / "run.sh").permissions() & fs::perms::owner_exec) != fs::perms::none);
    CHECK_FALSE(fs::exists(path / "later.txt"));
    // The objects live in the mirror, not in the worktree.
    CHECK(tests::read_file(path / ".git/objects/info/alternates") ==
          (done->mirror.gitdir / "objects").string() + "\n");
    CHECK(git_in(path, "count-objects") == "0 objects, 0 kilobytes");

    REQUIRE(worktree->remove());
    CHECK_FALSE(fs::exists(path));
    CHECK_FALSE(fs::exists(path.string() + ".lease"));
    CHECK(fs::exists(done->mirror.gitdir / "objects"));
}

TEST_CASE("inside bwrap, git works in the worktree while the mirror is read-only") {
    SKIP_UNDER_WRAP("nested bwrap cannot mount a new /proc inside the wrap");
    const auto dir = tests::make_temp_dir("worktree");
    const fs::path origin = dir / "origin";
    const std::string sha = tests::make_repo(origin, {{"a.txt", "a\n"}});
    const jobs::MirrorCache cache(dir / "state");
    jobs::WorktreeArea area(dir / "state");
    auto worktree = area.create("wrapped");
    REQUIRE(worktree);
    auto done = jobs::checkout_commit(
        cache, checkout_request("file://" + origin.string(), sha, worktree->path()));
    REQUIRE(done);
    const std::string wt = worktree->path().string();
    const std::string mirror = done->mirror.gitdir.string();
    // Everything read-only but the worktree; an unprivileged uid inside.
    const std::string script = "cd " + wt +
                               " && git rev-parse HEAD && git log --oneline | wc -l && test -z "
                               "\"$(git status --porcelain)\" && "
                               "echo changed > a.txt && git -c user.name=s -c user.email=s@x "
                               "commit -qam step && git log --oneline | wc -l && "
                               "! touch " +
                               mirror + "/objects/x 2>/dev/null && id -u";
    auto result = tests::shell(
        "bwrap --unshare-user --uid 1000 --gid 1000 --ro-bind / / --dev /dev --bind " + wt + " " +
        wt + " --tmpfs /var/tmp --setenv HOME /var/tmp -- /bin/sh -c '" + script + "'");
    INFO(result.out);
    REQUIRE(result.code == 0);
    CHECK(result.out == sha + "\n1\n2\n1000\n");
    CHECK_FALSE(fs::exists(done->mirror.gitdir / "objects/x"));
    // The step's commit landed in the worktree's own object store, not the mirror's.
    CHECK(tests::shell("git --git-dir=" + mirror + " cat-file -e " +
                       git_in(worktree->path(), "rev-parse HEAD"))
              .code != 0);
}

TEST_CASE("fetch-depth makes the worktree shallow like actions/checkout") {
    const auto dir = tests::make_temp_dir("worktree");
    const fs::path origin = dir / "origin";
    tests::make_repo(origin, {{"a.txt", "1\n"}});
    for (int i = 0; i < 4; ++i) tests::commit_file(origin, "a.txt", std::to_string(i) + "\n");
    sh("cd " + origin.string() +
       " && git checkout -qb side HEAD~2 && echo s > s.txt && git add s.txt && git commit -qm side "
       "&& git checkout -q main && git merge -q --no-edit side");
    const std::string tip = git_in(origin, "rev-parse HEAD");
    const jobs::MirrorCache cache(dir / "state");
    for (const unsigned depth : {1u, 2u, 0u}) {
        const fs::path path = dir / ("depth" + std::to_string(depth));
        auto request = checkout_request(origin.string(), tip, path);
        request.depth = depth;
        REQUIRE(jobs::checkout_commit(cache, request));
        const std::string count = git_in(path, "rev-list --count HEAD");
        if (depth == 1) CHECK(count == "1");
        if (depth == 2) CHECK(count == "3");  // the merge and both parents
        if (depth == 0) CHECK(count == git_in(origin, "rev-list --count HEAD"));
        CHECK(git_in(path, "status --porcelain").empty());
        CHECK((git_in(path, "rev-parse --is-shallow-repository") == "true") == (depth != 0));
    }
}

TEST_CASE("submodules are checked out on request, recursively if asked") {
    const auto dir = tests::make_temp_dir("worktree");
    const std::string leaf = tests::make_repo(dir / "leaf", {{"leaf.txt", "leaf\n"}});
    tests::make_repo(dir / "middle", {{"middle.txt", "middle\n"}});
    const std::string allow = "git -c protocol.file.allow=always ";
    sh("cd " + (dir / "middle").string() + " && " + allow +
       "submodule -q add ../leaf deps/leaf && git commit -qm leaf");
    tests::make_repo(dir / "top", {{"top.txt", "top\n"}});
    sh("cd " + (dir / "top").string() + " && " + allow + "submodule -q add " +
       (dir / "middle").string() + " middle && git commit -qm middle");
    const std::string top = git_in(dir / "top", "rev-parse HEAD");
    const jobs::MirrorCache cache(dir / "state");

    auto none = checkout_request((dir / "top").string(), top, dir / "none");
    REQUIRE(jobs::checkout_commit(cache, none));
    CHECK_FALSE(fs::exists(dir / "none/middle/middle.txt"));

    auto one = checkout_request((dir / "top").string(), top, dir / "one");
    one.submodules = jobs::SubmoduleMode::top;
    auto one_done = jobs::checkout_commit(cache, one);
    REQUIRE(one_done);
    CHECK(one_done->mirror_gitdirs.size() == 2);
    CHECK(tests::read_file(dir / "one/middle/middle.txt") == "middle\n");
    CHECK_FALSE(fs::exists(dir / "one/middle/deps/leaf/leaf.txt"));
    CHECK(git_in(dir / "one/middle", "rev-parse HEAD") == git_in(dir / "middle", "rev-parse HEAD"));

    auto all = checkout_request((dir / "top").string(), top, dir / "all");
    all.submodules = jobs::SubmoduleMode::recursive;
    auto all_done = jobs::checkout_commit(cache, all);
    REQUIRE(all_done);
    CHECK(all_done->mirror_gitdirs.size() == 3);
    CHECK(tests::read_file(dir / "all/middle/deps/leaf/leaf.txt") == "leaf\n");
    CHECK(git_in(dir / "all/middle/deps/leaf", "rev-parse HEAD") == leaf);
    CHECK(git_in(dir / "all", "status --porcelain").empty());
    CHECK(git_in(dir / "all/middle", "status --porcelain").empty());
    // Every mirror the checkout reads, the submodule's submodule's too, lies in top's scope.
    for (const auto& gitdir : all_done->mirror_gitdirs)
        CHECK((gitdir == all_done->mirror.scope / "repo.git" ||
               gitdir.parent_path() == all_done->mirror.scope / "modules"));

    // What a wrap must bind read-only for git inside those submodules: found from the
    // commit's own .gitmodules, before any checkout.
    const auto prefetched = jobs::submodule_mirrors(cache, all_done->mirror, std::nullopt);
    CHECK(prefetched.size() == 2);
    for (const auto& gitdir : prefetched)
        CHECK(std::find(all_done->mirror_gitdirs.begin(), all_done->mirror_gitdirs.end(), gitdir) !=
              all_done->mirror_gitdirs.end());
    CHECK(jobs::submodule_mirrors(cache, one_done->mirror, std::nullopt).size() == 2);
}

TEST_CASE("relative submodule URLs resolve like git's") {
    CHECK(jobs::resolve_submodule_url("https://github.com/o/top.git", "../lib.git") ==
          "https://github.com/o/lib.git");
    CHECK(jobs::resolve_submodule_url("https://github.com/o/top", "./sub") ==
          "https://github.com/o/top/sub");
    CHECK(jobs::resolve_submodule_url("/srv/git/top/", "../../other/x") == "/srv/other/x");
    CHECK(jobs::resolve_submodule_url("/srv/top", "https://example.com/a") ==
          "https://example.com/a");
}

TEST_CASE("removal never follows a symlink out of the worktree") {
    const auto dir = tests::make_temp_dir("worktree");
    const fs::path outside = dir / "outside";
    tests::write_file(outside / "canary.txt", "keep me\n");
    tests::write_file(dir / "canary-file", "keep me too\n");
    jobs::WorktreeArea area(dir / "state");
    auto worktree = area.create("hostile");
    REQUIRE(worktree);
    const fs::path wt = worktree->path();
    tests::write_file(wt / "src/file.txt", "x");
    fs::create_directory_symlink(outside, wt / "escape");
    fs::create_directory_symlink(outside, wt / "src/escape-dir");
    fs::create_symlink(dir / "canary-file", wt / "escape-file");
    fs::create_symlink("/", wt / "root");
    // A directory left unreadable, and nesting deeper than any descriptor budget.
    tests::write_file(wt / "locked/inner/f", "x");
    fs::create_directory_symlink(outside, wt / "locked/inner/escape");
    ::chmod((wt / "locked/inner").c_str(), 0);
    ::chmod((wt / "locked").c_str(), 0);
    {
        // Go deeper relative to the last level (PATH_MAX forbids absolute paths this long).
        std::string rel;
        for (int i = 0; i < 1500; ++i) rel += "d/";
        REQUIRE(tests::shell("cd " + wt.string() + " && mkdir -p " + rel + " && cd " + rel +
                             " && ln -s " + outside.string() + " escape")
                    .code == 0);
    }

    REQUIRE(worktree->remove());
    CHECK_FALSE(fs::exists(fs::symlink_status(wt)));
    CHECK(tests::read_file(outside / "canary.txt") == "keep me\n");
    CHECK(tests::read_file(dir / "canary-file") == "keep me too\n");
    CHECK(fs::exists("/usr/bin"));

    // A worktree path that is itself a symlink is unlinked, not followed.
    fs::create_directory_symlink(outside, dir / "link-root");
    REQUIRE(jobs::remove_tree(dir / "link-root"));
    CHECK_FALSE(fs::exists(fs::symlink_status(dir / "link-root")));
    CHECK(fs::exists(outside / "canary.txt"));
    CHECK(jobs::remove_tree(dir / "does-not-exist"));
}

TEST_CASE("worktrees of a crashed run are reaped, live ones are not") {
    const auto dir = tests::make_temp_dir("worktree");
    jobs::WorktreeArea area(dir / "state");
    auto live = area.create("live");
    REQUIRE(live);
    tests::write_file(live->path() / "f", "x");
    // A run that crashes: it creates a worktree and dies without cleaning up.
    const pid_t child = ::fork();
    if (child == 0) {
        auto crashed = area.create("crashed");
        if (crashed) tests::write_file(crashed->path() / "f", "x");
        std::_Exit(crashed ? 0 : 1);  // no destructors: the worktree stays, the lease dies
    }
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    REQUIRE(WEXITSTATUS(status) == 0);
    fs::create_directories(area.dir() / "orphan-without-lease/x");
    int before = 0;
    for ([[maybe_unused]] const auto& entry : fs::directory_iterator(area.dir())) ++before;
    CHECK(before == 5);  // live + lease, crashed + lease, orphan

    CHECK(area.reap_stale() == 2);
    CHECK(fs::exists(live->path() / "f"));
    int after = 0;
    for ([[maybe_unused]] const auto& entry : fs::directory_iterator(area.dir())) ++after;
    CHECK(after == 2);

    const fs::path path = live->path();
    jobs::JobWorktree moved = std::move(*live);
    CHECK(fs::exists(path / "f"));  // a moved-from worktree removes nothing
    { jobs::JobWorktree gone = std::move(moved); }
    CHECK_FALSE(fs::exists(path));
}

TEST_CASE("a mirror whose blob is corrupt under a checkout is re-cloned and the checkout retried") {
    const auto dir = tests::make_temp_dir("worktree");
    const fs::path origin = dir / "origin";
    std::string big;
    for (int i = 0; i < 4000; ++i) big += "line " + std::to_string(i * 7919 % 10007) + "\n";
    const std::string sha = tests::make_repo(origin, {{"big.txt", big}, {"small.txt", "s\n"}});
    const jobs::MirrorCache cache(dir / "state");
    REQUIRE(jobs::checkout_commit(cache, checkout_request(origin.string(), sha, dir / "first")));
    const fs::path gitdir = cache.mirrors_dir() /
                            jobs::mirror_dir_name(*jobs::parse_remote(origin.string())) /
                            "repo.git";
    // Overwrite bytes in the middle of big.txt's compressed data: the index still lists it.
    const std::string blob = git_in(origin, "rev-parse HEAD:big.txt");
    fs::path pack;
    for (const auto& entry : fs::directory_iterator(gitdir / "objects/pack"))
        if (entry.path().extension() == ".pack") pack = entry.path();
    REQUIRE_FALSE(pack.empty());
    const std::string verify =
        sh("git verify-pack -v " + pack.replace_extension(".idx").string() + " | grep ^" + blob);
    std::istringstream fields(verify);
    std::string id, type;
    long size = 0, packed = 0, offset = 0;
    fields >> id >> type >> size >> packed >> offset;
    REQUIRE(packed > 100);
    pack.replace_extension(".pack");
    fs::permissions(pack, fs::perms::owner_write, fs::perm_options::add);
    sh("printf 'CORRUPTCORRUPTCORRUPT' | dd of=" + pack.string() +
       " bs=1 seek=" + std::to_string(offset + packed / 2) + " conv=notrunc status=none");

    auto second =
        jobs::checkout_commit(cache, checkout_request(origin.string(), sha, dir / "second"));
    REQUIRE(second);
    CHECK(second->mirror.event == jobs::MirrorEvent::recloned);
    CHECK(tests::read_file(dir / "second/big.txt") == big);
    CHECK(git_in(dir / "second", "status --porcelain").empty());
}

TEST_CASE("under sandgate's own wrap, git works in the worktree and the mirror is read-only") {
    SKIP_UNDER_WRAP("a nested wrap cannot mount /proc");
    const auto dir = tests::make_temp_dir("worktree");
    const fs::path origin = dir / "origin";
    const std::string sha = tests::make_repo(origin, {{"a.txt", "a\n"}});
    tests::commit_file(origin, "b.txt", "b\n");
    const std::string tip = git_in(origin, "rev-parse HEAD");
    const jobs::MirrorCache cache(dir / "state");
    jobs::WorktreeArea area(dir / "state");
    auto worktree = area.create("wrapped");
    REQUIRE(worktree);
    auto done =
        jobs::checkout_commit(cache, checkout_request(origin.string(), tip, worktree->path()));
    REQUIRE(done);
    tests::commit_file(origin, "c.txt", "c\n");
    auto other = cache.ensure_commit(jobs::MirrorRequest{
        origin.string(), git_in(origin, "rev-parse HEAD"), "", std::nullopt, ""});
    REQUIRE(other);
    tests::make_repo(dir / "secret", {{"s.txt", "private\n"}});
    auto secret = cache.ensure_commit(jobs::MirrorRequest{
        (dir / "secret").string(), git_in(dir / "secret", "rev-parse HEAD"), "", std::nullopt, ""});
    REQUIRE(secret);

    sandbox::RunRequest request;
    request.argv = {
        "/bin/sh", "-c",
        "git rev-parse HEAD && git log --format=%s && test -z \"$(git status --porcelain)\" && "
        "echo x > new.txt && git add new.txt && git -c user.name=s -c user.email=s@x commit -qm "
        "step && "
        "git rev-list --count HEAD && ! touch " +
            done->mirror.gitdir.string() +
            "/objects/x 2>/dev/null && "
            "! ls " +
            secret->gitdir.string() + " 2>/dev/null && echo ok"};
    request.cwd = worktree->path();
    request.env = sandbox::child_environment(sandbox::current_environment(), {}, {});
    request.policy.mode = sandbox::SandboxMode::bwrap;
    request.policy.read_only = {done->mirror.scope};  // as the gate binds it
    request.timeout = std::chrono::minutes(5);
    const auto result = sandbox::run(request);
    INFO(result.out.head + result.err.head + (result.error ? result.error->message : ""));
    REQUIRE(result.exit_code == 0);
    CHECK(result.out.head == tip + "\nchange\ninitial\n3\nok\n");
}

TEST_CASE("GitWorkspace backs actions/checkout: ref, path, fetch-depth, submodules") {
    const auto dir = tests::make_temp_dir("worktree");
    const fs::path origin = dir / "origin";
    const std::string first = tests::make_repo(origin, {{"a.txt", "1\n"}});
    const std::string second = tests::commit_file(origin, "a.txt", "2\n");
    sh("git -C " + origin.string() + " tag v1 " + first + " && git -C " + origin.string() +
       " tag -a -m annotated v1a " + first);
    const std::string third = tests::commit_file(origin, "a.txt", "3\n");
    sh("git -C " + origin.string() + " branch older " + second);
    const jobs::MirrorCache cache(dir / "state");
    jobs::WorktreeArea area(dir / "state");
    fs::path kept;
    {
        jobs::GitWorkspace provider(
            cache, area,
            jobs::GitSource{origin.string(), third, "refs/heads/main", "o/r", std::nullopt});
        auto workspace = provider.workspace_for("build (linux)");
        REQUIRE(workspace);
        kept = *workspace;
        CHECK(fs::is_empty(*workspace));  // nothing until actions/checkout runs

        auto done = provider.checkout(*workspace, jobs::CheckoutRequest{});
        REQUIRE(done);
        CHECK_THAT(*done, Catch::Contains(third) && Catch::Contains("depth 1"));
        CHECK(git_in(*workspace, "rev-parse HEAD") == third);
        CHECK(git_in(*workspace, "rev-list --count HEAD") == "1");
        CHECK(provider.mirrors_used().size() == 1);

        jobs::CheckoutRequest again;
        again.fetch_depth = "0";
        again.ref = "older";
        REQUIRE(provider.checkout(*workspace, again));  // cleans the previous checkout first
        CHECK(git_in(*workspace, "rev-parse HEAD") == second);
        CHECK(git_in(*workspace, "rev-list --count HEAD") == "2");
        CHECK(git_in(*workspace, "status --porcelain").empty());

        for (const std::string& ref :
             std::vector<std::string>{"v1", "v1a", "refs/tags/v1", first}) {
            jobs::CheckoutRequest tagged;
            tagged.ref = ref;
            tagged.path = "sub/dir";
            REQUIRE(provider.checkout(*workspace, tagged));
            CHECK(git_in(*workspace / "sub/dir", "rev-parse HEAD") == first);
        }

        jobs::CheckoutRequest bad;
        bad.path = "../escape";
        CHECK_FALSE(provider.checkout(*workspace, bad));
        bad = {};
        bad.repository = "someone/else";
        auto other = provider.checkout(*workspace, bad);
        REQUIRE_FALSE(other);
        CHECK_THAT(other.error().message, Catch::Contains("someone/else"));
        bad = {};
        bad.ref = "no-such-branch";
        auto unknown = provider.checkout(*workspace, bad);
        REQUIRE_FALSE(unknown);
        CHECK_THAT(unknown.error().message, Catch::Contains("no-such-branch"));
        bad = {};
        bad.fetch_depth = "deep";
        CHECK_FALSE(provider.checkout(*workspace, bad));
        bad = {};
        bad.submodules = "maybe";
        CHECK_FALSE(provider.checkout(*workspace, bad));
    }
    CHECK_FALSE(fs::exists(kept));  // the provider's worktrees go with it
}
