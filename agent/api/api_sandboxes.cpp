// The API's sandbox verbs: create, exec, get, list, destroy (api.hpp).
#include <simdjson.h>

#include <expected>
#include <string>

#include "agent/api/api.hpp"
#include "agent/sandboxes/sandbox_records.hpp"
#include "common/json_convert.hpp"
#include "sandbox/broker/broker_protocol.hpp"

namespace agent {

using Json = nlohmann::ordered_json;

namespace {

constexpr std::int64_t k_max_ttl_s = 24 * 3600;

Json sandbox_to_json(const SandboxInfo& info) {
    Json json;
    json["id"] = info.id;
    json["identity"] = identity_json(info.identity);
    json["state"] = to_string(info.state);
    json["created_ms"] = info.created_ms;
    json["expires_at_ms"] = info.expires_at_ms;
    json["root"] = info.root.string();
    json["policy"] = common::to_ordered_json_or_null(info.policy_json);
    json["execs"] = info.execs;
    return json;
}

// A sandbox request's body: a JSON object (read by `parser`, which the caller keeps alive
// while `doc` is used) and the identity it names; the 400 message otherwise.
struct SandboxBody {
    simdjson::dom::element doc;
    SandboxIdentity identity;
};

std::expected<SandboxBody, std::string> parse_sandbox_body(simdjson::dom::parser& parser,
                                                           const HttpRequest& request) {
    SandboxBody body;
    if (parser.parse(simdjson::padded_string(request.body)).get(body.doc) != simdjson::SUCCESS ||
        !body.doc.is_object())
        return std::unexpected("body: a JSON object is required");
    std::string error;
    auto identity = parse_identity(body.doc, &error);
    if (!identity) return std::unexpected(std::move(error));
    body.identity = std::move(*identity);
    return body;
}

}  // namespace

HttpResponse Api::sandboxes(const HttpRequest& request, const std::vector<std::string>& parts) {
    if (parts.size() == 2 && request.method == "GET") {
        Json list = Json::array();
        for (const auto& info : m_sandboxes.list()) list.push_back(sandbox_to_json(info));
        return json_response(200, {{"sandboxes", std::move(list)}});
    }
    if (parts.size() >= 5 && parts[3] == "execs" &&
        ((parts.size() == 6 && parts[5] == "cancel" && request.method == "POST") ||
         (parts.size() == 5 && request.method == "DELETE")))
        return cancel_exec(parts[2], parts[4]);
    if (parts.size() == 4 && parts[3] == "exec" && request.method == "POST")
        return sandbox_exec(request, parts[2]);
    if (parts.size() == 2 && request.method == "POST") return create_sandbox(request);
    if (parts.size() != 3)
        return error_response(404, "no route " + request.method + " " + request.path);
    const std::string& id = parts[2];
    if (request.method == "GET") {
        auto info = m_sandboxes.get(id);
        if (!info) return error_response(404, "no sandbox " + id);
        auto json = sandbox_to_json(*info);
        const auto running = m_execs.running(id);
        json["running_exec"] = running ? Json(*running) : Json(nullptr);
        return json_response(200, json);
    }
    if (request.method == "DELETE") {
        if (auto ok = m_sandboxes.destroy(id); !ok) return error_response(503, ok.error().message);
        return json_response(200, {{"id", id}, {"destroyed", true}});
    }
    return error_response(404, "no route " + request.method + " " + request.path);
}

HttpResponse Api::create_sandbox(const HttpRequest& request) {
    simdjson::dom::parser parser;
    auto body = parse_sandbox_body(parser, request);
    if (!body) return error_response(400, body.error());
    const simdjson::dom::element doc = body->doc;
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
        options.policy.network =
            network == "host" ? sandbox::NetworkMode::host : sandbox::NetworkMode::none;
    }
    if (doc["job"].get(number) == simdjson::SUCCESS) options.job = number;
    auto created = m_sandboxes.create(body->identity, options);
    if (!created)
        return error_response(created.error().kind == common::ErrorKind::invalid_input ? 409 : 503,
                              created.error().message);
    return json_response(201, sandbox_to_json(*created));
}

// One exec, registered under its exec id while it runs: a cancel request for that id, or the
// client hanging up on this request, stops it (the answer then says cancelled, and by whom).
HttpResponse Api::sandbox_exec(const HttpRequest& request, const std::string& id) {
    simdjson::dom::parser parser;
    auto body = parse_sandbox_body(parser, request);
    if (!body) return error_response(400, body.error());
    const simdjson::dom::element doc = body->doc;
    std::string exec_id;
    if (simdjson::dom::element field; doc["exec_id"].get(field) == simdjson::SUCCESS) {
        std::string_view text;
        if (field.get(text) != simdjson::SUCCESS || !valid_exec_id(text))
            return error_response(400, "field exec_id: 1 to 64 letters, digits, '.', '_' or '-'");
        exec_id = std::string(text);
    }
    auto exec = sandbox::parse_exec_object(request.body);
    if (!exec) return error_response(400, exec.error().message);
    if (!m_sandboxes.get(id)) return error_response(404, "no sandbox " + id);
    auto registration = m_execs.begin(id, exec_id, request.connection_fd);
    if (!registration)
        return error_response(
            registration.error().kind == common::ErrorKind::invalid_input ? 409 : 503,
            registration.error().message);
    ExecControl control;
    control.exec_id = registration->exec_id();
    control.cancel = &registration->token();
    control.cancelled_by = [&] {
        const auto cause = registration->cause();
        return cause == ExecCancelCause::none ? std::string() : std::string(to_string(cause));
    };
    auto reply = m_sandboxes.exec(id, body->identity, std::move(*exec), control);
    if (!reply) return error_response(502, reply.error().message);
    Json answer;
    answer["exec_id"] = control.exec_id;
    if (reply->refusal) {
        answer["refusal"] = sandbox::to_string(*reply->refusal);
        answer["error"] = reply->message;
        return json_response(*reply->refusal == sandbox::Refusal::unavailable ? 503 : 409, answer);
    }
    answer["result"] = sandbox::run_result_to_json(*reply->result);
    if (reply->result->error && reply->result->error->kind == sandbox::RunErrorKind::cancelled) {
        const std::string by = control.cancelled_by();
        answer["cancelled_by"] = by.empty() ? "sandbox" : by;
    }
    return json_response(200, answer);
}

HttpResponse Api::cancel_exec(const std::string& id, const std::string& exec_id) {
    if (!m_sandboxes.get(id)) return error_response(404, "no sandbox " + id);
    if (!valid_exec_id(exec_id))
        return error_response(400, "exec id: 1 to 64 letters, digits, '.', '_' or '-'");
    const auto outcome = m_execs.cancel(id, exec_id);
    Json evidence;
    evidence["sandbox"] = id;
    evidence["exec_id"] = exec_id;
    evidence["cancel"] = to_string(outcome);
    m_sandboxes.record_event(id, "exec_cancel", evidence.dump());
    Json answer{{"sandbox", id}, {"exec_id", exec_id}, {"outcome", to_string(outcome)}};
    switch (outcome) {
        case ExecCancelOutcome::requested:
            return json_response(200, answer);
        case ExecCancelOutcome::finished:
            answer["error"] = "exec " + exec_id + " in sandbox " + id + " has finished";
            return json_response(409, answer);
        case ExecCancelOutcome::unknown:
            break;
    }
    answer["error"] = "no exec " + exec_id + " in sandbox " + id;
    return json_response(404, answer);
}

}  // namespace agent
