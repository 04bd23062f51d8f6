#include "sandbox/broker/broker_protocol.hpp"

#include <simdjson.h>

#include <array>
#include <nlohmann/json.hpp>

namespace sandbox {
namespace {

using Json = nlohmann::ordered_json;
using simdjson::dom::element;
using simdjson::dom::object;

constexpr std::string_view k_base64 =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::unexpected<Error> bad(std::string_view field, std::string_view what) {
    return fail(ErrorKind::invalid_input,
                "broker request: field '" + std::string(field) + "' " + std::string(what));
}

Expected<element> parse_document(simdjson::dom::parser& parser, std::string_view json,
                                 simdjson::padded_string& storage) {
    storage = simdjson::padded_string(json);
    element doc;
    if (auto error = parser.parse(storage).get(doc); error)
        return fail(ErrorKind::invalid_input,
                    std::string("broker message is not JSON: ") + simdjson::error_message(error));
    if (!doc.is_object()) return fail(ErrorKind::invalid_input, "broker message is not an object");
    return doc;
}

// Optional string field: nullopt when absent; an error when present but not a string.
Expected<std::optional<std::string>> optional_string(object obj, std::string_view key) {
    element value;
    if (obj[key].get(value) != simdjson::SUCCESS || value.is_null())
        return std::optional<std::string>();
    std::string_view text;
    if (value.get(text) != simdjson::SUCCESS) return bad(key, "must be a string");
    return std::optional<std::string>(std::string(text));
}

Expected<std::optional<std::uint64_t>> optional_uint(object obj, std::string_view key) {
    element value;
    if (obj[key].get(value) != simdjson::SUCCESS || value.is_null())
        return std::optional<std::uint64_t>();
    std::uint64_t number = 0;
    if (value.get(number) != simdjson::SUCCESS) return bad(key, "must be a non-negative integer");
    return std::optional<std::uint64_t>(number);
}

Expected<void> parse_exec_fields(object obj, ExecRequest& exec) {
    element argv;
    if (obj["argv"].get(argv) == simdjson::SUCCESS && !argv.is_null()) {
        simdjson::dom::array items;
        if (argv.get(items) != simdjson::SUCCESS) return bad("argv", "must be an array of strings");
        for (element item : items) {
            std::string_view text;
            if (item.get(text) != simdjson::SUCCESS) return bad("argv", "must hold strings only");
            exec.argv.emplace_back(text);
        }
    }
    auto shell = optional_string(obj, "shell");
    if (!shell) return std::unexpected(shell.error());
    exec.shell = *shell;
    if (exec.argv.empty() == !exec.shell) return bad("argv", "or 'shell' is needed (exactly one)");
    element env;
    if (obj["env"].get(env) == simdjson::SUCCESS && !env.is_null()) {
        object pairs;
        if (env.get(pairs) != simdjson::SUCCESS) return bad("env", "must be an object of strings");
        for (auto [name, value] : pairs) {
            std::string_view text;
            if (value.get(text) != simdjson::SUCCESS) return bad("env", "values must be strings");
            if (name.empty() || name.find('=') != std::string_view::npos)
                return bad("env", "has an invalid variable name");
            exec.env.emplace_back(std::string(name), std::string(text));
        }
    }
    auto cwd = optional_string(obj, "cwd");
    if (!cwd) return std::unexpected(cwd.error());
    exec.cwd = cwd->value_or("");
    auto timeout = optional_uint(obj, "timeout_ms");
    if (!timeout) return std::unexpected(timeout.error());
    if (*timeout) exec.timeout = std::chrono::milliseconds(**timeout);
    auto grace = SANDGATE_TRY(optional_uint(obj, "kill_grace_ms"));
    if (grace) {
        if (*grace > static_cast<std::uint64_t>(k_max_kill_grace.count()))
            return bad("kill_grace_ms", "is more than " + std::to_string(k_max_kill_grace.count()));
        exec.kill_grace = std::chrono::milliseconds(*grace);
    }
    auto limit = SANDGATE_TRY(optional_uint(obj, "output_limit"));
    if (limit) {
        if (*limit > k_max_broker_output_limit) return bad("output_limit", "is too large");
        exec.output_limit = *limit;
    }
    auto stdin_text = optional_string(obj, "stdin_text");
    if (!stdin_text) return std::unexpected(stdin_text.error());
    if (*stdin_text && (*stdin_text)->size() > k_max_stdin_bytes)
        return bad("stdin_text", "exceeds " + std::to_string(k_max_stdin_bytes) + " bytes");
    exec.stdin_text = std::move(*stdin_text);
    bool stream = false;
    if (auto error = obj["stream"].get(stream);
        error != simdjson::SUCCESS && error != simdjson::NO_SUCH_FIELD)
        return bad("stream", "must be a boolean");
    exec.output_frames = stream ? OutputFrames::live : OutputFrames::none;
    return {};
}

Json encode_stream(const StreamResult& stream) {
    Json json;
    json["head_b64"] = base64_encode(stream.head);
    json["tail_b64"] = base64_encode(stream.tail);
    json["bytes"] = stream.bytes;
    json["truncated"] = stream.truncated;
    return json;
}

Expected<StreamResult> parse_stream(object obj) {
    StreamResult stream;
    std::string_view head, tail;
    if (obj["head_b64"].get(head) || obj["tail_b64"].get(tail) || obj["bytes"].get(stream.bytes) ||
        obj["truncated"].get(stream.truncated))
        return fail(ErrorKind::permanent, "broker reply: malformed stream");
    auto decoded_head = base64_decode(head);
    auto decoded_tail = base64_decode(tail);
    if (!decoded_head || !decoded_tail)
        return fail(ErrorKind::permanent, "broker reply: bad base64 output");
    stream.head = std::move(*decoded_head);
    stream.tail = std::move(*decoded_tail);
    return stream;
}

template <typename Enum, std::size_t N>
std::optional<Enum> enum_from(std::string_view text, const std::array<Enum, N>& values) {
    for (Enum value : values)
        if (to_string(value) == text) return value;
    return std::nullopt;
}

Expected<RunResult> parse_run_result(object obj) {
    RunResult result;
    element value;
    std::int64_t number = 0;
    if (obj["exit_code"].get(value) == simdjson::SUCCESS && value.get(number) == simdjson::SUCCESS)
        result.exit_code = static_cast<int>(number);
    if (obj["signal"].get(value) == simdjson::SUCCESS && value.get(number) == simdjson::SUCCESS)
        result.signal = static_cast<int>(number);
    std::uint64_t duration = 0;
    object out, err;
    std::string_view tree_kill, posture;
    if (obj["timed_out"].get(result.timed_out) || obj["duration_ms"].get(duration) ||
        obj["out"].get(out) || obj["err"].get(err) ||
        obj["skip_markers"].get(result.skip_markers) || obj["tree_kill"].get(tree_kill) ||
        obj["sandbox"].get(posture))
        return fail(ErrorKind::permanent, "broker reply: malformed result");
    result.duration = std::chrono::milliseconds(duration);
    auto out_stream = parse_stream(out);
    auto err_stream = parse_stream(err);
    if (!out_stream || !err_stream) return fail(ErrorKind::permanent, "broker reply: bad stream");
    result.out = std::move(*out_stream);
    result.err = std::move(*err_stream);
    result.tree_kill =
        enum_from(tree_kill, std::array{TreeKill::cgroup, TreeKill::subreaper, TreeKill::pidns})
            .value_or(TreeKill::subreaper);
    result.sandbox_json = std::string(posture);
    result.sandbox = nullptr;  // the posture is the text above: never the default "off"
    object error;
    if (obj["error"].get(error) == simdjson::SUCCESS) {
        std::string_view kind, message;
        if (error["kind"].get(kind) || error["message"].get(message))
            return fail(ErrorKind::permanent, "broker reply: malformed error");
        result.error = RunError{};
        result.error->kind =
            enum_from(kind, std::array{RunErrorKind::timeout, RunErrorKind::spawn_failed,
                                       RunErrorKind::invalid_request,
                                       RunErrorKind::sandbox_unavailable, RunErrorKind::cancelled})
                .value_or(RunErrorKind::spawn_failed);
        result.error->message = std::string(message);
        std::int64_t errno_value = 0;
        if (error["errno"].get(errno_value) == simdjson::SUCCESS)
            result.error->errno_value = static_cast<int>(errno_value);
    }
    return result;
}

Expected<BrokerStatus> parse_status(object obj) {
    BrokerStatus status;
    std::string_view identity, ns;
    if (obj["identity"].get(identity) || obj["busy"].get(status.busy) ||
        obj["expires_at_ms"].get(status.expires_at_ms) || obj["pid"].get(status.pid) ||
        obj["pid_namespace"].get(ns))
        return fail(ErrorKind::permanent, "broker reply: malformed status");
    status.identity = std::string(identity);
    status.pid_namespace = std::string(ns);
    std::string_view reaper;
    if (obj["reaper"].get(reaper) == simdjson::SUCCESS) status.reaper = std::string(reaper);
    return status;
}

}  // namespace

std::string_view to_string(Refusal refusal) {
    switch (refusal) {
        case Refusal::busy:
            return "busy";
        case Refusal::identity:
            return "identity";
        case Refusal::expired:
            return "expired";
        case Refusal::not_ready:
            return "not_ready";
        case Refusal::invalid:
            return "invalid";
        case Refusal::unavailable:
            return "unavailable";
    }
    return "invalid";
}

std::string encode_request(const BrokerRequest& request) {
    Json json;
    json["op"] = request.op == BrokerOp::exec   ? "exec"
                 : request.op == BrokerOp::ping ? "ping"
                                                : "shutdown";
    const auto& exec = request.exec;
    json["identity"] = exec.identity;
    if (request.op != BrokerOp::exec) return json.dump();
    if (exec.shell)
        json["shell"] = *exec.shell;
    else
        json["argv"] = exec.argv;
    Json env = Json::object();
    for (const auto& [name, value] : exec.env) env[name] = value;
    json["env"] = std::move(env);
    json["cwd"] = exec.cwd;
    if (exec.timeout) json["timeout_ms"] = exec.timeout->count();
    if (exec.kill_grace) json["kill_grace_ms"] = exec.kill_grace->count();
    json["output_limit"] = exec.output_limit;
    if (exec.stdin_text) json["stdin_text"] = *exec.stdin_text;
    if (exec.output_frames == OutputFrames::live) json["stream"] = true;
    return json.dump(-1, ' ', false, Json::error_handler_t::replace);
}

Expected<BrokerRequest> parse_request(std::string_view json) {
    simdjson::dom::parser parser;
    simdjson::padded_string storage;
    auto doc = SANDGATE_TRY(parse_document(parser, json, storage));
    object obj = doc.get_object().value_unsafe();
    BrokerRequest request;
    std::string_view op;
    if (obj["op"].get(op) != simdjson::SUCCESS) return bad("op", "is missing");
    if (op == "exec")
        request.op = BrokerOp::exec;
    else if (op == "ping")
        request.op = BrokerOp::ping;
    else if (op == "shutdown")
        request.op = BrokerOp::shutdown;
    else
        return bad("op", "is not one of exec, ping, shutdown");
    auto identity = optional_string(obj, "identity");
    if (!identity) return std::unexpected(identity.error());
    request.exec.identity = identity->value_or("");
    if (request.op == BrokerOp::exec) SANDGATE_CHECK(parse_exec_fields(obj, request.exec));
    return request;
}

nlohmann::ordered_json run_result_to_json(const RunResult& result) {
    Json json;
    json["exit_code"] = result.exit_code ? Json(*result.exit_code) : Json(nullptr);
    json["signal"] = result.signal ? Json(*result.signal) : Json(nullptr);
    json["timed_out"] = result.timed_out;
    json["duration_ms"] = result.duration.count();
    json["out"] = encode_stream(result.out);
    json["err"] = encode_stream(result.err);
    json["skip_markers"] = result.skip_markers;
    json["tree_kill"] = to_string(result.tree_kill);
    json["sandbox"] = posture_text(result);
    if (result.error) {
        json["error"]["kind"] = to_string(result.error->kind);
        json["error"]["message"] = result.error->message;
        // A failed spawn's errno decides 126 against 127 for the client (exit_status).
        if (result.error->errno_value != 0) json["error"]["errno"] = result.error->errno_value;
    }
    return json;
}

std::string encode_run_result(const RunResult& result) {
    return run_result_to_json(result).dump(-1, ' ', false, Json::error_handler_t::replace);
}

Expected<RunResult> decode_run_result(std::string_view json) {
    simdjson::dom::parser parser;
    simdjson::padded_string storage;
    auto doc = parse_document(parser, json, storage);
    if (!doc) return fail(ErrorKind::permanent, doc.error().message);
    return parse_run_result(doc->get_object().value_unsafe());
}

Expected<ExecRequest> parse_exec_object(std::string_view json) {
    simdjson::dom::parser parser;
    simdjson::padded_string storage;
    auto doc = SANDGATE_TRY(parse_document(parser, json, storage));
    ExecRequest exec;
    SANDGATE_CHECK(parse_exec_fields(doc.get_object().value_unsafe(), exec));
    return exec;
}

std::string encode_reply(const BrokerReply& reply) {
    Json json;
    json["ok"] = !reply.refusal;
    if (reply.refusal) {
        json["refusal"] = to_string(*reply.refusal);
        json["message"] = reply.message;
    }
    if (reply.result) json["result"] = run_result_to_json(*reply.result);
    if (reply.status) {
        Json status;
        status["identity"] = reply.status->identity;
        status["busy"] = reply.status->busy;
        status["expires_at_ms"] = reply.status->expires_at_ms;
        status["pid"] = reply.status->pid;
        status["pid_namespace"] = reply.status->pid_namespace;
        status["reaper"] = reply.status->reaper;
        json["status"] = std::move(status);
    }
    return json.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string encode_output(Stream stream, std::string_view bytes) {
    Json json;
    json["output"] = stream == Stream::out ? "out" : "err";
    json["data"] = base64_encode(bytes);
    return json.dump();
}

namespace {

Expected<OutputChunk> parse_output(object obj, std::string_view stream) {
    OutputChunk chunk;
    if (stream == "err")
        chunk.stream = Stream::err;
    else if (stream != "out")
        return fail(ErrorKind::permanent, "broker output frame: 'output' is not out or err");
    std::string_view data;
    if (obj["data"].get(data) != simdjson::SUCCESS)
        return fail(ErrorKind::permanent, "broker output frame: no 'data'");
    chunk.bytes = SANDGATE_TRY(base64_decode(data));
    return chunk;
}

}  // namespace

Expected<BrokerReply> parse_reply(std::string_view json) {
    simdjson::dom::parser parser;
    simdjson::padded_string storage;
    auto doc = parse_document(parser, json, storage);
    if (!doc) return fail(ErrorKind::permanent, doc.error().message);
    object obj = doc->get_object().value_unsafe();
    BrokerReply reply;
    if (std::string_view stream; obj["output"].get(stream) == simdjson::SUCCESS) {
        reply.output = SANDGATE_TRY(parse_output(obj, stream));
        return reply;
    }
    bool ok = false;
    if (obj["ok"].get(ok)) return fail(ErrorKind::permanent, "broker reply: no 'ok'");
    if (!ok) {
        std::string_view refusal, message;
        if (obj["refusal"].get(refusal) || obj["message"].get(message))
            return fail(ErrorKind::permanent, "broker reply: malformed refusal");
        reply.refusal = enum_from(refusal, std::array{Refusal::busy, Refusal::identity,
                                                      Refusal::expired, Refusal::not_ready,
                                                      Refusal::invalid, Refusal::unavailable})
                            .value_or(Refusal::invalid);
        reply.message = std::string(message);
        return reply;
    }
    object inner;
    if (obj["result"].get(inner) == simdjson::SUCCESS) {
        auto result = parse_run_result(inner);
        if (!result) return std::unexpected(result.error());
        reply.result = std::move(*result);
    }
    if (obj["status"].get(inner) == simdjson::SUCCESS) {
        auto status = parse_status(inner);
        if (!status) return std::unexpected(status.error());
        reply.status = std::move(*status);
    }
    return reply;
}

std::string base64_encode(std::string_view bytes) {
    std::string out;
    out.reserve((bytes.size() + 2) / 3 * 4);
    std::size_t i = 0;
    for (; i + 2 < bytes.size(); i += 3) {
        const auto n = (std::uint32_t{static_cast<unsigned char>(bytes[i])} << 16) |
                       (std::uint32_t{static_cast<unsigned char>(bytes[i + 1])} << 8) |
                       std::uint32_t{static_cast<unsigned char>(bytes[i + 2])};
        for (int shift : {18, 12, 6, 0}) out.push_back(k_base64[(n >> shift) & 63]);
    }
    if (i < bytes.size()) {
        std::uint32_t n = std::uint32_t{static_cast<unsigned char>(bytes[i])} << 16;
        if (i + 1 < bytes.size()) n |= std::uint32_t{static_cast<unsigned char>(bytes[i + 1])} << 8;
        out.push_back(k_base64[(n >> 18) & 63]);
        out.push_back(k_base64[(n >> 12) & 63]);
        out.push_back(i + 1 < bytes.size() ? k_base64[(n >> 6) & 63] : '=');
        out.push_back('=');
    }
    return out;
}

Expected<std::string> base64_decode(std::string_view text) {
    if (text.size() % 4 != 0) return fail(ErrorKind::invalid_input, "base64: bad length");
    std::string out;
    out.reserve(text.size() / 4 * 3);
    for (std::size_t i = 0; i < text.size(); i += 4) {
        std::uint32_t n = 0;
        int pad = 0;
        for (std::size_t j = 0; j < 4; ++j) {
            const char c = text[i + j];
            std::uint32_t v = 0;
            if (c == '=' && j >= 2 && i + 4 == text.size()) {
                ++pad;
            } else {
                const auto at = k_base64.find(c);
                if (at == std::string_view::npos || pad)
                    return fail(ErrorKind::invalid_input, "base64: bad character");
                v = static_cast<std::uint32_t>(at);
            }
            n = (n << 6) | v;
        }
        out.push_back(static_cast<char>((n >> 16) & 0xff));
        if (pad < 2) out.push_back(static_cast<char>((n >> 8) & 0xff));
        if (pad < 1) out.push_back(static_cast<char>(n & 0xff));
    }
    return out;
}

}  // namespace sandbox
