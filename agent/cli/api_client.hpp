#pragma once
// The client side of the agent's HTTP API (api.hpp), shared by `sandgate jobs` and `sandgate
// sandboxes`: where the agent listens (its unix socket, found from --config or the default
// state directory, or --socket; or http://127.0.0.1:PORT with --url and a bearer token read
// from --token-file) and one request at a time over libcurl.
//
// Exit codes the clients share: 2 bad usage (flags, an unreadable token file or config),
// 3 the agent cannot be reached, 1 the API answered with an error status.

#include <functional>
#include <string>
#include <string_view>

#include "agent/cli/cli11.hpp"
#include "common/error.hpp"
#include "sandbox/process/cancel.hpp"

namespace agent {

inline constexpr int k_api_exit_failed = 1;
inline constexpr int k_api_exit_usage = 2;
inline constexpr int k_api_exit_unreachable = 3;

// The connection flags as typed (--config, --socket, --url, --token-file).
struct ApiTargetOptions {
    std::string config_path;
    std::string socket;
    std::string url;
    std::string token_file;
};

struct ApiTarget {
    std::string socket;  // unix socket path, or empty
    std::string url = "http://localhost";
    std::string token;  // bearer token, or empty
};

struct ApiResponse {
    long status = 0;   // the HTTP status
    std::string body;  // empty when it was streamed (api_stream)
    bool ok() const { return status >= 200 && status < 300; }
};

// Adds --config, --socket, --url and --token-file to `app` (their values land in `options`,
// which must outlive the parse).
void add_api_target_options(CLI::App& app, ApiTargetOptions& options);

// --url (with the token of --token-file), else --socket, else the socket of the agent
// configured by --config (or of the default state directory). invalid_input naming the file
// when the token file or the config cannot be read.
common::Expected<ApiTarget> resolve_api_target(const ApiTargetOptions& options);

// One request; `payload` is sent as the JSON body of a POST. unavailable ("cannot reach the
// agent at WHERE: why") when no answer came; any HTTP status is an answer.
common::Expected<ApiResponse> api_request(const ApiTarget& target, std::string_view method,
                                          const std::string& path, const std::string& payload = "");

// A GET whose body goes to stdout as it arrives (a followed log); the returned body is empty.
common::Expected<ApiResponse> api_stream(const ApiTarget& target, const std::string& path);

// What a cancellable request does once `cancel` fires: keep waiting for its answer (the
// caller has asked the agent to stop the work), or hang up (the agent sees the connection
// close; the call then fails with ErrorKind::transient "hung up").
enum class AfterCancel { wait_for_answer, hang_up };

// api_request that also watches `cancel`: the first time it fires, `on_cancel` is called once
// (on this thread) and its answer decides. `on_cancel` may make requests of its own.
common::Expected<ApiResponse> api_request_cancellable(
    const ApiTarget& target, std::string_view method, const std::string& path,
    const std::string& payload, const sandbox::CancelToken& cancel,
    const std::function<AfterCancel()>& on_cancel);

// One request whose answer is the command's output: the body on stdout on success (returns 0);
// otherwise one line on stderr, "PROGRAM: HTTP 404: no sandbox sb-x" (api_error_line; returns
// k_api_exit_failed) or "PROGRAM: cannot reach the agent ..." (k_api_exit_unreachable).
int print_api_answer(const ApiTarget& target, std::string_view program, std::string_view method,
                     const std::string& path, const std::string& payload = "");

// An error answer as one line: "HTTP 404: no sandbox sb-x" (the body's "error" field, else its
// first line; nothing but the status when it is empty).
std::string api_error_line(const ApiResponse& response);

}  // namespace agent
