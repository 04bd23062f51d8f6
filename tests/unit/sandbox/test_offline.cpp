// The cache-only toolchain environment and per-run toolchain homes (sandbox/wrap/offline.cpp),
// checked against ../shared/docs/offline-toolchains.md: every toolchain told to stay offline,
// homes inside the run's scratch, a warm cache copied by allowlist (credentials never), copies
// that cannot write back into the cache, and offline config files that stay well-formed.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

#include "sandbox/wrap/offline.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

namespace fs = std::filesystem;

std::string value_of(const sandbox::Environment& env, std::string_view name) {
    for (const auto& [key, value] : env)
        if (key == name) return value;
    return "<unset>";
}

}  // namespace

TEST_CASE("offline: every toolchain of the doc is switched to its cache-only mode") {
    const auto scratch = sandbox::scratch_layout("/tmp/sandgate-run");
    const auto env =
        sandbox::wrapped_environment({}, scratch, sandbox::OfflineEnv::on, std::nullopt);
    CHECK(value_of(env, "CARGO_NET_OFFLINE") == "true");
    CHECK(value_of(env, "npm_config_offline") == "true");
    CHECK(value_of(env, "YARN_ENABLE_NETWORK") == "0");
    CHECK(value_of(env, "PIP_NO_INDEX") == "1");
    CHECK(value_of(env, "GOPROXY") == "off");
    CHECK(value_of(env, "GOFLAGS") == "-mod=mod");
    CHECK(value_of(env, "GOTOOLCHAIN") == "local");
    CHECK(value_of(env, "MAVEN_ARGS") == "-o");
    const auto online =
        sandbox::wrapped_environment({}, scratch, sandbox::OfflineEnv::off, std::nullopt);
    CHECK(value_of(online, "CARGO_NET_OFFLINE") == "<unset>");
    CHECK(value_of(online, "GOPROXY") == "<unset>");
}

TEST_CASE(
    "offline: HOME, TMPDIR, XDG and the toolchain homes point into the scratch, whatever came in") {
    const auto scratch = sandbox::scratch_layout("/tmp/sandgate-run");
    const sandbox::Environment base = {{"HOME", "/root"},
                                       {"CARGO_HOME", "/root/.cargo"},
                                       {"TMPDIR", "/tmp"},
                                       {"PATH", "/opt/bin:/usr/bin"},
                                       {"LANG", "C.UTF-8"}};
    const auto env =
        sandbox::wrapped_environment(base, scratch, sandbox::OfflineEnv::on, std::nullopt);
    CHECK(value_of(env, "HOME") == "/tmp/sandgate-run/home");
    CHECK(value_of(env, "TMPDIR") == "/tmp/sandgate-run/tmp");
    CHECK(value_of(env, "CARGO_HOME") == "/tmp/sandgate-run/home/.cargo");
    CHECK(value_of(env, "GRADLE_USER_HOME") == "/tmp/sandgate-run/home/.gradle");
    CHECK(value_of(env, "XDG_CONFIG_HOME") == "/tmp/sandgate-run/home/.config");
    CHECK(value_of(env, "PIP_CONFIG_FILE") == "/dev/null");
    CHECK(value_of(env, "PATH") == "/opt/bin:/usr/bin");  // the request's own is kept
    CHECK(value_of(env, "LANG") == "C.UTF-8");
    std::size_t homes = 0;
    for (const auto& [key, value] : env) homes += key == "HOME";
    CHECK(homes == 1);  // replaced, not appended
}

TEST_CASE("offline: automatic means offline exactly when the network is none") {
    sandbox::Policy policy;
    policy.network = sandbox::NetworkMode::none;
    CHECK(sandbox::offline_enabled(policy));
    policy.network = sandbox::NetworkMode::host;
    CHECK_FALSE(sandbox::offline_enabled(policy));
    policy.offline = sandbox::Offline::on;
    CHECK(sandbox::offline_enabled(policy));
}

TEST_CASE(
    "offline: a warm cache is copied by allowlist, credentials stay behind, the cache is not "
    "written") {
    const fs::path cache = tests::make_temp_dir("cache");
    tests::write_file(cache / "cargo/registry/index/crates", "index");
    tests::write_file(cache / "cargo/git/db/repo", "git");
    tests::write_file(cache / "cargo/credentials.toml", "[registry]\ntoken = \"CANARY\"\n");
    tests::write_file(cache / "cargo/config.toml", "[registry]\ntoken = \"CANARY\"\n");
    tests::write_file(cache / "npm/_cacache/index-v5/x", "npm");
    tests::write_file(cache / "npm/.npmrc", "//registry.npmjs.org/:_authToken=CANARY\n");
    tests::write_file(cache / "m2/repository/org/x.jar", "jar");
    tests::write_file(cache / "m2/settings.xml", "<servers>CANARY</servers>");
    const auto scratch = sandbox::scratch_layout(tests::make_temp_dir("scratch") / "run");
    auto fresh = sandbox::create_scratch(scratch, std::nullopt);
    REQUIRE(fresh);
    REQUIRE(*fresh);  // a new home: to be seeded
    REQUIRE(sandbox::seed_toolchain_home(**fresh, scratch, sandbox::OfflineEnv::on, cache,
                                         std::nullopt));
    const fs::path home = scratch.home;
    // Made already: not seeded again.
    auto again = sandbox::create_scratch(scratch, std::nullopt);
    REQUIRE(again);
    CHECK_FALSE(*again);
    CHECK(tests::read_file(home / ".cargo/registry/index/crates") == "index");
    CHECK(tests::read_file(home / ".cargo/git/db/repo") == "git");
    CHECK(tests::read_file(home / ".npm/_cacache/index-v5/x") == "npm");
    CHECK(tests::read_file(home / ".m2/repository/org/x.jar") == "jar");
    CHECK_FALSE(fs::exists(home / ".cargo/credentials.toml"));
    CHECK_FALSE(fs::exists(home / ".cargo/config.toml"));
    CHECK_FALSE(fs::exists(home / ".npmrc"));
    CHECK(tests::read_file(home / ".m2/settings.xml").find("CANARY") == std::string::npos);
    // Copies, not links: a run that rewrites its copy leaves the shared cache as it was.
    tests::write_file(home / ".cargo/registry/index/crates", "poison");
    CHECK(tests::read_file(cache / "cargo/registry/index/crates") == "index");
    struct stat st {};
    REQUIRE(::stat((cache / "m2/repository/org/x.jar").c_str(), &st) == 0);
    CHECK(st.st_nlink == 1);
}

TEST_CASE(
    "offline: a scratch home a step replaced by a link is refused, and seeding never writes "
    "through links") {
    const fs::path host = tests::make_temp_dir("host");
    tests::write_file(host / "settings.xml", "host file\n");
    const auto scratch = sandbox::scratch_layout(tests::make_temp_dir("scratch") / "run");
    auto fresh = sandbox::create_scratch(scratch, std::nullopt);
    REQUIRE(fresh);
    REQUIRE(*fresh);
    // A step made the seeded paths links before the (fresh) home was seeded: O_EXCL and
    // beneath-only resolution refuse them instead of writing the host file.
    fs::create_directories(scratch.home / ".m2");
    fs::create_symlink(host / "settings.xml", scratch.home / ".m2/settings.xml");
    fs::create_directories(scratch.home / ".gradle");
    fs::create_directory_symlink(host, scratch.home / ".gradle/init.d");
    CHECK_FALSE(sandbox::seed_toolchain_home(**fresh, scratch, sandbox::OfflineEnv::on,
                                             std::nullopt, std::nullopt));
    CHECK(tests::read_file(host / "settings.xml") == "host file\n");
    CHECK_FALSE(fs::exists(host / "sandgate-offline.gradle"));
    // The home itself replaced by a link: the next run's scratch is refused.
    fs::rename(scratch.home, scratch.root / "moved");
    fs::create_directory_symlink(host, scratch.home);
    auto refused = sandbox::create_scratch(scratch, std::nullopt);
    REQUIRE_FALSE(refused);
    CHECK(refused.error().message == "the scratch's home is not a directory");
}

TEST_CASE(
    "offline: the maven, gradle and NuGet files configure offline mode and stay well-formed") {
    const fs::path cache = tests::make_temp_dir("cache") / "a&b<c>\"d'";
    fs::create_directories(cache / "nuget/packages");
    const auto scratch = sandbox::scratch_layout("/tmp/run&<x>");
    const auto files = sandbox::offline_config_files(scratch, cache);
    REQUIRE(files.size() == 3);
    CHECK(files[0].path == scratch.home / ".m2/settings.xml");
    CHECK(files[0].content.find("<offline>true</offline>") != std::string::npos);
    CHECK(files[0].content.find("/tmp/run&amp;&lt;x&gt;/home/.m2/repository") != std::string::npos);
    CHECK(files[1].content == "gradle.startParameter.offline = true\n");
    CHECK(files[2].content.find("<clear />") != std::string::npos);
    CHECK(files[2].content.find("a&amp;b&lt;c&gt;&quot;d&apos;/nuget/packages") !=
          std::string::npos);
    for (const auto& file : files) CHECK(file.content.find("&<") == std::string::npos);
}
