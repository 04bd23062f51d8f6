// The API's sandbox verbs: create, exec, get, list, destroy (api.hpp).
#include <simdjson.h>

#include "agent/api.hpp"
#include "sandbox/broker_protocol.hpp"
#include "sandbox/json_convert.hpp"

namespace agent {

using Json = nlohmann::ordered_json;

namespace {

constexpr std::int64_t k_max_ttl_s = 24 * 3600;

Json sandbox_to_json(const SandboxInfo& info) {
    Json json;
    json["id"] = info.id;
    json["identity"] = {{"repository", info.identity.repository},
                        {"sha", info.identity.sha},
                        {"run_id", info.identity.run_id},
                        {"attempt", info.identity.attempt},
                        {"job_id", info.identity.job_id}};
    json["state"] = to_string(info.state);
    json["created_ms"] = info.created_ms;
    json["expires_at_ms"] = info.expires_at_ms;
    json["root"] = info.root.string();
    json["policy"] = sandbox::to_ordered_json_or_null(info.policy_json);
    json["execs"] = info.execs;
    return json;
}

// The "identity" object of a body; nullopt with *error set when malformed.
std::optional<SandboxIdentity> parse_identity(simdjson::dom::element doc, std::string* error) {
    simdjson::dom::object obj;
    if (doc["identity"].get(obj) != simdjson::SUCCESS) {
        *error = "field identity: an object is required";
        return std::nullopt;
    }
    SandboxIdentity identity;
    std::string_view text;
    for (auto [name, target] : {std::pair{"repository", &identity.repository},
                                std::pair{"sha", &identity.sha},
                                std::pair{"job_id", &identity.job_id}}) {
        if (obj[name].get(text) != simdjson::SUCCESS || text.empty()) {
            *error = std::string("field identity.") + name + ": a non-empty string is required";
            return std::nullopt;
        }
        *target = std::string(text);
    }
    for (auto [name, target] : {std::pair{"run_id", &identity.run_id},
                                std::pair{"attempt", &identity.attempt}}) {
        simdjson::dom::element value;
        if (obj[name].get(value) != simdjson::SUCCESS) continue;
        if (value.get(*target) != simdjson::SUCCESS) {
            *error = std::string("field identity.") + name + ": an integer is required";
            return std::nullopt;
        }
    }
    return identity;
}

}  // namespace

HttpResponse Api::sandboxes(const HttpRequest& request, const std::vector<std::string>& parts) {
    if (parts.size() == 2 && request.method == "GET") {
        Json list = Json::array();
        for (const auto& info : m_sandboxes.list()) list.push_back(sandbox_to_json(info));
        return json_response(200, {{"sandboxes", std::move(list)}});
    }
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    const bool has_body = request.method == "POST";
    if (has_body && (parser.parse(simdjson::padded_string(request.body)).get(doc) !=
                         simdjson::SUCCESS ||
                     !doc.is_object()))
        return error_response(400, "body: a JSON object is required");
    std::string error;
    if (parts.size() == 2 && request.method == "POST") {
        auto identity = parse_identity(doc, &error);
        if (!identity) return error_response(400, error);
        SandboxOptions options;
        options.policy = m_config.sandbox_policy;
        std::int64_t number = 0;
        if (doc["ttl_s"].get(number) == simdjson::SUCCESS) {
            if (number < 1 || number > k_max_ttl_s)
                return error_response(400, "field ttl_s: 1 to 86400 seconds");
            options.ttl = std::chrono::seconds(number);
        }
        std::string_view network;
        if (doc["network"].get(network) == simdjson::SUCCESS) {
            if (network != "none" && network != "host")
                return error_response(400, "field network: none or host");
            options.policy.network = network == "host" ? sandbox::NetworkMode::host
                                                       : sandbox::NetworkMode::none;
        }
        if (doc["job"].get(number) == simdjson::SUCCESS) options.job = number;
        auto created = m_sandboxes.create(*identity, options);
        if (!created)
            return error_response(created.error().kind == sandbox::ErrorKind::invalid_input ? 409 : 503,
                                  created.error().message);
        return json_response(201, sandbox_to_json(*created));
    }
    if (parts.size() < 3) return error_response(404, "no route " + request.method + " " + request.path);
    const std::string& id = parts[2];
    if (parts.size() == 3 && request.method == "GET") {
        auto info = m_sandboxes.get(id);
        if (!info) return error_response(404, "no sandbox " + id);
        return json_response(200, sandbox_to_json(*info));
    }
    if (parts.size() == 3 && request.method == "DELETE") {
        if (auto ok = m_sandboxes.destroy(id); !ok) return error_response(503, ok.error().message);
        return json_response(200, {{"id", id}, {"destroyed", true}});
    }
    if (parts.size() == 4 && parts[3] == "exec" && request.method == "POST") {
        auto identity = parse_identity(doc, &error);
        if (!identity) return error_response(400, error);
        auto exec = sandbox::parse_exec_object(request.body);
        if (!exec) return error_response(400, exec.error().message);
        if (!m_sandboxes.get(id)) return error_response(404, "no sandbox " + id);
        auto reply = m_sandboxes.exec(id, *identity, std::move(*exec));
        if (!reply) return error_response(502, reply.error().message);
        if (reply->refusal)
            return json_response(*reply->refusal == sandbox::Refusal::unavailable ? 503 : 409,
                                 {{"refusal", sandbox::to_string(*reply->refusal)},
                                  {"error", reply->message}});
        return json_response(200, {{"result", sandbox::run_result_to_json(*reply->result)}});
    }
    return error_response(404, "no route " + request.method + " " + request.path);
}

}  // namespace agent
