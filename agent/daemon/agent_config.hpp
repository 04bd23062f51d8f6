#pragma once
// `sandgate agent`'s configuration file (YAML; documented in README.md, written by
// `sandgate agent init`). Unknown keys and bad values are refused with FILE:LINE: key: why.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/store/job_store.hpp"
#include "common/error.hpp"
#include "sandbox/process/run.hpp"

namespace agent {

struct AgentConfig {
    // agent:
    std::string id;                   // lease owner id; default: the host name
    std::filesystem::path state_dir;  // default: $XDG_STATE_HOME/sandgate
    std::size_t max_jobs = 2;
    std::chrono::seconds lease{60};
    OnLostLease on_lost_job = OnLostLease::conclude;
    std::int64_t max_attempts = 2;    // claims before a lost job is concluded
    std::chrono::seconds drain{300};  // SIGTERM: running jobs get this long, then cancelled
    std::chrono::seconds reap_interval{60};
    // Mirrors unused this long are removed (jobs/git/mirror_gc.hpp), checked at start and daily.
    std::chrono::hours mirror_max_idle{14 * 24};
    // api:
    std::string listen = "unix";  // "unix" (state_dir/agent/api.sock), "unix:PATH" or
                                  // "127.0.0.1:PORT" (0: a free port, logged)
    std::optional<std::filesystem::path> token_file;           // required on TCP
    std::optional<std::filesystem::path> webhook_secret_file;  // enables POST /webhook
    // github:
    std::vector<std::string> repositories;  // accepted owner/name (webhooks, polling)
    std::optional<std::string> pr_label;
    std::string api_url = "https://api.github.com";
    std::optional<std::filesystem::path> github_token_file;
    std::chrono::seconds poll_interval{0};  // 0: no polling
    // The check run of each agent job (placeholders: {workflow} = "sandgate", {job} = the
    // job's workflow job or "gate", {sha}, {short_sha}).
    std::string check_name = "sandgate / {job}";
    // Where a job's OWNER/NAME repository is fetched from: "{repository}" is replaced by it.
    // Empty: the web host of api_url (https://github.com/OWNER/NAME, or https://HOST/OWNER/NAME
    // for Enterprise Server).
    std::string clone_url;
    // queue:
    // Empty: the embedded SQLite queue (STATE_DIR/agent/jobs.sqlite3, one agent). Else a
    // pool's PostgreSQL database, postgresql://[user@]host[:port]/db[?param=...] (libpq's URL;
    // never with a password: that comes from password_file, or libpq's PGPASSFILE/passfile).
    std::string queue_url;
    std::optional<std::filesystem::path> queue_password_file;  // 0600, one line
    // job:
    std::vector<std::string> job_command;  // empty: sandgate gate (see daemon.hpp)
    sandbox::SandboxMode sandbox = sandbox::SandboxMode::bwrap;
    sandbox::NetworkMode network = sandbox::NetworkMode::none;
    // job.network: allowlist is network none plus job.allow_egress (HOST[:PORT] or a preset)
    // and job.allow_egress_ranges (CIDR), as typed, each checked on load (agent/policy_options):
    // the job runs with --network allowlist and an --allow-egress (--allow-egress-range) for
    // each. Its steps then get a wrap and a filtering proxy each (no persistent sandbox), so
    // every step has its own egress evidence. Non-empty exactly under allowlist.
    std::vector<std::string> allow_egress;
    std::vector<std::string> allow_egress_ranges;
    std::chrono::minutes job_timeout{60};
    // One persistent sandbox (a broker in one wrap) per job, its steps sent there as exec
    // requests (see agent/cli/job_executor.hpp; `sandgate gate` and `sandgate run` honour it), so
    // a job pays the wrap's start-up once. false: the job command wraps each step itself.
    bool persistent_sandbox = true;
    std::filesystem::path source;  // the file this came from
};

// job.network as the job's --network says it: "none", "host" or "allowlist".
std::string_view job_network(const AgentConfig& config);

// Parses it: invalid_input "FILE:LINE: key: why"; a missing FILE names a misspelt one beside.
common::Expected<AgentConfig> load_agent_config(const std::filesystem::path& path);

// The commented default configuration `sandgate agent init` writes.
std::string default_agent_config();

// The state directory default: $XDG_STATE_HOME/sandgate or ~/.local/state/sandgate.
std::filesystem::path default_state_dir();

// Reads a secret file: it must be a regular file not readable by group or others (0600 or
// stricter); trailing newlines are dropped. The value never appears in an error.
common::Expected<std::string> read_secret_file(const std::filesystem::path& path);

enum class LogDetail { info, debug };

// The agent's log format, shared by the daemon and its GitHub rounds (which write to the
// daemon's stderr): structured, one event a line, `ts=... level=... [source=S] message`
// (`source` empty: the daemon itself).
void use_agent_log_format(std::string_view source, LogDetail detail);

}  // namespace agent
