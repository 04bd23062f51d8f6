// sandgate gate end to end: real repositories with workflows, file:// and path remotes, the
// real binary, the exit codes, concurrent gates on one mirror, cleanup that does not follow a
// planted symlink, and the token never shown.
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <future>
#include <string>
#include <vector>

#include "jobs/git/git_worktree.hpp"
#include "tests/helpers/git_fixture.hpp"
#include "tests/support/gate_cli.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/wrap_detect.hpp"

namespace fs = std::filesystem;
using namespace tests::gate_cli;
using tests::sh;

TEST_CASE("a gate passes on a good commit and fails on a bad one") {
    const auto dir = tests::make_temp_dir("gate");
    const Repo repo = make_gate_repo(dir);
    const std::string state = " --state-dir " + (dir / "state").string();

    auto passed = gate("--repo file://" + repo.path.string() + " --sha " + repo.good + state +
                       " --report " + (dir / "good.json").string());
    INFO(passed.out);
    CHECK(passed.code == 0);
    CHECK_THAT(passed.out, Catch::Contains("passed"));
    CHECK_THAT(tests::read_file(dir / "good.json"), Catch::Contains("\"success\""));
    CHECK(worktree_dirs(dir / "state") == 0);

    auto failed = gate("--repo " + repo.path.string() + " --sha " + repo.bad + state +
                       " --report " + (dir / "bad.json").string());
    INFO(failed.out);
    CHECK(failed.code == 1);
    CHECK_THAT(failed.out, Catch::Contains("check"));
    CHECK_THAT(tests::read_file(dir / "bad.json"), Catch::Contains("\"failure\""));
    CHECK(worktree_dirs(dir / "state") == 0);
}

TEST_CASE("the event selects the workflows, -j the jobs") {
    const auto dir = tests::make_temp_dir("gate");
    const Repo repo = make_gate_repo(dir);
    const std::string common =
        "--repo " + repo.path.string() + " --state-dir " + (dir / "state").string();
    auto lint =
        gate(common + " --sha " + repo.good + " --event pull_request -j lint --ref feature");
    INFO(lint.out);
    CHECK(lint.code == 0);
    auto all = gate(common + " --sha " + repo.good + " --event pull_request");
    INFO(all.out);
    CHECK(all.code == 1);  // `other` fails
    auto push = gate(common + " --sha " + repo.good + " --event push --ref main");
    CHECK(push.code == 0);
}

// Two workflows: one on every push/pull request, one only when src/ changed.
const char* k_always_workflow =
    "on: [push, pull_request]\njobs:\n  always_job:\n    runs-on: ubuntu-latest\n"
    "    steps:\n      - run: true\n";
const char* k_src_workflow =
    "on:\n  push:\n    paths: ['src/**', '!src/**.md']\n  pull_request:\n"
    "    paths: ['src/**']\njobs:\n  paths_job:\n    runs-on: ubuntu-latest\n"
    "    steps:\n      - run: true\n";

TEST_CASE(
    "paths filters: a workflow runs only when the push or pull request changed a matching file") {
    const auto dir = tests::make_temp_dir("gate");
    const fs::path origin = dir / "origin";
    const std::string first =
        tests::make_repo(origin, {{".github/workflows/always.yml", k_always_workflow},
                                  {".github/workflows/src.yml", k_src_workflow},
                                  {"README.md", "hello\n"}});
    const std::string docs = tests::commit_file(origin, "docs/guide.md", "docs\n");
    const std::string src_md = tests::commit_file(origin, "src/notes.md", "notes\n");
    const std::string src = tests::commit_file(origin, "src/main.c", "int main;\n");
    const std::string common = "--repo file://" + origin.string() + " --state-dir " +
                               (dir / "state").string() + " --event push --ref main";
    const auto ran = [&](const std::string& report) {
        const std::string text = tests::read_file(dir / report);
        return std::pair{text.find("\"always_job\"") != std::string::npos,
                         text.find("\"paths_job\"") != std::string::npos};
    };

    auto skipped = gate(common + " --sha " + docs + " --base-sha " + first + " --report " +
                        (dir / "docs.json").string());
    INFO(skipped.out);
    CHECK(skipped.code == 0);
    CHECK(ran("docs.json") == std::pair{true, false});
    CHECK_THAT(skipped.out, !Catch::Contains("warning"));

    auto excluded = gate(common + " --sha " + src_md + " --base-sha " + docs + " --report " +
                         (dir / "md.json").string());
    INFO(excluded.out);
    CHECK(excluded.code == 0);
    CHECK(ran("md.json") == std::pair{true, false});  // `!src/**.md` excludes the only change

    auto runs = gate(common + " --sha " + src + " --base-sha " + src_md + " --report " +
                     (dir / "src.json").string());
    INFO(runs.out);
    CHECK(runs.code == 0);
    CHECK(ran("src.json") == std::pair{true, true});

    // A base the repository does not have: the filter is not applied (it runs), with a warning.
    const std::string unknown(40, 'e');
    auto open = gate(common + " --sha " + docs + " --base-sha " + unknown + " --report " +
                     (dir / "open.json").string());
    INFO(open.out);
    CHECK(open.code == 0);
    CHECK(ran("open.json") == std::pair{true, true});
    CHECK_THAT(open.out, Catch::Contains("warning") && Catch::Contains("push") &&
                             Catch::Contains(unknown) && Catch::Contains(docs));

    // A pull request whose base moved on after it branched: the three-dot diff sees only its own
    // files.
    sh("git -C " + origin.string() + " checkout -q -b feature " + docs);
    const std::string feature = tests::commit_file(origin, "docs/more.md", "more\n");
    sh("git -C " + origin.string() + " checkout -q main");
    const std::string pr = common.substr(0, common.find(" --event")) +
                           " --event pull_request --ref feature --base-ref main";
    auto pr_docs = gate(pr + " --sha " + feature + " --base-sha " + src + " --report " +
                        (dir / "pr.json").string());
    INFO(pr_docs.out);
    CHECK(pr_docs.code == 0);
    CHECK(ran("pr.json") == std::pair{true, false});
    // Without --base-sha, or with one the remote lacks, --base-ref's tip is the base: the same.
    for (const std::string& base : {std::string(), " --base-sha " + unknown}) {
        auto by_ref =
            gate(pr + " --sha " + feature + base + " --report " + (dir / "pr-ref.json").string());
        INFO(by_ref.out);
        CHECK(by_ref.code == 0);
        CHECK(ran("pr-ref.json") == std::pair{true, false});
        CHECK_THAT(by_ref.out, !Catch::Contains("warning"));
    }
    // A new branch (--base-sha all zeros): diffed from its merge base with the remote's default
    // branch (the mirror's HEAD), so only docs/more.md; with src/ changed on it, it runs.
    const std::string branch = common.substr(0, common.find(" --ref")) +
                               " --ref feature --base-sha " + std::string(40, '0');
    auto created = gate(branch + " --sha " + feature + " --report " + (dir / "new.json").string());
    INFO(created.out);
    CHECK(created.code == 0);
    CHECK(ran("new.json") == std::pair{true, false});
    sh("git -C " + origin.string() + " checkout -q feature");
    const std::string feature_src = tests::commit_file(origin, "src/feature.c", "int f;\n");
    sh("git -C " + origin.string() + " checkout -q main");
    auto created_src =
        gate(branch + " --sha " + feature_src + " --report " + (dir / "new-src.json").string());
    INFO(created_src.out);
    CHECK(created_src.code == 0);
    CHECK(ran("new-src.json") == std::pair{true, true});

    auto bad = gate(pr + " --sha " + feature + " --base-sha nope");
    CHECK(bad.code == 2);
    CHECK_THAT(bad.out, Catch::Contains("--base-sha"));
}

TEST_CASE(
    "merge_group: --base-sha and --base-ref reach github.event.merge_group and its branches "
    "filter") {
    const auto dir = tests::make_temp_dir("gate");
    const fs::path origin = dir / "origin";
    const std::string base = tests::make_repo(origin, {{"README.md", "hello\n"}});
    const std::string head = tests::commit_file(
        origin, ".github/workflows/queue.yml",
        "on:\n  merge_group:\n    branches: [release]\njobs:\n  queue_job:\n    runs-on: "
        "ubuntu-latest\n"
        "    steps:\n      - run: |\n          test '${{ github.event.merge_group.base_sha }}' = " +
            base +
            "\n          test '${{ github.event.merge_group.base_ref }}' = refs/heads/release\n"
            "          test \"$GITHUB_BASE_REF\" = ''\n");
    const std::string common =
        "--repo file://" + origin.string() + " --state-dir " + (dir / "state").string() +
        " --event merge_group --ref refs/heads/gh-readonly-queue/release/pr-1-" + base + " --sha " +
        head + " --base-sha " + base;
    auto ran = gate(common + " --base-ref release");
    INFO(ran.out);
    CHECK(ran.code == 0);
    CHECK_THAT(ran.out, Catch::Contains("queue_job"));
    // Another base branch: the branches filter leaves nothing to check.
    auto other = gate(common + " --base-ref refs/heads/main");
    INFO(other.out);
    CHECK(other.code == 1);
    CHECK_THAT(other.out, Catch::Contains("no workflow"));
}

TEST_CASE("unknown SHAs, unreachable remotes and bad arguments have their own exit codes") {
    const auto dir = tests::make_temp_dir("gate");
    const Repo repo = make_gate_repo(dir);
    const std::string state = " --state-dir " + (dir / "state").string();
    const std::string unknown(40, 'e');

    auto missing = gate("--repo " + repo.path.string() + " --sha " + unknown + state);
    CHECK(missing.code == 3);
    CHECK_THAT(missing.out, Catch::Contains(unknown));

    auto nowhere =
        gate("--repo file://" + (dir / "nowhere").string() + " --sha " + repo.good + state);
    CHECK(nowhere.code == 4);
    CHECK_THAT(nowhere.out, Catch::Contains((dir / "nowhere").string()));

    const std::string token = "ghs_GateTokenNeverShown42";
    auto refused =
        tests::shell("SANDGATE_GIT_TOKEN=" + token + " " + SANDGATE_BINARY +
                     " gate --repo https://127.0.0.1:1/o/r.git --sha " + repo.good + state);
    CHECK(refused.code == 4);
    CHECK_THAT(refused.out, Catch::Contains("127.0.0.1:1") && !Catch::Contains(token));
    CHECK(tests::files_containing(dir / "state", token).empty());

    CHECK(gate("--repo " + repo.path.string() + " --sha abc" + state).code == 2);
    CHECK(gate("--repo " + repo.path.string() + " --sha " + repo.good + " --event release" + state)
              .code == 2);
    CHECK(gate("--sha " + repo.good + state).code == 2);
    auto password = gate("--repo https://u:pa55w0rdXYZ@example.com/o/r --sha " + repo.good + state);
    CHECK(password.code == 2);
    CHECK_THAT(password.out, !Catch::Contains("pa55w0rdXYZ"));
    auto no_job =
        gate("--repo " + repo.path.string() + " --sha " + repo.good + " -j nosuchjob" + state);
    CHECK(no_job.code == 2);
    CHECK_THAT(no_job.out, Catch::Contains("nosuchjob"));
    auto sandbox =
        gate("--repo " + repo.path.string() + " --sha " + repo.good + " --sandbox nope" + state);
    CHECK(sandbox.code == 2);
    CHECK_THAT(sandbox.out, Catch::Contains("--sandbox"));
    auto isolation =
        tests::shell(std::string(SANDGATE_BINARY) + " gate --sandbox off --memory 1G --repo " +
                     repo.path.string() + " --sha " + repo.good + state);
    CHECK(isolation.code == 2);
    CHECK_THAT(isolation.out, Catch::Contains("--sandbox off"));
    auto nothing = gate("--repo " + repo.path.string() + " --sha " + repo.good +
                        " -W .github/workflows/pr.yml" + state);
    CHECK(nothing.code == 1);  // no workflow runs on merge_group: nothing checked is no pass
}

TEST_CASE("concurrent gates share one mirror") {
    const auto dir = tests::make_temp_dir("gate");
    const Repo repo = make_gate_repo(dir);
    const std::string state = " --state-dir " + (dir / "state").string();
    std::vector<std::future<tests::ShellResult>> runs;
    for (int i = 0; i < 4; ++i) {
        const std::string sha = i % 2 == 0 ? repo.good : repo.bad;
        runs.push_back(std::async(std::launch::async, [=] {
            return gate("--repo file://" + repo.path.string() + " --sha " + sha + state);
        }));
    }
    for (int i = 0; i < 4; ++i) {
        auto result = runs[i].get();
        INFO(result.out);
        CHECK(result.code == (i % 2 == 0 ? 0 : 1));
    }
    CHECK(worktree_dirs(dir / "state") == 0);
    int mirrors =
        0;  // one repository: one scope (beside the locks and last uses), its mirror whole
    for (const auto& entry : fs::directory_iterator(dir / "state/mirrors"))
        if (entry.path().filename() != "locks" && entry.path().filename() != "last-use") {
            CHECK(tests::shell("git --git-dir=" + (entry.path() / "repo.git").string() +
                               " fsck --no-dangling")
                      .code == 0);
            ++mirrors;
        }
    CHECK(mirrors == 1);
}

TEST_CASE("cleanup does not follow a symlink a step planted, and reaps a crashed run's worktrees") {
    const auto dir = tests::make_temp_dir("gate");
    const fs::path outside = dir / "outside";
    tests::write_file(outside / "canary.txt", "keep\n");
    const std::string workflow = std::string(R"(on: merge_group
jobs:
  plant:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - run: ln -s )") + outside.string() +
                                 R"( escape && ln -s / root && mkdir -p deep/er && ln -s )" +
                                 outside.string() + R"(/canary.txt deep/er/file && chmod 000 deep
)";
    const fs::path origin = dir / "origin";
    const std::string sha = tests::make_repo(origin, {{".github/workflows/plant.yml", workflow}});
    // A crashed run's worktree, lease not held.
    jobs::WorktreeArea area(dir / "state");
    const pid_t child = ::fork();
    if (child == 0) {
        auto crashed = area.create("crashed");
        std::_Exit(crashed ? 0 : 1);
    }
    int status = 0;
    ::waitpid(child, &status, 0);
    REQUIRE(worktree_dirs(dir / "state") == 1);

    auto result = gate("--repo " + origin.string() + " --sha " + sha + " --state-dir " +
                       (dir / "state").string());
    INFO(result.out);
    CHECK(result.code == 0);
    CHECK(tests::read_file(outside / "canary.txt") == "keep\n");
    CHECK(worktree_dirs(dir / "state") == 0);
}

TEST_CASE("--help documents the exit codes and the token variable") {
    auto help = tests::shell(std::string(SANDGATE_BINARY) + " gate --help");
    CHECK(help.code == 0);
    CHECK_THAT(help.out, Catch::Contains("3 the remote does not have the SHA") &&
                             Catch::Contains("SANDGATE_GIT_TOKEN") &&
                             Catch::Contains("--network") && Catch::Contains("--read-only"));
    auto listed = tests::shell(std::string(SANDGATE_BINARY) + " --help");
    CHECK_THAT(listed.out, Catch::Contains("gate"));
}
