#pragma once
// Test-only: `sandgate gate` from the tests' side (test_gate.cpp, test_gate_github.cpp): a
// repository with a gate workflow, a good and a bad commit, and the binary run with the
// sandbox the environment allows.

#include <filesystem>
#include <string>

#include "tests/helpers/git_fixture.hpp"
#include "tests/support/wrap_detect.hpp"

namespace tests::gate_cli {

// Steps run in bwrap; inside sandgate's own wrap (the dogfood run) a nested wrap cannot mount
// /proc, so there the gate runs its steps unwrapped: the git layer is what is tested here.
inline std::string sandbox_flag() {
    return tests::under_wrap() ? " --sandbox off" : " --sandbox bwrap";
}

inline const char* const k_workflow = R"YAML(name: gate
on: [merge_group, push]
jobs:
  check:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - name: the commit, clean, with history
        run: |
          test "$(git rev-parse HEAD)" = "$GITHUB_SHA"
          test -z "$(git status --porcelain)"
          git log --oneline
          cat app.txt
          grep -q good app.txt
)YAML";

inline const char* const k_pull_workflow = R"YAML(name: pr
on: pull_request
jobs:
  lint:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
        with:
          fetch-depth: 0
      - run: test "$(git rev-list --count HEAD)" -ge 2
  other:
    runs-on: ubuntu-latest
    steps:
      - run: exit 1
)YAML";

struct Repo {
    std::filesystem::path path;
    std::string good;  // a commit whose gate passes
    std::string bad;   // a commit whose gate fails
};

inline Repo make_gate_repo(const std::filesystem::path& dir) {
    Repo repo;
    repo.path = dir / "origin";
    tests::make_repo(repo.path, {{".github/workflows/gate.yml", k_workflow},
                                 {".github/workflows/pr.yml", k_pull_workflow},
                                 {"app.txt", "good\n"}});
    repo.good = tests::commit_file(repo.path, "more.txt", "more\n");
    repo.bad = tests::commit_file(repo.path, "app.txt", "broken\n");
    tests::sh("git -C " + repo.path.string() + " checkout -q " + repo.good);
    return repo;
}

inline tests::ShellResult gate(const std::string& args) {
    return tests::shell(std::string("env -u SANDGATE_GIT_TOKEN ") + SANDGATE_BINARY + " gate" +
                        sandbox_flag() + " " + args);
}

inline int worktree_dirs(const std::filesystem::path& state) {
    int count = 0;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(state / "worktrees", ec))
        count += entry.is_directory() ? 1 : 0;
    return count;
}

}  // namespace tests::gate_cli
