#include "agent/sandboxes/sandbox_manager.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <nlohmann/json.hpp>
#include <thread>

#include "agent/cli/launcher.hpp"
#include "agent/cli/random_id.hpp"
#include "agent/sandboxes/sandbox_dirs.hpp"
#include "agent/sandboxes/sandbox_records.hpp"
#include "common/fd.hpp"
#include "common/json_convert.hpp"
#include "sandbox/access/safe_access.hpp"
#include "sandbox/broker/broker.hpp"
#include "sandbox/process/spawn.hpp"

namespace agent {

using common::ErrorKind;
using common::Expected;
using common::fail;
using Json = nlohmann::ordered_json;

namespace {

constexpr std::chrono::seconds k_run_grace{60};     // broker run timeout past the TTL
constexpr std::chrono::seconds k_shutdown_wait{5};  // before SIGKILL on destroy
constexpr std::chrono::seconds k_reply_margin{30};
constexpr std::chrono::milliseconds k_ready_poll{10};

}  // namespace

struct SandboxManager::Sandbox {
    SandboxInfo info;
    std::filesystem::path dir;
    std::filesystem::path socket;
    std::optional<std::int64_t> job;
    std::string posture;  // the wrap's description, from the broker's pings/results
    std::thread runner;
    std::atomic<bool> finished{false};
    std::mutex result_mutex;
    std::optional<sandbox::RunResult> result;
    common::Fd pidfd;  // the broker, for SIGKILL on a teardown it does not obey
};

std::string SandboxIdentity::canonical() const {
    return repository + "@" + sha + "/" + std::to_string(run_id) + "/" + std::to_string(attempt) +
           "/" + job_id;
}

std::string_view to_string(SandboxState state) {
    switch (state) {
        case SandboxState::created:
            return "created";
        case SandboxState::ready:
            return "ready";
        case SandboxState::active:
            return "active";
        case SandboxState::destroyed:
            return "destroyed";
    }
    return "destroyed";
}

SandboxManager::SandboxManager(ManagerConfig config) : m_config(std::move(config)) {
    if (m_config.sandgate_binary.empty()) {
        std::error_code ec;
        m_config.sandgate_binary = std::filesystem::read_symlink("/proc/self/exe", ec);
        // The broker runs in the small launcher beside sandgate-full or sandgate-agent
        // (agent/cli/launcher.hpp): it starts faster and each step's fork copies far fewer
        // mappings.
        const auto launcher = m_config.sandgate_binary.parent_path() / "sandgate";
        const auto name = m_config.sandgate_binary.filename();
        if ((name == k_full_binary_name || name == k_agent_binary_name) &&
            ::access(launcher.c_str(), X_OK) == 0)
            m_config.sandgate_binary = launcher;
    }
    m_stats.buckets.assign(std::size(k_step_buckets), 0);
}

SandboxManager::~SandboxManager() {
    for (const auto& info : list()) (void)destroy(info.id);
}

void SandboxManager::record(const Sandbox& box, std::string_view kind, const std::string& body) {
    if (!m_config.journal || !box.job) return;
    if (auto ok = m_config.journal->append_event(*box.job, kind, body); !ok)
        spdlog::warn("sandbox {}: cannot record {}: {}", box.info.id, kind, ok.error().message);
}

std::shared_ptr<SandboxManager::Sandbox> SandboxManager::find(const std::string& id) {
    std::lock_guard lock(m_mutex);
    auto it = m_sandboxes.find(id);
    return it == m_sandboxes.end() ? nullptr : it->second;
}

Expected<SandboxInfo> SandboxManager::create(const SandboxIdentity& identity,
                                             const SandboxOptions& options) {
    if (identity.repository.empty() || identity.sha.empty() || identity.job_id.empty())
        return fail(ErrorKind::invalid_input,
                    "sandbox identity needs a repository, a SHA and a job id");
    if (options.ttl.count() <= 0) return fail(ErrorKind::invalid_input, "sandbox ttl must be > 0");
    auto new_id = SANDGATE_TRY(random_id("sb-", 8));
    auto box = std::make_shared<Sandbox>();
    {
        std::lock_guard lock(m_mutex);
        for (const auto& [id, other] : m_sandboxes)
            if (other->info.identity == identity && other->info.state != SandboxState::destroyed)
                return fail(ErrorKind::invalid_input,
                            "a sandbox for " + identity.canonical() + " exists already: " + id);
        box->info.id = std::move(new_id);
        box->info.identity = identity;
        box->info.state = SandboxState::created;
        m_sandboxes[box->info.id] = box;
    }
    auto created = start(*box, options);
    if (!created) {
        std::lock_guard lock(m_mutex);
        m_sandboxes.erase(box->info.id);
        return std::unexpected(created.error());
    }
    std::lock_guard lock(m_mutex);
    box->info.state = SandboxState::ready;
    return box->info;
}

// The broker's wrap: the caller's policy, plus its socket directory and the steps' root
// writable, plus (wrapped) the binaries it is started from, read-only.
sandbox::Policy SandboxManager::broker_policy(sandbox::Policy policy,
                                              const std::filesystem::path& socket_dir,
                                              const std::filesystem::path& root) const {
    policy.writable.push_back(socket_dir);
    policy.writable.push_back(root);
    if (policy.mode == sandbox::SandboxMode::off) return policy;
    policy.read_only.push_back(m_config.sandgate_binary);
    // `sandgate broker` is execv'd into sandgate-broker beside the launcher (sandgate-full
    // where that is what runs): show them too.
    for (const char* name : {k_broker_binary_name, k_full_binary_name}) {
        const auto other = m_config.sandgate_binary.parent_path() / name;
        std::error_code ec;
        if (other != m_config.sandgate_binary && std::filesystem::exists(other, ec))
            policy.read_only.push_back(other);
    }
    return policy;
}

// `sandgate broker ...` for `box`, wrapped by `policy`, bounded by the TTL and a grace.
sandbox::RunRequest SandboxManager::broker_run(const Sandbox& box, sandbox::Policy policy,
                                               std::chrono::seconds ttl) const {
    sandbox::RunRequest run;
    run.argv = {m_config.sandgate_binary.string(),
                "broker",
                "--socket",
                box.socket.string(),
                "--identity",
                box.info.identity.canonical(),
                "--expires-at",
                std::to_string(box.info.expires_at_ms),
                "--root",
                box.info.root.string()};
    // bwrap unshares the pid namespace and its init exits with the broker: nothing a step
    // leaves can outlive it, so the broker reaps its steps itself (no reaper fork per step).
    if (policy.mode == sandbox::SandboxMode::bwrap) run.argv.push_back("--reap-steps");
    run.env = sandbox::child_environment(sandbox::current_environment(), {}, {});
    run.policy = std::move(policy);
    run.cwd = box.info.root;  // never the agent's own cwd, which the wrap would bind writable
    run.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(ttl + k_run_grace);
    return run;
}

Expected<void> SandboxManager::start(Sandbox& box, const SandboxOptions& options) {
    box.dir = m_config.state_dir / "sandboxes" / box.info.id;
    auto made = SANDGATE_TRY(socket_dir_for(box.dir));
    const auto socket_dir = made;
    box.socket = socket_dir / "broker.sock";
    box.info.socket = box.socket;
    box.job = options.job;
    box.info.root = options.worktree.empty() ? box.dir / "work" : options.worktree;
    box.info.created_ms = system_now_ms();
    box.info.expires_at_ms =
        box.info.created_ms +
        std::chrono::duration_cast<std::chrono::milliseconds>(options.ttl).count();
    for (const auto& dir : {box.dir.parent_path(), box.dir, socket_dir})
        if (auto ok = make_private_dir(dir); !ok) {
            remove_socket_dir(box);
            return ok;
        }
    if (options.worktree.empty())
        if (auto ok = make_private_dir(box.info.root); !ok) return ok;

    sandbox::Policy policy = broker_policy(options.policy, socket_dir, box.info.root);
    box.info.policy_json = sandbox_policy_json(policy, options);
    // The policy is on the job's record before the sandbox exists.
    if (m_config.journal && box.job)
        SANDGATE_CHECK(m_config.journal->record_policy(*box.job, box.info.policy_json));
    write_meta(box);

    sandbox::RunRequest run = broker_run(box, std::move(policy), options.ttl);
    box.runner = std::thread([&box, run = std::move(run)] {
        auto result = sandbox::run(run);
        std::lock_guard lock(box.result_mutex);
        box.result = std::move(result);
        box.finished = true;
    });
    auto ready = wait_ready(box);
    if (!ready) {
        stop(box);
        remove_tree(box.dir);
        remove_socket_dir(box);
    }
    return ready;
}

void SandboxManager::remove_socket_dir(const Sandbox& box) {
    const auto dir = box.socket.parent_path();
    if (dir.string().starts_with(k_short_socket_prefix)) remove_tree(dir);
}

void SandboxManager::write_meta(const Sandbox& box) {
    Json meta;
    meta["id"] = box.info.id;
    meta["identity"] = identity_json(box.info.identity);
    meta["owner_pid"] = ::getpid();
    meta["expires_at_ms"] = box.info.expires_at_ms;
    meta["socket"] = box.socket.string();
    // Through the directory's fd, renamed into place: never through a link at that name.
    auto dir = sandbox::SafeDir::open_trusted(box.dir, "the sandbox directory");
    if (!dir ||
        !dir->replace_file("meta.json", meta.dump() + "\n", {0600, std::nullopt}, "meta.json"))
        spdlog::warn("sandbox {}: cannot write its meta.json", box.info.id);
}

// Polls the broker until it answers a ping with our identity, or its run ended.
Expected<void> SandboxManager::wait_ready(Sandbox& box) {
    const auto deadline = std::chrono::steady_clock::now() + m_config.start_timeout;
    sandbox::BrokerRequest ping;
    ping.op = sandbox::BrokerOp::ping;
    while (std::chrono::steady_clock::now() < deadline) {
        if (box.finished) {
            std::lock_guard lock(box.result_mutex);
            const auto& result = *box.result;
            std::string why = result.error ? result.error->message
                                           : "exit status " + std::to_string(result.exit_status()) +
                                                 ": " + result.err.head.substr(0, 400);
            return fail(
                result.error && result.error->kind == sandbox::RunErrorKind::sandbox_unavailable
                    ? ErrorKind::unavailable
                    : ErrorKind::permanent,
                "sandbox " + box.info.id + " did not start: " + why);
        }
        common::PeerCredentials peer;
        auto reply = sandbox::broker_call(box.socket, ping, std::chrono::seconds(5), &peer);
        if (reply && reply->status && reply->status->identity == box.info.identity.canonical()) {
            box.pidfd = sandbox::open_pidfd(peer.pid);
            return {};
        }
        std::this_thread::sleep_for(k_ready_poll);
    }
    return fail(ErrorKind::timeout, "sandbox " + box.info.id + " did not answer within " +
                                        std::to_string(m_config.start_timeout.count()) + " ms");
}

// Asks the broker to exit, then kills it if it does not, and joins its run.
void SandboxManager::stop(Sandbox& box) {
    if (!box.runner.joinable()) return;
    if (!box.finished) {
        sandbox::BrokerRequest shutdown;
        shutdown.op = sandbox::BrokerOp::shutdown;
        shutdown.exec.identity = box.info.identity.canonical();
        (void)sandbox::broker_call(box.socket, shutdown, std::chrono::seconds(5));
        const auto deadline = std::chrono::steady_clock::now() + k_shutdown_wait;
        while (!box.finished && std::chrono::steady_clock::now() < deadline)
            std::this_thread::sleep_for(k_ready_poll);
        if (!box.finished && box.pidfd)
            ::syscall(SYS_pidfd_send_signal, box.pidfd.get(), SIGKILL, nullptr, 0);
    }
    box.runner.join();
}

std::optional<sandbox::BrokerReply> SandboxManager::claim(Sandbox& box,
                                                          const SandboxIdentity& identity) {
    const std::string& id = box.info.id;
    sandbox::BrokerReply reply;
    {
        std::lock_guard lock(m_mutex);
        if (!(box.info.identity == identity)) {
            reply.refusal = sandbox::Refusal::identity;
            reply.message = "identity does not match sandbox " + id;
        } else if (box.info.state == SandboxState::active) {
            reply.refusal = sandbox::Refusal::busy;
            reply.message = "another command is running in " + id;
        } else if (box.info.state != SandboxState::ready) {
            reply.refusal = sandbox::Refusal::not_ready;
            reply.message = "sandbox " + id + " is " + std::string(to_string(box.info.state));
        } else if (system_now_ms() >= box.info.expires_at_ms) {
            reply.refusal = sandbox::Refusal::expired;
            reply.message = "sandbox " + id + " expired";
        } else {
            box.info.state = SandboxState::active;
            return std::nullopt;
        }
    }
    // The evidence is written outside the lock: a journal write must not stall every other
    // sandbox's exec, get or list.
    record(box, "exec", refusal_evidence(id, identity, *reply.refusal, reply.message).dump());
    return reply;
}

void SandboxManager::release(Sandbox& box, const Expected<sandbox::BrokerReply>& reply) {
    std::lock_guard lock(m_mutex);
    if (box.info.state == SandboxState::active) box.info.state = SandboxState::ready;
    if (!reply || !reply->result) return;
    ++box.info.execs;
    const double seconds = static_cast<double>(reply->result->duration.count()) / 1000.0;
    ++m_stats.count;
    m_stats.seconds_sum += seconds;
    for (std::size_t i = 0; i < std::size(k_step_buckets); ++i)
        if (seconds <= k_step_buckets[i]) ++m_stats.buckets[i];
}

Expected<sandbox::BrokerReply> SandboxManager::exec(const std::string& id,
                                                    const SandboxIdentity& identity,
                                                    sandbox::ExecRequest request,
                                                    const ExecControl& control) {
    auto box = find(id);
    if (!box) return fail(ErrorKind::invalid_input, "no sandbox " + id);
    if (auto refusal = claim(*box, identity)) return std::move(*refusal);
    request.identity = identity.canonical();
    const ExecForm form = request.shell ? ExecForm::shell : ExecForm::argv;
    const auto wait =
        request.timeout
            ? std::optional(*request.timeout + k_reply_margin)
            : std::optional(std::chrono::milliseconds(box->info.expires_at_ms - system_now_ms()) +
                            k_reply_margin);
    sandbox::BrokerRequest call{sandbox::BrokerOp::exec, std::move(request)};
    auto reply = sandbox::broker_call(box->socket, call, wait, nullptr, control.cancel);
    call.exec.stdin_text.reset();
    release(*box, reply);
    if (!reply) {
        auto err = reply.error();
        err.message =
            "sandbox " + id + ": broker unreachable (nothing ran on the host): " + err.message;
        return std::unexpected(err);
    }
    if (!m_config.journal || !box->job) return reply;  // no record to write the evidence to
    auto evidence = exec_evidence(id, identity, form, *reply);
    if (!control.exec_id.empty()) evidence["exec_id"] = control.exec_id;
    if (reply->result && reply->result->error &&
        reply->result->error->kind == sandbox::RunErrorKind::cancelled) {
        std::string by = control.cancelled_by ? control.cancelled_by() : "";
        evidence["cancelled_by"] = by.empty() ? "sandbox" : by;
    }
    record(*box, "exec", evidence.dump());
    return reply;
}

void SandboxManager::record_event(const std::string& id, std::string_view kind,
                                  const std::string& body) {
    if (auto box = find(id)) record(*box, kind, body);
}

std::optional<SandboxInfo> SandboxManager::get(const std::string& id) {
    auto box = find(id);
    if (!box) return std::nullopt;
    std::lock_guard lock(m_mutex);
    return box->info;
}

std::vector<SandboxInfo> SandboxManager::list() {
    std::lock_guard lock(m_mutex);
    std::vector<SandboxInfo> out;
    for (const auto& [id, box] : m_sandboxes) out.push_back(box->info);
    return out;
}

std::size_t SandboxManager::alive() {
    std::lock_guard lock(m_mutex);
    return m_sandboxes.size();
}

StepStats SandboxManager::step_stats() {
    std::lock_guard lock(m_mutex);
    return m_stats;
}

Expected<void> SandboxManager::destroy(const std::string& id) {
    std::shared_ptr<Sandbox> box;
    {
        std::lock_guard lock(m_mutex);
        auto it = m_sandboxes.find(id);
        if (it == m_sandboxes.end() || it->second->info.state == SandboxState::destroyed)
            return {};  // idempotent: gone, or being torn down by another caller
        box = it->second;
        box->info.state = SandboxState::destroyed;
    }
    stop(*box);
    remove_tree(box->dir);
    remove_socket_dir(*box);
    Json evidence;
    evidence["sandbox"] = id;
    evidence["destroyed"] = true;
    record(*box, "sandbox", evidence.dump());
    std::lock_guard lock(m_mutex);
    m_sandboxes.erase(id);
    return {};
}

std::size_t SandboxManager::reap_expired() {
    std::vector<std::string> expired;
    {
        std::lock_guard lock(m_mutex);
        const auto now = system_now_ms();
        for (const auto& [id, box] : m_sandboxes)
            if (box->info.expires_at_ms <= now || box->finished) expired.push_back(id);
    }
    for (const auto& id : expired) (void)destroy(id);
    return expired.size();
}

}  // namespace agent
