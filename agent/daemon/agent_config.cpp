#include "agent/daemon/agent_config.hpp"

#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <charconv>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include "agent/cli/egress_presets.hpp"
#include "agent/store/pg.hpp"
#include "github/report_format.hpp"
#include "jobs/workflow/yaml_tree.hpp"

namespace agent {

using common::ErrorKind;
using common::Expected;
using common::fail;

namespace {

struct BadConfig {
    std::string message;
};

// The file is read with the workflow reader (jobs/workflow/yaml_tree.hpp): bounded, and one line
// per error whatever the file holds.
using Node = jobs::YamlNode;

std::string where(const std::filesystem::path& file, const Node& node) {
    return jobs::one_line(file.string()) + ":" + std::to_string(node.mark.line);
}

[[noreturn]] void invalid(const std::filesystem::path& file, const std::string& key,
                          const Node& node) {
    throw BadConfig{where(file, node) + ": " + key + ": not a valid value"};
}

template <typename T>
T scalar(const std::filesystem::path& file, const std::string& key, const Node& node);

template <>
std::string scalar<std::string>(const std::filesystem::path& file, const std::string& key,
                                const Node& node) {
    if (node.is_null()) return {};
    if (!node.is_scalar()) invalid(file, key, node);
    return node.text;
}

template <>
std::int64_t scalar<std::int64_t>(const std::filesystem::path& file, const std::string& key,
                                  const Node& node) {
    if (!node.is_scalar()) invalid(file, key, node);
    std::int64_t value = 0;
    const std::string& text = node.text;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size()) invalid(file, key, node);
    return value;
}

template <>
bool scalar<bool>(const std::filesystem::path& file, const std::string& key, const Node& node) {
    if (!node.is_scalar() || node.scalar_type() != Node::ScalarType::boolean)
        invalid(file, key, node);
    return node.as_bool();
}

template <>
std::vector<std::string> scalar<std::vector<std::string>>(const std::filesystem::path& file,
                                                          const std::string& key,
                                                          const Node& node) {
    if (!node.is_sequence()) invalid(file, key, node);
    std::vector<std::string> out;
    for (const auto& item : node.items) {
        if (!item.is_scalar()) invalid(file, key, item);
        out.push_back(item.text);
    }
    return out;
}

std::int64_t positive(const std::filesystem::path& file, const std::string& key, const Node& node) {
    const auto value = scalar<std::int64_t>(file, key, node);
    if (value <= 0) throw BadConfig{where(file, node) + ": " + key + ": must be > 0"};
    return value;
}

using Setter = std::function<void(const Node&)>;

std::string redact_url(std::string text, const std::string& secret) {
    for (auto at = text.find(secret); !secret.empty() && at != std::string::npos;
         at = text.find(secret))
        text.replace(at, secret.size(), "<queue.url>");
    return text;
}

// A pool's queue URL: postgresql:// (or postgres://) that libpq can parse, and no password in
// it (a configuration file is read by more people and tools than a 0600 secret file).
std::string checked_queue_url(const std::filesystem::path& file, const Node& node,
                              std::string url) {
    const auto at = where(file, node) + ": queue.url: ";
    if (!url.starts_with("postgresql://") && !url.starts_with("postgres://"))
        throw BadConfig{
            at + "must be a postgresql:// URL (leave queue.url out for the embedded SQLite queue)"};
    const auto authority_start = url.find("://") + 3;
    const auto authority =
        url.substr(authority_start, url.find_first_of("/?#", authority_start) - authority_start);
    const auto userinfo_end = authority.rfind('@');
    const bool userinfo_password = userinfo_end != std::string::npos &&
                                   authority.substr(0, userinfo_end).find(':') != std::string::npos;
    if (userinfo_password)
        throw BadConfig{at +
                        "holds a password; put it in queue.password_file (mode 0600) or a "
                        "PGPASSFILE, never in the configuration"};
    auto parts = pg::parse_url(url);
    // libpq's message may quote the URL: never echoed.
    if (!parts) throw BadConfig{at + redact_url(parts.error().message, url)};
    if (parts->password)
        throw BadConfig{at +
                        "holds a password; put it in queue.password_file (mode 0600) or a "
                        "PGPASSFILE, never in the configuration"};
    return url;
}

void apply(const std::filesystem::path& file, const std::string& section, const Node& node,
           const std::map<std::string, Setter>& setters) {
    if (!node.is_mapping())
        throw BadConfig{where(file, node) + ": " + section + ": must be a mapping"};
    for (const auto& item : node.entries) {
        const auto it = setters.find(item.key);
        if (it == setters.end())
            throw BadConfig{jobs::one_line(file.string()) + ":" +
                            std::to_string(item.key_mark.line) + ": " + section + "." +
                            jobs::one_line(item.key) + ": unknown key"};
        it->second(item.value);
    }
}

enum class EgressValue { host, range };

// job.allow_egress (HOST[:PORT] or a preset) or job.allow_egress_ranges (CIDR): a list, each
// item read as its flag reads it (a preset expanded from this machine's configuration).
std::vector<std::string> egress_values(const std::filesystem::path& file, const std::string& key,
                                       const Node& node, EgressValue kind) {
    auto values = scalar<std::vector<std::string>>(file, key, node);
    for (std::size_t i = 0; i < values.size(); ++i) {
        sandbox::Policy scratch;
        const std::vector<std::string> one = {values[i]};
        auto ok = kind == EgressValue::host ? add_egress_values(one, {}, scratch)
                                            : add_egress_values({}, one, scratch);
        if (!ok)
            throw BadConfig{where(file, node.items[i]) + ": " + key + ": " + ok.error().message};
    }
    return values;
}

// Where job.allow_egress and job.allow_egress_ranges were given (null: not given).
struct EgressNodes {
    const Node* hosts = nullptr;
    const Node* ranges = nullptr;
};

// job.network: allowlist and job.allow_egress need each other; the proxy needs the wrap.
void check_allowlist(const std::filesystem::path& file, const AgentConfig& c, const Node* allowlist,
                     const EgressNodes& egress) {
    if (allowlist != nullptr && c.allow_egress.empty())
        throw BadConfig{where(file, *allowlist) +
                        ": job.network: allowlist needs job.allow_egress (the hosts a step may "
                        "reach)"};
    if (allowlist != nullptr && c.sandbox != sandbox::SandboxMode::bwrap)
        throw BadConfig{where(file, *allowlist) +
                        ": job.network: allowlist needs job.sandbox: bwrap (which enforces it)"};
    if (allowlist != nullptr) return;
    if (!c.allow_egress.empty())
        throw BadConfig{where(file, *egress.hosts) +
                        ": job.allow_egress: only with job.network: allowlist"};
    if (!c.allow_egress_ranges.empty())
        throw BadConfig{where(file, *egress.ranges) +
                        ": job.allow_egress_ranges: only with job.network: allowlist"};
}

void parse(const std::filesystem::path& file, const Node& root, AgentConfig& c) {
    const Node* allowlist = nullptr;  // job.network: allowlist, when given
    EgressNodes egress;
    auto text = [&](const std::string& key) {
        return [&, key](const Node& n) { return scalar<std::string>(file, key, n); };
    };
    std::map<std::string, Setter> agent_keys = {
        {"id", [&](const Node& n) { c.id = text("agent.id")(n); }},
        {"state_dir", [&](const Node& n) { c.state_dir = text("agent.state_dir")(n); }},
        {"max_jobs",
         [&](const Node& n) {
             c.max_jobs = static_cast<std::size_t>(positive(file, "agent.max_jobs", n));
         }},
        {"lease_seconds",
         [&](const Node& n) {
             c.lease = std::chrono::seconds(positive(file, "agent.lease_seconds", n));
         }},
        {"max_attempts",
         [&](const Node& n) { c.max_attempts = positive(file, "agent.max_attempts", n); }},
        {"drain_seconds",
         [&](const Node& n) {
             c.drain = std::chrono::seconds(positive(file, "agent.drain_seconds", n));
         }},
        {"mirror_idle_days",
         [&](const Node& n) {
             c.mirror_max_idle =
                 std::chrono::hours(24 * positive(file, "agent.mirror_idle_days", n));
         }},
        {"reap_seconds",
         [&](const Node& n) {
             c.reap_interval = std::chrono::seconds(positive(file, "agent.reap_seconds", n));
         }},
        {"on_lost_job",
         [&](const Node& n) {
             const auto value = text("agent.on_lost_job")(n);
             if (value != "conclude" && value != "requeue")
                 throw BadConfig{where(file, n) + ": agent.on_lost_job: conclude or requeue"};
             c.on_lost_job = value == "requeue" ? OnLostLease::requeue : OnLostLease::conclude;
         }},
    };
    std::map<std::string, Setter> api_keys = {
        {"listen", [&](const Node& n) { c.listen = text("api.listen")(n); }},
        {"token_file", [&](const Node& n) { c.token_file = text("api.token_file")(n); }},
        {"webhook_secret_file",
         [&](const Node& n) { c.webhook_secret_file = text("api.webhook_secret_file")(n); }},
    };
    std::map<std::string, Setter> github_keys = {
        {"repositories",
         [&](const Node& n) {
             c.repositories = scalar<std::vector<std::string>>(file, "github.repositories", n);
         }},
        {"label", [&](const Node& n) { c.pr_label = text("github.label")(n); }},
        {"api_url", [&](const Node& n) { c.api_url = text("github.api_url")(n); }},
        {"token_file", [&](const Node& n) { c.github_token_file = text("github.token_file")(n); }},
        {"poll_seconds",
         [&](const Node& n) {
             c.poll_interval =
                 std::chrono::seconds(scalar<std::int64_t>(file, "github.poll_seconds", n));
         }},
        {"check_name", [&](const Node& n) { c.check_name = text("github.check_name")(n); }},
        {"clone_url",
         [&](const Node& n) {
             c.clone_url = text("github.clone_url")(n);
             if (c.clone_url.find("{repository}") == std::string::npos)
                 throw BadConfig{where(file, n) + ": github.clone_url: must contain {repository}"};
         }},
    };
    std::map<std::string, Setter> job_keys = {
        {"command",
         [&](const Node& n) {
             c.job_command = scalar<std::vector<std::string>>(file, "job.command", n);
         }},
        {"timeout_minutes",
         [&](const Node& n) {
             c.job_timeout = std::chrono::minutes(positive(file, "job.timeout_minutes", n));
         }},
        {"persistent_sandbox",
         [&](const Node& n) {
             c.persistent_sandbox = scalar<bool>(file, "job.persistent_sandbox", n);
         }},
        {"sandbox",
         [&](const Node& n) {
             const auto value = text("job.sandbox")(n);
             if (value != "bwrap" && value != "off")
                 throw BadConfig{where(file, n) + ": job.sandbox: bwrap or off"};
             c.sandbox = value == "off" ? sandbox::SandboxMode::off : sandbox::SandboxMode::bwrap;
         }},
        {"network",
         [&](const Node& n) {
             const auto value = text("job.network")(n);
             if (value != "none" && value != "host" && value != "allowlist")
                 throw BadConfig{where(file, n) + ": job.network: none, allowlist or host"};
             c.network = value == "host" ? sandbox::NetworkMode::host : sandbox::NetworkMode::none;
             if (value == "allowlist") allowlist = &n;
         }},
        {"allow_egress",
         [&](const Node& n) {
             c.allow_egress = egress_values(file, "job.allow_egress", n, EgressValue::host);
             egress.hosts = &n;
         }},
        {"allow_egress_ranges",
         [&](const Node& n) {
             c.allow_egress_ranges =
                 egress_values(file, "job.allow_egress_ranges", n, EgressValue::range);
             egress.ranges = &n;
         }},
    };
    std::map<std::string, Setter> queue_keys = {
        {"url",
         [&](const Node& n) { c.queue_url = checked_queue_url(file, n, text("queue.url")(n)); }},
        {"password_file",
         [&](const Node& n) { c.queue_password_file = text("queue.password_file")(n); }},
    };
    std::map<std::string, Setter> sections = {
        {"agent", [&](const Node& n) { apply(file, "agent", n, agent_keys); }},
        {"api", [&](const Node& n) { apply(file, "api", n, api_keys); }},
        {"github", [&](const Node& n) { apply(file, "github", n, github_keys); }},
        {"job", [&](const Node& n) { apply(file, "job", n, job_keys); }},
        {"queue", [&](const Node& n) { apply(file, "queue", n, queue_keys); }},
    };
    if (root.is_null()) return;
    apply(file, "", root, sections);
    check_allowlist(file, c, allowlist, egress);
}

}  // namespace

std::string_view job_network(const AgentConfig& config) {
    if (!config.allow_egress.empty()) return "allowlist";
    return sandbox::to_string(config.network);
}

namespace {

constexpr std::string_view k_agent_config_name = "sandgate-agent.yaml";

// A missing FILE with a file of another spelling beside it (the names earlier versions
// documented): the line names that file rather than leaving the reader to guess.
Expected<void> refuse_other_spelling(const std::filesystem::path& path) {
    std::error_code ec;
    if (std::filesystem::symlink_status(path, ec).type() != std::filesystem::file_type::not_found)
        return {};
    for (const char* other :
         {"sandgate-agent.yaml", "sandgate-agent.yml", "agent.yaml", "agent.yml"}) {
        const auto beside = path.parent_path() / other;
        if (beside.filename() == path.filename() || !std::filesystem::exists(beside, ec)) continue;
        return fail(ErrorKind::invalid_input,
                    jobs::one_line(path.string()) + ": no such file; " +
                        jobs::one_line(beside.string()) +
                        " beside it is not read: the configuration file is named " +
                        std::string(k_agent_config_name));
    }
    return {};
}

}  // namespace

Expected<AgentConfig> load_agent_config(const std::filesystem::path& path) {
    AgentConfig config;
    config.source = path;
    SANDGATE_CHECK(refuse_other_spelling(path));
    auto root = SANDGATE_TRY(jobs::load_yaml_file(path.string()));
    try {
        parse(path, root, config);
    } catch (const BadConfig& bad) {
        return fail(ErrorKind::invalid_input, bad.message);
    }
    if (config.id.empty()) {
        char host[256] = {};
        ::gethostname(host, sizeof(host) - 1);
        config.id = host[0] ? host : "sandgate-agent";
    }
    if (config.state_dir.empty()) config.state_dir = default_state_dir();
    github::JobReport probe;
    probe.workflow = "sandgate";
    probe.job = probe.job_key = "gate";
    probe.sha = std::string(40, '0');
    if (auto name = github::render_check_name(config.check_name, probe); !name)
        return fail(ErrorKind::invalid_input,
                    path.string() + ": github.check_name: " + name.error().message);
    if (config.queue_password_file && config.queue_url.empty())
        return fail(ErrorKind::invalid_input,
                    path.string() + ": queue.password_file: only with queue.url");
    if (config.poll_interval.count() < 0)
        return fail(ErrorKind::invalid_input,
                    path.string() + ": github.poll_seconds: must be >= 0");
    if (config.listen.rfind("127.0.0.1:", 0) == 0 && !config.token_file)
        return fail(ErrorKind::invalid_input,
                    path.string() + ": api.token_file: required when api.listen is 127.0.0.1:PORT");
    if (config.listen != "unix" && config.listen.rfind("unix:", 0) != 0 &&
        config.listen.rfind("127.0.0.1:", 0) != 0)
        return fail(ErrorKind::invalid_input,
                    path.string() + ": api.listen: unix, unix:PATH or 127.0.0.1:PORT");
    return config;
}

Expected<std::string> read_secret_file(const std::filesystem::path& path) {
    struct stat info {};
    if (::stat(path.c_str(), &info) != 0)
        return fail(ErrorKind::invalid_input, common::errno_message(path.string()));
    if (!S_ISREG(info.st_mode) || (info.st_mode & 077) != 0)
        return fail(ErrorKind::invalid_input,
                    path.string() + ": a secret file must be a regular file with mode 0600");
    std::ifstream in(path, std::ios::binary);
    std::ostringstream content;
    content << in.rdbuf();
    std::string value = content.str();
    while (!value.empty() && (value.back() == '\n' || value.back() == '\r')) value.pop_back();
    if (value.empty()) return fail(ErrorKind::invalid_input, path.string() + ": the file is empty");
    return value;
}

std::string default_agent_config() {
    return R"(# sandgate agent configuration (see README.md, "The agent").
agent:
  # id: gate-1                 # lease owner id; default: the host name
  # state_dir: /var/lib/sandgate   # default: $XDG_STATE_HOME/sandgate
  max_jobs: 2                  # jobs run at once
  lease_seconds: 60            # a job's lease, renewed while it runs
  on_lost_job: conclude        # after a crash: conclude (failed) or requeue
  max_attempts: 2              # runs before a lost job is concluded
  drain_seconds: 300           # on SIGTERM, running jobs get this long
  mirror_idle_days: 14         # mirrors unused this long are removed (checked daily)
api:
  listen: unix                 # unix (STATE_DIR/agent/api.sock), unix:PATH or 127.0.0.1:PORT
                               # (PORT 0: a free port, named in the "ready" log line)
  # token_file: /etc/sandgate/api-token        # 0600; required on 127.0.0.1
  # webhook_secret_file: /etc/sandgate/webhook-secret   # 0600; enables POST /webhook
github:
  repositories: []             # owner/name accepted from webhooks
  # label: merge-gate          # only pull requests with this label
  # api_url: https://api.github.com
  # token_file: /etc/sandgate/github-token   # enables polling and check runs
  # poll_seconds: 30           # 0: no polling (webhooks only)
  # check_name: "sandgate / {job}"
  # clone_url: "https://github.com/{repository}.git"
# queue:                       # a pool of agents sharing one PostgreSQL queue (README: "A pool")
#   url: postgresql://sandgate@db.example.com/sandgate   # never a password in the URL
#   password_file: /etc/sandgate/queue-password        # 0600; or PGPASSFILE
job:
  sandbox: bwrap               # bwrap or off
  network: none                # none, host or allowlist (loopback, and job.allow_egress
                               # through a filtering proxy: README "Egress by allowlist")
  # allow_egress: ["@npm", "@pypi", "ghcr.io"]   # HOST[:PORT] or a preset, under allowlist
  # allow_egress_ranges: [10.20.0.0/16]          # private ranges allowed names may resolve to
  timeout_minutes: 60
  persistent_sandbox: true     # one sandbox (broker) per job, its steps exec requests there;
                               # false: a fresh wrap per step
  # command: [sandgate, gate]  # the program run per job (default: this sandgate's gate)
)";
}

void use_agent_log_format(std::string_view source, LogDetail detail) {
    const std::string tag = source.empty() ? "" : "source=" + std::string(source) + " ";
    spdlog::set_pattern("ts=%Y-%m-%dT%H:%M:%S.%eZ level=%l " + tag + "%v",
                        spdlog::pattern_time_type::utc);
    spdlog::set_level(detail == LogDetail::debug ? spdlog::level::debug : spdlog::level::info);
}

}  // namespace agent
