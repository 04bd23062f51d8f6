#pragma once
// Persistent job sandboxes: one per job identity (repository, SHA, run id, attempt, job id),
// each a broker (sandbox/broker/broker.hpp) started once by the wrap through sandbox::run and kept
// until teardown, so a job's steps share one set of namespaces.
//
// Lifecycle: created (broker starting) -> ready -> active (one exec in flight) -> ready ...
// -> destroyed. Contract:
// - create() writes the resolved policy (mounts, network posture, limits, env NAMES only) to
//   the job's record BEFORE the sandbox exists, then starts the broker and waits until it
//   answers; a wrap that cannot be had fails closed (the error of sandbox::run's plan).
// - exec() refuses (BrokerReply::refusal, nothing run) a wrong identity, a sandbox that is not
//   ready (created, destroyed, or active: one command at a time), or one past its TTL. A
//   broker that cannot be reached is an error; nothing ever runs on the host instead.
// - an exec given a cancel token (ExecControl) is stopped when it fires: the broker's
//   connection is half-closed, the broker sends the step's tree SIGTERM, SIGKILL after the
//   request's kill grace, and answers a result with RunErrorKind::cancelled (exit 130).
// - every exec and refusal leaves value-free evidence on the job's record: identity, posture,
//   duration, exit, byte counts, truncation, skip markers. Never env values, argv or stdin.
// - destroy() is idempotent: it stops the broker (shutdown, then SIGKILL via a pidfd), waits
//   for its run to end and removes the sandbox's directory (never following a symlink out).
// - reap_expired() destroys sandboxes past their TTL; reap_stale() (start-up) removes the
//   directories of sandboxes left by a previous life, killing their brokers if still alive.
// Thread-safe.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "agent/store/job_store.hpp"
#include "common/error.hpp"
#include "sandbox/broker/broker_protocol.hpp"
#include "sandbox/process/cancel.hpp"
#include "sandbox/process/run.hpp"

namespace agent {

struct SandboxIdentity {
    std::string repository;
    std::string sha;
    std::int64_t run_id = 0;
    std::int64_t attempt = 1;
    std::string job_id;
    // "repository@sha/run/attempt/job": the broker's opaque identity string.
    std::string canonical() const;
    bool operator==(const SandboxIdentity&) const = default;
};

enum class SandboxState { created, ready, active, destroyed };
std::string_view to_string(SandboxState state);

struct SandboxOptions {
    sandbox::Policy policy;          // the wrap; mode off only when asked explicitly
    std::filesystem::path worktree;  // steps' root (bound writable); empty: a fresh dir
    std::chrono::seconds ttl{3600};
    std::optional<std::int64_t> job;     // the job record that receives policy and evidence
    std::vector<std::string> env_names;  // names the steps will be given (recorded, no values)
};

struct SandboxInfo {
    std::string id;
    SandboxIdentity identity;
    SandboxState state = SandboxState::created;
    std::int64_t created_ms = 0;
    std::int64_t expires_at_ms = 0;
    std::filesystem::path root;    // where steps run
    std::filesystem::path socket;  // the broker's owner-only socket
    std::string policy_json;       // as recorded
    std::int64_t execs = 0;
};

// How one exec may be stopped early, and what its evidence says about that.
struct ExecControl {
    std::string exec_id;                           // recorded in the evidence when set
    const sandbox::CancelToken* cancel = nullptr;  // not owned; fired: the step is stopped
    // Asked once, after a step that ended cancelled: who stopped it ("api", "client_hangup";
    // recorded as cancelled_by). Unset or empty: "sandbox" (a teardown stopped it).
    std::function<std::string()> cancelled_by;
};

struct StepStats {
    std::int64_t count = 0;
    double seconds_sum = 0;
    std::vector<std::int64_t> buckets;  // cumulative counts for k_step_buckets
};
inline constexpr double k_step_buckets[] = {0.01, 0.1, 0.5, 1, 5, 30, 120, 600};

struct ManagerConfig {
    // Sandboxes live in state_dir/sandboxes/<id>; the broker's socket in <id>/sock, or in a
    // private /tmp/sandgate-sb-* directory when that path is too long for a unix socket
    // (recorded in <id>/meta.json, removed with the sandbox and by reap_stale()).
    std::filesystem::path state_dir;
    std::filesystem::path sandgate_binary;  // the broker; empty: the `sandgate` launcher beside
                                            // /proc/self/exe when there is one, else that
    JobQueue* journal = nullptr;            // not owned; may be null (no records kept)
    std::chrono::milliseconds start_timeout{30000};
};

class SandboxManager {
public:
    explicit SandboxManager(ManagerConfig config);
    ~SandboxManager();  // destroys every sandbox still alive
    SandboxManager(const SandboxManager&) = delete;
    SandboxManager& operator=(const SandboxManager&) = delete;

    common::Expected<SandboxInfo> create(const SandboxIdentity& identity,
                                         const SandboxOptions& options);
    common::Expected<sandbox::BrokerReply> exec(const std::string& id,
                                                const SandboxIdentity& identity,
                                                sandbox::ExecRequest request,
                                                const ExecControl& control = {});
    // Appends `body` as an event of `kind` to the job record of sandbox `id`, when it has one.
    void record_event(const std::string& id, std::string_view kind, const std::string& body);
    std::optional<SandboxInfo> get(const std::string& id);
    std::vector<SandboxInfo> list();
    common::Expected<void> destroy(const std::string& id);
    std::size_t reap_expired();
    std::size_t reap_stale();
    std::size_t alive();
    StepStats step_stats();

private:
    struct Sandbox;
    std::shared_ptr<Sandbox> find(const std::string& id);
    void record(const Sandbox& box, std::string_view kind, const std::string& body);
    common::Expected<void> start(Sandbox& box, const SandboxOptions& options);
    sandbox::Policy broker_policy(sandbox::Policy policy, const std::filesystem::path& socket_dir,
                                  const std::filesystem::path& root) const;
    sandbox::RunRequest broker_run(const Sandbox& box, sandbox::Policy policy,
                                   std::chrono::seconds ttl) const;
    common::Expected<void> wait_ready(Sandbox& box);
    void write_meta(const Sandbox& box);
    static void remove_socket_dir(const Sandbox& box);
    void stop(Sandbox& box);
    // Claims `box` for one command (ready -> active), or the refusal to answer with (recorded
    // as evidence) when it cannot be: wrong identity, busy, not ready, expired.
    std::optional<sandbox::BrokerReply> claim(Sandbox& box, const SandboxIdentity& identity);
    // After the command: back to ready, and a finished command counted in the step statistics.
    void release(Sandbox& box, const common::Expected<sandbox::BrokerReply>& reply);
    static void kill_stale_broker(const std::filesystem::path& socket);

    ManagerConfig m_config;
    std::mutex m_mutex;
    std::map<std::string, std::shared_ptr<Sandbox>> m_sandboxes;
    StepStats m_stats;
};

}  // namespace agent
