// `sandgate jobs submit|list|get|cancel|log|health`: a client of the agent's API (api.hpp),
// over the agent's unix socket (default) or http://127.0.0.1:PORT with a bearer token from a
// file. `health` is GET /healthz (the Dockerfile's HEALTHCHECK): exit 0 when the agent answers
// 200, 3 when it cannot be reached, 1 for any other answer.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "agent/cli/api_client.hpp"
#include "agent/cli/cli11.hpp"
#include "agent/cli/commands.hpp"

namespace agent {

namespace {

int print(const ApiTarget& target, std::string_view method, const std::string& path,
          const std::string& payload = "") {
    return print_api_answer(target, "sandgate jobs", method, path, payload);
}

int stream(const ApiTarget& target, const std::string& path) {
    auto response = api_stream(target, path);
    if (!response) {
        std::fprintf(stderr, "sandgate jobs: %s\n", response.error().message.c_str());
        return k_api_exit_unreachable;
    }
    return response->ok() ? 0 : k_api_exit_failed;
}

}  // namespace

int jobs_command(CommandArgs args) {
    CLI::App app{"talk to a running `sandgate agent`: submit, list, get, cancel, log, health",
                 "sandgate jobs"};
    app.require_subcommand(1);
    ApiTargetOptions target_options;
    add_api_target_options(app, target_options);
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
                       "the base: a push's `before` (40 zeros: a new branch), a pull request's or "
                       "merge group's base");
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
    auto* health = app.add_subcommand("health", "exit 0 when the agent answers GET /healthz");
    try {
        app.parse(static_cast<int>(args.size()), args.data());
    } catch (const CLI::ParseError& error) {
        const int code = app.exit(error);
        return code == 0 ? 0 : k_api_exit_usage;
    }
    auto target = resolve_api_target(target_options);
    if (!target) {
        std::fprintf(stderr, "sandgate jobs: %s\n", target.error().message.c_str());
        return k_api_exit_usage;
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
        return print(*target, "POST", "/v1/jobs", body.dump());
    }
    if (list->parsed())
        return print(*target, "GET", "/v1/jobs" + (state.empty() ? "" : "?state=" + state));
    if (get->parsed()) return print(*target, "GET", job_path);
    if (health->parsed()) return print(*target, "GET", "/healthz");
    if (cancel->parsed()) return print(*target, "POST", job_path + "/cancel");
    return stream(*target, job_path + "/log" + (follow ? "?follow=1" : ""));
}

}  // namespace agent
