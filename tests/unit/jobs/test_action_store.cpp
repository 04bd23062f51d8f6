#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

#include "jobs/actions/action_archive.hpp"
#include "jobs/actions/action_resolve.hpp"
#include "jobs/actions/action_store.hpp"
#include "jobs/workflow/action_model.hpp"
#include "tests/support/action_fixture.hpp"
#include "tests/support/run_helpers.hpp"

namespace fs = std::filesystem;

namespace {

jobs::ActionSource source_of(const std::string& text) {
    auto source = jobs::ActionSource::parse(text);
    REQUIRE(source.has_value());
    return *source;
}

jobs::ActionResolver resolver(const fs::path& dir, const std::string& source,
                              jobs::PinRefresh refresh = jobs::PinRefresh::cached_first) {
    jobs::ResolveOptions options;
    options.refresh = refresh;
    options.fill_command = "sandgate actions pull -C /src/repo";
    return jobs::ActionResolver(jobs::ActionStore({dir / "archives", dir / "work"}),
                                source_of(source), options);
}

bool writable_bits(const fs::path& path) {
    struct stat st {};
    REQUIRE(::lstat(path.c_str(), &st) == 0);
    return (st.st_mode & 0222) != 0;
}

std::size_t count_entries(const fs::path& dir) {
    std::error_code ec;
    std::size_t n = 0;
    for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); ++it)
        ++n;
    return n;
}

}  // namespace

TEST_CASE("action references are parsed strictly") {
    auto ref = jobs::parse_action_ref("actions/cache/restore@v5");
    REQUIRE(ref.has_value());
    CHECK(ref->owner == "actions");
    CHECK(ref->repo == "cache");
    CHECK(ref->path == "restore");
    CHECK(ref->ref == "v5");
    CHECK(ref->archive_name() == "actions_cache");
    CHECK(ref->uses() == "actions/cache/restore@v5");
    auto branch = jobs::parse_action_ref("owner/repo@releases/v1");
    REQUIRE(branch.has_value());
    CHECK(branch->ref == "releases/v1");
    for (const char* bad :
         {"actions/cache", "actions@v1", "../x/y@v1", "a/b/../c@v1", "a/b//c@v1", "a/b@", "a/b@-x",
          "a/b@v 1", "a/b@x..y", "a b/c@v1", "a/./c@v1", "/abs/x@v1"}) {
        INFO(bad);
        CHECK_FALSE(jobs::parse_action_ref(bad).has_value());
    }
    CHECK(jobs::is_remote_uses("actions/setup-python@v7"));
    CHECK_FALSE(jobs::is_remote_uses("./local"));
    CHECK_FALSE(jobs::is_remote_uses("docker://alpine:3"));
    CHECK(jobs::is_builtin_action("actions/checkout@v4"));
    CHECK(jobs::is_builtin_action("Actions/Checkout@v5"));
    CHECK_FALSE(jobs::is_builtin_action("actions/checkout-extra@v1"));
}

TEST_CASE(
    "a file:// mirror source resolves the real actions' tags to their commits, in the runner's "
    "archive layout") {
    const auto dir = tests::make_temp_dir("actions");
    const auto source = tests::make_mirror_source(dir);
    auto actions = resolver(dir, "file://" + source.string());
    for (const auto& action : tests::corpus_actions()) {
        const std::string uses = action.owner + "/" + action.repo + "@" + action.tag;
        INFO(uses);
        const auto entry = actions.get(uses);
        REQUIRE(entry.error.empty());
        CHECK(entry.sha == action.bundle_sha);
        const auto archive =
            dir / "archives" / (action.owner + "_" + action.repo) / (action.bundle_sha + ".tar.gz");
        CHECK(fs::is_regular_file(archive));
        CHECK(entry.tree ==
              dir / "work/trees" / (action.owner + "_" + action.repo) / action.bundle_sha);
        CHECK(fs::is_regular_file(entry.directory / "action.yml"));
        CHECK_FALSE(writable_bits(entry.directory));
        CHECK_FALSE(writable_bits(entry.directory / "action.yml"));
        // The archive is GitHub's tarball shape: one top directory OWNER-REPO-SHORTSHA.
        const auto check = dir / ("check-" + action.repo);
        fs::create_directories(check);
        tests::sh("tar -C " + check.string() + " -xzf " + archive.string());
        CHECK(fs::is_directory(
            check / (action.owner + "-" + action.repo + "-" + action.bundle_sha.substr(0, 7))));
        CHECK(count_entries(check) == 1);
    }
    const jobs::ActionStore store({dir / "archives", dir / "work"});
    auto ref = jobs::parse_action_ref("actions/setup-python@v7.0.0");
    REQUIRE(ref.has_value());
    CHECK_FALSE(store.pinned(*ref).has_value());  // only what was resolved is pinned
    ref->ref = "v7";
    CHECK(store.pinned(*ref) == tests::corpus_actions().front().bundle_sha);
    // A full SHA and a branch resolve too; a ref the repository lacks is an error naming it.
    CHECK(actions.get("actions/setup-python@main").sha ==
          tests::corpus_actions().front().bundle_sha);
    CHECK(actions.get("actions/setup-python@" + tests::corpus_actions().front().bundle_sha)
              .error.empty());
    // OWNER/REPO/PATH: the action in a directory of the same tree.
    const auto restore = actions.get("actions/cache/restore@v5");
    REQUIRE(restore.error.empty());
    CHECK(restore.tree == actions.get("actions/cache@v5").tree);
    CHECK(restore.directory == restore.tree / "restore");
    CHECK(jobs::load_action(restore.tree, restore.directory).has_value());
    const auto missing = actions.get("actions/setup-python@v99");
    CHECK(missing.error.find("has no tag, branch or commit 'v99'") != std::string::npos);
}

TEST_CASE(
    "pinned refs resolve from the store alone, without the source, until a pull refreshes them") {
    const auto dir = tests::make_temp_dir("actions");
    const auto source = tests::make_mirror_source(dir, "setup-python");
    {
        auto pull = resolver(dir, source.string(), jobs::PinRefresh::from_source);
        REQUIRE(pull.get("actions/setup-python@v7").error.empty());
    }
    fs::remove_all(source);
    auto offline = resolver(dir, "none");
    const auto started = std::chrono::steady_clock::now();
    const auto entry = offline.get("actions/setup-python@v7");
    const auto took = std::chrono::steady_clock::now() - started;
    CHECK(entry.error.empty());
    CHECK(entry.sha == tests::corpus_actions().front().bundle_sha);
    CHECK(took < std::chrono::milliseconds(50));
    CHECK(offline.lock().size() == 1);
}

TEST_CASE(
    "the official runner's pre-filled archive cache serves SHA-pinned actions with no source") {
    const auto dir = tests::make_temp_dir("actions");
    jobs::ActionResolver actions(
        jobs::ActionStore({tests::corpus_dir() / "archive-cache", dir / "work"}), source_of("none"),
        jobs::ResolveOptions{});
    for (const auto& action : tests::corpus_actions()) {
        const auto entry =
            actions.get(action.owner + "/" + action.repo + "@" + action.upstream_sha);
        INFO(entry.uses << ": " << entry.error);
        REQUIRE(entry.error.empty());
        auto manifest = jobs::load_action(entry.tree, entry.directory);
        REQUIRE(manifest.has_value());
        CHECK(manifest->kind == (action.repo == "rust-toolchain" ? jobs::ActionKind::composite
                                                                 : jobs::ActionKind::node));
    }
    CHECK(fs::is_directory(
        dir / "work/trees/actions_setup-python/5fda3b95a4ea91299a34e894583c3862153e4b97/dist"));
}

TEST_CASE(
    "a cache miss with no source reachable fails closed with one line naming the action and the "
    "pull command") {
    const auto dir = tests::make_temp_dir("actions");
    for (const std::string& source : {std::string("none"), (dir / "no-such-source").string()}) {
        auto actions = resolver(dir, source);
        const auto entry = actions.get("actions/setup-python@v7");
        INFO(entry.error);
        CHECK(entry.sha.empty());
        CHECK(entry.error.find("'actions/setup-python@v7'") != std::string::npos);
        CHECK(entry.error.find("`sandgate actions pull -C /src/repo`") != std::string::npos);
        CHECK(entry.error.find('\n') == std::string::npos);
    }
    CHECK_FALSE(fs::exists(dir / "work/trees"));
}

TEST_CASE(
    "archives whose entries escape their tree, or that exceed the caps, are refused and leave "
    "nothing") {
    const auto dir = tests::make_temp_dir("actions");
    using tests::TarEntry;
    const TarEntry top{"a-b-1234567/", AE_IFDIR, ""};
    const TarEntry manifest{"a-b-1234567/action.yml", AE_IFREG,
                            "runs: {using: node20, main: x.js}\n"};
    struct Case {
        const char* what;
        std::vector<TarEntry> entries;
        const char* message;
    };
    const std::vector<Case> cases{
        {"absolute", {top, {"/etc/evil", AE_IFREG, "x"}}, "outside its tree"},
        {"dotdot", {top, {"a-b-1234567/../../evil", AE_IFREG, "x"}}, "outside its tree"},
        {"two tops", {top, manifest, {"other/x", AE_IFREG, "x"}}, "more than one top directory"},
        {"link out", {top, {"a-b-1234567/l", AE_IFLNK, "/etc"}}, "link out of its tree"},
        {"link up", {top, {"a-b-1234567/d/l", AE_IFLNK, "../../x"}}, "link out of its tree"},
        {"through a link",
         {top, {"a-b-1234567/l", AE_IFLNK, "."}, {"a-b-1234567/l/../../x", AE_IFREG, "x"}},
         "outside its tree"},
        {"hard link",
         {top, manifest, {"a-b-1234567/h", AE_IFREG, "/etc/passwd", true}},
         "hard link"},
        {"fifo", {top, {"a-b-1234567/p", AE_IFIFO, ""}}, "neither a file"},
        {"char device", {top, {"a-b-1234567/c", AE_IFCHR, ""}}, "neither a file"},
        {"too big", {top, {"a-b-1234567/big", AE_IFREG, std::string(5000, 'x')}}, "larger than"},
    };
    const jobs::ArchiveLimits limits{1'000'000, 4096, 100};
    for (const auto& c : cases) {
        INFO(c.what);
        const auto archive = dir / (std::string(c.what) + ".tar.gz");
        tests::write_tarball(archive, c.entries);
        const auto dest = dir / (std::string("out-") + c.what);
        auto unpacked = jobs::unpack_action_archive(archive, dest, limits);
        REQUIRE_FALSE(unpacked.has_value());
        CHECK(unpacked.error().message.find(c.message) != std::string::npos);
        CHECK(unpacked.error().message.find('\n') == std::string::npos);
        CHECK_FALSE(fs::exists(dest));
    }
    CHECK_FALSE(fs::exists("/etc/evil"));
    // A bomb stops at the total cap however small its archive is.
    tests::write_tarball(dir / "bomb.tar.gz",
                         {top,
                          {"a-b-1234567/1", AE_IFREG, std::string(3000, 'x')},
                          {"a-b-1234567/2", AE_IFREG, std::string(3000, 'y')}});
    auto bomb = jobs::unpack_action_archive(dir / "bomb.tar.gz", dir / "out-bomb",
                                            jobs::ArchiveLimits{5000, 4096, 100});
    REQUIRE_FALSE(bomb.has_value());
    CHECK(bomb.error().message.find("unpacks to more than 5000 bytes") != std::string::npos);
    // Links inside the tree and plain content unpack.
    tests::write_tarball(dir / "good.tar.gz", {top,
                                               manifest,
                                               {"a-b-1234567/d/", AE_IFDIR, ""},
                                               {"a-b-1234567/d/l", AE_IFLNK, "../action.yml"}});
    REQUIRE(jobs::unpack_action_archive(dir / "good.tar.gz", dir / "out-good", limits).has_value());
    CHECK(tests::read_file(dir / "out-good/d/l").find("node20") != std::string::npos);
}

TEST_CASE(
    "the store refuses a bad archive, ignores a crashed unpack's leftovers, lists and prunes") {
    const auto dir = tests::make_temp_dir("actions");
    const jobs::ActionStore store({dir / "archives", dir / "work"});
    const std::string sha(40, 'a');
    auto ref = jobs::parse_action_ref("evil/act@" + sha);
    REQUIRE(ref.has_value());
    fs::create_directories(dir / "archives/evil_act");
    tests::write_tarball(store.archive_path(*ref, sha),
                         {{"top/", AE_IFDIR, ""}, {"top/l", AE_IFLNK, "/"}});
    auto tree = store.tree(*ref, sha);
    REQUIRE_FALSE(tree.has_value());
    CHECK(tree.error().message.find("link out of its tree") != std::string::npos);
    CHECK(count_entries(dir / "work/trees/evil_act") == 0);  // neither a tree nor a leftover
    // A leftover of an unpack that died half-way is never taken for the tree.
    const std::string good(40, 'b');
    ref->ref = good;
    tests::write_tarball(store.archive_path(*ref, good),
                         {{"top/", AE_IFDIR, ""},
                          {"top/action.yml", AE_IFREG, "runs: {using: node20, main: m.js}\n"}});
    fs::create_directories(dir / ("work/trees/evil_act/.tmp-" + good + "-XXXX/t"));
    tests::write_file(dir / ("work/trees/evil_act/.tmp-" + good + "-XXXX/t/half"), "");
    auto unpacked = store.tree(*ref, good);
    REQUIRE(unpacked.has_value());
    CHECK(*unpacked == dir / "work/trees/evil_act" / good);
    CHECK(fs::exists(*unpacked / "action.yml"));
    CHECK_FALSE(fs::exists(*unpacked / "half"));
    REQUIRE(store.pin(jobs::ActionRef{"evil", "act", "", "v1"}, good).has_value());

    auto listed = store.list();
    REQUIRE(listed.has_value());
    REQUIRE(listed->size() == 2);
    CHECK((*listed)[1].sha == good);
    CHECK((*listed)[1].refs == std::vector<std::string>{"v1"});
    CHECK((*listed)[1].unpacked);
    CHECK_FALSE((*listed)[0].unpacked);
    {
        auto held = store.lock_shared();  // a run using the trees
        REQUIRE(held.has_value());
        auto refused = store.prune(jobs::PruneArchives::keep);
        REQUIRE_FALSE(refused.has_value());
        CHECK(refused.error().message.find("a run is using the action store") != std::string::npos);
    }
    auto pruned = store.prune(jobs::PruneArchives::keep);
    REQUIRE(pruned.has_value());
    CHECK_FALSE(fs::exists(*unpacked));
    CHECK_FALSE(fs::exists(dir / "work/trees/evil_act"));
    CHECK(fs::exists(store.archive_path(*ref, sha)));
    REQUIRE(store.prune(jobs::PruneArchives::unreferenced).has_value());
    CHECK_FALSE(fs::exists(store.archive_path(*ref, sha)));  // no pin names it
    CHECK(fs::exists(store.archive_path(*ref, good)));
}

TEST_CASE(
    "sandgate actions pull fills the store from a repository's workflows; list and prune show and "
    "clear it") {
    const auto dir = tests::make_temp_dir("actions");
    const auto source = tests::make_mirror_source(dir);
    tests::write_file(dir / "repo/.github/workflows/ci.yml", R"(on: push
jobs:
  build:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-python@v7
      - uses: dtolnay/rust-toolchain@v1
      - run: echo hi
)");
    const std::vector<std::string> store{"--actions-dir", (dir / "store").string(), "--state-dir",
                                         (dir / "state").string()};
    auto with_store = [&](std::vector<std::string> args) {
        args.insert(args.end(), store.begin(), store.end());
        auto ran = tests::run_sandgate(dir, args);
        UNSCOPED_INFO(ran.output);
        return ran;
    };
    auto pulled =
        with_store({"actions", "pull", "-C", "repo", "--source", "file://" + source.string()});
    CHECK(pulled.exit_code == 0);
    CHECK(pulled.output.find("91b337006d77bc934620a651e697d85c92c5b201 actions/setup-python@v7") !=
          std::string::npos);
    CHECK(
        pulled.output.find("42bd78258edd451ea3bb64172d301c67497f7e6d dtolnay/rust-toolchain@v1") !=
        std::string::npos);
    CHECK(pulled.output.find("checkout") == std::string::npos);  // a builtin: never fetched
    auto listed = with_store({"actions", "list"});
    CHECK(listed.exit_code == 0);
    CHECK(listed.output.find("actions_setup-python") != std::string::npos);
    CHECK(listed.output.find("unpacked v7") != std::string::npos);
    auto pruned = with_store({"actions", "prune"});
    CHECK(pruned.exit_code == 0);
    CHECK(pruned.output.find("removed " +
                             (dir / "state/action-work/trees/actions_setup-python").string()) !=
          std::string::npos);
    CHECK(with_store({"actions", "list"}).output.find("packed   v7") != std::string::npos);
    // Errors: no source for a named action is exit 1 with the one line; bad usage is 2.
    auto missing =
        with_store({"actions", "pull", "acme/none@v1", "--source", "file://" + source.string()});
    CHECK(missing.exit_code == 1);
    CHECK(missing.output.find("'acme/none@v1' is not in the action cache") != std::string::npos);
    CHECK(with_store({"actions", "pull", "./local"}).exit_code == 2);
    CHECK(with_store({"actions", "pull", "--source", "ssh://host/x"}).exit_code == 2);
    CHECK(tests::run_sandgate(dir, {"actions"}).exit_code == 2);
}
