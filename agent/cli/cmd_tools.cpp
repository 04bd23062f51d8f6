// `sandgate tools list|add [--tool-cache DIR]`: the hosted tool cache (sandbox/wrap/tool_cache.hpp)
// that every bwrap step sees read-only at /opt/hostedtoolcache as RUNNER_TOOL_CACHE, so that
// actions/setup-python, setup-node, setup-go and setup-java find the machine's toolchains with
// no download. `add` builds it from the toolchains on PATH; `list` shows what it holds.
// Exit 0, 1 when `add` found no toolchain at all, 2 on usage, 125 when the cache cannot be
// made or read.
#include <cstdio>
#include <cstdlib>

#include "agent/cli/cli11.hpp"
#include "agent/cli/commands.hpp"
#include "agent/cli/policy_options.hpp"
#include "sandbox/wrap/tool_cache.hpp"

namespace agent {
namespace {

constexpr int k_exit_refused = 125;

void print_entry(const char* verb, const sandbox::ToolEntry& entry) {
    std::printf("%s%s/%s/%s%s%s%s\n", verb, entry.tool.c_str(), entry.version.c_str(),
                entry.arch.c_str(),
                entry.complete ? "" : " (incomplete: `sandgate tools add` makes it again)",
                entry.target.empty() ? "" : " -> ", entry.target.c_str());
}

int list_tools(const std::filesystem::path& cache) {
    auto entries = sandbox::list_tool_cache(cache);
    if (!entries) {
        std::fprintf(stderr, "sandgate tools list: %s\n", entries.error().message.c_str());
        return k_exit_refused;
    }
    std::printf("tool cache %s (RUNNER_TOOL_CACHE inside the sandbox: %s)\n", cache.c_str(),
                std::string(sandbox::k_tool_cache_mount).c_str());
    if (entries->empty())
        std::printf("  empty: `sandgate tools add` fills it from this machine's toolchains\n");
    for (const auto& entry : *entries) print_entry("  ", entry);
    return 0;
}

int add_tools(const std::filesystem::path& cache) {
    const char* path = std::getenv("PATH");
    std::vector<std::string> notes;
    const auto tools =
        sandbox::find_machine_tools(path ? path : "/usr/local/bin:/usr/bin:/bin", notes);
    for (const auto& note : notes) std::fprintf(stderr, "sandgate tools add: %s\n", note.c_str());
    if (tools.empty()) {
        std::fprintf(stderr,
                     "sandgate tools add: no python3, node, go or java on PATH: nothing to add\n");
        return 1;
    }
    std::error_code ec;
    std::filesystem::create_directories(cache.parent_path(), ec);  // trusted path: the caller's own
    auto added = sandbox::add_machine_tools(cache, tools);
    if (!added) {
        std::fprintf(stderr, "sandgate tools add: %s\n", added.error().message.c_str());
        return k_exit_refused;
    }
    for (const auto& entry : added->added) print_entry("added ", entry);
    for (const auto& entry : added->kept) print_entry("kept  ", entry);
    std::printf("tool cache %s\n", cache.c_str());
    return 0;
}

}  // namespace

int tools_command(CommandArgs args) {
    CLI::App app("sandgate tools: the hosted tool cache bound read-only into every step",
                 "sandgate tools");
    app.require_subcommand(1);
    std::string cache;
    const std::string help =
        "the tool cache directory (default: " + default_tool_cache().string() + ")";
    CLI::App* list = app.add_subcommand("list", "what the tool cache holds");
    CLI::App* add =
        app.add_subcommand("add", "add this machine's python3, node, go and java (those on PATH)");
    list->add_option("--tool-cache", cache, help);
    add->add_option("--tool-cache", cache, help);
    try {
        app.parse(static_cast<int>(args.size()), args.data());
    } catch (const CLI::ParseError& error) {
        return app.exit(error) == 0 ? 0 : 2;
    }
    std::error_code ec;
    const std::filesystem::path dir = cache.empty()
                                          ? default_tool_cache()
                                          : std::filesystem::absolute(cache, ec).lexically_normal();
    return list->parsed() ? list_tools(dir) : add_tools(dir);
}

}  // namespace agent
