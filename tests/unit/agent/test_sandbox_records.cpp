// The records a job sandbox leaves are value-free: env NAMES but never values, no argv, no
// stdin; an exec's evidence carries the result's facts, a refusal says which.
#include <catch2/catch.hpp>
#include <string>

#include "agent/sandboxes/sandbox_records.hpp"

namespace {

agent::SandboxIdentity identity() {
    return {"octo/repo", "0123456789abcdef0123456789abcdef01234567", 42, 2, "build"};
}

}  // namespace

TEST_CASE("sandbox records: the policy record has env names, limits and paths, never values") {
    sandbox::Policy policy;
    policy.mode = sandbox::SandboxMode::bwrap;
    policy.read_only = {"/opt/cache"};
    policy.memory_bytes = 1 << 20;
    agent::SandboxOptions options;
    options.ttl = std::chrono::seconds(90);
    options.env_names = {"GITHUB_TOKEN", "CI"};
    const std::string json = agent::sandbox_policy_json(policy, options);
    CHECK(json.find("\"mode\":\"bwrap\"") != std::string::npos);
    CHECK(json.find("\"/opt/cache\"") != std::string::npos);
    CHECK(json.find("\"memory_bytes\":1048576") != std::string::npos);
    CHECK(json.find("\"ttl_s\":90") != std::string::npos);
    CHECK(json.find("\"env_names\":[\"GITHUB_TOKEN\",\"CI\"]") != std::string::npos);
    CHECK(json.find("\"pids\":null") != std::string::npos);
}

TEST_CASE("sandbox records: an exec's evidence has the result's facts and no output or argv") {
    sandbox::RunResult result;
    result.exit_code = 3;
    result.out.bytes = 10;
    result.out.head = "secret output";
    result.err.truncated = true;
    result.skip_markers = 2;
    result.duration = std::chrono::milliseconds(1500);
    sandbox::BrokerReply reply;
    reply.result = result;
    const auto evidence = agent::exec_evidence("sb-1", identity(), agent::ExecForm::shell, reply);
    CHECK(evidence["kind"] == "shell");
    CHECK(evidence["exit_code"] == 3);
    CHECK(evidence["signal"].is_null());
    CHECK(evidence["out_bytes"] == 10);
    CHECK(evidence["err_truncated"] == true);
    CHECK(evidence["skip_markers"] == 2);
    CHECK(evidence["duration_ms"] == 1500);
    CHECK(evidence["identity"]["run_id"] == 42);
    CHECK(evidence.dump().find("secret output") == std::string::npos);
    CHECK_FALSE(evidence.contains("refused"));
}

TEST_CASE("sandbox records: refusals name their kind") {
    sandbox::BrokerReply refused;
    refused.refusal = sandbox::Refusal::busy;
    CHECK(agent::exec_evidence("sb-1", identity(), agent::ExecForm::argv, refused)["refused"] ==
          "busy");
    const auto evidence = agent::refusal_evidence("sb-1", identity(), sandbox::Refusal::expired,
                                                  "sandbox sb-1 expired");
    CHECK(evidence["refused"] == "expired");
    CHECK(evidence["message"] == "sandbox sb-1 expired");
    CHECK(evidence["identity"]["job_id"] == "build");
}
