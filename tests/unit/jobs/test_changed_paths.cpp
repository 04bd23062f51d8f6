// The files an event changed (jobs/git/changed_paths.cpp), computed with libgit2 in real
// repositories made with the git CLI: additions, modifications, deletions and renames (both
// paths), the three-dot diff of a pull request whose base moved on, new and deleted branches,
// commits missing from the repository (an error, and select_for_event failing open with a
// warning), and GitHub's 300-file limit applied to paths and paths-ignore.
#include <algorithm>
#include <catch2/catch.hpp>
#include <set>
#include <string>

#include "jobs/git/changed_paths.hpp"
#include "tests/helpers/git_fixture.hpp"
#include "tests/support/temp_dir.hpp"

namespace fs = std::filesystem;
using tests::sh;

namespace {

// Enough lines that a rename with a small edit stays above libgit2's 50% similarity.
std::string body(const std::string& tag) {
    std::string text;
    for (int i = 0; i < 20; ++i) text += tag + " line " + std::to_string(i) + "\n";
    return text;
}

std::set<std::string> as_set(const jobs::ChangedFiles& changed) {
    return {changed.paths.begin(), changed.paths.end()};
}

jobs::Value payload(const std::string& json) {
    auto value = jobs::parse_json(json);
    REQUIRE(value);
    return *value;
}

jobs::Value push(const std::string& before, const std::string& after,
                 const std::string& extra = "") {
    return payload("{\"ref\":\"refs/heads/feature\",\"before\":\"" + before + "\",\"after\":\"" +
                   after + "\"" + extra + "}");
}

// base or base_ref empty: left out of the payload.
jobs::Value pull(const std::string& base, const std::string& head,
                 const std::string& base_ref = "main") {
    std::string fields;
    if (!base_ref.empty()) fields = "\"ref\":\"" + base_ref + "\"";
    if (!base.empty())
        fields += (fields.empty() ? "" : ",") + std::string("\"sha\":\"") + base + "\"";
    return payload("{\"action\":\"synchronize\",\"pull_request\":{\"base\":{" + fields +
                   "},\"head\":{\"sha\":\"" + head + "\"}}}");
}

jobs::Workflow workflow(const std::string& file, const std::string& on) {
    auto parsed = jobs::parse_workflow("on:\n" + on +
                                           "jobs:\n  a:\n    runs-on: ubuntu-latest\n"
                                           "    steps:\n      - run: true\n",
                                       file);
    REQUIRE(parsed);
    return *parsed;
}

std::vector<std::string> files_of(const jobs::EventSelection& selection) {
    std::vector<std::string> files;
    for (const auto& w : selection.workflows) files.push_back(w.file);
    return files;
}

const std::string k_zeros(40, '0');

// A repository whose `feature` branch (head: src/feature.c) forked from main, and whose main
// moved on after the fork (base: docs/later.md).
struct Fork {
    std::filesystem::path repo;
    std::string head;
    std::string base;
};

Fork moved_on_fork(const std::filesystem::path& dir) {
    Fork fork{dir / "repo", {}, {}};
    tests::make_repo(fork.repo, {{"README.md", "hello\n"}});
    sh("git -C " + fork.repo.string() + " checkout -q -b feature");
    fork.head = tests::commit_file(fork.repo, "src/feature.c", "int f;\n");
    sh("git -C " + fork.repo.string() + " checkout -q main");
    fork.base = tests::commit_file(fork.repo, "docs/later.md", "moved on\n");
    return fork;
}

}  // namespace

TEST_CASE("changed paths: added, modified, deleted and renamed files; a rename counts both paths") {
    const auto dir = tests::make_temp_dir("changed");
    const auto repo = dir / "repo";
    const std::string first = tests::make_repo(repo, {{"a.txt", body("a")},
                                                      {"b.txt", body("b")},
                                                      {"old/c.txt", body("c")},
                                                      {"same.txt", body("s")}});
    tests::write_file(repo / "a.txt", body("a") + "modified\n");
    fs::remove(repo / "b.txt");
    fs::create_directories(repo / "new");
    fs::rename(repo / "old/c.txt", repo / "new/c.txt");
    tests::write_file(repo / "e.txt", "new\n");
    sh("cd " + repo.string() + " && git add -A && git commit -q -m second");
    const std::string second = sh("git -C " + repo.string() + " rev-parse HEAD");

    auto changed = jobs::diff_commits(repo, first, second);
    REQUIRE(changed);
    CHECK(changed->files == 4);  // the rename is one entry
    CHECK(as_set(*changed) ==
          std::set<std::string>{"a.txt", "b.txt", "e.txt", "new/c.txt", "old/c.txt"});

    // From nothing: every file of the commit.
    auto all = jobs::diff_commits(repo, "", first);
    REQUIRE(all);
    CHECK(as_set(*all) == std::set<std::string>{"a.txt", "b.txt", "old/c.txt", "same.txt"});

    // The push event diffs before..after the same way (two dots).
    auto pushed = jobs::event_changed_files(repo, "push", push(first, second));
    REQUIRE(pushed);
    CHECK(as_set(*pushed) == as_set(*changed));
}

TEST_CASE(
    "changed paths: a pull request is diffed from the merge base, not from its moved-on base") {
    const auto dir = tests::make_temp_dir("changed");
    const auto [repo, head, base] = moved_on_fork(dir);

    for (const char* event : {"pull_request", "pull_request_target"}) {
        auto changed = jobs::event_changed_files(repo, event, pull(base, head));
        REQUIRE(changed);
        CHECK(changed->paths == std::vector<std::string>{"src/feature.c"});
    }
    // A two-dot diff would have counted the base's own change (as deleted on the head side).
    auto two_dot = jobs::diff_commits(repo, base, head);
    REQUIRE(two_dot);
    CHECK(as_set(*two_dot) == std::set<std::string>{"docs/later.md", "src/feature.c"});

    // Unrelated histories: base..head.
    sh("git -C " + repo.string() + " checkout -q --orphan lonely && git -C " + repo.string() +
       " rm -q -rf .");
    const std::string lonely = tests::commit_file(repo, "only.txt", "x\n");
    auto unrelated = jobs::event_changed_files(repo, "pull_request", pull(base, lonely));
    REQUIRE(unrelated);
    CHECK(as_set(*unrelated) == std::set<std::string>{"README.md", "docs/later.md", "only.txt"});
}

TEST_CASE("changed paths: a new branch is diffed from its merge base with the default branch") {
    const auto dir = tests::make_temp_dir("changed");
    const auto repo = dir / "repo";
    const std::string root = tests::make_repo(repo, {{"README.md", "hello\n"}, {"lib/x.c", "x\n"}});
    sh("git -C " + repo.string() + " checkout -q -b feature");
    tests::commit_file(repo, "src/one.c", "1\n");
    const std::string after = tests::commit_file(repo, "src/two.c", "2\n");
    sh("git -C " + repo.string() + " checkout -q main");
    tests::commit_file(repo, "main-only.txt", "m\n");  // the default branch moved on

    const std::string with_default =
        ",\"created\":true,\"repository\":{\"default_branch\":\"main\"}";
    auto created = jobs::event_changed_files(repo, "push", push(k_zeros, after, with_default));
    REQUIRE(created);
    CHECK(as_set(*created) == std::set<std::string>{"src/one.c", "src/two.c"});

    // No default branch to compare with (none named, no origin, not bare): every file.
    auto no_default = jobs::event_changed_files(repo, "push", push(k_zeros, after));
    REQUIRE(no_default);
    CHECK(as_set(*no_default) ==
          std::set<std::string>{"README.md", "lib/x.c", "src/one.c", "src/two.c"});

    // A bare mirror's HEAD names the default branch.
    sh("git clone -q --mirror " + repo.string() + " " + (dir / "mirror.git").string());
    auto mirrored = jobs::event_changed_files(dir / "mirror.git", "push", push(k_zeros, after));
    REQUIRE(mirrored);
    CHECK(as_set(*mirrored) == std::set<std::string>{"src/one.c", "src/two.c"});

    // A branch made at a commit of the default branch changed nothing; so did a deletion.
    auto same = jobs::event_changed_files(repo, "push", push(k_zeros, root, with_default));
    REQUIRE(same);
    CHECK(same->paths.empty());
    auto deleted = jobs::event_changed_files(repo, "push", push(after, k_zeros));
    REQUIRE(deleted);
    CHECK(deleted->paths.empty());
}

TEST_CASE(
    "changed paths: a commit missing from the repository is an error; the selection fails open and "
    "warns") {
    const auto dir = tests::make_temp_dir("changed");
    const auto repo = dir / "repo";
    const std::string first = tests::make_repo(repo, {{"README.md", "hello\n"}});
    const std::string second = tests::commit_file(repo, "docs/a.md", "a\n");
    const std::string missing(40, 'e');

    auto error = jobs::diff_commits(repo, missing, second);
    REQUIRE_FALSE(error);
    CHECK(error.error().kind == common::ErrorKind::unavailable);
    CHECK_THAT(error.error().message, Catch::Contains(missing));

    auto pr = jobs::event_changed_files(repo, "pull_request", pull(missing, second, ""));
    REQUIRE_FALSE(pr);
    CHECK_THAT(pr.error().message, Catch::Contains("pull_request") && Catch::Contains(missing) &&
                                       Catch::Contains(second));
    auto no_shas =
        jobs::event_changed_files(repo, "push", payload("{\"ref\":\"refs/heads/main\"}"));
    REQUIRE_FALSE(no_shas);
    CHECK(no_shas.error().kind == common::ErrorKind::invalid_input);

    std::vector<jobs::Workflow> workflows = {
        workflow("src.yml", "  push:\n    paths: ['src/**']\n"),
        workflow("plain.yml", "  push:\n")};
    // Known diff: only docs/ changed, so the src-filtered workflow is skipped.
    auto known = jobs::select_for_event(workflows, "push", push(first, second), repo);
    CHECK(files_of(known) == std::vector<std::string>{"plain.yml"});
    CHECK(known.warnings.empty());
    // Unknown base: it runs, and the warning names the workflow, the event and both SHAs.
    auto unknown = jobs::select_for_event(workflows, "push", push(missing, second), repo);
    CHECK(files_of(unknown) == std::vector<std::string>{"src.yml", "plain.yml"});
    REQUIRE(unknown.warnings.size() == 1);
    CHECK_THAT(unknown.warnings[0], Catch::Contains("src.yml") && Catch::Contains("push") &&
                                        Catch::Contains(missing) && Catch::Contains(second));
    // Not a repository at all: the same.
    auto nowhere = jobs::select_for_event(workflows, "push", push(first, second), dir / "nothing");
    CHECK(files_of(nowhere).size() == 2);
    CHECK(nowhere.warnings.size() == 1);
    // A tag push does not evaluate paths filters: no diff, no warning.
    auto tag = jobs::select_for_event(workflows, "push",
                                      payload("{\"ref\":\"refs/tags/v1\",\"before\":\"" + missing +
                                              "\",\"after\":\"" + second + "\"}"),
                                      repo);
    CHECK(files_of(tag).size() == 2);
    CHECK(tag.warnings.empty());
}

TEST_CASE(
    "changed paths: a pull request without its base SHA, or with one the repository lacks, is "
    "diffed "
    "from its base branch") {
    const auto dir = tests::make_temp_dir("changed");
    const Fork fork = moved_on_fork(dir);
    const auto& repo = fork.repo;
    const auto& head = fork.head;
    const std::string missing(40, 'e');

    // The base SHA was force-pushed away (or never given): the tip of base.ref, three dots.
    for (const std::string& base : {missing, std::string()}) {
        for (const std::string& ref : {std::string("main"), std::string("refs/heads/main")}) {
            auto changed = jobs::event_changed_files(repo, "pull_request", pull(base, head, ref));
            INFO(base << " " << ref);
            REQUIRE(changed);
            CHECK(changed->paths == std::vector<std::string>{"src/feature.c"});
        }
    }
    // A clone of the feature branch knows main as refs/remotes/origin/main only.
    const auto clone = dir / "clone";
    sh("git clone -q -b feature " + repo.string() + " " + clone.string());
    auto cloned = jobs::event_changed_files(clone, "pull_request", pull("", head, "main"));
    REQUIRE(cloned);
    CHECK(cloned->paths == std::vector<std::string>{"src/feature.c"});

    // A base branch the repository does not have either: an error naming both, failing open.
    auto neither = jobs::event_changed_files(repo, "pull_request", pull(missing, head, "gone"));
    REQUIRE_FALSE(neither);
    CHECK(neither.error().kind == common::ErrorKind::unavailable);
    CHECK_THAT(neither.error().message, Catch::Contains(missing) && Catch::Contains("'gone'"));
    auto no_base = jobs::event_changed_files(repo, "pull_request", pull("", head, ""));
    REQUIRE_FALSE(no_base);
    CHECK(no_base.error().kind == common::ErrorKind::invalid_input);
    std::vector<jobs::Workflow> workflows = {
        workflow("docs.yml", "  pull_request:\n    paths: ['docs/**']\n")};
    CHECK(files_of(jobs::select_for_event(workflows, "pull_request", pull("", head, "main"), repo))
              .empty());
    auto warned = jobs::select_for_event(workflows, "pull_request", pull("", head, "gone"), repo);
    CHECK(files_of(warned) == std::vector<std::string>{"docs.yml"});
    CHECK(warned.warnings.size() == 1);
}

TEST_CASE("changed paths: GitHub looks at the first 300 files of the diff only") {
    const auto dir = tests::make_temp_dir("changed");
    const auto repo = dir / "repo";
    const std::string first = tests::make_repo(repo, {{"README.md", "hello\n"}});
    for (int i = 0; i < 300; ++i) {
        char name[32];
        std::snprintf(name, sizeof name, "a/%03d.txt", i);
        tests::write_file(repo / name, std::to_string(i) + "\n");
    }
    tests::write_file(repo / "z/last.txt", "the 301st file\n");
    sh("cd " + repo.string() + " && git add -A && git commit -q -m many");
    const std::string second = sh("git -C " + repo.string() + " rev-parse HEAD");

    auto changed = jobs::diff_commits(repo, first, second);
    REQUIRE(changed);
    CHECK(changed->files == 301);
    REQUIRE(changed->paths.size() == 300);
    CHECK(changed->paths.front() == "a/000.txt");
    CHECK(std::ranges::find(changed->paths, "z/last.txt") == changed->paths.end());

    const std::vector<jobs::Workflow> workflows = {
        workflow("z.yml", "  push:\n    paths: ['z/**']\n"),  // only the 301st matches
        workflow("ignore-a.yml",
                 "  push:\n    paths-ignore: ['a/**']\n"),  // only the 301st is not ignored
        workflow("a.yml", "  push:\n    paths: ['a/**']\n")};
    auto selection = jobs::select_for_event(workflows, "push", push(first, second), repo);
    CHECK(files_of(selection) == std::vector<std::string>{"a.yml"});
    CHECK(selection.warnings.empty());
}

TEST_CASE(
    "changed paths: a push of more than 1,000 commits is not diffed (GitHub runs the workflow)") {
    const auto dir = tests::make_temp_dir("changed");
    const auto repo = dir / "repo";
    const std::string first = tests::make_repo(repo, {{"README.md", "hello\n"}});
    // 1001 commits on top of `first`, each touching docs/n.txt, in one fast-import stream.
    std::string stream;
    for (int i = 0; i < 1001; ++i) {
        const std::string content = std::to_string(i) + "\n";
        stream +=
            "commit refs/heads/main\ncommitter t <t@example.com> 1767225600 +0000\ndata 1\nc\n";
        if (i == 0) stream += "from " + first + "\n";
        stream += "M 100644 inline docs/n.txt\ndata " + std::to_string(content.size()) + "\n" +
                  content + "\n";
    }
    tests::write_file(dir / "stream", stream);
    sh("git -C " + repo.string() + " fast-import --quiet < " + (dir / "stream").string());
    const std::string last = sh("git -C " + repo.string() + " rev-parse main");
    const std::string thousandth = sh("git -C " + repo.string() + " rev-parse main~1000");

    auto too_many = jobs::event_changed_files(repo, "push", push(first, last));
    REQUIRE_FALSE(too_many);
    CHECK_THAT(too_many.error().message,
               Catch::Contains("1000") && Catch::Contains(first) && Catch::Contains(last));
    const std::vector<jobs::Workflow> workflows = {
        workflow("src.yml", "  push:\n    paths: ['src/**']\n")};
    auto selection = jobs::select_for_event(workflows, "push", push(first, last), repo);
    CHECK(files_of(selection) == std::vector<std::string>{"src.yml"});
    CHECK(selection.warnings.size() == 1);
    // Exactly 1,000 commits are diffed: only docs/ changed, so it is skipped.
    auto thousand = jobs::select_for_event(workflows, "push", push(thousandth, last), repo);
    CHECK(thousand.workflows.empty());
    CHECK(thousand.warnings.empty());
}
