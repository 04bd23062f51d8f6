#include "agent/sandboxes/leg_sandboxes.hpp"

#include <cstdio>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>

#include "agent/cli/job_executor.hpp"
#include "agent/sandboxes/sandbox_dirs.hpp"
#include "common/temp_dir.hpp"
#include "jobs/workflow/yaml_tree.hpp"
#include "sandbox/access/safe_access.hpp"
#include "sandbox/wrap/bwrap_layout.hpp"
#include "sandbox/wrap/identity.hpp"
#include "sandbox/wrap/mounts.hpp"

namespace agent {

namespace {

// A leg's sandbox outlives any step of it: the job runner stops a leg at its timeout-minutes
// (GitHub's ceiling for self-hosted runners is 72 hours).
constexpr std::chrono::hours k_leg_ttl{73};

bool same_binds(const std::vector<sandbox::Bind>& a, const std::vector<sandbox::Bind>& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const auto& x, const auto& y) {
        return x.source == y.source && x.destination == y.destination && x.access == y.access;
    });
}

bool same_owner(const std::optional<sandbox::Owner>& a, const std::optional<sandbox::Owner>& b) {
    if (a.has_value() != b.has_value()) return false;
    return !a || (a->uid == b->uid && a->gid == b->gid);
}

// As root, a wrap gives the run's writable trees to the sandbox's host identity before it
// starts (sandbox/wrap/bwrap_layout.hpp); the trusted side writes there between a leg's steps
// (a checkout, a cache restore, an artifact download), so each step sent to the leg's sandbox
// gives them again, as a wrap of its own would.
common::Expected<void> give_writable(const sandbox::Policy& policy) {
    const auto owner = sandbox::sandbox_owner(policy);
    if (!owner) return {};
    std::vector<std::filesystem::path> trees = policy.writable;
    if (policy.scratch) trees.push_back(*policy.scratch);
    std::vector<sandbox::MountEntry> masks;
    for (const auto& hidden : policy.hide) {
        sandbox::MountEntry mask;
        mask.kind = sandbox::MountKind::hide_dir;
        mask.dest = hidden;
        masks.push_back(std::move(mask));
    }
    return sandbox::give_trees({trees, masks, *owner});
}

// The steps of one leg, sent to the leg's sandbox once its first step started it.
class LegExecutor final : public jobs::StepExecutor {
public:
    LegExecutor(SandboxManager& manager, SandboxIdentity identity, std::string label,
                std::filesystem::path root)
        : m_manager(manager),
          m_identity(std::move(identity)),
          m_label(std::move(label)),
          m_root(std::move(root)) {}
    ~LegExecutor() override {
        if (m_box) (void)m_manager.destroy(m_box->id);  // stops whatever the leg left running
    }
    LegExecutor(const LegExecutor&) = delete;
    LegExecutor& operator=(const LegExecutor&) = delete;

    sandbox::RunResult run(const sandbox::RunRequest& request) override {
        // A background step holding the sandbox: this one gets a wrap of its own rather than
        // waiting for a step that may never end (a service).
        std::unique_lock turn(m_turn, std::try_to_lock);
        if (!turn.owns_lock() || !eligible(request)) return sandbox::run(request);
        if (!m_box && !m_failed) start(request.policy);
        if (!m_box || !same_posture(m_policy, request.policy)) return sandbox::run(request);
        if (auto given = give_writable(request.policy); !given) {
            sandbox::RunResult refused;
            refused.error = sandbox::RunError{sandbox::RunErrorKind::sandbox_unavailable,
                                              given.error().message, 0};
            return refused;
        }
        auto result = m_steps->run(request);
        result.sandbox = nullptr;
        result.sandbox_json = m_posture;
        return result;
    }

private:
    bool eligible(const sandbox::RunRequest& request) const {
        const auto& policy = request.policy;
        if (policy.mode != sandbox::SandboxMode::bwrap || !policy.egress.empty()) return false;
        return !request.cwd.empty() && sandbox::relative_beneath(m_root, request.cwd).has_value();
    }

    void start(const sandbox::Policy& policy) {
        SandboxOptions options;
        options.policy = policy;
        options.worktree = m_root;
        options.ttl = k_leg_ttl;
        auto box = m_manager.create(m_identity, options);
        if (!box) {
            m_failed = true;
            std::fprintf(stderr,
                         "sandgate: %s: no sandbox for the job (%s): each step gets a wrap of "
                         "its own\n",
                         m_label.c_str(), jobs::one_line(box.error().message).c_str());
            return;
        }
        m_box = std::move(*box);
        m_policy = policy;
        nlohmann::ordered_json posture;
        posture["mode"] = std::string(sandbox::to_string(policy.mode));
        posture["network"] = std::string(sandbox::to_string(policy.network));
        posture["sandbox"] = "job";  // one per leg, its steps sharing its namespaces
        posture["id"] = m_box->id;
        m_posture = posture.dump();
        m_steps = std::make_unique<BrokerStepExecutor>(m_box->socket, m_identity.canonical(),
                                                       nullptr, 0, m_posture);
    }

    SandboxManager& m_manager;
    SandboxIdentity m_identity;
    std::string m_label;
    std::filesystem::path m_root;
    std::mutex m_turn;  // one step of the leg at a time in its sandbox
    std::optional<SandboxInfo> m_box;
    bool m_failed = false;  // the sandbox could not be started: said once, not tried again
    sandbox::Policy m_policy;
    std::string m_posture;
    std::unique_ptr<BrokerStepExecutor> m_steps;
};

ManagerConfig manager_config(const std::filesystem::path& dir, std::filesystem::path binary) {
    ManagerConfig config;
    config.state_dir = dir;
    config.sandgate_binary = std::move(binary);
    return config;
}

}  // namespace

bool same_posture(const sandbox::Policy& made, const sandbox::Policy& step) {
    return made.mode == step.mode && made.network == step.network && made.offline == step.offline &&
           made.read_only == step.read_only && made.writable == step.writable &&
           made.hide == step.hide && same_binds(made.binds, step.binds) &&
           made.scratch == step.scratch && made.toolchain_cache == step.toolchain_cache &&
           made.tool_cache == step.tool_cache && made.memory_bytes == step.memory_bytes &&
           made.pids == step.pids && made.tmp_size_bytes == step.tmp_size_bytes &&
           made.egress.empty() && step.egress.empty() &&
           same_owner(made.host_identity, step.host_identity) && made.image == step.image &&
           made.container_runtime == step.container_runtime;
}

LegSandboxes::LegSandboxes(std::filesystem::path dir, std::string repository, std::string sha,
                           std::filesystem::path sandgate_binary)
    : m_dir(std::move(dir)),
      m_repository(repository.empty() ? "local" : std::move(repository)),
      m_sha(sha.empty() ? "worktree" : std::move(sha)),
      m_manager(manager_config(m_dir, std::move(sandgate_binary))) {}

LegSandboxes::~LegSandboxes() {
    // The legs have dropped their executors by now; anything left is destroyed by the
    // manager's own destructor, which runs after this body: the directory goes last.
    for (const auto& info : m_manager.list()) (void)m_manager.destroy(info.id);
    remove_tree(m_dir);
}

common::Expected<std::unique_ptr<LegSandboxes>> LegSandboxes::create(
    std::string repository, std::string sha, std::filesystem::path sandgate_binary) {
    auto dir = SANDGATE_TRY(common::make_host_temp_dir("sandgate-legs-"));
    return std::unique_ptr<LegSandboxes>(new LegSandboxes(
        std::move(dir), std::move(repository), std::move(sha), std::move(sandgate_binary)));
}

std::unique_ptr<jobs::StepExecutor> LegSandboxes::open_leg(const std::string& label,
                                                           const std::filesystem::path& root) {
    const auto number = ++m_legs;
    SandboxIdentity identity{m_repository, m_sha, number, 1, "leg-" + std::to_string(number)};
    return std::make_unique<LegExecutor>(m_manager, std::move(identity), label, root);
}

std::unique_ptr<LegSandboxes> open_leg_sandboxes(const jobs::RunSettings& settings,
                                                 std::string_view who) {
    const auto& policy = settings.policy;
    if (policy.mode != sandbox::SandboxMode::bwrap || !policy.egress.empty()) return nullptr;
    auto made = LegSandboxes::create(settings.repo.repository, settings.repo.sha);
    if (made) return std::move(*made);
    std::fprintf(stderr,
                 "%.*s: no sandboxes for the job legs (%s): each step gets a wrap of its own\n",
                 static_cast<int>(who.size()), who.data(), made.error().message.c_str());
    return nullptr;
}

}  // namespace agent
