#include "agent/cli/job_executor.hpp"

#include <simdjson.h>
#include <spdlog/spdlog.h>

#include <charconv>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "agent/daemon/queue_open.hpp"
#include "common/json_convert.hpp"
#include "sandbox/broker/broker.hpp"
#include "sandbox/process/result_json.hpp"

namespace agent {

namespace {

sandbox::RunResult refused(std::string message) {
    sandbox::RunResult result;
    result.error =
        sandbox::RunError{sandbox::RunErrorKind::sandbox_unavailable, std::move(message), 0};
    return result;
}

// The executor with the queue it records into (opened from the environment).
class OwningExecutor final : public jobs::StepExecutor {
public:
    OwningExecutor(std::unique_ptr<JobQueue> queue, const JobSandboxEnvironment& box,
                   std::int64_t job_id, std::string posture)
        : m_queue(std::move(queue)),
          m_executor(box.socket, box.identity, m_queue.get(), job_id, std::move(posture)) {}
    sandbox::RunResult run(const sandbox::RunRequest& request) override {
        return m_executor.run(request);
    }

private:
    std::unique_ptr<JobQueue> m_queue;
    BrokerStepExecutor m_executor;
};

// What a step that ran leaves on the job's record: never argv, env values, stdin or output.
void add_run_evidence(const sandbox::RunResult& result, const jobs::Masker* masker,
                      nlohmann::ordered_json& evidence) {
    evidence["exit"] = result.exit_status();
    evidence["duration_ms"] = result.duration.count();
    evidence["stdout_bytes"] = result.out.bytes;
    evidence["stderr_bytes"] = result.err.bytes;
    evidence["truncated"] = result.out.truncated || result.err.truncated;
    evidence["skip_markers"] = result.skip_markers;
    evidence["timed_out"] = result.timed_out;
    if (result.error) evidence["error"] = sandbox::to_string(result.error->kind);
    if (!result.egress) return;
    auto egress = *result.egress;  // the names are the step's: a secret in one is masked
    for (auto& connection : egress.connections) {
        if (masker == nullptr) break;
        connection.host = masker->mask(connection.host);
        connection.reason = masker->mask(connection.reason);
    }
    evidence["egress"] = sandbox::to_json(egress);
}

void record_step(JobQueue* queue, std::int64_t job_id, const nlohmann::ordered_json& evidence) {
    if (queue == nullptr || job_id <= 0) return;
    if (auto ok = queue->append_event(job_id, "step", evidence.dump()); !ok)
        spdlog::warn("job {}: evidence not recorded: {}", job_id, ok.error().message);
}

// Each step in a wrap of its own, its evidence recorded on the job.
class RecordingExecutor final : public jobs::StepExecutor {
public:
    RecordingExecutor(std::unique_ptr<JobQueue> queue, std::int64_t job_id,
                      const jobs::Masker& masker)
        : m_queue(std::move(queue)), m_job_id(job_id), m_masker(masker) {}
    sandbox::RunResult run(const sandbox::RunRequest& request) override {
        auto result = sandbox::run(request);
        nlohmann::ordered_json evidence;
        evidence["posture"] = common::to_ordered_json_or_null(sandbox::posture_text(result));
        add_run_evidence(result, &m_masker, evidence);
        const std::lock_guard lock(m_record);  // parallel legs share the queue's connection
        record_step(m_queue.get(), m_job_id, evidence);
        return result;
    }

private:
    std::unique_ptr<JobQueue> m_queue;
    std::int64_t m_job_id;
    const jobs::Masker& m_masker;
    std::mutex m_record;
};

// Refuses every step: the job sandbox environment was incomplete.
class RefusingExecutor final : public jobs::StepExecutor {
public:
    explicit RefusingExecutor(std::string why) : m_why(std::move(why)) {}
    sandbox::RunResult run(const sandbox::RunRequest&) override { return refused(m_why); }

private:
    std::string m_why;
};

std::string variable(const char* name) {
    const char* value = std::getenv(name);
    return value == nullptr ? std::string() : std::string(value);
}

// The mode and network of the job's recorded sandbox policy (empty when there is none).
struct Posture {
    std::string mode, network;
    std::string json() const {
        nlohmann::ordered_json out = nlohmann::ordered_json::object();
        if (!mode.empty()) out["mode"] = mode;
        if (!network.empty()) out["network"] = network;
        return out.dump();
    }
};

Posture recorded_posture(JobQueue& queue, std::int64_t job_id) {
    Posture posture;
    auto job = queue.get(job_id);
    if (!job || !*job || (*job)->policy_json.empty()) return posture;
    simdjson::dom::parser parser;
    simdjson::dom::element policy;
    if (parser.parse((*job)->policy_json).get(policy) != simdjson::SUCCESS) return posture;
    std::string_view value;
    if (policy["mode"].get(value) == simdjson::SUCCESS) posture.mode = value;
    if (policy["network"].get(value) == simdjson::SUCCESS) posture.network = value;
    return posture;
}

// invalid_input when the recorded sandbox is weaker than `asked`.
common::Expected<void> check_posture(const Posture& recorded, const sandbox::Policy& asked) {
    const bool unwrapped = recorded.mode == sandbox::to_string(sandbox::SandboxMode::off) &&
                           asked.mode != sandbox::SandboxMode::off;
    const bool networked = recorded.network == sandbox::to_string(sandbox::NetworkMode::host) &&
                           asked.network != sandbox::NetworkMode::host;
    // The job sandbox's wrap has no proxy of a step's own: egress asked of it would be lost.
    if (!asked.egress.empty())
        return common::fail(common::ErrorKind::invalid_input,
                            "--network allowlist: the job sandbox has no egress proxy (each "
                            "step needs a wrap of its own): no step runs");
    if (!unwrapped && !networked) return {};
    return common::fail(common::ErrorKind::invalid_input,
                        "the job sandbox (mode " + recorded.mode + ", network " + recorded.network +
                            ") is weaker than asked (--sandbox " +
                            std::string(sandbox::to_string(asked.mode)) + " --network " +
                            std::string(sandbox::to_string(asked.network)) + "): no step runs");
}

}  // namespace

BrokerStepExecutor::BrokerStepExecutor(std::filesystem::path socket, std::string identity,
                                       JobQueue* evidence, std::int64_t job_id, std::string posture)
    : m_socket(std::move(socket)),
      m_identity(std::move(identity)),
      m_evidence(evidence),
      m_job_id(job_id),
      m_posture(std::move(posture)) {}

sandbox::RunResult BrokerStepExecutor::run(const sandbox::RunRequest& request) {
    if (request.argv.empty()) return refused("job sandbox: the step has no argv");
    // A cancel before the step starts runs nothing; one that fires mid-step hangs up on the
    // broker, which stops the step's tree (SIGTERM, SIGKILL after the kill grace) and answers.
    std::lock_guard turn(m_turn);  // after another leg's step, never beside it
    if (request.cancel != nullptr && request.cancel->cancelled()) {
        sandbox::RunResult result;
        result.error = sandbox::RunError{sandbox::RunErrorKind::cancelled,
                                         "cancelled before the step started", 0};
        return result;
    }
    sandbox::BrokerRequest call;
    call.op = sandbox::BrokerOp::exec;
    auto& exec = call.exec;
    exec.identity = m_identity;
    exec.argv = request.argv;
    exec.env = request.env;
    exec.cwd = request.cwd.string();
    exec.timeout = request.timeout;
    exec.kill_grace = std::min(request.kill_grace, sandbox::k_max_kill_grace);
    exec.output_limit = std::min(request.output_limit, sandbox::k_max_broker_output_limit);
    exec.stdin_text = request.stdin_text;
    // The output reaches the observer as the step writes it (the live log), not at its end.
    if (request.observer != nullptr) exec.output_frames = sandbox::OutputFrames::live;
    auto reply = sandbox::broker_call(m_socket, call, std::nullopt, nullptr, request.cancel,
                                      request.observer);
    nlohmann::ordered_json evidence;
    evidence["identity"] = m_identity;
    evidence["posture"] = common::to_ordered_json_or_null(m_posture);
    sandbox::RunResult result;
    if (!reply) {
        result = refused("job sandbox broker unreachable: " + reply.error().message);
        evidence["refusal"] = "unreachable";
    } else if (reply->refusal) {
        result = refused("job sandbox refused the step (" +
                         std::string(sandbox::to_string(*reply->refusal)) + "): " + reply->message);
        evidence["refusal"] = sandbox::to_string(*reply->refusal);
    } else if (!reply->result) {
        result = refused("job sandbox broker answered without a result");
        evidence["refusal"] = "no result";
    } else {
        result = std::move(*reply->result);
        add_run_evidence(result, nullptr, evidence);
    }
    record_step(m_evidence, m_job_id, evidence);
    return result;
}

common::Expected<std::optional<JobSandboxEnvironment>> job_sandbox_from_environment(
    NeedWorkspace need_workspace) {
    JobSandboxEnvironment box{variable(k_broker_socket_variable),
                              variable(k_broker_identity_variable),
                              variable(k_job_workspace_variable)};
    if (box.socket.empty() && box.identity.empty()) return std::nullopt;
    auto missing = [](const char* name, const char* why) {
        return common::fail(
            common::ErrorKind::invalid_input,
            std::string(name) + " " + why +
                ": the job sandbox environment is incomplete (nothing runs on the host instead)");
    };
    if (box.socket.empty()) return missing(k_broker_socket_variable, "is not set");
    if (box.identity.empty()) return missing(k_broker_identity_variable, "is not set");
    if (need_workspace == NeedWorkspace::yes) {
        std::error_code ec;
        if (box.workspace.empty()) return missing(k_job_workspace_variable, "is not set");
        if (!box.workspace.is_absolute() || !std::filesystem::is_directory(box.workspace, ec))
            return missing(k_job_workspace_variable, "is not an absolute directory");
        box.workspace = std::filesystem::canonical(box.workspace, ec);
        if (ec) return missing(k_job_workspace_variable, "cannot be resolved");
    }
    return box;
}

common::Expected<std::unique_ptr<jobs::StepExecutor>> broker_executor(
    const JobSandboxEnvironment& box, const sandbox::Policy* asked) {
    std::unique_ptr<JobQueue> queue;
    std::int64_t job_id = 0;
    Posture posture;
    const std::string state_dir = variable("SANDGATE_STATE_DIR");
    const std::string job = variable("SANDGATE_JOB_ID");
    if (!state_dir.empty() && !job.empty()) {
        std::from_chars(job.data(), job.data() + job.size(),
                        job_id);  // 0 (no evidence) unless a number
        if (auto opened = open_job_process_queue(state_dir); opened) {
            queue = std::move(*opened);
            posture = recorded_posture(*queue, job_id);
        } else {
            spdlog::warn("job sandbox evidence: {}", opened.error().message);
        }
    }
    if (asked != nullptr) SANDGATE_CHECK(check_posture(posture, *asked));
    return std::make_unique<OwningExecutor>(std::move(queue), box, job_id, posture.json());
}

std::unique_ptr<jobs::StepExecutor> broker_executor_from_environment(const jobs::Masker& masker) {
    auto box = job_sandbox_from_environment(NeedWorkspace::no);
    if (!box) return std::make_unique<RefusingExecutor>(box.error().message);
    if (!*box) return recording_executor(masker);
    return std::move(*broker_executor(**box));  // no posture asked: never an error
}

std::unique_ptr<jobs::StepExecutor> recording_executor(const jobs::Masker& masker) {
    const std::string state_dir = variable("SANDGATE_STATE_DIR");
    const std::string job = variable("SANDGATE_JOB_ID");
    std::int64_t job_id = 0;
    const auto [end, ec] = std::from_chars(job.data(), job.data() + job.size(), job_id);
    if (state_dir.empty() || ec != std::errc() || end != job.data() + job.size() || job_id <= 0)
        return nullptr;
    auto queue = open_job_process_queue(state_dir);
    if (!queue) {
        spdlog::warn("job {}: step evidence not recorded: {}", job_id, queue.error().message);
        return nullptr;
    }
    return std::make_unique<RecordingExecutor>(std::move(*queue), job_id, masker);
}

}  // namespace agent
