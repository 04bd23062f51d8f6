// The hosted runner's tool cache, built from the machine's toolchains (see tool_cache.hpp).
#include "sandbox/wrap/tool_cache.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <optional>
#include <tuple>

#include "sandbox/access/safe_access.hpp"
#include "sandbox/wrap/mounts.hpp"

namespace sandbox {
namespace {

const CreateOptions k_dir_mode{0755, std::nullopt};

// The first file named `name` on `path_list` that is an executable regular file.
std::optional<std::filesystem::path> find_on_path(const std::string& path_list,
                                                  std::string_view name) {
    std::size_t start = 0;
    while (start <= path_list.size()) {
        std::size_t end = path_list.find(':', start);
        if (end == std::string::npos) end = path_list.size();
        const std::string dir = path_list.substr(start, end - start);
        start = end + 1;
        if (dir.empty() || dir.front() != '/') continue;  // never the working directory
        const std::filesystem::path candidate = std::filesystem::path(dir) / name;
        struct stat st {};
        if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
            ::access(candidate.c_str(), X_OK) == 0)
            return candidate;
    }
    return std::nullopt;
}

// What `argv` prints on stdout and stderr, run unwrapped with only PATH set, within seconds.
std::optional<std::string> output_of(const std::vector<std::string>& argv,
                                     const std::string& path_list) {
    RunRequest request;
    request.argv = argv;
    request.env = {{"PATH", path_list}, {"LC_ALL", "C"}};
    request.timeout = std::chrono::seconds(10);
    request.output_limit = 16384;
    request.policy.mode = SandboxMode::off;
    const RunResult result = run(request);
    if (result.error || result.exit_code != 0) return std::nullopt;
    return result.out.head + "\n" + result.err.head;
}

// The first version number after `marker` in `text` (digits and dots), padded to three
// components (go1.20 is 1.20.0); empty when there is none.
std::string version_after(const std::string& text, std::string_view marker) {
    std::size_t at = text.find(marker);
    if (at == std::string::npos) return {};
    at += marker.size();
    std::size_t end = at;
    while (end < text.size() &&
           (std::isdigit(static_cast<unsigned char>(text[end])) || text[end] == '.'))
        ++end;
    std::string version = text.substr(at, end - at);
    while (!version.empty() && version.back() == '.') version.pop_back();
    if (version.empty() || !std::isdigit(static_cast<unsigned char>(version.front()))) return {};
    const auto dots = std::count(version.begin(), version.end(), '.');
    for (auto i = dots; i < 2; ++i) version += ".0";
    return version;
}

// Java 8 calls itself 1.8.0_392: the tool cache knows it as 8.0.392.
std::string java_version(const std::string& text) {
    const std::size_t quote = text.find("version \"");
    if (quote == std::string::npos) return {};
    const std::string quoted = text.substr(quote + 9, text.find('"', quote + 9) - quote - 9);
    const std::size_t under = quoted.find('_');
    if (quoted.starts_with("1.") && under != std::string::npos) {
        const std::string update = version_after(quoted.substr(under + 1), "");
        const std::string major = version_after(quoted.substr(2, under - 2), "");
        if (major.empty() || update.empty()) return {};
        return quoted.substr(2, under - 2) + "." + update.substr(0, update.find('.'));
    }
    return version_after(quoted, "");
}

// The real path of `program`, when it lies in /usr (which the wrap shows); else a note.
std::optional<std::filesystem::path> visible_real_path(const std::filesystem::path& program,
                                                       std::string_view tool,
                                                       std::vector<std::string>& notes) {
    std::error_code ec;
    const auto real = std::filesystem::canonical(program, ec);
    if (ec) {
        notes.push_back(std::string(tool) + ": " + program.string() + " cannot be resolved");
        return std::nullopt;
    }
    if (!path_within(real, "/usr")) {
        notes.push_back(std::string(tool) + ": " + real.string() +
                        " lies outside /usr, which the sandbox cannot see: left out");
        return std::nullopt;
    }
    return real;
}

void add_python(const std::string& path_list, std::vector<MachineTool>& tools,
                std::vector<std::string>& notes) {
    const auto python = find_on_path(path_list, "python3");
    if (!python) return;
    const auto real = visible_real_path(*python, "Python", notes);
    if (!real) return;
    const auto output = output_of({python->string(), "--version"}, path_list);
    const std::string version = output ? version_after(*output, "Python ") : std::string();
    if (version.empty()) {
        notes.push_back("Python: `" + python->string() + " --version` did not name a version");
        return;
    }
    MachineTool tool{"Python", version, {}, {{"python", *real}, {"python3", *real}}};
    if (const auto pip = find_on_path(path_list, "pip3");
        pip && visible_real_path(*pip, "pip", notes)) {
        tool.bins.emplace_back("pip", *pip);
        tool.bins.emplace_back("pip3", *pip);
    }
    tools.push_back(std::move(tool));
}

void add_node(const std::string& path_list, std::vector<MachineTool>& tools,
              std::vector<std::string>& notes) {
    const auto node = find_on_path(path_list, "node");
    if (!node) return;
    const auto real = visible_real_path(*node, "node", notes);
    if (!real) return;
    const auto output = output_of({node->string(), "--version"}, path_list);
    const std::string version = output ? version_after(*output, "v") : std::string();
    if (version.empty()) {
        notes.push_back("node: `" + node->string() + " --version` did not name a version");
        return;
    }
    MachineTool tool{"node", version, {}, {{"node", *real}}};
    for (const char* name : {"npm", "npx"}) {
        // Beside the node that was found, as a package puts them.
        const auto beside = node->parent_path() / name;
        std::error_code ec;
        if (std::filesystem::exists(beside, ec) && visible_real_path(beside, name, notes))
            tool.bins.emplace_back(name, beside);
    }
    tools.push_back(std::move(tool));
}

// A toolchain whose root holds bin/PROGRAM: the root is the real program's grandparent.
void add_rooted(const std::string& path_list, const char* program, const char* tool_name,
                const std::vector<std::string>& version_argv, std::vector<MachineTool>& tools,
                std::vector<std::string>& notes) {
    const auto found = find_on_path(path_list, program);
    if (!found) return;
    const auto real = visible_real_path(*found, tool_name, notes);
    if (!real) return;
    const auto root = real->parent_path().parent_path();
    if (real->parent_path().filename() != "bin") {
        notes.push_back(std::string(tool_name) + ": " + real->string() +
                        " is not in a toolchain's bin/: left out");
        return;
    }
    std::vector<std::string> argv = {found->string()};
    argv.insert(argv.end(), version_argv.begin(), version_argv.end());
    const auto output = output_of(argv, path_list);
    std::string version;
    if (output)
        version = std::string_view(program) == "go" ? version_after(*output, "go version go")
                                                    : java_version(*output);
    if (version.empty()) {
        notes.push_back(std::string(tool_name) + ": `" + found->string() +
                        "` did not name its version");
        return;
    }
    tools.push_back({tool_name, version, root, {}});
}

Expected<void> make_link(const SafeDir& dir, const std::filesystem::path& target,
                         const std::string& name) {
    if (::symlinkat(target.c_str(), dir.fd(), name.c_str()) != 0)
        return fail(ErrorKind::unavailable,
                    errno_message("linking " + (dir.path() / name).string()));
    return {};
}

std::filesystem::path link_target(const std::filesystem::path& path) {
    std::error_code ec;
    auto target = std::filesystem::read_symlink(path, ec);
    return ec ? std::filesystem::path() : target;
}

// One tool into the cache: <version>/<arch> made afresh, then <arch>.complete.
Expected<ToolEntry> add_tool(const SafeDir& root, const MachineTool& tool, const std::string& arch,
                             bool& kept) {
    const std::string version_dir = tool.tool + "/" + tool.version;
    auto dir = SANDGATE_TRY(root.make_dirs(version_dir, k_dir_mode, version_dir));
    ToolEntry entry{tool.tool, tool.version, arch, true, {}};
    struct stat st {};
    const std::string marker = arch + ".complete";
    if (::fstatat(dir.fd(), marker.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
        kept = true;
        entry.target = tool.root.empty()
                           ? link_target(dir.path() / arch / "bin" / tool.bins.front().first)
                           : link_target(dir.path() / arch);
        return entry;
    }
    SANDGATE_CHECK(dir.remove(arch, version_dir + "/" + arch));
    if (!tool.root.empty()) {
        SANDGATE_CHECK(make_link(dir, tool.root, arch));
        entry.target = tool.root;
    } else {
        auto bin = dir.make_dirs(arch + "/bin", k_dir_mode, version_dir + "/" + arch + "/bin");
        if (!bin) return std::unexpected(bin.error());
        for (const auto& [name, target] : tool.bins) {
            SANDGATE_CHECK(make_link(*bin, target, name));
        }
        entry.target = tool.bins.front().second;
    }
    SANDGATE_CHECK(dir.create_file(marker, "", {0644, std::nullopt}, version_dir + "/" + marker));
    return entry;
}

}  // namespace

std::string tool_cache_arch() {
    struct utsname name {};
    if (::uname(&name) != 0) return "x64";
    const std::string machine = name.machine;
    if (machine == "x86_64") return "x64";
    if (machine == "aarch64" || machine == "arm64") return "arm64";
    if (machine.size() == 4 && machine.front() == 'i' && machine.ends_with("86")) return "x86";
    return machine;
}

std::vector<MachineTool> find_machine_tools(const std::string& path_list,
                                            std::vector<std::string>& notes) {
    std::vector<MachineTool> tools;
    add_python(path_list, tools, notes);
    add_node(path_list, tools, notes);
    add_rooted(path_list, "go", "go", {"version"}, tools, notes);
    add_rooted(path_list, "java", "Java_Temurin-Hotspot_jdk", {"-version"}, tools, notes);
    return tools;
}

Expected<ToolCacheAdd> add_machine_tools(const std::filesystem::path& cache,
                                         const std::vector<MachineTool>& tools) {
    auto root = SANDGATE_TRY(SafeDir::make_trusted(cache, k_dir_mode, "the tool cache"));
    const std::string arch = tool_cache_arch();
    ToolCacheAdd result;
    for (const auto& tool : tools) {
        if (tool.root.empty() && tool.bins.empty()) continue;
        bool kept = false;
        auto entry = SANDGATE_TRY(add_tool(root, tool, arch, kept));
        (kept ? result.kept : result.added).push_back(std::move(entry));
    }
    return result;
}

Expected<std::vector<ToolEntry>> list_tool_cache(const std::filesystem::path& cache) {
    std::vector<ToolEntry> entries;
    std::error_code ec;
    if (!std::filesystem::exists(std::filesystem::symlink_status(cache, ec))) return entries;
    if (ec) return entries;
    auto root = SANDGATE_TRY(SafeDir::open_trusted(cache, "the tool cache"));
    // <Tool>/<version>/<arch> (a directory or a link) and <arch>.complete beside it.
    std::vector<std::string> markers;
    SANDGATE_CHECK(root.walk([&](const WalkEntry& found) {
        const auto depth = std::count(found.relative.begin(), found.relative.end(), '/');
        if (depth < 2)
            return found.kind == EntryKind::directory ? WalkStep::descend : WalkStep::skip;
        if (depth > 2) return WalkStep::skip;
        if (found.relative.ends_with(".complete")) {
            markers.push_back(found.relative.substr(0, found.relative.size() - 9));
            return WalkStep::skip;
        }
        if (found.kind != EntryKind::directory && found.kind != EntryKind::symlink)
            return WalkStep::skip;
        const auto first = found.relative.find('/');
        const auto second = found.relative.find('/', first + 1);
        ToolEntry entry{found.relative.substr(0, first),
                        found.relative.substr(first + 1, second - first - 1),
                        found.relative.substr(second + 1),
                        false,
                        {}};
        const auto path = root.path() / found.relative;
        if (found.kind == EntryKind::symlink) {
            entry.target = link_target(path);
        } else {
            for (const char* name : {"python3", "node", "python"}) {
                if (entry.target.empty()) entry.target = link_target(path / "bin" / name);
            }
        }
        entries.push_back(std::move(entry));
        return WalkStep::skip;
    }));
    for (auto& entry : entries) {
        const std::string relative = entry.tool + "/" + entry.version + "/" + entry.arch;
        entry.complete = std::find(markers.begin(), markers.end(), relative) != markers.end();
    }
    std::sort(entries.begin(), entries.end(), [](const ToolEntry& a, const ToolEntry& b) {
        return std::tie(a.tool, a.version, a.arch) < std::tie(b.tool, b.version, b.arch);
    });
    return entries;
}

void point_at_tool_cache(Environment& env) {
    for (const char* name : {"RUNNER_TOOL_CACHE", "AGENT_TOOLSDIRECTORY"}) {
        auto it =
            std::find_if(env.begin(), env.end(), [&](const auto& kv) { return kv.first == name; });
        if (it != env.end())
            it->second = std::string(k_tool_cache_mount);
        else
            env.emplace_back(name, std::string(k_tool_cache_mount));
    }
}

}  // namespace sandbox
