#include "agent/api/api.hpp"

#include <fcntl.h>
#include <simdjson.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <thread>

#include "agent/api/api_bodies.hpp"
#include "agent/daemon/job_base.hpp"
#include "agent/daemon/webhook_events.hpp"
#include "common/json_convert.hpp"
#include "github/webhook.hpp"
#include "jobs/workflow/merge_queue.hpp"

namespace agent {

using Json = nlohmann::ordered_json;

namespace {

constexpr std::chrono::milliseconds k_follow_poll{200};
constexpr std::size_t k_log_chunk = 64 * 1024;

std::vector<std::string> split_path(std::string_view path) {
    std::vector<std::string> parts;
    std::size_t start = 0;
    while (start <= path.size()) {
        const auto end = path.find('/', start);
        const auto part = path.substr(start, end == std::string_view::npos ? end : end - start);
        if (!part.empty()) parts.emplace_back(part);
        if (end == std::string_view::npos) break;
        start = end + 1;
    }
    return parts;
}

std::optional<std::int64_t> parse_int(std::string_view text) {
    std::int64_t value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
    return value;
}

// Streams a log file from the start; with follow, waits for more until the job is finished.
BodyStream log_stream(std::filesystem::path path, std::int64_t id, JobQueue& queue,
                      LogFollow follow) {
    auto fd = std::make_shared<common::Fd>(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    return [fd, path = std::move(path), id, &queue, follow]() -> std::optional<std::string> {
        if (!*fd) fd->reset(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
        std::string chunk(k_log_chunk, '\0');
        const ssize_t got = *fd ? ::read(fd->get(), chunk.data(), chunk.size()) : 0;
        if (got > 0) {
            chunk.resize(static_cast<std::size_t>(got));
            return chunk;
        }
        if (follow == LogFollow::no) return std::nullopt;
        auto job = queue.get(id);
        // Finished and read to the end: one last read catches what was written before the end.
        if (!job || !*job || is_terminal((*job)->state)) {
            const ssize_t last = *fd ? ::read(fd->get(), chunk.data(), chunk.size()) : 0;
            if (last <= 0) return std::nullopt;
            chunk.resize(static_cast<std::size_t>(last));
            return chunk;
        }
        std::this_thread::sleep_for(k_follow_poll);
        return std::string();
    };
}

}  // namespace

std::filesystem::path job_log_path(const std::filesystem::path& log_dir, std::int64_t id) {
    return log_dir / (std::to_string(id) + ".log");
}

HttpResponse json_response(int status, const Json& body) {
    HttpResponse response;
    response.status = status;
    response.body = body.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
    return response;
}

HttpResponse error_response(int status, std::string_view message) {
    Json body;
    body["error"] = message;
    return json_response(status, body);
}

Json job_to_json(const Job& job) {
    Json json;
    json["id"] = job.id;
    json["repository"] = job.spec.key.repository;
    json["sha"] = job.spec.key.sha;
    json["workflow_job"] = job.spec.key.workflow_job;
    json["attempt"] = job.spec.key.attempt;
    json["ref"] = job.spec.ref;
    json["event"] = job.spec.event;
    json["source"] = job.spec.source;
    json["state"] = to_string(job.state);
    json["cancel_requested"] = job.cancel_requested;
    json["reason"] = job.reason;
    json["claims"] = job.claims;
    json["lease_owner"] = job.lease_owner;
    json["lease_expires_ms"] = job.lease_expires_ms;
    json["created_ms"] = job.created_ms;
    json["started_ms"] = job.started_ms;
    json["finished_ms"] = job.finished_ms;
    json["payload"] = common::to_ordered_json_or_null(job.spec.payload_json);
    json["result"] = common::to_ordered_json_or_null(job.result_json);
    json["policy"] =
        job.policy_json.empty() ? Json(nullptr) : common::to_ordered_json_or_null(job.policy_json);
    return json;
}

Api::Api(ApiConfig config, JobQueue& queue, SandboxManager& sandboxes)
    : m_config(std::move(config)), m_queue(queue), m_sandboxes(sandboxes) {}

void Api::changed() const {
    if (m_config.on_change) m_config.on_change();
}

HttpResponse Api::handle(const HttpRequest& request) {
    const auto parts = split_path(request.path);
    if (parts.size() == 1 && parts[0] == "healthz") return json_response(200, {{"status", "ok"}});
    if (parts.size() == 1 && parts[0] == "webhook") {
        if (request.method != "POST") return error_response(405, "use POST");
        return webhook(request);
    }
    if (m_config.token) {
        const auto it = request.headers.find("authorization");
        if (it == request.headers.end() || !bearer_matches(it->second, *m_config.token)) {
            auto response = error_response(401, "a bearer token is required");
            response.headers["WWW-Authenticate"] = "Bearer";
            return response;
        }
    }
    if (parts.size() == 1 && parts[0] == "metrics") return metrics();
    if (parts.size() >= 2 && parts[0] == "v1" && parts[1] == "jobs") return jobs(request, parts);
    if (parts.size() >= 2 && parts[0] == "v1" && parts[1] == "sandboxes")
        return sandboxes(request, parts);
    return error_response(404, "no route " + request.method + " " + request.path);
}

HttpResponse Api::jobs(const HttpRequest& request, const std::vector<std::string>& parts) {
    if (parts.size() == 2 && request.method == "POST") return submit(request);
    if (parts.size() == 2 && request.method == "GET") {
        JobFilter filter;
        const auto& q = request.query;
        if (auto it = q.find("state"); it != q.end()) {
            filter.state = parse_job_state(it->second);
            if (!filter.state)
                return error_response(400, "query state: unknown state " + it->second);
        }
        if (auto it = q.find("repository"); it != q.end()) filter.repository = it->second;
        if (auto it = q.find("sha"); it != q.end()) filter.sha = it->second;
        if (auto it = q.find("limit"); it != q.end()) {
            auto limit = parse_int(it->second);
            if (!limit || *limit < 1 || *limit > 1000)
                return error_response(400, "query limit: an integer from 1 to 1000");
            filter.limit = static_cast<std::size_t>(*limit);
        }
        if (auto it = q.find("after"); it != q.end())
            filter.after_id = parse_int(it->second).value_or(0);
        auto jobs = m_queue.list(filter);
        if (!jobs) return error_response(503, jobs.error().message);
        Json list = Json::array();
        for (const auto& job : *jobs) list.push_back(job_to_json(job));
        return json_response(200, {{"jobs", std::move(list)}});
    }
    const auto id = parts.size() >= 3 ? parse_int(parts[2]) : std::nullopt;
    if (!id) return error_response(404, "no route " + request.method + " " + request.path);
    auto job = m_queue.get(*id);
    if (!job) return error_response(503, job.error().message);
    if (!*job) return error_response(404, "no job " + parts[2]);
    if (parts.size() == 3 && request.method == "GET") {
        auto json = job_to_json(**job);
        Json events = Json::array();
        if (auto list = m_queue.events(*id))
            for (const auto& event : *list)
                events.push_back({{"at_ms", event.at_ms},
                                  {"kind", event.kind},
                                  {"body", common::to_ordered_json_or_null(event.body_json)}});
        json["events"] = std::move(events);
        return json_response(200, json);
    }
    if (parts.size() == 4 && parts[3] == "cancel" && request.method == "POST") {
        auto outcome = m_queue.cancel(*id, "cancelled through the API");
        if (!outcome) return error_response(503, outcome.error().message);
        changed();
        const char* text = *outcome == CancelOutcome::cancelled   ? "cancelled"
                           : *outcome == CancelOutcome::requested ? "cancel_requested"
                                                                  : "already_finished";
        return json_response(200, {{"id", *id}, {"outcome", text}});
    }
    if (parts.size() == 4 && parts[3] == "log" && request.method == "GET") {
        const auto it = request.query.find("follow");
        const bool follow =
            it != request.query.end() && (it->second == "1" || it->second == "true");
        return log(*id, follow ? LogFollow::yes : LogFollow::no);
    }
    return error_response(404, "no route " + request.method + " " + request.path);
}

HttpResponse Api::submit(const HttpRequest& request) {
    auto spec = read_job_submission(request.body);
    if (!spec) return error_response(400, spec.error());
    auto submitted = m_queue.submit(*spec);
    if (!submitted) return error_response(503, submitted.error().message);
    changed();
    auto json = job_to_json(submitted->job);
    json["duplicate"] = submitted->outcome == SubmitOutcome::duplicate;
    return json_response(submitted->outcome == SubmitOutcome::created ? 201 : 200, json);
}

HttpResponse Api::log(std::int64_t id, LogFollow follow) {
    HttpResponse response;
    response.content_type = "text/plain; charset=utf-8";
    response.stream = log_stream(job_log_path(m_config.log_dir, id), id, m_queue, follow);
    return response;
}

HttpResponse Api::webhook(const HttpRequest& request) {
    if (!m_config.webhook_secret) return error_response(404, "webhooks are not configured");
    const auto signature = request.headers.find("x-hub-signature-256");
    if (signature == request.headers.end())
        return error_response(401, "X-Hub-Signature-256 is missing");
    const auto check =
        github::verify_webhook_signature(*m_config.webhook_secret, request.body, signature->second);
    if (check != github::SignatureCheck::valid)
        return error_response(401, check == github::SignatureCheck::malformed
                                       ? "X-Hub-Signature-256 is malformed"
                                       : "X-Hub-Signature-256 does not match");
    const auto event_header = request.headers.find("x-github-event");
    const std::string event = event_header == request.headers.end() ? "" : event_header->second;
    if (event == "ping") return json_response(200, {{"pong", true}});
    auto action = webhook_action(event, request.body, {m_config.pr_label, m_config.repositories});
    if (!action) return error_response(400, action.error().message);
    Json answer;
    answer["event"] = event;
    switch (action->verb) {
        case WebhookVerb::ignore:
            answer["ignored"] = action->reason;
            return json_response(200, answer);
        case WebhookVerb::cancel: {
            auto ids = m_queue.cancel_matching(action->spec.key.repository, action->spec.key.sha,
                                               action->reason);
            if (!ids) return error_response(503, ids.error().message);
            changed();
            answer["cancelled"] = *ids;
            return json_response(200, answer);
        }
        case WebhookVerb::rerun: {
            JobFilter filter;
            filter.repository = action->spec.key.repository;
            filter.sha = action->spec.key.sha;
            filter.limit = 1000;
            auto previous = m_queue.list(filter);
            if (!previous) return error_response(503, previous.error().message);
            const JobSpec* latest = nullptr;
            for (const auto& job : *previous) {
                if (job.spec.key.workflow_job != action->spec.key.workflow_job) continue;
                action->spec.key.attempt =
                    std::max(action->spec.key.attempt, job.spec.key.attempt + 1);
                if (!latest || job.spec.key.attempt > latest->key.attempt) latest = &job.spec;
            }
            if (latest) inherit_base(action->spec, *latest);
            [[fallthrough]];
        }
        case WebhookVerb::submit: {
            auto submitted = m_queue.submit(action->spec);
            if (!submitted) return error_response(503, submitted.error().message);
            changed();
            answer["job"] = submitted->job.id;
            answer["duplicate"] = submitted->outcome == SubmitOutcome::duplicate;
            return json_response(submitted->outcome == SubmitOutcome::created ? 201 : 200, answer);
        }
    }
    return error_response(500, "unreachable");
}

HttpResponse Api::metrics() {
    std::string text;
    text += "# HELP sandgate_jobs Jobs in the queue by state.\n# TYPE sandgate_jobs gauge\n";
    for (int i = 0; i < k_job_state_count; ++i) {
        const auto state = static_cast<JobState>(i);
        auto count = m_queue.count(state);
        text += "sandgate_jobs{state=\"" + std::string(to_string(state)) + "\"} " +
                std::to_string(count.value_or(0)) + "\n";
    }
    // The queue's (a pool's, when it is shared): owed reports, and which backend it is.
    text +=
        "# HELP sandgate_reports_owed Reports the queue still owes GitHub.\n"
        "# TYPE sandgate_reports_owed gauge\n";
    text += "sandgate_reports_owed " +
            std::to_string(m_queue.owed_reports(std::nullopt).value_or(0)) + "\n";
    text += "# HELP sandgate_queue_info The queue's backend.\n# TYPE sandgate_queue_info gauge\n";
    text += std::string("sandgate_queue_info{backend=\"") +
            (m_queue.backend() == QueueBackend::postgresql ? "postgresql" : "sqlite") + "\"} 1\n";
    if (m_config.agent_metrics) text += m_config.agent_metrics();
    const auto stats = m_sandboxes.step_stats();
    text +=
        "# HELP sandgate_step_duration_seconds Steps run in job sandboxes.\n"
        "# TYPE sandgate_step_duration_seconds histogram\n";
    for (std::size_t i = 0; i < std::size(k_step_buckets); ++i)
        text += "sandgate_step_duration_seconds_bucket{le=\"" +
                fmt::format("{}", k_step_buckets[i]) + "\"} " + std::to_string(stats.buckets[i]) +
                "\n";
    text +=
        "sandgate_step_duration_seconds_bucket{le=\"+Inf\"} " + std::to_string(stats.count) + "\n";
    text += "sandgate_step_duration_seconds_sum " + fmt::format("{}", stats.seconds_sum) + "\n";
    text += "sandgate_step_duration_seconds_count " + std::to_string(stats.count) + "\n";
    text +=
        "# HELP sandgate_sandboxes_alive Job sandboxes alive.\n"
        "# TYPE sandgate_sandboxes_alive gauge\n";
    text += "sandgate_sandboxes_alive " + std::to_string(m_sandboxes.alive()) + "\n";
    HttpResponse response;
    response.content_type = "text/plain; version=0.0.4";
    response.body = std::move(text);
    return response;
}

}  // namespace agent
