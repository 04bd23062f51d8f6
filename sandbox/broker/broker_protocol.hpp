#pragma once
// The job-sandbox broker's wire protocol: one JSON request and one JSON reply per connection,
// each a frame (unix_socket.hpp). Requests are parsed with simdjson and replies emitted with
// nlohmann::ordered_json; output bytes travel base64-encoded so that non-UTF-8 output survives.
//
// Request:  {"op":"exec","identity":ID,"argv":[..] | "shell":SCRIPT,"env":{NAME:VALUE},
//            "cwd":PATH,"timeout_ms":N,"kill_grace_ms":N,"output_limit":N,"stdin_text":TEXT,
//            "stream":true}
//           {"op":"ping"} | {"op":"shutdown","identity":ID}
// Reply:    {"ok":true,"result":{...RunResult...}} | {"ok":true,"status":{...}}
//           an exec with "stream":true is first answered by any number of output frames,
//           {"output":"out"|"err","data":BASE64}, as the step writes, then by its reply; the
//           reply's result still carries the captured copy (bounded by output_limit).
//           {"ok":false,"refusal":"busy|identity|expired|not_ready|invalid|unavailable",
//            "message":TEXT}
// invalid: the request is at fault; unavailable: the broker lacked a resource for the step
// (descriptors, memory), so the same request may succeed later.
// stdin_text is never echoed in a reply or a message. kill_grace_ms: SIGTERM to SIGKILL when
// the step is stopped (timeout, cancel); absent: sandbox::k_default_kill_grace.

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sandbox/base.hpp"
#include "sandbox/process/run.hpp"

namespace sandbox {

inline constexpr std::size_t k_max_request_frame = 8 * 1024 * 1024;
inline constexpr std::size_t k_max_reply_frame = 128 * 1024 * 1024;
inline constexpr std::size_t k_max_broker_output_limit = 16 * 1024 * 1024;
inline constexpr std::chrono::milliseconds k_max_kill_grace{std::chrono::minutes(10)};

enum class BrokerOp { exec, ping, shutdown };

// Whether an exec's output also travels as it is written (output frames before the reply).
enum class OutputFrames { none, live };

struct ExecRequest {
    std::string identity;
    std::vector<std::string> argv;     // exactly one of argv and shell
    std::optional<std::string> shell;  // run as bash --noprofile --norc -eo pipefail -c SCRIPT
    Environment env;                   // set on top of the broker's allowlisted environment
    std::string cwd;                   // inside the sandbox root; empty: the root
    std::optional<std::chrono::milliseconds> timeout;
    std::optional<std::chrono::milliseconds> kill_grace;  // at most k_max_kill_grace
    std::size_t output_limit = k_default_output_limit;
    std::optional<std::string> stdin_text;  // at most k_max_stdin_bytes
    OutputFrames output_frames = OutputFrames::none;
};

struct BrokerRequest {
    BrokerOp op = BrokerOp::exec;
    ExecRequest exec;  // exec and shutdown (identity only)
};

enum class Refusal { busy, identity, expired, not_ready, invalid, unavailable };

struct BrokerStatus {
    std::string identity;
    bool busy = false;
    std::int64_t expires_at_ms = 0;
    std::int64_t pid = 0;       // the broker's pid in its own namespace
    std::string pid_namespace;  // readlink /proc/self/ns/pid
    // Who reaps a step's orphans: "broker" (it is their subreaper) or "per_step" (a reaper
    // process per step); empty from a broker that does not say.
    std::string reaper;
};

// One output frame: bytes the step wrote, in the order written.
struct OutputChunk {
    Stream stream = Stream::out;
    std::string bytes;
};

struct BrokerReply {
    // Set on an output frame of a streamed exec (nothing else is then): more frames follow.
    std::optional<OutputChunk> output;
    std::optional<Refusal> refusal;  // set: refused, nothing ran
    std::string message;             // why it was refused
    std::optional<RunResult> result;
    std::optional<BrokerStatus> status;
};

std::string_view to_string(Refusal refusal);

std::string encode_request(const BrokerRequest& request);
// invalid_input naming the field on anything malformed (an unknown op, both argv and shell,
// stdin_text over the limit, ...).
Expected<BrokerRequest> parse_request(std::string_view json);

// The exec fields (argv|shell, env, cwd, timeout_ms, kill_grace_ms, output_limit, stdin_text) of a
// JSON object, ignoring any others (identity is left empty): for APIs that carry them.
Expected<ExecRequest> parse_exec_object(std::string_view json);

std::string encode_reply(const BrokerReply& reply);
std::string encode_output(Stream stream, std::string_view bytes);
Expected<BrokerReply> parse_reply(std::string_view json);

// The RunResult as the JSON object used in replies (output base64-encoded).
nlohmann::ordered_json run_result_to_json(const RunResult& result);
std::string encode_run_result(const RunResult& result);
// The inverse of encode_run_result (e.g. the "result" of the agent API's exec answer);
// permanent naming what is malformed.
Expected<RunResult> decode_run_result(std::string_view json);

std::string base64_encode(std::string_view bytes);
Expected<std::string> base64_decode(std::string_view text);

}  // namespace sandbox
