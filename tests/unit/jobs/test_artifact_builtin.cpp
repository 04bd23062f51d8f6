// actions/upload-artifact and actions/download-artifact answered by sandgate, end to end
// through `sandgate run`: an artifact passed from one job to the job that needs it, kept with
// the run's report; if-no-files-found; names, hidden files, links left out, merge-multiple.
#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

#include "jobs/builtins/artifact_store.hpp"
#include "tests/support/run_helpers.hpp"
#include "tests/support/scoped_env.hpp"

namespace fs = std::filesystem;

namespace {

bool has(const tests::Ran& ran, const std::string& text) {
    return ran.output.find(text) != std::string::npos;
}

}  // namespace

TEST_CASE("an artifact uploaded by one job is downloaded by the job that needs it") {
    const auto dir = tests::make_temp_dir("artifact");
    tests::ScopedEnv state("XDG_STATE_HOME", (dir / "state").string());
    tests::write_file(dir / "repo/w/a.yml", R"yaml(on: push
jobs:
  build:
    runs-on: ubuntu-latest
    steps:
      - run: |
          rm -rf dist got all merged
          mkdir -p dist/sub
          echo one > dist/a.txt
          echo two > dist/sub/b.txt
          echo hidden > dist/.secret
          ln -s /etc/passwd dist/passwd
          echo log > build.log
      - id: up
        uses: actions/upload-artifact@v4
        with:
          name: bin
          path: |
            dist/
            !dist/sub/ignored.txt
      - uses: actions/upload-artifact@v4
        with:
          name: log
          path: build.log
      - run: test -n "${{ steps.up.outputs.artifact-digest }}"
  use:
    runs-on: ubuntu-latest
    needs: build
    steps:
      - id: down
        uses: actions/download-artifact@v4
        with:
          name: bin
          path: got
      - run: |
          test "$(cat got/a.txt)" = one
          test "$(cat got/sub/b.txt)" = two
          test ! -e got/.secret
          test ! -e got/passwd
          echo "path=[${{ steps.down.outputs.download-path }}]"
      - uses: actions/download-artifact@v4
        with:
          path: all
      - run: test "$(cat all/bin/a.txt)" = one && test "$(cat all/log/build.log)" = log
      - uses: actions/download-artifact@v4
        with:
          pattern: l*
          path: merged
          merge-multiple: true
      - run: test "$(cat merged/build.log)" = log && test ! -e merged/a.txt
)yaml");
    auto ran = tests::run_workflows(dir, {"-C", "repo", "-W", "w", "--report", "r.json"});
    CHECK(ran.exit_code == 0);
    CHECK(has(ran, "sandgate: kept the artifact 'bin' (2 files, 8 bytes) with this run"));
    CHECK(has(ran, "sandgate: left out 1 entries that are links"));
    CHECK(has(ran, "sandgate: unpacked the artifact 'bin' (2 files) of this run into "));
    CHECK(has(ran, "/repo/got]"));
    // Kept with the report, on the trusted side.
    CHECK(fs::is_regular_file(dir / "r.artifacts/bin.tar.gz"));
    CHECK(fs::is_regular_file(dir / "r.artifacts/log.tar.gz"));

    // The next run with the same report starts with none of the last run's artifacts.
    tests::write_file(dir / "repo/w/a.yml", R"yaml(on: push
jobs:
  use:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/download-artifact@v4
        with:
          name: bin
)yaml");
    auto again = tests::run_workflows(dir, {"-C", "repo", "-W", "w", "--report", "r.json"});
    CHECK(again.exit_code == 1);
    CHECK(has(again, "Unable to download artifact(s): Artifact not found for name: bin"));
}

TEST_CASE("if-no-files-found: error fails the step, warn warns, ignore says it; names clash") {
    const auto dir = tests::make_temp_dir("artifact-none");
    tests::ScopedEnv state("XDG_STATE_HOME", (dir / "state").string());
    tests::write_file(dir / "repo/w/a.yml", R"yaml(on: push
jobs:
  none:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/upload-artifact@v4
        with:
          name: w
          path: nothing-here/
      - uses: actions/upload-artifact@v4
        with:
          name: i
          path: nothing-here/
          if-no-files-found: ignore
      - uses: actions/upload-artifact@v4
        with:
          name: e
          path: |
            nothing-here/
            nor-here.txt
          if-no-files-found: error
      - run: echo "not-$((1+1))-reached"
  clash:
    runs-on: ubuntu-latest
    steps:
      - run: echo x > f.txt
      - uses: actions/upload-artifact@v4
        with:
          name: same
          path: f.txt
      - uses: actions/upload-artifact@v4
        with:
          name: same
          path: f.txt
          overwrite: true
      - uses: actions/upload-artifact@v4
        with:
          name: same
          path: f.txt
)yaml");
    auto ran = tests::run_workflows(dir, {"-C", "repo", "-W", "w"});
    CHECK(ran.exit_code == 1);
    CHECK(has(ran,
              "No files were found with the provided path: nothing-here/, nor-here.txt. No "
              "artifacts will be uploaded."));
    CHECK_FALSE(has(ran, "not-2-reached"));
    CHECK(has(ran, "an artifact named 'same' exists already in this run"));
    CHECK_FALSE(fs::exists(dir / "repo/nothing-here"));
}

TEST_CASE("the artifact store: names, no overwrite unless asked, not found") {
    const auto dir = tests::make_temp_dir("artifact-store");
    auto store = jobs::ArtifactStore::open(dir / "a");
    REQUIRE(store);
    CHECK(jobs::valid_artifact_name("my artifact-1"));
    for (const char* bad : {"", ".", "..", "a/b", "a:b", "a*", "a\\b", "a\nb"})
        CHECK_FALSE(jobs::valid_artifact_name(bad));
    auto put = [&](const std::string& name, jobs::ArtifactOverwrite overwrite) {
        auto blob = store->begin_upload();
        REQUIRE(blob);
        return store->commit(std::move(*blob), name, overwrite);
    };
    CHECK(put("x", jobs::ArtifactOverwrite::no));
    CHECK_FALSE(put("x", jobs::ArtifactOverwrite::no));
    CHECK(put("x", jobs::ArtifactOverwrite::yes));
    CHECK(put("y", jobs::ArtifactOverwrite::no));
    CHECK(store->names().value() == std::vector<std::string>{"x", "y"});
    CHECK(store->open_artifact("z").error().message == "Artifact not found for name: z");
    CHECK(fs::is_empty(dir / "a/tmp"));
}
