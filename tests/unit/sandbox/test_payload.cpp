// resolve_payload decides execvp's verdict as the wrap will see it: only files visible through
// the plan's binds count, PATH is searched in order, a non-executable hit is remembered (126)
// while the search goes on, and relative names resolve against the working directory.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <string>
#include <vector>

#include "sandbox/wrap/payload.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

namespace fs = std::filesystem;

void write_program(const fs::path& path, fs::perms perms) {
    fs::create_directories(path.parent_path());
    std::ofstream(path) << "#!/bin/sh\nexit 0\n";
    fs::permissions(path, perms);
}

constexpr auto k_exec = fs::perms::owner_all;
constexpr auto k_plain = fs::perms::owner_read | fs::perms::owner_write;

// A layout where `shown` is bound inside and nothing else of the host is.
std::vector<sandbox::MountEntry> binding(const fs::path& shown) {
    return {{sandbox::MountKind::bind, shown, shown, {}, 2}};
}

sandbox::Environment path_env(const std::string& path) {
    return {{"PATH", path}};
}

}  // namespace

TEST_CASE("payload: a program on PATH inside a bound directory is found") {
    auto dir = tests::make_temp_dir();
    const fs::path root = fs::canonical(dir);
    write_program(root / "bin" / "tool", k_exec);
    CHECK(sandbox::resolve_payload("tool", path_env((root / "bin").string()), root,
                                   binding(root)) == 0);
}

TEST_CASE("payload: a program that is not there, or not visible inside, is 127") {
    auto dir = tests::make_temp_dir();
    const fs::path root = fs::canonical(dir);
    write_program(root / "hidden" / "tool", k_exec);
    const auto env = path_env((root / "hidden").string());
    CHECK(sandbox::resolve_payload("nothing-here", env, root, binding(root)) == 127);
    // On the host, but the layout binds only a sibling directory: not there for execvp inside.
    fs::create_directories(root / "shown");
    CHECK(sandbox::resolve_payload("tool", env, root, binding(root / "shown")) == 127);
    CHECK(sandbox::resolve_payload((root / "hidden" / "tool").string(), env, root,
                                   binding(root / "shown")) == 127);
}

TEST_CASE("payload: a PATH entry outside every mount is not there inside, wherever it points") {
    auto dir = tests::make_temp_dir();
    const fs::path root = fs::canonical(dir);
    write_program(root / "shown" / "bin" / "tool", k_exec);
    // On the host, `link` leads into the bound directory; inside, nothing is mounted at `link`
    // (the wrap's root is empty but for its mounts), so execvp finds nothing there.
    fs::create_directory_symlink(root / "shown" / "bin", root / "link");
    const auto layout = binding(root / "shown");
    CHECK(sandbox::resolve_payload("tool", path_env((root / "link").string()), root, layout) ==
          127);
    CHECK(sandbox::resolve_payload((root / "link" / "tool").string(), path_env("/usr/bin"), root,
                                   layout) == 127);
    // Through the bound directory itself it is found.
    CHECK(sandbox::resolve_payload(
              "tool", path_env((root / "link").string() + ":" + (root / "shown" / "bin").string()),
              root, layout) == 0);
}

TEST_CASE("payload: a non-executable hit is 126 unless a later PATH entry has an executable one") {
    auto dir = tests::make_temp_dir();
    const fs::path root = fs::canonical(dir);
    write_program(root / "a" / "tool", k_plain);
    write_program(root / "b" / "tool", k_exec);
    const std::string a = (root / "a").string();
    const std::string b = (root / "b").string();
    CHECK(sandbox::resolve_payload("tool", path_env(a), root, binding(root)) == 126);
    CHECK(sandbox::resolve_payload("tool", path_env(a + ":" + b), root, binding(root)) == 0);
    CHECK(sandbox::resolve_payload("tool", path_env(a + ":" + (root / "none").string()), root,
                                   binding(root)) == 126);
}

TEST_CASE("payload: names with a slash resolve against the working directory, not PATH") {
    auto dir = tests::make_temp_dir();
    const fs::path root = fs::canonical(dir);
    write_program(root / "work" / "script.sh", k_exec);
    write_program(root / "work" / "data.txt", k_plain);
    const auto env = path_env("/usr/bin:/bin");
    CHECK(sandbox::resolve_payload("./script.sh", env, root / "work", binding(root)) == 0);
    CHECK(sandbox::resolve_payload("./data.txt", env, root / "work", binding(root)) == 126);
    CHECK(sandbox::resolve_payload("script.sh", env, root / "work", binding(root)) == 127);
    // An empty PATH entry means the working directory, as for execvp.
    CHECK(sandbox::resolve_payload("script.sh", path_env("/usr/bin:"), root / "work",
                                   binding(root)) == 0);
}

TEST_CASE("payload: a failing payload reports the verdict with its exact status") {
    const auto not_found = sandbox::failing_payload(127, "gcc");
    REQUIRE(not_found.size() == 5);
    CHECK(not_found[0] == "/bin/sh");
    CHECK(not_found[2].find("exit 127") != std::string::npos);
    CHECK(not_found[4].find("gcc: command not found inside the sandbox") != std::string::npos);
    const auto denied = sandbox::failing_payload(126, "./x");
    CHECK(denied[2].find("exit 126") != std::string::npos);
    CHECK(denied[4].find("permission denied") != std::string::npos);
}

TEST_CASE("payload: a bind showing a host directory elsewhere is searched at its host side") {
    auto dir = tests::make_temp_dir();
    const fs::path root = fs::canonical(dir);
    write_program(root / "externals" / "node20" / "bin" / "node", k_exec);
    write_program(root / "externals" / "bin" / "plain", k_plain);
    fs::create_directories(root / "externals" / "lib");
    write_program(root / "elsewhere" / "tool", k_exec);
    // A link staying within the bind is seen at its destination; one leading out is not seen.
    fs::create_symlink("../lib/../node20/bin/node", root / "externals" / "bin" / "node");
    fs::create_symlink(root / "elsewhere" / "tool", root / "externals" / "bin" / "out");
    const std::vector<sandbox::MountEntry> layout = {
        {sandbox::MountKind::ro_bind, "/__e", root / "externals", {}, 2}};
    const auto env = path_env("/__e/bin");
    CHECK(sandbox::resolve_payload("/__e/node20/bin/node", env, "/__w", layout) == 0);
    CHECK(sandbox::resolve_payload("node", env, "/__w", layout) == 0);
    CHECK(sandbox::resolve_payload("plain", env, "/__w", layout) == 126);
    CHECK(sandbox::resolve_payload("out", env, "/__w", layout) == 127);
    CHECK(sandbox::resolve_payload("/__e/node24/bin/node", env, "/__w", layout) == 127);
    // The host path itself is not shown inside.
    CHECK(sandbox::resolve_payload((root / "externals/node20/bin/node").string(), env, "/__w",
                                   layout) == 127);
}
