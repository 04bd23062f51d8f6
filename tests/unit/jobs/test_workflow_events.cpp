// Which workflows an event triggers (jobs/workflow/workflow_events.cpp): GitHub's filter pattern
// cheat sheet, ordered `!` exclusions, *-ignore lists, activity types, and the ref each event's
// branch filters test (push: the ref; pull_request and merge_group: the base branch).
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "jobs/workflow/workflow_events.hpp"

namespace {

jobs::Workflow workflow(const std::string& on) {
    auto parsed = jobs::parse_workflow("on:\n" + on +
                                           "jobs:\n  a:\n    runs-on: ubuntu-latest\n"
                                           "    steps:\n      - run: true\n",
                                       "w.yml");
    REQUIRE(parsed);
    return *parsed;
}

jobs::Value payload(const std::string& json) {
    auto value = jobs::parse_json(json);
    REQUIRE(value);
    return *value;
}

jobs::Value push_to(const std::string& ref) {
    return payload("{\"ref\":\"" + ref + "\"}");
}

}  // namespace

TEST_CASE("events: the cheat sheet's branch patterns") {
    using jobs::glob_match;
    CHECK(glob_match("feature/*", "feature/my-branch"));
    CHECK_FALSE(glob_match("feature/*", "feature/your/branch"));
    CHECK(glob_match("feature/**", "feature/mona/the/octocat"));
    CHECK(glob_match("*", "main"));
    CHECK_FALSE(glob_match("*", "releases/v1"));
    CHECK(glob_match("**", "releases/v1"));
    CHECK(glob_match("*feature", "ver-10-feature"));
    CHECK(glob_match("v2*", "v2"));
    CHECK(glob_match("v2*", "v2.9"));
    CHECK(glob_match("v[12].[0-9]+.[0-9]+", "v1.10.1"));
    CHECK(glob_match("v[12].[0-9]+.[0-9]+", "v2.0.0"));
    CHECK_FALSE(glob_match("v[12].[0-9]+.[0-9]+", "v3.0.0"));
    CHECK_FALSE(glob_match("v[12].[0-9]+.[0-9]+", "v1..0"));
}

TEST_CASE("events: the cheat sheet's path patterns, ? and + quantify the preceding character") {
    using jobs::glob_match;
    CHECK(glob_match("*.jsx?", "page.js"));
    CHECK(glob_match("*.jsx?", "page.jsx"));
    CHECK_FALSE(glob_match("*.jsx?", "page.jsxx"));
    CHECK(glob_match("**.js", "app/src/index.js"));
    CHECK(glob_match("**/docs/**", "a/b/docs/c/d.md"));
    CHECK(glob_match("**/*-post.md", "my-post.md"));
    CHECK(glob_match("**/*-post.md", "path/their-post.md"));
    CHECK(glob_match("**/migrate-*.sql", "database/migrate-v1.0.sql"));
    CHECK(glob_match("ab+c", "abbbc"));
    CHECK_FALSE(glob_match("ab+c", "ac"));
    CHECK(glob_match("a\\*b", "a*b"));
    CHECK_FALSE(glob_match("a\\*b", "axb"));
}

TEST_CASE(
    "events: a branches list is ordered, a later !pattern excludes, a later pattern re-admits") {
    const auto wf = workflow(
        "  push:\n    branches:\n      - 'releases/**'\n      - '!releases/**-alpha'\n"
        "      - 'releases/keep-alpha'\n");
    CHECK(jobs::event_matches(wf, "push", push_to("refs/heads/releases/10")));
    CHECK_FALSE(jobs::event_matches(wf, "push", push_to("refs/heads/releases/10-alpha")));
    CHECK(jobs::event_matches(wf, "push", push_to("refs/heads/releases/keep-alpha")));
    CHECK_FALSE(jobs::event_matches(wf, "push", push_to("refs/heads/main")));
}

TEST_CASE("events: branches-ignore, tags and tags-ignore") {
    const auto ignore =
        workflow("  push:\n    branches-ignore: ['mona/octocat', 'releases/**-alpha']\n");
    CHECK_FALSE(jobs::event_matches(ignore, "push", push_to("refs/heads/mona/octocat")));
    CHECK_FALSE(jobs::event_matches(ignore, "push", push_to("refs/heads/releases/beta/3-alpha")));
    CHECK(jobs::event_matches(ignore, "push", push_to("refs/heads/main")));
    const auto tags = workflow("  push:\n    tags: ['v[0-9]+.[0-9]+.[0-9]+']\n");
    CHECK(jobs::event_matches(tags, "push", push_to("refs/tags/v1.2.3")));
    CHECK_FALSE(jobs::event_matches(tags, "push", push_to("refs/tags/v1.2")));
    // Only tags listed: a branch push does not run it, and the other way round.
    CHECK_FALSE(jobs::event_matches(tags, "push", push_to("refs/heads/main")));
    const auto branches = workflow("  push:\n    branches: [main]\n");
    CHECK_FALSE(jobs::event_matches(branches, "push", push_to("refs/tags/v1.0.0")));
}

TEST_CASE(
    "events: pull requests and merge queues filter on their base branch, types on the action") {
    const auto wf = workflow(
        "  pull_request:\n    types: [opened, synchronize]\n    branches: [main]\n"
        "  merge_group:\n    types: [checks_requested]\n    branches: [main]\n");
    const auto pr = [](const std::string& action, const std::string& base) {
        return payload("{\"action\":\"" + action + "\",\"pull_request\":{\"base\":{\"ref\":\"" +
                       base + "\"}}}");
    };
    CHECK(jobs::event_matches(wf, "pull_request", pr("opened", "main")));
    CHECK_FALSE(jobs::event_matches(wf, "pull_request", pr("closed", "main")));
    CHECK_FALSE(jobs::event_matches(wf, "pull_request", pr("opened", "develop")));
    const auto queue = [](const std::string& base) {
        return payload(
            "{\"action\":\"checks_requested\",\"merge_group\":{\"head_ref\":"
            "\"refs/heads/gh-readonly-queue/" +
            base + "/pr-1-abc\",\"base_ref\":\"refs/heads/" + base + "\"}}");
    };
    CHECK(jobs::event_matches(wf, "merge_group", queue("main")));
    CHECK_FALSE(jobs::event_matches(wf, "merge_group", queue("release")));
    CHECK_FALSE(jobs::event_matches(wf, "push", push_to("refs/heads/main")));  // not under on:
}

TEST_CASE(
    "events: a merge queue payload without base_ref filters on the branch its head_ref names") {
    CHECK(jobs::merge_queue_base_ref("refs/heads/gh-readonly-queue/main/pr-7-0123abcd") ==
          "refs/heads/main");
    CHECK(jobs::merge_queue_base_ref("refs/heads/gh-readonly-queue/release/1.x/pr-42-ff00") ==
          "refs/heads/release/1.x");
    CHECK(jobs::merge_queue_base_ref("refs/heads/main").empty());
    CHECK(jobs::merge_queue_base_ref("refs/heads/gh-readonly-queue/pr-1-abc").empty());
    const auto wf = workflow("  merge_group:\n    branches: ['release/**']\n");
    const auto group = [](const std::string& head_ref) {
        return payload("{\"merge_group\":{\"head_ref\":\"" + head_ref + "\"}}");
    };
    CHECK(jobs::event_matches(wf, "merge_group",
                              group("refs/heads/gh-readonly-queue/release/1.x/pr-42-ff00")));
    CHECK_FALSE(jobs::event_matches(wf, "merge_group",
                                    group("refs/heads/gh-readonly-queue/main/pr-7-0123")));
}

namespace {

jobs::ChangedFiles changed(std::vector<std::string> paths) {
    jobs::ChangedFiles files;
    files.files = paths.size();
    files.paths = std::move(paths);
    return files;
}

}  // namespace

TEST_CASE("events: paths runs when one changed file's last matching pattern is not a !pattern") {
    const auto wf = workflow(
        "  push:\n    paths:\n      - 'src/**'\n      - '!src/**/*.md'\n"
        "      - 'src/keep/README.md'\n      - '**.c'\n");
    const auto pushed = push_to("refs/heads/main");
    const auto runs = [&](std::vector<std::string> paths) {
        const auto files = changed(std::move(paths));
        return jobs::event_matches(wf, "push", pushed, &files);
    };
    CHECK(runs({"src/a/b/apps/main.cpp"}));
    CHECK_FALSE(runs({"src/docs/guide.md"}));                    // excluded by the later !pattern
    CHECK(runs({"src/keep/README.md"}));                         // re-admitted by a still later one
    CHECK(runs({"docs/x.md", "src/docs/y.md", "tools/gen.c"}));  // one admitted file is enough
    CHECK_FALSE(runs({"docs/x.md", "src/y.md"}));
    CHECK(runs({"deep/down/file.c"}));  // `**.c` crosses directories
    CHECK_FALSE(runs({}));              // nothing changed: the workflow does not run
    // Without the diff (unknown), paths filters are not applied.
    CHECK(jobs::event_matches(wf, "push", pushed));
    CHECK(jobs::has_paths_filter(wf, "push"));
    CHECK_FALSE(jobs::has_paths_filter(workflow("  push:\n    branches: [main]\n"), "push"));
}

TEST_CASE("events: paths-ignore skips only when every changed file is ignored") {
    const auto wf = workflow("  pull_request:\n    paths-ignore: ['docs/**', '**.md']\n");
    const auto pr =
        payload("{\"action\":\"opened\",\"pull_request\":{\"base\":{\"ref\":\"main\"}}}");
    const auto runs = [&](std::vector<std::string> paths) {
        const auto files = changed(std::move(paths));
        return jobs::event_matches(wf, "pull_request", pr, &files);
    };
    CHECK_FALSE(runs({"docs/a.txt", "README.md", "sub/dir/notes.md"}));
    CHECK(runs({"docs/a.txt", "src/main.c"}));
    CHECK_FALSE(runs({}));
    CHECK(jobs::paths_filter_admits(wf.on.find("pull_request")->filters,
                                    std::vector<std::string>{"x"}));
}

TEST_CASE("events: branches and paths filters must both pass; tag pushes ignore paths") {
    const auto wf =
        workflow("  push:\n    branches: [main]\n    tags: ['v*']\n    paths: ['src/**']\n");
    const auto src = changed({"src/a.c"});
    const auto docs = changed({"docs/a.md"});
    CHECK(jobs::event_matches(wf, "push", push_to("refs/heads/main"), &src));
    CHECK_FALSE(jobs::event_matches(wf, "push", push_to("refs/heads/main"), &docs));
    CHECK_FALSE(jobs::event_matches(wf, "push", push_to("refs/heads/dev"), &src));
    CHECK(jobs::event_matches(wf, "push", push_to("refs/tags/v1"),
                              &docs));  // GitHub: not evaluated for tags
    const auto pr =
        workflow("  pull_request_target:\n    branches: [main]\n    paths: ['src/**']\n");
    const auto base = [](const std::string& ref) {
        return payload("{\"action\":\"opened\",\"pull_request\":{\"base\":{\"ref\":\"" + ref +
                       "\"}}}");
    };
    CHECK(jobs::event_matches(pr, "pull_request_target", base("main"), &src));
    CHECK_FALSE(jobs::event_matches(pr, "pull_request_target", base("main"), &docs));
    CHECK_FALSE(jobs::event_matches(pr, "pull_request_target", base("dev"), &src));
}

TEST_CASE(
    "events: paths with paths-ignore is GitHub's (paths decides); merge_group has no paths "
    "filter") {
    auto both = jobs::parse_workflow(
        "on:\n  push:\n    paths: [a]\n    paths-ignore: [b]\njobs:\n  a:\n"
        "    runs-on: ubuntu-latest\n    steps:\n      - run: true\n",
        "w.yml");
    REQUIRE(both);
    const std::vector<std::string> changed_a = {"a"}, changed_b = {"b"};
    CHECK(jobs::paths_filter_admits(both->on.find("push")->filters, changed_a));
    CHECK_FALSE(jobs::paths_filter_admits(both->on.find("push")->filters, changed_b));
    auto queue = jobs::parse_workflow(
        "on:\n  merge_group:\n    paths: [a]\njobs:\n  a:\n"
        "    runs-on: ubuntu-latest\n    steps:\n      - run: true\n",
        "w.yml");
    REQUIRE_FALSE(queue);
    CHECK_THAT(queue.error().message, Catch::Contains("w.yml:3:") && Catch::Contains("paths"));
}
