// The agent API's client side over libcurl (api_client.hpp).
#include "agent/cli/api_client.hpp"

#include <poll.h>
#include <simdjson.h>

#include <cstdio>
#include <memory>

#include "agent/cli/cli11.hpp"
#include "agent/cli/terminal_text.hpp"
#include "agent/daemon/agent_config.hpp"
#include "agent/daemon/daemon.hpp"
#include "github/curl_handles.hpp"

namespace agent {

namespace {

using common::ErrorKind;
using common::fail;

using github::EasyHandle;
using github::HeaderList;
using github::MultiHandle;

std::size_t to_string_sink(char* data, std::size_t size, std::size_t count, void* body) {
    static_cast<std::string*>(body)->append(data, size * count);
    return size * count;
}

std::size_t to_stdout_sink(char* data, std::size_t size, std::size_t count, void*) {
    std::fwrite(data, size, count, stdout);
    std::fflush(stdout);
    return size * count;
}

// One prepared request: the easy handle and the header list it points into.
struct Prepared {
    EasyHandle curl;
    HeaderList headers;
    std::string url;
    std::string method;
};

common::Expected<Prepared> prepare(const ApiTarget& target, std::string_view method,
                                   const std::string& path, const std::string& payload,
                                   std::string* body) {
    Prepared p;
    p.curl = github::make_easy_handle();
    const bool headers_ok =
        github::append_header(p.headers, "Content-Type: application/json") &&
        (target.token.empty() ||
         github::append_header(p.headers, "Authorization: Bearer " + target.token));
    if (!p.curl || !headers_ok) return fail(ErrorKind::unavailable, "cannot make a libcurl handle");
    p.url = target.url + path;
    p.method = std::string(method);
    CURL* curl = p.curl.get();
    curl_easy_setopt(curl, CURLOPT_URL, p.url.c_str());
    if (!target.socket.empty())
        curl_easy_setopt(curl, CURLOPT_UNIX_SOCKET_PATH, target.socket.c_str());
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, p.method.c_str());
    if (method == "POST") {
        // The payload is copied: the caller's string may go before the transfer ends.
        curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, static_cast<long>(payload.size()));
        curl_easy_setopt(curl, CURLOPT_COPYPOSTFIELDS, payload.c_str());
    }
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, p.headers.get());
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    if (body) {
        curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, to_string_sink);
        curl_easy_setopt(curl, CURLOPT_WRITEDATA, body);
    } else {
        curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, to_stdout_sink);
    }
    return p;
}

std::string where(const ApiTarget& target) {
    return target.socket.empty() ? target.url : target.socket;
}

common::Expected<ApiResponse> finish(const ApiTarget& target, CURL* curl, CURLcode code,
                                     std::string body) {
    if (code != CURLE_OK)
        return fail(ErrorKind::unavailable,
                    "cannot reach the agent at " + where(target) + ": " + curl_easy_strerror(code));
    ApiResponse response;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &response.status);
    response.body = std::move(body);
    return response;
}

}  // namespace

void add_api_target_options(CLI::App& app, ApiTargetOptions& options) {
    app.add_option("--config", options.config_path, "the agent's configuration (finds its socket)");
    app.add_option("--socket", options.socket, "the agent's API unix socket");
    app.add_option("--url", options.url, "the agent's API on http://127.0.0.1:PORT");
    app.add_option("--token-file", options.token_file, "bearer token file (0600) for --url");
}

common::Expected<ApiTarget> resolve_api_target(const ApiTargetOptions& options) {
    ApiTarget target;
    if (!options.url.empty()) {
        target.url = options.url;
        if (!options.token_file.empty()) {
            auto token = read_secret_file(options.token_file);
            if (!token) return std::unexpected(token.error());
            target.token = *token;
        }
        return target;
    }
    if (!options.socket.empty()) {
        target.socket = options.socket;
        return target;
    }
    AgentConfig config;
    if (!options.config_path.empty()) {
        auto loaded = SANDGATE_TRY(load_agent_config(options.config_path));
        config = loaded;
    } else {
        config.state_dir = default_state_dir();
    }
    target.socket = api_socket_path(config).string();
    return target;
}

common::Expected<ApiResponse> api_request(const ApiTarget& target, std::string_view method,
                                          const std::string& path, const std::string& payload) {
    std::string body;
    auto prepared = SANDGATE_TRY(prepare(target, method, path, payload, &body));
    const CURLcode code = curl_easy_perform(prepared.curl.get());
    return finish(target, prepared.curl.get(), code, std::move(body));
}

common::Expected<ApiResponse> api_stream(const ApiTarget& target, const std::string& path) {
    auto prepared = SANDGATE_TRY(prepare(target, "GET", path, "", nullptr));
    const CURLcode code = curl_easy_perform(prepared.curl.get());
    return finish(target, prepared.curl.get(), code, {});
}

common::Expected<ApiResponse> api_request_cancellable(
    const ApiTarget& target, std::string_view method, const std::string& path,
    const std::string& payload, const sandbox::CancelToken& cancel,
    const std::function<AfterCancel()>& on_cancel) {
    std::string body;
    auto prepared = SANDGATE_TRY(prepare(target, method, path, payload, &body));
    MultiHandle multi(curl_multi_init());
    if (!multi) return fail(ErrorKind::unavailable, "cannot make a libcurl multi handle");
    CURL* curl = prepared.curl.get();
    curl_multi_add_handle(multi.get(), curl);
    // Removed before either handle is cleaned up, whichever way this returns.
    struct Attached {
        CURLM* multi;
        CURL* curl;
        ~Attached() { curl_multi_remove_handle(multi, curl); }
    } attached{multi.get(), curl};
    bool asked = false;
    int running = 1;
    while (true) {
        if (curl_multi_perform(multi.get(), &running) != CURLM_OK)
            return fail(ErrorKind::unavailable,
                        "cannot reach the agent at " + where(target) + ": libcurl failed");
        if (running == 0) break;
        if (!asked && cancel.cancelled()) {
            asked = true;
            if (on_cancel() == AfterCancel::hang_up) return fail(ErrorKind::transient, "hung up");
        }
        // The token's fd wakes the poll at once; it stays readable once fired, so it is
        // watched only until the cancel was handled.
        curl_waitfd extra{cancel.fd(), CURL_WAIT_POLLIN, 0};
        curl_multi_poll(multi.get(), asked ? nullptr : &extra, asked ? 0 : 1, 1000, nullptr);
    }
    int left = 0;
    CURLcode code = CURLE_OK;
    while (CURLMsg* message = curl_multi_info_read(multi.get(), &left))
        if (message->msg == CURLMSG_DONE) code = message->data.result;
    return finish(target, curl, code, std::move(body));
}

std::string api_error_line(const ApiResponse& response) {
    std::string line = "HTTP " + std::to_string(response.status);
    std::string message;
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    std::string_view text;
    if (parser.parse(simdjson::padded_string(response.body)).get(doc) == simdjson::SUCCESS &&
        doc.is_object() && doc["error"].get(text) == simdjson::SUCCESS) {
        message = std::string(text);
    } else {
        message = response.body.substr(0, response.body.find('\n'));
    }
    message = one_line(std::move(message));
    return message.empty() ? line : line + ": " + message;
}

int print_api_answer(const ApiTarget& target, std::string_view program, std::string_view method,
                     const std::string& path, const std::string& payload) {
    auto response = api_request(target, method, path, payload);
    if (!response) {
        std::fprintf(stderr, "%.*s: %s\n", static_cast<int>(program.size()), program.data(),
                     response.error().message.c_str());
        return k_api_exit_unreachable;
    }
    if (!response->ok()) {
        std::fprintf(stderr, "%.*s: %s\n", static_cast<int>(program.size()), program.data(),
                     api_error_line(*response).c_str());
        return k_api_exit_failed;
    }
    std::fwrite(response->body.data(), 1, response->body.size(), stdout);
    return 0;
}

}  // namespace agent
