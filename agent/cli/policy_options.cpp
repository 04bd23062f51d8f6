#include "agent/cli/policy_options.hpp"

#include <algorithm>
#include <charconv>

#include "agent/cli/egress_presets.hpp"
#include "agent/cli/units.hpp"
#include "agent/daemon/agent_config.hpp"
#include "sandbox/wrap/identity.hpp"

namespace agent {
namespace {

common::Expected<std::optional<std::uint64_t>> optional_bytes(const std::string& text,
                                                              const char* flag) {
    if (text.empty()) return std::optional<std::uint64_t>{};
    auto bytes = parse_bytes(text);
    if (!bytes)
        return common::fail(common::ErrorKind::invalid_input,
                            std::string(flag) + ": " + bytes.error().message);
    if (*bytes == 0)
        return common::fail(common::ErrorKind::invalid_input,
                            std::string(flag) + ": must be positive");
    return std::optional<std::uint64_t>(*bytes);
}

std::vector<std::filesystem::path> paths(const std::vector<std::string>& texts) {
    return {texts.begin(), texts.end()};
}

// --network allowlist and its hosts: each needs the other.
common::Expected<void> add_egress(const PolicyOptions& options, sandbox::Policy& policy) {
    const bool allowlist = options.network == "allowlist";
    if (auto ok = add_egress_values(options.allow_egress, options.allow_egress_range, policy); !ok)
        return ok;
    if (!allowlist && !options.allow_egress.empty())
        return common::fail(
            common::ErrorKind::invalid_input,
            "--allow-egress " + options.allow_egress.front() + ": needs --network allowlist");
    if (!allowlist && !options.allow_egress_range.empty())
        return common::fail(common::ErrorKind::invalid_input,
                            "--allow-egress-range " + options.allow_egress_range.front() +
                                ": needs --network allowlist");
    if (allowlist && policy.egress.empty())
        return common::fail(common::ErrorKind::invalid_input,
                            "--network allowlist: name the hosts the step may reach with "
                            "--allow-egress HOST[:PORT]");
    return {};
}

// --tool-cache, or the default cache when `sandgate tools add` made it; bwrap binds it.
common::Expected<void> choose_tool_cache(const PolicyOptions& options, sandbox::Policy& policy) {
    if (!options.tool_cache.empty()) {
        if (policy.mode != sandbox::SandboxMode::bwrap)
            return common::fail(
                common::ErrorKind::invalid_input,
                "--tool-cache: only with --sandbox bwrap (which binds it read-only)");
        policy.tool_cache = options.tool_cache;
        return {};
    }
    std::error_code ec;
    const auto fallback = default_tool_cache();
    if (policy.mode == sandbox::SandboxMode::bwrap && std::filesystem::is_directory(fallback, ec))
        policy.tool_cache = fallback;
    return {};
}

}  // namespace

std::filesystem::path default_tool_cache() {
    return default_state_dir() / "tool-cache";
}

void add_policy_options(CLI::App& parent, PolicyOptions& options) {
    // A group of their own: `--help` shows them apart, and CLI11 checks each new option's names
    // against its group's only (a check that grows with the square of the options in one app).
    CLI::App& app = *parent.add_option_group("Sandbox policy");
    app.add_option("--sandbox", options.sandbox,
                   "isolation: off (none), bwrap (the default: a bubblewrap sandbox) or "
                   "container (an OCI runtime)")
        ->check(CLI::IsMember({"off", "bwrap", "container"}));
    app.add_option("--network", options.network,
                   "none (the default: loopback only), allowlist (loopback, and the hosts of "
                   "--allow-egress through a filtering proxy) or host")
        ->check(CLI::IsMember({"none", "allowlist", "host"}));
    app.add_option("--offline", options.offline,
                   "cache-only toolchain environment: on or off (default: on exactly under "
                   "--network none)")
        ->check(CLI::IsMember({"on", "off"}));
    // One PATH per occurrence: a vector option would otherwise swallow what follows.
    app.add_option("--read-only", options.read_only, "bind PATH read-only (repeatable)")
        ->allow_extra_args(false);
    app.add_option("--writable", options.writable, "bind PATH writable (repeatable)")
        ->allow_extra_args(false);
    app.add_option("--hide", options.hide, "mask PATH inside the sandbox (repeatable)")
        ->allow_extra_args(false);
    app.add_option("--scratch", options.scratch,
                   "keep the private HOME/TMPDIR scratch in DIR (default: inside the wrap's "
                   "private /tmp tmpfs, bounded by --tmp-size, gone with the run)");
    app.add_option("--memory", options.memory, "memory limit (bytes, 512M, 2G)");
    app.add_option("--pids", options.pids, "process limit");
    app.add_option("--tmp-size", options.tmp_size,
                   "size of the private /tmp and of /dev/shm; /tmp also holds the default scratch "
                   "(default 1G each)");
    app.add_option(
        "--toolchain-cache", options.toolchain_cache,
        "warm toolchain cache DIR, bound read-only and seeding a per-run toolchain home");
    app.add_option("--tool-cache", options.tool_cache,
                   "hosted tool cache DIR (`sandgate tools add`), bound read-only at "
                   "/opt/hostedtoolcache as RUNNER_TOOL_CACHE (default: the state directory's "
                   "tool-cache when it exists; bwrap only)");
    app.add_option("--allow-egress", options.allow_egress,
                   "under --network allowlist: let the step reach HOST[:PORT] (repeatable; "
                   "*.example.org for the names below it; port 443 by default) through the proxy; "
                   "@npm, @pypi, @crates, @go, @debian, @github: a registry's hosts, from this "
                   "machine's configuration where it names one")
        ->allow_extra_args(false);
    app.add_option("--allow-egress-range", options.allow_egress_range,
                   "under --network allowlist: let allowed names resolve into CIDR although it is "
                   "loopback, link-local or private (an internal mirror; 127.0.0.1/32 for a test "
                   "server on this host); refused otherwise (repeatable)")
        ->allow_extra_args(false);
    app.add_option("--sandbox-user", options.sandbox_user,
                   "as root: the unprivileged host UID[:GID] the sandbox runs as, "
                   "which is given the trees it may write (default 65534:65534; never root)");
    app.add_option("--image", options.image, "container image (--sandbox container)");
    app.add_option("--container-runtime", options.container_runtime,
                   "podman or docker executable (default: podman, then docker, on PATH)");
}

common::Expected<sandbox::Policy> to_policy(const PolicyOptions& options) {
    sandbox::Policy policy;
    if (options.sandbox == "off") {
        policy.mode = sandbox::SandboxMode::off;
    } else if (options.sandbox == "bwrap") {
        policy.mode = sandbox::SandboxMode::bwrap;
    } else if (options.sandbox == "container") {
        policy.mode = sandbox::SandboxMode::container;
    } else {
        return common::fail(
            common::ErrorKind::invalid_input,
            "--sandbox: expected off, bwrap or container, not '" + options.sandbox + "'");
    }
    if (options.network == "none" || options.network == "allowlist")
        policy.network = sandbox::NetworkMode::none;
    else if (options.network == "host")
        policy.network = sandbox::NetworkMode::host;
    else
        return common::fail(
            common::ErrorKind::invalid_input,
            "--network: expected none, allowlist or host, not '" + options.network + "'");
    if (options.offline == "on")
        policy.offline = sandbox::Offline::on;
    else if (options.offline == "off")
        policy.offline = sandbox::Offline::off;
    else if (!options.offline.empty())
        return common::fail(common::ErrorKind::invalid_input,
                            "--offline: expected on or off, not '" + options.offline + "'");
    policy.read_only = paths(options.read_only);
    policy.writable = paths(options.writable);
    policy.hide = paths(options.hide);
    if (!options.scratch.empty()) policy.scratch = options.scratch;
    if (!options.toolchain_cache.empty()) policy.toolchain_cache = options.toolchain_cache;
    SANDGATE_CHECK(choose_tool_cache(options, policy));
    policy.memory_bytes = SANDGATE_TRY(optional_bytes(options.memory, "--memory"));
    policy.tmp_size_bytes = SANDGATE_TRY(optional_bytes(options.tmp_size, "--tmp-size"));
    if (!options.pids.empty()) {
        std::uint64_t pids = 0;
        const auto* end = options.pids.data() + options.pids.size();
        auto [ptr, ec] = std::from_chars(options.pids.data(), end, pids);
        if (ec != std::errc() || ptr != end || pids == 0)
            return common::fail(common::ErrorKind::invalid_input,
                                "--pids: expected a positive number, not '" + options.pids + "'");
        policy.pids = pids;
    }
    SANDGATE_CHECK(add_egress(options, policy));
    if (!options.sandbox_user.empty()) {
        auto identity =
            SANDGATE_TRY(sandbox::parse_host_identity(options.sandbox_user, "--sandbox-user"));
        policy.host_identity = identity;
    }
    policy.image = options.image;
    policy.container_runtime = options.container_runtime;
    const bool container = policy.mode == sandbox::SandboxMode::container;
    if (!container && (!options.image.empty() || !options.container_runtime.empty()))
        return common::fail(common::ErrorKind::invalid_input,
                            "--image/--container-runtime: only with --sandbox container");
    if (policy.mode == sandbox::SandboxMode::off &&
        (!options.read_only.empty() || !options.writable.empty() || !options.hide.empty() ||
         policy.memory_bytes || policy.pids || policy.tmp_size_bytes || policy.toolchain_cache ||
         policy.scratch || !policy.egress.empty()))
        return common::fail(common::ErrorKind::invalid_input,
                            "--sandbox off cannot honour isolation flags ("
                            "--read-only, --memory, --allow-egress, ...): drop them or use a "
                            "sandbox");
    return policy;
}

}  // namespace agent
