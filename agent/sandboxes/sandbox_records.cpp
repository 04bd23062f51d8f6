// The value-free records of a job sandbox (see sandbox_records.hpp).
#include "agent/sandboxes/sandbox_records.hpp"

#include "common/json_convert.hpp"

namespace agent {

using Json = nlohmann::ordered_json;

Json identity_json(const SandboxIdentity& identity) {
    Json json;
    json["repository"] = identity.repository;
    json["sha"] = identity.sha;
    json["run_id"] = identity.run_id;
    json["attempt"] = identity.attempt;
    json["job_id"] = identity.job_id;
    return json;
}

std::optional<SandboxIdentity> parse_identity(simdjson::dom::element doc, std::string* error) {
    simdjson::dom::object obj;
    if (doc["identity"].get(obj) != simdjson::SUCCESS) {
        *error = "field identity: an object is required";
        return std::nullopt;
    }
    SandboxIdentity identity;
    std::string_view text;
    for (auto [name, target] :
         {std::pair{"repository", &identity.repository}, std::pair{"sha", &identity.sha},
          std::pair{"job_id", &identity.job_id}}) {
        if (obj[name].get(text) != simdjson::SUCCESS || text.empty()) {
            *error = std::string("field identity.") + name + ": a non-empty string is required";
            return std::nullopt;
        }
        *target = std::string(text);
    }
    for (auto [name, target] :
         {std::pair{"run_id", &identity.run_id}, std::pair{"attempt", &identity.attempt}}) {
        simdjson::dom::element value;
        if (obj[name].get(value) != simdjson::SUCCESS) continue;
        if (value.get(*target) != simdjson::SUCCESS) {
            *error = std::string("field identity.") + name + ": an integer is required";
            return std::nullopt;
        }
    }
    return identity;
}

std::string sandbox_policy_json(const sandbox::Policy& policy, const SandboxOptions& options) {
    Json json;
    json["mode"] = sandbox::to_string(policy.mode);
    json["network"] = sandbox::to_string(policy.network);
    auto paths = [](const std::vector<std::filesystem::path>& list) {
        Json out = Json::array();
        for (const auto& path : list) out.push_back(path.string());
        return out;
    };
    json["read_only"] = paths(policy.read_only);
    json["writable"] = paths(policy.writable);
    json["hide"] = paths(policy.hide);
    Json limits;
    limits["memory_bytes"] = policy.memory_bytes ? Json(*policy.memory_bytes) : Json(nullptr);
    limits["pids"] = policy.pids ? Json(*policy.pids) : Json(nullptr);
    limits["tmp_size_bytes"] = policy.tmp_size_bytes ? Json(*policy.tmp_size_bytes) : Json(nullptr);
    limits["ttl_s"] = options.ttl.count();
    json["limits"] = std::move(limits);
    json["env_names"] = options.env_names;
    return json.dump();
}

// The value-free evidence of one exec: identity, posture, duration, exit, byte counts,
// truncation, skip markers (never env values, argv or stdin).
Json exec_evidence(const std::string& id, const SandboxIdentity& identity, ExecForm form,
                   const sandbox::BrokerReply& reply) {
    Json evidence;
    evidence["sandbox"] = id;
    evidence["identity"] = identity_json(identity);
    evidence["kind"] = form == ExecForm::shell ? "shell" : "argv";
    if (reply.refusal) {
        evidence["refused"] = sandbox::to_string(*reply.refusal);
    } else if (reply.result) {
        const auto& result = *reply.result;
        evidence["posture"] = common::to_ordered_json_or_null(sandbox::posture_text(result));
        evidence["duration_ms"] = result.duration.count();
        evidence["exit_code"] = result.exit_code ? Json(*result.exit_code) : Json(nullptr);
        evidence["signal"] = result.signal ? Json(*result.signal) : Json(nullptr);
        evidence["timed_out"] = result.timed_out;
        evidence["out_bytes"] = result.out.bytes;
        evidence["err_bytes"] = result.err.bytes;
        evidence["out_truncated"] = result.out.truncated;
        evidence["err_truncated"] = result.err.truncated;
        evidence["skip_markers"] = result.skip_markers;
        if (result.error) evidence["error"] = sandbox::to_string(result.error->kind);
    }
    return evidence;
}

Json refusal_evidence(const std::string& id, const SandboxIdentity& identity,
                      sandbox::Refusal refusal, const std::string& message) {
    Json evidence;
    evidence["sandbox"] = id;
    evidence["identity"] = identity_json(identity);
    evidence["refused"] = sandbox::to_string(refusal);
    evidence["message"] = message;
    return evidence;
}

}  // namespace agent
