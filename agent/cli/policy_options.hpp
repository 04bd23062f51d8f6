#pragma once
// The isolation flags shared by every command that runs untrusted code (`sandgate exec`,
// later `sandgate run`): added to a CLI11 app in one call, then turned into a
// sandbox::Policy. The wrap's flags (--network, --read-only, ...) are added here too, so
// each command gets them without repeating itself.

#include <filesystem>
#include <string>
#include <vector>

#include "agent/cli/cli11.hpp"
#include "common/error.hpp"
#include "sandbox/process/run.hpp"

namespace agent {

// The raw values as typed; to_policy() validates them.
struct PolicyOptions {
    std::string sandbox = "bwrap";  // off | bwrap | container
    std::string network = "none";   // none | allowlist | host
    std::string offline;            // "" (automatic: on under --network none) | on | off
    std::vector<std::string> read_only;
    std::vector<std::string> writable;
    std::vector<std::string> hide;
    std::string scratch;
    std::string memory;  // byte sizes as typed ("512M")
    std::string pids;
    std::string tmp_size;
    std::string toolchain_cache;
    std::string tool_cache;                 // "": default_tool_cache() when it exists (bwrap only)
    std::vector<std::string> allow_egress;  // HOST[:PORT] as typed
    std::vector<std::string> allow_egress_range;  // CIDR as typed
    std::string image;
    std::string container_runtime;
    std::string sandbox_user;  // UID[:GID], numbers; "" = 65534:65534 (as root)
};

// The hosted tool cache `sandgate tools add` fills by default: default_state_dir()/tool-cache.
std::filesystem::path default_tool_cache();

// Adds the policy flags to `app`; CLI11 stores what it parses into `options`, which must
// outlive the parse.
void add_policy_options(CLI::App& app, PolicyOptions& options);

// The Policy the parsed flags describe; invalid_input with a message naming the flag.
common::Expected<sandbox::Policy> to_policy(const PolicyOptions& options);

}  // namespace agent
