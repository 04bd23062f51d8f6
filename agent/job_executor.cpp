#include "agent/job_executor.hpp"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <cstdlib>

#include "sandbox/broker.hpp"

namespace agent {

namespace {

sandbox::RunResult refused(std::string message) {
    sandbox::RunResult result;
    result.error = sandbox::RunError{sandbox::RunErrorKind::sandbox_unavailable, std::move(message), 0};
    return result;
}

void feed(sandbox::OutputObserver* observer, sandbox::Stream stream,
          const sandbox::StreamResult& output) {
    if (observer == nullptr) return;
    if (!output.head.empty()) observer->on_output(stream, output.head);
    if (!output.tail.empty()) observer->on_output(stream, output.tail);
}

// The executor with the queue it records into (opened from the environment).
class OwningExecutor final : public jobs::StepExecutor {
public:
    OwningExecutor(std::unique_ptr<JobQueue> queue, std::filesystem::path socket,
                   std::string identity, std::int64_t job_id)
        : m_queue(std::move(queue)),
          m_executor(std::move(socket), std::move(identity), m_queue.get(), job_id) {}
    sandbox::RunResult run(const sandbox::RunRequest& request) override {
        return m_executor.run(request);
    }

private:
    std::unique_ptr<JobQueue> m_queue;
    BrokerStepExecutor m_executor;
};

}  // namespace

BrokerStepExecutor::BrokerStepExecutor(std::filesystem::path socket, std::string identity,
                                       JobQueue* evidence, std::int64_t job_id)
    : m_socket(std::move(socket)),
      m_identity(std::move(identity)),
      m_evidence(evidence),
      m_job_id(job_id) {}

sandbox::RunResult BrokerStepExecutor::run(const sandbox::RunRequest& request) {
    if (request.argv.empty()) return refused("job sandbox: the step has no argv");
    // A cancel before the step starts runs nothing; one that fires mid-step is seen by the
    // agent, which stops the whole job (process group and sandbox).
    if (request.cancel != nullptr && request.cancel->cancelled()) {
        sandbox::RunResult result;
        result.error = sandbox::RunError{sandbox::RunErrorKind::cancelled, "cancelled before the step started", 0};
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
    exec.output_limit = std::min(request.output_limit, sandbox::k_max_broker_output_limit);
    exec.stdin_text = request.stdin_text;
    auto reply = sandbox::broker_call(m_socket, call);
    nlohmann::ordered_json evidence;
    evidence["identity"] = m_identity;
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
        feed(request.observer, sandbox::Stream::out, result.out);
        feed(request.observer, sandbox::Stream::err, result.err);
        evidence["exit"] = result.exit_status();
        evidence["duration_ms"] = result.duration.count();
        evidence["stdout_bytes"] = result.out.bytes;
        evidence["stderr_bytes"] = result.err.bytes;
        evidence["truncated"] = result.out.truncated || result.err.truncated;
        evidence["skip_markers"] = result.skip_markers;
        evidence["timed_out"] = result.timed_out;
    }
    if (m_evidence != nullptr && m_job_id > 0)
        if (auto ok = m_evidence->append_event(m_job_id, "step", evidence.dump()); !ok)
            spdlog::warn("job {}: evidence not recorded: {}", m_job_id, ok.error().message);
    return result;
}

std::unique_ptr<jobs::StepExecutor> broker_executor_from_environment() {
    const char* socket = std::getenv(k_broker_socket_variable);
    const char* identity = std::getenv(k_broker_identity_variable);
    if (socket == nullptr || identity == nullptr || *socket == '\0') return nullptr;
    std::unique_ptr<JobQueue> queue;
    std::int64_t job_id = 0;
    const char* state_dir = std::getenv("SANDGATE_STATE_DIR");
    const char* job = std::getenv("SANDGATE_JOB_ID");
    if (state_dir != nullptr && job != nullptr) {
        job_id = std::strtoll(job, nullptr, 10);
        if (auto opened = open_sqlite_queue(default_queue_path(state_dir)); opened)
            queue = std::move(*opened);
        else
            spdlog::warn("job sandbox evidence: {}", opened.error().message);
    }
    return std::make_unique<OwningExecutor>(std::move(queue), socket, identity, job_id);
}

}  // namespace agent
