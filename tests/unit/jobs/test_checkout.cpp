// jobs/git/checkout: where a job leg's workspace comes from in `sandgate run`. CopyWorkspace
// gives each leg a copy of the repository directory in a directory of the leg's own (git's
// ignored files left out, links copied as links), DirectoryWorkspace (--bind) the directory
// itself; end to end, matrix legs writing the same paths in parallel and `../build` kept
// between a leg's steps.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

#include "jobs/git/checkout.hpp"
#include "tests/support/run_helpers.hpp"
#include "tests/support/temp_dir.hpp"

namespace fs = std::filesystem;

TEST_CASE("each leg gets a copy of its own: ignored files left out, links kept as links") {
    auto dir = tests::make_temp_dir("checkout");
    const auto repo = dir / "project";
    tests::write_file(repo / "src/main.c", "int main(void) { return 0; }\n");
    tests::write_file(repo / ".gitignore", "build/\n*.o\n");
    tests::write_file(repo / "build/big.bin", "ignored");
    tests::write_file(repo / "src/main.o", "ignored");
    tests::write_file(repo / "untracked.txt", "copied");
    fs::create_symlink("/etc/passwd", repo / "link");
    REQUIRE(std::system(("git -C '" + repo.string() + "' init -q && git -C '" + repo.string() +
                         "' add src .gitignore")
                            .c_str()) == 0);
    fs::path left_behind;
    {
        auto made = jobs::CopyWorkspace::create(repo, "octo/project");
        REQUIRE(made);
        auto& provider = **made;
        auto first = provider.workspace_for("build");
        auto second = provider.workspace_for("build");
        REQUIRE(first);
        REQUIRE(second);
        CHECK(*first != *second);
        CHECK(first->filename() == "project");
        CHECK(provider.leg_root(*first) == first->parent_path());
        CHECK(tests::read_file(*first / "src/main.c") == "int main(void) { return 0; }\n");
        CHECK(tests::read_file(*first / "untracked.txt") == "copied");
        CHECK(fs::is_directory(*first / ".git"));
        CHECK_FALSE(fs::exists(*first / "build"));
        CHECK_FALSE(fs::exists(*first / "src/main.o"));
        CHECK(fs::is_symlink(*first / "link"));
        CHECK(fs::read_symlink(*first / "link") == "/etc/passwd");
        // One leg's writes never reach the other's copy or the repository.
        tests::write_file(*first / "src/main.c", "changed");
        CHECK(tests::read_file(*second / "src/main.c") == "int main(void) { return 0; }\n");
        CHECK(tests::read_file(repo / "src/main.c") == "int main(void) { return 0; }\n");
        // Checkout of the repository itself is a no-op; another repository or a ref is refused.
        auto line = provider.checkout(*first, {});
        REQUIRE(line);
        CHECK(line->find("copy of the repository directory") != std::string::npos);
        CHECK_FALSE(provider.checkout(*first, {"other/repo", "", "", "", ""}));
        CHECK_FALSE(provider.checkout(*first, {"", "v1", "", "", ""}));
        auto into = provider.checkout(*first, {"", "", "sub/dir", "", ""});
        REQUIRE(into);
        CHECK(tests::read_file(*first / "sub/dir/untracked.txt") == "copied");
        // A link a step left where the legs' directory is removed is unlinked, not followed.
        fs::create_directory_symlink(dir, *first / "escape");
        left_behind = first->parent_path().parent_path();
    }
    CHECK_FALSE(fs::exists(left_behind));
    CHECK(fs::exists(repo / "src/main.c"));
}

TEST_CASE("sandgate run: parallel legs write the same paths, ../build stays between steps") {
    auto dir = tests::make_temp_dir("checkout-run");
    tests::write_file(dir / "input.txt", "from the repository\n");
    tests::write_file(dir / ".github/workflows/ci.yml", R"WF(on: push
jobs:
  legs:
    runs-on: ubuntu-latest
    strategy:
      matrix:
        leg: [one, two, three]
    steps:
      - run: |
          test "$(cat input.txt)" = "from the repository"
          echo ${{ matrix.leg }} > out.txt
          mkdir -p ../build && echo ${{ matrix.leg }} > ../build/made
          test "$RUNNER_WORKSPACE" = "$(dirname "$GITHUB_WORKSPACE")"
      - run: sleep 0.3; test "$(cat out.txt)" = ${{ matrix.leg }}
      - run: test "$(cat ../build/made)" = ${{ matrix.leg }}
)WF");
    auto ran = tests::run_workflows(dir, {});
    CHECK(ran.exit_code == 0);
    CHECK_FALSE(fs::exists(dir / "out.txt"));  // the repository directory is not the workspace
    // --bind: the directory itself, shared.
    tests::write_file(dir / "bind.yml", R"(on: push
jobs:
  bound:
    runs-on: ubuntu-latest
    steps:
      - run: echo bound > out.txt
)");
    ran = tests::run_workflows(dir, {"--bind", "-W", "bind.yml"});
    CHECK(ran.exit_code == 0);
    CHECK(tests::read_file(dir / "out.txt") == "bound\n");
}
