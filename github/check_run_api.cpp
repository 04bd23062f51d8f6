#include "github/check_run_api.hpp"

#include <simdjson.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "github/report_format.hpp"

namespace github::api {
namespace {

using common::ErrorKind;
using nlohmann::ordered_json;

std::string repo_path(const Target& target) {
    return "/repos/" + url_encode(target.repository.owner) + "/" +
           url_encode(target.repository.name);
}

std::string dump(const ordered_json& body) {
    return body.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

ordered_json annotations_json(const JobReport& report, std::size_t from) {
    const auto clamped = clamp_annotations(report);
    ordered_json out = ordered_json::array();
    const std::size_t end = std::min(clamped.size(), from + k_annotations_per_request);
    for (std::size_t i = from; i < end; ++i) {
        const auto& note = clamped[i];
        ordered_json item = {
            {"path", note.path}, {"start_line", note.start_line}, {"end_line", note.end_line}};
        if (note.start_column > 0) item["start_column"] = note.start_column;
        if (note.end_column > 0) item["end_column"] = note.end_column;
        item["annotation_level"] = to_string(note.level);
        item["message"] = note.message;
        if (!note.title.empty()) item["title"] = note.title;
        out.push_back(std::move(item));
    }
    return out;
}

ordered_json full_output(const JobReport& report) {
    ordered_json output = {{"title", check_title(report)}, {"summary", check_summary(report)}};
    if (std::string text = check_text(report); !text.empty()) output["text"] = text;
    if (!report.annotations.empty()) output["annotations"] = annotations_json(report, 0);
    return output;
}

std::string now_or(const std::optional<std::chrono::system_clock::time_point>& when) {
    return format_github_time(when.value_or(std::chrono::system_clock::now()));
}

void add_identity(ordered_json& body, const Target& target, const JobReport& report) {
    body["external_id"] = report.job_key;
    if (target.details_url) body["details_url"] = *target.details_url;
}

common::Expected<std::int64_t> read_id(const Response& response) {
    simdjson::dom::parser parser;
    std::int64_t id = 0;
    if (parser.parse(response.body)["id"].get_int64().get(id) != simdjson::SUCCESS) {
        return common::fail(ErrorKind::permanent, "GitHub's check run answer has no `id`");
    }
    return id;
}

common::Expected<void> patch(const Target& target, std::int64_t id, const ordered_json& body) {
    (void)SANDGATE_TRY(target.client.request(
        Method::patch, repo_path(target) + "/check-runs/" + std::to_string(id), dump(body)));
    return {};
}

}  // namespace

common::Expected<std::optional<std::int64_t>> find_check_run(const Target& target,
                                                             const JobReport& report) {
    std::optional<std::int64_t> found;
    std::int64_t seen = 0;
    for (int page = 1; page <= k_lookup_max_pages; ++page) {
        const std::string path = repo_path(target) + "/commits/" + url_encode(report.sha) +
                                 "/check-runs?check_name=" + url_encode(target.check_name) +
                                 "&filter=all&per_page=" + std::to_string(k_lookup_page_size) +
                                 "&page=" + std::to_string(page);
        auto response = SANDGATE_TRY(target.client.request(Method::get, path));
        simdjson::dom::parser parser;
        simdjson::dom::element root;
        simdjson::dom::array runs;
        std::int64_t total = 0;
        if (parser.parse(response.body).get(root) != simdjson::SUCCESS ||
            root["check_runs"].get_array().get(runs) != simdjson::SUCCESS ||
            root["total_count"].get_int64().get(total) != simdjson::SUCCESS) {
            return common::fail(ErrorKind::permanent,
                                "GET " + path + ": answer lacks total_count/check_runs");
        }
        for (auto run : runs) {
            ++seen;
            std::string_view external;
            std::int64_t id = 0;
            if (run["external_id"].get_string().get(external) == simdjson::SUCCESS &&
                external == report.job_key && run["id"].get_int64().get(id) == simdjson::SUCCESS) {
                found = std::max(found.value_or(id), id);
            }
        }
        if (runs.size() == 0 || seen >= total) break;
    }
    return found;
}

common::Expected<std::int64_t> create_in_progress(const Target& target, const JobReport& report) {
    ordered_json body = {{"name", target.check_name}, {"head_sha", report.sha}};
    add_identity(body, target, report);
    body["status"] = "in_progress";
    body["started_at"] = now_or(report.started_at);
    body["output"] = {{"title", check_title(report)}, {"summary", check_summary(report)}};
    auto response =
        target.client.request(Method::post, repo_path(target) + "/check-runs", dump(body));
    if (!response) return std::unexpected(response.error());
    return read_id(*response);
}

common::Expected<void> reopen(const Target& target, std::int64_t id, const JobReport& report) {
    ordered_json body = {{"name", target.check_name}};
    add_identity(body, target, report);
    body["status"] = "in_progress";
    body["started_at"] = now_or(report.started_at);
    body["output"] = {{"title", check_title(report)}, {"summary", check_summary(report)}};
    return patch(target, id, body);
}

common::Expected<std::int64_t> create_completed(const Target& target, const JobReport& report) {
    ordered_json body = {{"name", target.check_name}, {"head_sha", report.sha}};
    add_identity(body, target, report);
    body["status"] = "completed";
    body["conclusion"] = to_string(report.conclusion.value_or(Conclusion::failure));
    if (report.started_at) body["started_at"] = format_github_time(*report.started_at);
    body["completed_at"] = now_or(report.completed_at);
    body["output"] = full_output(report);
    auto response =
        target.client.request(Method::post, repo_path(target) + "/check-runs", dump(body));
    if (!response) return std::unexpected(response.error());
    return read_id(*response);
}

common::Expected<void> conclude(const Target& target, std::int64_t id, const JobReport& report) {
    ordered_json body = {{"name", target.check_name}};
    add_identity(body, target, report);
    body["status"] = "completed";
    body["conclusion"] = to_string(report.conclusion.value_or(Conclusion::failure));
    body["completed_at"] = now_or(report.completed_at);
    body["output"] = full_output(report);
    return patch(target, id, body);
}

common::Expected<void> add_annotations(const Target& target, std::int64_t id,
                                       const JobReport& report, std::size_t from) {
    ordered_json body = {{"output",
                          {{"title", check_title(report)},
                           {"summary", check_summary(report)},
                           {"annotations", annotations_json(report, from)}}}};
    return patch(target, id, body);
}

common::Expected<void> conclude_plainly(const Target& target, std::int64_t id,
                                        const JobReport& report, const std::string& why) {
    ordered_json body = {
        {"status", "completed"},
        {"conclusion", to_string(report.conclusion.value_or(Conclusion::failure))},
        {"completed_at", now_or(report.completed_at)},
        {"output",
         {{"title", check_title(report)},
          {"summary", utf8_prefix("GitHub refused the full report: " + why, k_max_output_chars)}}}};
    return patch(target, id, body);
}

common::Expected<void> post_status(const Target& target, const JobReport& report) {
    std::string state = "pending";
    if (report.status == JobStatus::completed) {
        switch (report.conclusion.value_or(Conclusion::failure)) {
            case Conclusion::success:
            case Conclusion::skipped:
                state = "success";
                break;
            case Conclusion::failure:
            case Conclusion::timed_out:
                state = "failure";
                break;
            case Conclusion::cancelled:
                state = "error";
                break;
        }
    }
    ordered_json body = {{"state", state}};
    if (target.details_url) body["target_url"] = *target.details_url;
    body["description"] = status_description(report);
    body["context"] = target.check_name;
    (void)SANDGATE_TRY(target.client.request(
        Method::post, repo_path(target) + "/statuses/" + url_encode(report.sha), dump(body)));
    return {};
}

}  // namespace github::api
