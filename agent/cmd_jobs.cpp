// `sandgate jobs submit|list|get|cancel|log`: a client of the agent's API (api.hpp), over the
// agent's unix socket (default) or http://127.0.0.1:PORT with a bearer token from a file.
// CLI11's inlined string splitting trips g++ 12's -Wnull-dereference (a false positive).
#pragma GCC diagnostic ignored "-Wnull-dereference"
#include <CLI/CLI.hpp>
#include <curl/curl.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <memory>

#include "agent/agent_config.hpp"
#include "agent/commands.hpp"
#include "agent/daemon.hpp"

namespace agent {

namespace {

constexpr int k_exit_usage = 2;
constexpr int k_exit_failed = 1;
constexpr int k_exit_unreachable = 3;

struct CurlDeleter {
    void operator()(CURL* curl) const { curl_easy_cleanup(curl); }
};
struct ListDeleter {
    void operator()(curl_slist* list) const { curl_slist_free_all(list); }
};

struct Target {
    std::string socket;      // unix socket path, or empty
    std::string url = "http://localhost";
    std::string token;
};

std::size_t to_stdout(char* data, std::size_t size, std::size_t count, void* body) {
    if (body) static_cast<std::string*>(body)->append(data, size * count);
    else std::fwrite(data, size, count, stdout), std::fflush(stdout);
    return size * count;
}

// Performs one request. Streams the body to stdout when `body` is null.
int request(const Target& target, const std::string& method, const std::string& path,
            const std::string& payload, std::string* body) {
    std::unique_ptr<CURL, CurlDeleter> curl(curl_easy_init());
    std::unique_ptr<curl_slist, ListDeleter> headers;
    headers.reset(curl_slist_append(headers.release(), "Content-Type: application/json"));
    std::string auth;
    if (!target.token.empty()) {
        auth = "Authorization: Bearer " + target.token;
        headers.reset(curl_slist_append(headers.release(), auth.c_str()));
    }
    const std::string url = target.url + path;
    curl_easy_setopt(curl.get(), CURLOPT_URL, url.c_str());
    if (!target.socket.empty())
        curl_easy_setopt(curl.get(), CURLOPT_UNIX_SOCKET_PATH, target.socket.c_str());
    curl_easy_setopt(curl.get(), CURLOPT_CUSTOMREQUEST, method.c_str());
    if (method == "POST") {
        curl_easy_setopt(curl.get(), CURLOPT_POSTFIELDS, payload.c_str());
        curl_easy_setopt(curl.get(), CURLOPT_POSTFIELDSIZE, static_cast<long>(payload.size()));
    }
    curl_easy_setopt(curl.get(), CURLOPT_HTTPHEADER, headers.get());
    curl_easy_setopt(curl.get(), CURLOPT_WRITEFUNCTION, to_stdout);
    curl_easy_setopt(curl.get(), CURLOPT_WRITEDATA, body);
    const auto code = curl_easy_perform(curl.get());
    if (code != CURLE_OK) {
        std::fprintf(stderr, "sandgate jobs: cannot reach the agent at %s: %s\n",
                     target.socket.empty() ? target.url.c_str() : target.socket.c_str(),
                     curl_easy_strerror(code));
        return k_exit_unreachable;
    }
    long status = 0;
    curl_easy_getinfo(curl.get(), CURLINFO_RESPONSE_CODE, &status);
    return status >= 200 && status < 300 ? 0 : k_exit_failed;
}

int print(const Target& target, const std::string& method, const std::string& path,
          const std::string& payload = "") {
    std::string body;
    const int status = request(target, method, path, payload, &body);
    if (status == k_exit_unreachable) return status;
    std::fwrite(body.data(), 1, body.size(), status == 0 ? stdout : stderr);
    return status;
}

}  // namespace

int jobs_command(CommandArgs args) {
    CLI::App app{"talk to a running `sandgate agent`: submit, list, get, cancel, log",
                 "sandgate jobs"};
    app.require_subcommand(1);
    std::string config_path, socket, url, token_file;
    app.add_option("--config", config_path, "the agent's configuration (finds its socket)");
    app.add_option("--socket", socket, "the agent's API unix socket");
    app.add_option("--url", url, "the agent's API on http://127.0.0.1:PORT");
    app.add_option("--token-file", token_file, "bearer token file (0600) for --url");
    nlohmann::ordered_json submit_body;
    std::string repo, sha, job, ref, event = "push", state, base_sha, base_ref;
    std::int64_t attempt = 1, id = 0;
    bool follow = false;
    auto* submit = app.add_subcommand("submit", "queue a gate job");
    submit->add_option("--repo", repo, "owner/name, a URL or a path")->required();
    submit->add_option("--sha", sha, "the commit")->required();
    submit->add_option("-j,--job", job, "one workflow job (default: all)");
    submit->add_option("--ref", ref, "the ref the commit is on");
    submit->add_option("--event", event, "push, pull_request or merge_group");
    submit->add_option("--attempt", attempt, "attempt number (default 1)");
    submit->add_option("--base-sha", base_sha,
                       "the base: a push's `before` (40 zeros: a new branch), a pull request's or merge group's base");
    submit->add_option("--base-ref", base_ref, "the base branch of a pull request or merge group");
    auto* list = app.add_subcommand("list", "list jobs");
    list->add_option("--state", state, "only jobs in this state");
    auto* get = app.add_subcommand("get", "show one job with its evidence");
    get->add_option("id", id)->required();
    auto* cancel = app.add_subcommand("cancel", "cancel a job");
    cancel->add_option("id", id)->required();
    auto* log = app.add_subcommand("log", "print a job's log");
    log->add_option("id", id)->required();
    log->add_flag("-f,--follow", follow, "keep streaming until the job ends");
    try {
        app.parse(static_cast<int>(args.size()), args.data());
    } catch (const CLI::ParseError& error) {
        const int code = app.exit(error);
        return code == 0 ? 0 : k_exit_usage;
    }
    Target target;
    if (!url.empty()) {
        target.url = url;
        if (!token_file.empty()) {
            auto token = read_secret_file(token_file);
            if (!token) {
                std::fprintf(stderr, "sandgate jobs: %s\n", token.error().message.c_str());
                return k_exit_usage;
            }
            target.token = *token;
        }
    } else if (!socket.empty()) {
        target.socket = socket;
    } else {
        AgentConfig config;
        if (!config_path.empty()) {
            auto loaded = load_agent_config(config_path);
            if (!loaded) {
                std::fprintf(stderr, "sandgate jobs: %s\n", loaded.error().message.c_str());
                return k_exit_usage;
            }
            config = *loaded;
        } else {
            config.state_dir = default_state_dir();
        }
        target.socket = api_socket_path(config).string();
    }
    const std::string job_path = "/v1/jobs/" + std::to_string(id);
    if (submit->parsed()) {
        nlohmann::ordered_json body;
        body["repository"] = repo;
        body["sha"] = sha;
        body["workflow_job"] = job;
        body["ref"] = ref;
        body["event"] = event;
        body["attempt"] = attempt;
        if (!base_sha.empty()) body["base_sha"] = base_sha;  // the API validates both
        if (!base_ref.empty()) body["base_ref"] = base_ref;
        return print(target, "POST", "/v1/jobs", body.dump());
    }
    if (list->parsed()) return print(target, "GET", "/v1/jobs" + (state.empty() ? "" : "?state=" + state));
    if (get->parsed()) return print(target, "GET", job_path);
    if (cancel->parsed()) return print(target, "POST", job_path + "/cancel");
    return request(target, "GET", job_path + "/log" + (follow ? "?follow=1" : ""), "", nullptr);
}

}  // namespace agent
