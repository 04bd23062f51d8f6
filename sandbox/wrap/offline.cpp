#include "sandbox/wrap/offline.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <charconv>
#include <string>
#include <utility>

#include "common/xml_escape.hpp"

namespace sandbox {
namespace {

struct CacheCopy {
    const char* from;  // below the cache dir
    const char* to;    // below the per-run HOME
};

// Allowlist: the directories of offline-toolchains.md, never a whole tool home.
constexpr CacheCopy k_copies[] = {
    {"cargo/registry", ".cargo/registry"},
    {"cargo/git", ".cargo/git"},
    {"npm/_cacache", ".npm/_cacache"},
    {"yarn/cache", ".cache/yarn"},
    {"go/mod", "go/pkg/mod"},
    {"m2/repository", ".m2/repository"},
    {"gradle/caches", ".gradle/caches"},
    {"gradle/wrapper/dists", ".gradle/wrapper/dists"},
    {"nuget/packages", ".nuget/packages"},
};

void set(Environment& env, std::string name, std::string value) {
    for (auto& [key, current] : env) {
        if (key == name) {
            current = std::move(value);
            return;
        }
    }
    env.emplace_back(std::move(name), std::move(value));
}

}  // namespace

ScratchLayout scratch_layout(const std::filesystem::path& root) {
    return ScratchLayout{root, root / "home", root / "tmp"};
}

Expected<std::optional<SafeDir>> create_scratch(const ScratchLayout& layout,
                                                const std::optional<Owner>& owner) {
    auto root = SafeDir::make_trusted(layout.root, {0700, owner}, "the scratch");
    if (!root) return std::unexpected(root.error());
    if (owner && ::fchown(root->fd(), owner->uid, owner->gid) != 0)
        return fail(ErrorKind::permanent, errno_message("giving the scratch to the sandbox"));
    if (auto tmp = root->make_dirs("tmp", {0700, owner}, "the scratch's tmp"); !tmp)
        return std::unexpected(tmp.error());
    if (auto home = root->open_dir("home", "the scratch's home")) return std::optional<SafeDir>();
    auto home = root->make_dirs("home", {0700, owner}, "the scratch's home");
    if (!home) return std::unexpected(home.error());
    return std::optional<SafeDir>(std::move(*home));
}

void trust_git_directories(Environment& env) {
    unsigned count = 0;
    for (const auto& [key, value] : env) {
        if (key != "GIT_CONFIG_COUNT") continue;
        const auto* end = value.data() + value.size();
        if (std::from_chars(value.data(), end, count).ptr != end) count = 0;
    }
    set(env, "GIT_CONFIG_KEY_" + std::to_string(count), "safe.directory");
    set(env, "GIT_CONFIG_VALUE_" + std::to_string(count), "*");
    set(env, "GIT_CONFIG_COUNT", std::to_string(count + 1));
}

std::vector<std::filesystem::path> toolchain_cache_binds(const std::filesystem::path& cache) {
    std::vector<std::filesystem::path> out;
    std::error_code ec;
    const auto add = [&](const char* below) {
        const auto dir = cache / below;
        if (std::filesystem::is_directory(std::filesystem::symlink_status(dir, ec)))
            out.push_back(dir);
    };
    for (const auto& copy : k_copies) add(copy.from);
    add("pnpm/store");
    add("pip/wheelhouse");
    return out;
}

bool offline_enabled(const Policy& policy) {
    switch (policy.offline) {
        case Offline::on:
            return true;
        case Offline::off:
            return false;
        case Offline::automatic:
            return policy.network == NetworkMode::none && policy.egress.empty();
    }
    return true;
}

Environment wrapped_environment(const Environment& base, const ScratchLayout& scratch,
                                OfflineEnv offline,
                                const std::optional<std::filesystem::path>& cache) {
    Environment env = base;
    const std::string home = scratch.home.string();
    const std::string tmp = scratch.tmp.string();
    bool has_path = false;
    for (const auto& [key, value] : env) has_path = has_path || key == "PATH";
    if (!has_path) set(env, "PATH", "/usr/local/bin:/usr/bin:/bin");
    set(env, "HOME", home);
    set(env, "USER", "sandgate");
    set(env, "LOGNAME", "sandgate");
    for (const char* name : {"TMPDIR", "TMP", "TEMP"}) set(env, name, tmp);
    set(env, "XDG_CACHE_HOME", home + "/.cache");
    set(env, "XDG_CONFIG_HOME", home + "/.config");
    set(env, "XDG_DATA_HOME", home + "/.local/share");
    set(env, "XDG_STATE_HOME", home + "/.local/state");
    set(env, "XDG_RUNTIME_DIR", tmp);
    // Toolchain homes: per run, inside the scratch, never the agent's.
    set(env, "CARGO_HOME", home + "/.cargo");
    set(env, "GOPATH", home + "/go");
    set(env, "GOMODCACHE", home + "/go/pkg/mod");
    set(env, "npm_config_cache", home + "/.npm");
    set(env, "npm_config_userconfig", home + "/.npmrc");
    set(env, "YARN_CACHE_FOLDER", home + "/.cache/yarn");
    set(env, "GRADLE_USER_HOME", home + "/.gradle");
    set(env, "NUGET_PACKAGES", home + "/.nuget/packages");
    set(env, "PIP_CONFIG_FILE", "/dev/null");
    if (cache) {
        std::error_code ec;
        if (std::filesystem::is_directory(*cache / "pip/wheelhouse", ec))
            set(env, "PIP_FIND_LINKS", (*cache / "pip/wheelhouse").string());
        if (std::filesystem::is_directory(*cache / "pnpm/store", ec))
            set(env, "npm_config_store_dir", (*cache / "pnpm/store").string());
    }
    if (offline == OfflineEnv::on) {
        set(env, "CARGO_NET_OFFLINE", "true");
        set(env, "npm_config_offline", "true");
        set(env, "YARN_ENABLE_NETWORK", "0");
        set(env, "YARN_ENABLE_IMMUTABLE_INSTALLS", "true");
        set(env, "PIP_NO_INDEX", "1");
        set(env, "GOPROXY", "off");
        set(env, "GOFLAGS", "-mod=mod");
        set(env, "GOTOOLCHAIN", "local");
        set(env, "GOSUMDB", "off");
        set(env, "MAVEN_ARGS", "-o");
        set(env, "DOTNET_CLI_TELEMETRY_OPTOUT", "1");
        set(env, "DOTNET_NOLOGO", "1");
    }
    return env;
}

Expected<void> seed_toolchain_home(const SafeDir& home, const ScratchLayout& scratch,
                                   OfflineEnv offline,
                                   const std::optional<std::filesystem::path>& cache,
                                   const std::optional<Owner>& owner) {
    if (cache) {
        auto root = SafeDir::open_trusted(*cache, "--toolchain-cache");
        for (const auto& copy : k_copies) {
            if (!root) break;
            auto from = root->open_dir(copy.from, copy.from);
            if (!from) continue;  // not cached (or not a plain directory): nothing to seed
            auto to = home.make_dirs(copy.to, {0755, owner}, copy.to);
            if (!to) return std::unexpected(to.error());
            if (auto copied = copy_tree(*from, *to, owner); !copied)
                return fail(ErrorKind::permanent, "seeding the toolchain home from " +
                                                      (*cache / copy.from).string() + ": " +
                                                      copied.error().message);
        }
    }
    if (offline == OfflineEnv::off) return {};
    for (const auto& file : offline_config_files(scratch, cache)) {
        const auto relative = relative_beneath(scratch.home, file.path);
        if (!relative) continue;
        const auto parent = std::filesystem::path(*relative).parent_path().string();
        if (!parent.empty()) {
            (void)SANDGATE_TRY(home.make_dirs(parent, {0755, owner}, parent));
        }
        (void)SANDGATE_TRY(
            home.create_file_once(*relative, file.content, {0644, owner}, *relative));
    }
    return {};
}

std::vector<ScratchFile> offline_config_files(const ScratchLayout& scratch,
                                              const std::optional<std::filesystem::path>& cache) {
    // Maven and Gradle have no environment switch that every version honours: configure them.
    std::vector<ScratchFile> files;
    const std::string repository = common::xml_escape((scratch.home / ".m2/repository").string());
    files.push_back({scratch.home / ".m2/settings.xml",
                     "<settings>\n  <offline>true</offline>\n  <localRepository>" + repository +
                         "</localRepository>\n</settings>\n"});
    files.push_back({scratch.home / ".gradle/init.d/sandgate-offline.gradle",
                     "gradle.startParameter.offline = true\n"});
    std::error_code ec;
    std::string feed = cache ? (*cache / "nuget/packages").string() : std::string();
    std::string sources = "<clear />";
    if (!feed.empty() && std::filesystem::is_directory(feed, ec))
        sources += "<add key=\"sandgate-cache\" value=\"" + common::xml_escape(feed) + "\" />";
    files.push_back({scratch.home / ".nuget/NuGet/NuGet.Config",
                     "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<configuration>\n"
                     "  <packageSources>" +
                         sources + "</packageSources>\n</configuration>\n"});
    return files;
}

}  // namespace sandbox
