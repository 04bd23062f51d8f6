#pragma once
// The hosted runner's tool cache (RUNNER_TOOL_CACHE), built on the trusted side from the
// machine's own toolchains, so that the real actions/setup-python, setup-node, setup-go and
// setup-java find their versions with no download. The layout is @actions/tool-cache's:
//   DIR/<Tool>/<version>/<arch>/...   and the marker   DIR/<Tool>/<version>/<arch>.complete
// with these tools, each where the machine has it (found on PATH, its version read from the
// binary itself):
//   Python/3.11.2/x64/bin/{python,python3[,pip,pip3]}   links to the machine's python3 (pip3)
//   node/20.19.2/x64/bin/{node[,npm,npx]}                links to the machine's node, npm, npx
//   go/1.19.8/x64 -> GOROOT                              a link to the toolchain's root
//   Java_Temurin-Hotspot_jdk/17.0.13/x64 -> JAVA_HOME    a link to the JDK's root
// <arch> is x64 on x86-64, arm64 on aarch64. Every link leads into /usr, which the wrap shows
// read-only: a toolchain elsewhere is left out (the sandbox could not see it). The bwrap arm
// binds DIR read-only at k_tool_cache_mount in every step and points RUNNER_TOOL_CACHE and
// AGENT_TOOLSDIRECTORY there: no step can write into it (nor, through its links, into /usr).

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "sandbox/base.hpp"
#include "sandbox/process/run.hpp"

namespace sandbox {

// Where the tool cache is inside the wrap (the hosted runners' own path).
inline constexpr std::string_view k_tool_cache_mount = "/opt/hostedtoolcache";

// This machine's architecture in the tool cache's words: x64, arm64 (or the kernel's name).
std::string tool_cache_arch();

// A toolchain of this machine, as the cache holds it.
struct MachineTool {
    std::string tool;     // Python, node, go, Java_Temurin-Hotspot_jdk
    std::string version;  // read from the binary: 3.11.2, 20.19.2, 1.19.8, 17.0.13
    // go and java: the cache's <arch> is a link to this root (GOROOT, JAVA_HOME).
    std::filesystem::path root;
    // Python and node: <arch>/bin/NAME links to each target.
    std::vector<std::pair<std::string, std::filesystem::path>> bins;
};

// The toolchains found on `path_list` (a PATH value): python3, node, go, java, each asked
// for its version (bounded: a few seconds each, unwrapped: the machine's own binaries).
// `notes` receives one line per toolchain left out and why.
std::vector<MachineTool> find_machine_tools(const std::string& path_list,
                                            std::vector<std::string>& notes);

// One <Tool>/<version>/<arch> of a cache.
struct ToolEntry {
    std::string tool;
    std::string version;
    std::string arch;
    bool complete = false;         // the .complete marker is there
    std::filesystem::path target;  // where <arch> (go, java) or its bin/<first> leads; may be empty
};

// Adds `tools` to the cache at `cache` (created, mode 0755, when missing; its parent must
// exist): each tool's directory and links, then its .complete marker, last. A version already
// complete is kept as it is (returned in `kept`); an incomplete one (a run cut short) is
// removed and made again.
struct ToolCacheAdd {
    std::vector<ToolEntry> added;
    std::vector<ToolEntry> kept;
};
Expected<ToolCacheAdd> add_machine_tools(const std::filesystem::path& cache,
                                         const std::vector<MachineTool>& tools);

// What the cache at `cache` holds, sorted. A cache that does not exist holds nothing.
Expected<std::vector<ToolEntry>> list_tool_cache(const std::filesystem::path& cache);

// Sets RUNNER_TOOL_CACHE and AGENT_TOOLSDIRECTORY to k_tool_cache_mount in `env` (replacing
// what the job runner set: inside the wrap the cache is there).
void point_at_tool_cache(Environment& env);

}  // namespace sandbox
