// The mirror cache's garbage collection (jobs/git/mirror_gc.hpp): last use recorded by fetches and
// job starts; scopes of repositories no longer served, idle scopes and idle flat mirrors of the
// earlier layout removed through a trash rename; in-use and locked mirrors kept; a later fetch
// finds the whole mirror or none. Real repositories (git CLI), file:// remotes, real mirrors.
#include <algorithm>
#include <catch2/catch.hpp>

#include "jobs/git/git_lock.hpp"
#include "jobs/git/git_mirror.hpp"
#include "jobs/git/git_mirror_layout.hpp"
#include "jobs/git/git_url.hpp"
#include "jobs/git/mirror_gc.hpp"
#include "tests/helpers/git_fixture.hpp"
#include "tests/support/temp_dir.hpp"

namespace fs = std::filesystem;
using tests::sh;

namespace {

struct Repos {
    fs::path dir = tests::make_temp_dir("mirror-gc");
    fs::path state = dir / "state";
    fs::path mirrors = state / "mirrors";
    jobs::MirrorCache cache{state};

    // A repository `name` with one commit, and its url.
    std::pair<std::string, std::string> repo(const std::string& name) {
        const std::string sha = tests::make_repo(dir / name, {{name + ".txt", name + "\n"}});
        return {"file://" + (dir / name).string(), sha};
    }
    // The cache's answer to a fetch of `sha` from `url`.
    auto ensure(const std::string& url, const std::string& sha) {
        jobs::MirrorRequest request;
        request.remote = url;
        request.sha = sha;
        auto mirror = cache.ensure_commit(request);
        REQUIRE(mirror);
        return *mirror;
    }
    // The scope a fetch of `sha` from `url` lands in.
    std::string fetch(const std::string& url, const std::string& sha) {
        const auto mirror = ensure(url, sha);
        CHECK(mirror.presence == jobs::CommitPresence::present);
        return mirror.scope.filename().string();
    }
    // Makes every trace of use of `path` (a scope or flat mirror, recursively) and of extra
    // files 20 days old.
    void age(const fs::path& path, const std::vector<fs::path>& extra = {}) {
        sh("find " + path.string() + " -exec touch -h -d '20 days ago' {} +");
        for (const auto& file : extra)
            if (fs::exists(file)) sh("touch -h -d '20 days ago' " + file.string());
    }
    fs::path stamp(const std::string& scope) const { return mirrors / "last-use" / scope; }
    bool trash_left() const {
        for (const auto& entry : fs::directory_iterator(mirrors))
            if (entry.path().filename().string().starts_with("gc-trash.")) return true;
        return false;
    }
};

std::vector<std::string> names(const jobs::MirrorGcReport& report) {
    std::vector<std::string> out;
    for (const auto& removal : report.removed) out.push_back(removal.name);
    std::sort(out.begin(), out.end());
    return out;
}

}  // namespace

TEST_CASE("unserved and idle scopes are removed; served, recent and in-use ones kept") {
    Repos r;
    const auto [app_url, app_sha] = r.repo("app");
    const auto [lib_url, lib_sha] = r.repo("lib");
    const auto [old_url, old_sha] = r.repo("old");
    const auto app = r.fetch(app_url, app_sha);
    const auto lib = r.fetch(lib_url, lib_sha);
    const auto old = r.fetch(old_url, old_sha);
    CHECK(*jobs::mirror_scope_name(app_url) == app);
    for (const auto& scope : {app, lib, old})
        CHECK(fs::exists(r.stamp(scope)));  // fetches record use

    jobs::MirrorGcPolicy policy;
    policy.served = std::set<std::string>{app, lib};
    auto first = jobs::collect_mirrors(r.state, policy);
    REQUIRE(first);
    CHECK(names(*first) == std::vector<std::string>{old});
    CHECK(first->removed.at(0).reason == jobs::MirrorGcReason::unserved);
    CHECK(first->kept == 2);
    CHECK_FALSE(fs::exists(r.mirrors / old));
    CHECK_FALSE(fs::exists(r.stamp(old)));
    CHECK_FALSE(fs::exists(r.mirrors / "locks" / (old + ".lock")));  // unlinked under the lock
    CHECK(fs::exists(r.mirrors / "locks" / (app + ".lock")));        // a kept scope's stays
    CHECK_FALSE(r.trash_left());

    // app and lib both idle for 20 days; lib is in use by a running job.
    r.age(r.mirrors / app, {r.stamp(app)});
    r.age(r.mirrors / lib, {r.stamp(lib)});
    policy.served.reset();
    policy.in_use = {lib};
    auto second = jobs::collect_mirrors(r.state, policy);
    REQUIRE(second);
    CHECK(names(*second) == std::vector<std::string>{app});
    CHECK(second->removed.at(0).reason == jobs::MirrorGcReason::idle);
    CHECK(fs::exists(r.mirrors / lib / "repo.git"));
    CHECK_FALSE(fs::exists(r.mirrors / app));

    // A job starting (make_mirror_scope) records a use: lib is no longer idle.
    REQUIRE(jobs::make_mirror_scope(r.state, lib_url));
    policy.in_use.clear();
    auto third = jobs::collect_mirrors(r.state, policy);
    REQUIRE(third);
    CHECK(third->removed.empty());
    CHECK(third->kept == 1);

    // A later fetch of a collected repository simply clones it again.
    const auto recloned = r.ensure(app_url, app_sha);
    CHECK(recloned.event == jobs::MirrorEvent::cloned);
    CHECK(recloned.presence == jobs::CommitPresence::present);
}

TEST_CASE(
    "a mirror whose fetch lock is held, its own or a submodule's, is kept and collected later") {
    Repos r;
    const auto [app_url, app_sha] = r.repo("app");
    const auto app = r.fetch(app_url, app_sha);
    jobs::MirrorGcPolicy nothing_served;
    nothing_served.served = std::set<std::string>{};
    for (const auto& lock_name : {app + ".lock", app + ".lib-0123456789abcdef.lock"}) {
        INFO(lock_name);
        auto held =
            jobs::FileLock::acquire(r.mirrors / "locks" / lock_name, jobs::LockMode::shared);
        REQUIRE(held);
        auto report = jobs::collect_mirrors(r.state, nothing_served);
        REQUIRE(report);
        CHECK(report->removed.empty());
        CHECK(report->busy == std::vector<std::string>{app});
        CHECK(fs::exists(r.mirrors / app / "repo.git"));
    }
    auto report = jobs::collect_mirrors(r.state, nothing_served);
    REQUIRE(report);
    CHECK(names(*report) == std::vector<std::string>{app});
    CHECK(report->busy.empty());
    // Its lock files went with it, the submodule's too; nothing else of the scope is left.
    std::vector<std::string> left;
    for (const auto& entry : fs::directory_iterator(r.mirrors / "locks"))
        left.push_back(entry.path().filename().string());
    CHECK(left.empty());
    CHECK_FALSE(fs::exists(r.stamp(app)));
    // A fetch after the collection makes the lock file again and clones.
    r.fetch(app_url, app_sha);
    CHECK(fs::exists(r.mirrors / "locks" / (app + ".lock")));
}

TEST_CASE(
    "idle flat mirrors of the earlier layout go with their lock and leftovers; old trash too") {
    Repos r;
    const auto [old_url, old_sha] = r.repo("old");
    const auto [new_url, new_sha] = r.repo("new");
    fs::create_directories(r.mirrors);
    const std::string old_name = *jobs::mirror_scope_name(old_url);
    const std::string new_name = *jobs::mirror_scope_name(new_url);
    for (const auto& [url, name] : {std::pair{old_url, old_name}, std::pair{new_url, new_name}}) {
        sh("git clone -q --mirror " + url + " " + (r.mirrors / (name + ".git")).string());
        tests::write_file(r.mirrors / (name + ".lock"), "");
    }
    fs::create_directories(r.mirrors / (old_name + ".git.tmp-abc123") / "objects");
    r.age(r.mirrors / (old_name + ".git"), {r.mirrors / (old_name + ".lock")});
    // An interrupted earlier collection left its trash.
    fs::create_directories(r.mirrors / "gc-trash.AbC123" / "some-0123456789abcdef" / "repo.git");
    tests::write_file(r.mirrors / "unrelated.txt", "not a mirror\n");

    auto report = jobs::collect_mirrors(r.state, {});
    REQUIRE(report);
    CHECK(names(*report) == std::vector<std::string>{old_name + ".git"});
    CHECK(report->removed.at(0).kind == jobs::MirrorKind::flat);
    CHECK_FALSE(fs::exists(r.mirrors / (old_name + ".git")));
    CHECK_FALSE(fs::exists(r.mirrors / (old_name + ".lock")));
    CHECK_FALSE(fs::exists(r.mirrors / (old_name + ".git.tmp-abc123")));
    CHECK(fs::exists(r.mirrors / (new_name + ".git")));  // used recently: kept, adopted later
    CHECK(fs::exists(r.mirrors / "unrelated.txt"));
    CHECK_FALSE(r.trash_left());

    // The kept flat mirror is still adopted by its first fetch; the removed one is cloned.
    // Moved into its scope, then re-cloned there: a git CLI mirror lacks sandgate's marker.
    CHECK(r.ensure(new_url, new_sha).event == jobs::MirrorEvent::recloned);
    CHECK(r.fetch(old_url, old_sha) == old_name);
}

TEST_CASE("no mirrors directory is an empty report; an unparsable remote has no scope name") {
    const auto dir = tests::make_temp_dir("mirror-gc");
    auto report = jobs::collect_mirrors(dir / "nowhere", {});
    REQUIRE(report);
    CHECK(report->removed.empty());
    CHECK(report->kept == 0);
    auto bad = jobs::mirror_scope_name("ssh://host/repo.git");
    REQUIRE_FALSE(bad);
    CHECK(bad.error().kind == common::ErrorKind::invalid_input);
    REQUIRE(jobs::record_mirror_use(dir / "m", "x-0123456789abcdef"));
    CHECK(fs::exists(dir / "m/last-use/x-0123456789abcdef"));
}

TEST_CASE("a deferred collection renames at once and leaves the removal to empty_mirror_trash") {
    Repos r;
    const auto [app_url, app_sha] = r.repo("app");
    const auto app = r.fetch(app_url, app_sha);
    jobs::MirrorGcPolicy nothing_served;
    nothing_served.served = std::set<std::string>{};
    auto report = jobs::collect_mirrors(r.state, nothing_served, std::chrono::system_clock::now(),
                                        jobs::TrashRemoval::deferred);
    REQUIRE(report);
    CHECK(names(*report) == std::vector<std::string>{app});
    CHECK_FALSE(fs::exists(r.mirrors / app));
    CHECK(r.trash_left());
    CHECK(r.fetch(app_url, app_sha) == app);  // a fetch meanwhile clones anew beside the trash
    auto emptied = jobs::empty_mirror_trash(r.state);
    REQUIRE(emptied);
    CHECK(*emptied == 1);
    CHECK_FALSE(r.trash_left());
    CHECK(fs::exists(r.mirrors / app / "repo.git"));
}
