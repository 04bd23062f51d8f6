#pragma once
// The agent's HTTP API (served by http_server.hpp). JSON in (simdjson) and out
// (nlohmann::ordered_json); errors are {"error": "..."} with a 4xx/5xx status.
//
//   GET    /healthz                      liveness, no auth
//   GET    /metrics                      Prometheus text: jobs by state, step durations,
//                                        sandboxes alive
//   POST   /v1/jobs                      submit {repository, sha, workflow_job?, attempt?,
//                                        ref?, event?}: 201 created, 200 duplicate
//   GET    /v1/jobs[?state=&repository=&sha=&limit=&after=]
//   GET    /v1/jobs/{id}                 the job, with its policy and evidence
//   POST   /v1/jobs/{id}/cancel
//   GET    /v1/jobs/{id}/log[?follow=1]  text/plain; follow streams until the job ends
//   POST   /v1/sandboxes                 create {identity:{repository, sha, run_id, attempt,
//                                        job_id}, ttl_s?, network?, job?}
//   GET    /v1/sandboxes, /v1/sandboxes/{id}
//   POST   /v1/sandboxes/{id}/exec       {identity, argv|shell, env, cwd, timeout_ms,
//                                        output_limit, stdin_text}: the RunResult (output
//                                        base64) or 409 with the refusal (503 when
//                                        it is `unavailable`: the broker lacked a resource)
//                                        exec_id? names the exec (else "ex-..." is
//                                        chosen); the answer carries exec_id, and when the
//                                        step was stopped, cancelled_by. A client that hangs up
//                                        cancels its exec.
//   POST   /v1/sandboxes/{id}/execs/{exec_id}/cancel   (also DELETE .../execs/{exec_id})
//                                        200 cancel_requested (the exec answers cancelled:
//                                        TERM, KILL after its kill grace); 404 unknown exec;
//                                        409 finished
//   DELETE /v1/sandboxes/{id}
//   POST   /webhook                      GitHub webhooks, verified by X-Hub-Signature-256
//
// Authentication: when a token is configured (always on TCP), every route but /healthz and
// /webhook needs "Authorization: Bearer TOKEN" (compared in constant time); on the unix socket
// the socket's 0600 mode in a 0700 directory is the authentication. No answer ever carries a
// secret value or stdin text.

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "agent/api/exec_registry.hpp"
#include "agent/api/http_server.hpp"
#include "agent/sandboxes/sandbox_manager.hpp"
#include "agent/store/job_store.hpp"

namespace agent {

struct ApiConfig {
    std::filesystem::path log_dir;               // job logs: log_dir/<id>.log
    std::optional<std::string> token;            // bearer token; required when set
    std::optional<std::string> webhook_secret;   // unset: /webhook answers 404
    std::optional<std::string> pr_label;         // only pull requests with this label
    std::vector<std::string> repositories;       // accepted "owner/name"; empty: any
    std::function<void()> on_change;             // a job was submitted or cancelled
    std::function<std::string()> agent_metrics;  // the daemon's own /metrics lines
    sandbox::Policy sandbox_policy;              // the policy of API-created sandboxes
};

// A job log request's mode: LogFollow::yes streams on until the job is finished.
enum class LogFollow { no, yes };

class Api {
public:
    Api(ApiConfig config, JobQueue& queue, SandboxManager& sandboxes);
    HttpResponse handle(const HttpRequest& request);

    const ApiConfig& config() const { return m_config; }

private:
    HttpResponse jobs(const HttpRequest& request, const std::vector<std::string>& parts);
    HttpResponse sandboxes(const HttpRequest& request, const std::vector<std::string>& parts);
    HttpResponse create_sandbox(const HttpRequest& request);
    HttpResponse sandbox_exec(const HttpRequest& request, const std::string& id);
    HttpResponse cancel_exec(const std::string& id, const std::string& exec_id);
    HttpResponse webhook(const HttpRequest& request);
    HttpResponse metrics();
    HttpResponse submit(const HttpRequest& request);
    HttpResponse log(std::int64_t id, LogFollow follow);
    void changed() const;

    ApiConfig m_config;
    JobQueue& m_queue;
    SandboxManager& m_sandboxes;
    ExecRegistry m_execs;  // the sandbox execs in flight, for their cancel
};

std::filesystem::path job_log_path(const std::filesystem::path& log_dir, std::int64_t id);

// Helpers shared by the API's source files.
HttpResponse json_response(int status, const nlohmann::ordered_json& body);
HttpResponse error_response(int status, std::string_view message);
nlohmann::ordered_json job_to_json(const Job& job);

}  // namespace agent
