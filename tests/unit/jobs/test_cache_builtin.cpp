// actions/cache (and cache/restore, cache/save) answered by sandgate's own store, end to end
// through `sandgate run`: a save in one run restored by the next with cache-hit, restore-keys
// prefixes, GitHub's scoping of pull requests, links and FIFOs among the saved paths never
// followed; and the store's own rules (immutable keys, size limits, eviction of the oldest).
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

#include "jobs/builtins/cache_store.hpp"
#include "sandbox/access/safe_access.hpp"
#include "tests/support/run_helpers.hpp"
#include "tests/support/scoped_env.hpp"

namespace fs = std::filesystem;

namespace {

// Restores `out` under KEY (restore-keys RESTORE), prints what came back, then writes KEY's
// content into out/data.txt for the post step to save.
constexpr const char* k_workflow = R"(on: [push, pull_request]
jobs:
  c:
    runs-on: ubuntu-latest
    steps:
      - run: rm -rf out
      - id: cache
        uses: actions/cache@v5
        with:
          path: out
          key: ${{ env.KEY }}
          restore-keys: ${{ env.RESTORE }}
      - run: |
          echo "hit=[${{ steps.cache.outputs.cache-hit }}]"
          echo "restored=[$(cat out/data.txt 2>/dev/null)]"
      - run: mkdir -p out && echo "$KEY" > out/data.txt
)";

tests::Ran run(const fs::path& dir, const std::string& key, const std::string& restore,
               std::vector<std::string> extra = {}) {
    std::vector<std::string> args{"-C",    "repo",       "-W",    "w",
                                  "--env", "KEY=" + key, "--env", "RESTORE=" + restore};
    args.insert(args.end(), extra.begin(), extra.end());
    return tests::run_workflows(dir, args);
}

bool has(const tests::Ran& ran, const std::string& text) {
    return ran.output.find(text) != std::string::npos;
}

fs::path setup(const std::string& label, const char* workflow = k_workflow) {
    const auto dir = tests::make_temp_dir(label);
    tests::write_file(dir / "repo/w/cache.yml", workflow);
    return dir;
}

std::vector<std::string> pull_request(const fs::path& dir, int number) {
    const auto file = dir / ("pr" + std::to_string(number) + ".json");
    tests::write_file(file, R"({"number": )" + std::to_string(number) +
                                R"(, "pull_request": {"head": {"ref": "topic)" +
                                std::to_string(number) + R"("}, "base": {"ref": "main"}}})");
    return {"pull_request", "-e", file.string()};
}

}  // namespace

TEST_CASE("a cache saved by one run is restored by the next, exact keys and restore-keys") {
    const auto dir = setup("cache");
    tests::ScopedEnv state("XDG_STATE_HOME", (dir / "state").string());
    auto first = run(dir, "deps-v1", "deps-");
    CHECK(first.exit_code == 0);
    CHECK(has(first, "hit=[false]"));
    CHECK(has(first, "restored=[]"));
    CHECK(has(first, "Cache not found for input keys: deps-v1, deps-"));
    CHECK(has(first, "sandgate: saved the cache entry for key deps-v1 (1 file"));

    auto second = run(dir, "deps-v1", "deps-");
    CHECK(second.exit_code == 0);
    CHECK(has(second, "hit=[true]"));
    CHECK(has(second, "restored=[deps-v1]"));
    CHECK(has(second, "sandgate: restored the cache entry for key deps-v1"));
    CHECK(has(second, "Cache hit occurred on the primary key deps-v1, not saving cache."));

    // A new key restores the newest entry its restore-keys prefix matches; no exact hit.
    auto third = run(dir, "deps-v2", "deps-");
    CHECK(third.exit_code == 0);
    CHECK(has(third, "hit=[false]"));
    CHECK(has(third, "restored=[deps-v1]"));
    CHECK(has(third, "saved the cache entry for key deps-v2"));
    auto fourth = run(dir, "deps-v3", "deps-");
    CHECK(has(fourth, "restored=[deps-v2]"));

    // An entry lives in the store (never in the workspace) and is not writable there.
    auto store = jobs::CacheStore::open(dir / "state/sandgate/caches");
    REQUIRE(store);
    auto entries = store->list();
    REQUIRE(entries);
    CHECK(entries->size() == 3);
    for (const auto& entry : fs::directory_iterator(dir / "state/sandgate/caches/blobs"))
        CHECK((fs::status(entry).permissions() & fs::perms::owner_write) == fs::perms::none);
}

TEST_CASE("a job that fails saves nothing; lookup-only and fail-on-cache-miss") {
    const auto dir = setup("cache-fail", R"(on: push
jobs:
  c:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/cache@v5
        with:
          path: out
          key: k1
      - run: mkdir -p out && echo x > out/f && exit ${{ env.CODE }}
  look:
    runs-on: ubuntu-latest
    needs: c
    if: always()
    steps:
      - id: look
        uses: actions/cache/restore@v5
        with:
          path: out
          key: k1
          lookup-only: true
          fail-on-cache-miss: true
      - run: echo "looked=[${{ steps.look.outputs.cache-hit }}]"
)");
    tests::ScopedEnv state("XDG_STATE_HOME", (dir / "state").string());
    auto failed = tests::run_workflows(dir, {"-C", "repo", "-W", "w", "--env", "CODE=1"});
    CHECK(failed.exit_code == 1);
    CHECK_FALSE(has(failed, "saved the cache entry"));
    CHECK(has(failed, "Failed to restore cache entry. Exiting as fail-on-cache-miss is set."));
    auto passed = tests::run_workflows(dir, {"-C", "repo", "-W", "w", "--env", "CODE=0"});
    CHECK(passed.exit_code == 0);
    CHECK(has(passed, "saved the cache entry for key k1"));
    CHECK(has(passed, "looked=[true]"));
    CHECK(has(passed, "lookup-only: nothing restored"));
}

TEST_CASE("a pull request reads its own and its base branch's entries, never another's") {
    const auto dir = setup("cache-pr");
    tests::ScopedEnv state("XDG_STATE_HOME", (dir / "state").string());
    const auto push_main = dir / "push.json";
    tests::write_file(push_main, R"({"ref": "refs/heads/main"})");
    CHECK(run(dir, "main-key", "none-", {"push", "-e", push_main.string()}).exit_code == 0);
    CHECK(run(dir, "pr7-key", "none-", pull_request(dir, 7)).exit_code == 0);

    // PR 8 cannot see PR 7's entry, but sees main's (its base branch).
    auto other = run(dir, "pr7-key", "none-", pull_request(dir, 8));
    CHECK(has(other, "hit=[false]"));
    CHECK(has(other, "restored=[]"));
    auto base = run(dir, "main-key", "none-", pull_request(dir, 8));
    CHECK(has(base, "hit=[true]"));
    CHECK(has(base, "restored=[main-key]"));
    // PR 7 reads its own; a save from a pull request went to its own scope only: main's
    // push run does not see it.
    auto own = run(dir, "pr7-key", "none-", pull_request(dir, 7));
    CHECK(has(own, "restored=[pr7-key]"));
    auto from_main = run(dir, "pr7-key", "none-", {"push", "-e", push_main.string()});
    CHECK(has(from_main, "restored=[]"));
}

TEST_CASE("links and FIFOs in a cached path are left out, never followed, and nothing hangs") {
    const auto dir = setup("cache-links", R"(on: push
jobs:
  c:
    runs-on: ubuntu-latest
    steps:
      - run: rm -rf out
      - id: cache
        uses: actions/cache@v5
        with:
          path: |
            out
            ~/.npm
          key: ${{ env.KEY }}
      - run: |
          ls -la out || true
          echo "hit=[${{ steps.cache.outputs.cache-hit }}]"
      - run: |
          mkdir -p out/sub
          echo real > out/sub/real.txt
          ln -s /etc/passwd out/passwd
          ln -s / out/root
          mkfifo out/fifo
)");
    tests::ScopedEnv state("XDG_STATE_HOME", (dir / "state").string());
    auto first = tests::run_workflows(dir, {"-C", "repo", "-W", "w", "--env", "KEY=links"});
    CHECK(first.exit_code == 0);
    CHECK(has(first, "sandgate: left out 3 entries that are links, FIFOs, sockets or devices"));
    CHECK(has(first, "sandgate keeps files of the workspace only: ~/.npm left out"));
    CHECK(has(first, "saved the cache entry for key links (1 file,"));
    fs::remove_all(dir / "repo/out");
    auto second = tests::run_workflows(dir, {"-C", "repo", "-W", "w", "--env", "KEY=links"});
    CHECK(second.exit_code == 0);
    CHECK(has(second, "hit=[true]"));
    // What the post step of the second run found was restored, plus the links the step made
    // again; the restore itself brought only the regular file.
    CHECK(has(second, "restored the cache entry for key links (1 file, 5 bytes)"));
}

TEST_CASE("a restore writes beneath the workspace only, replacing links a step planted") {
    const auto dir = setup("cache-plant", R"(on: push
jobs:
  c:
    runs-on: ubuntu-latest
    steps:
      - run: |
          rm -rf out && mkdir -p out
          ln -s ${{ env.VICTIM }} out/data.txt
      - uses: actions/cache/restore@v5
        with:
          path: out
          key: plant
      - run: echo "data=[$(cat out/data.txt)]"; test ! -L out/data.txt
  save:
    runs-on: ubuntu-latest
    needs: c
    if: always() && vars.SAVE == '1'
    steps:
      - run: rm -rf out && mkdir out && echo saved > out/data.txt
      - uses: actions/cache/save@v5
        with:
          path: out
          key: plant
)");
    tests::ScopedEnv state("XDG_STATE_HOME", (dir / "state").string());
    const auto victim = dir / "victim.txt";
    tests::write_file(victim, "precious\n");
    // The save job runs once (the restore misses, its check fails, the save still runs).
    auto seed = tests::run_workflows(
        dir, {"-C", "repo", "-W", "w", "--env", "VICTIM=" + victim.string(), "--var", "SAVE=1"});
    CHECK(has(seed, "saved the cache entry for key plant"));
    auto restored = tests::run_workflows(
        dir, {"-C", "repo", "-W", "w", "--env", "VICTIM=" + victim.string(), "--var", "SAVE=0"});
    CHECK(restored.exit_code == 0);
    CHECK(has(restored, "data=[saved]"));
    CHECK(tests::read_file(victim) == "precious\n");
}

TEST_CASE("the store: immutable keys, per-entry limit, the oldest evicted beyond the total") {
    const auto dir = tests::make_temp_dir("cache-store");
    auto store = jobs::CacheStore::open(dir / "caches", {100, 250});
    REQUIRE(store);
    auto save = [&](const std::string& key, std::size_t bytes) {
        auto blob = store->begin_save();
        REQUIRE(blob);
        const std::string content(bytes, static_cast<char>('a' + key.size() % 26));
        REQUIRE(::write(blob->fd().get(), content.data(), content.size()) ==
                static_cast<ssize_t>(content.size()));
        return store->commit(std::move(*blob), "repo@refs/heads/main", "v", key,
                             std::string(63, '0') + std::to_string(key.size() % 10), bytes);
    };
    CHECK(save("a", 90).value() == jobs::SaveOutcome::saved);
    CHECK(save("a", 90).value() == jobs::SaveOutcome::exists);
    auto too_big = save("big", 101);
    REQUIRE_FALSE(too_big);
    CHECK(too_big.error().message.find("more than the store's limit of 100") != std::string::npos);
    CHECK(save("bb", 90).value() == jobs::SaveOutcome::saved);
    CHECK(save("ccc", 90).value() == jobs::SaveOutcome::saved);  // 270 > 250: "a" goes
    auto keys = [&] {
        std::vector<std::string> out;
        const auto entries = store->list();
        REQUIRE(entries);
        for (const auto& entry : *entries) out.push_back(entry.key);
        return out;
    };
    CHECK(keys() == std::vector<std::string>{"bb", "ccc"});
    CHECK_FALSE(fs::exists(dir / "caches/blobs" / (std::string(63, '0') + "1.tar.gz")));
    // Prefix lookups take the newest; other scopes and versions never match.
    REQUIRE_FALSE(jobs::valid_cache_key(""));
    CHECK(store->lookup({"repo@refs/heads/main"}, "v", {"b"}).value()->key == "bb");
    CHECK_FALSE(store->lookup({"repo@refs/pull/1/merge"}, "v", {"bb"}).value());
    CHECK_FALSE(store->lookup({"repo@refs/heads/main"}, "w", {"bb"}).value());
    CHECK_FALSE(jobs::valid_cache_key("a,b"));
    CHECK_FALSE(jobs::valid_cache_key(std::string(513, 'k')));
}
