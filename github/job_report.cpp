#include "github/job_report.hpp"

#include <simdjson.h>

#include <algorithm>
#include <cctype>
#include <ctime>
#include <nlohmann/json.hpp>

namespace github {
namespace {

using common::ErrorKind;
using nlohmann::ordered_json;

bool all_digits(std::string_view text) {
    return !text.empty() &&
           std::ranges::all_of(text, [](unsigned char c) { return std::isdigit(c) != 0; });
}

template <typename Enum, size_t N>
std::optional<Enum> lookup(const std::pair<std::string_view, Enum> (&table)[N],
                           std::string_view text) {
    for (const auto& [name, value] : table) {
        if (name == text) return value;
    }
    return std::nullopt;
}

constexpr std::pair<std::string_view, Conclusion> k_conclusions[] = {
    {"success", Conclusion::success},
    {"failure", Conclusion::failure},
    {"timed_out", Conclusion::timed_out},
    {"cancelled", Conclusion::cancelled},
    {"skipped", Conclusion::skipped}};
constexpr std::pair<std::string_view, AnnotationLevel> k_levels[] = {
    {"notice", AnnotationLevel::notice},
    {"warning", AnnotationLevel::warning},
    {"failure", AnnotationLevel::failure},
    {"error", AnnotationLevel::failure},
    {"warn", AnnotationLevel::warning}};

std::int64_t epoch_ms(std::chrono::system_clock::time_point when) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(when.time_since_epoch()).count();
}

ordered_json step_json(const StepReport& step) {
    ordered_json out = {
        {"name", step.name},
        {"conclusion", to_string(step.conclusion)},
        {"exit_code", step.exit_code ? ordered_json(*step.exit_code) : ordered_json()},
        {"duration_ms", step.duration.count()},
        {"bytes_out", step.bytes_out},
        {"bytes_err", step.bytes_err},
        {"stdout_truncated", step.stdout_truncated},
        {"stderr_truncated", step.stderr_truncated},
        {"skip_markers", step.skip_markers},
        {"skip_reasons", step.skip_reasons}};
    return out;
}

ordered_json annotation_json(const Annotation& note) {
    ordered_json out = {
        {"path", note.path},   {"start_line", note.start_line},  {"end_line", note.end_line},
        {"title", note.title}, {"level", to_string(note.level)}, {"message", note.message}};
    if (note.start_column) out["start_column"] = *note.start_column;
    if (note.end_column) out["end_column"] = *note.end_column;
    return out;
}

// simdjson field readers that name the field on error.
struct Reader {
    std::string error;

    std::string text(simdjson::dom::element object, const char* field) {
        std::string_view value;
        if (object[field].get_string().get(value) != simdjson::SUCCESS) fail(field);
        return std::string(value);
    }
    std::optional<std::int64_t> integer(simdjson::dom::element object, const char* field) {
        simdjson::dom::element value;
        if (object[field].get(value) != simdjson::SUCCESS || value.is_null()) return std::nullopt;
        std::int64_t number = 0;
        if (value.get_int64().get(number) != simdjson::SUCCESS) fail(field);
        return number;
    }
    bool boolean(simdjson::dom::element object, const char* field) {
        bool value = false;
        if (object[field].get_bool().get(value) != simdjson::SUCCESS) fail(field);
        return value;
    }
    void fail(const char* field) {
        if (error.empty()) error = std::string("field `") + field + "` missing or mistyped";
    }
};

StepReport read_step(Reader& reader, simdjson::dom::element object) {
    StepReport step;
    step.name = reader.text(object, "name");
    auto conclusion = parse_conclusion(reader.text(object, "conclusion"));
    if (!conclusion) reader.fail("conclusion");
    step.conclusion = conclusion.value_or(Conclusion::failure);
    if (auto code = reader.integer(object, "exit_code")) step.exit_code = static_cast<int>(*code);
    step.duration = std::chrono::milliseconds(reader.integer(object, "duration_ms").value_or(0));
    step.bytes_out = static_cast<std::uint64_t>(reader.integer(object, "bytes_out").value_or(0));
    step.bytes_err = static_cast<std::uint64_t>(reader.integer(object, "bytes_err").value_or(0));
    step.stdout_truncated = reader.boolean(object, "stdout_truncated");
    step.stderr_truncated = reader.boolean(object, "stderr_truncated");
    simdjson::dom::array markers;
    step.skip_markers =
        static_cast<std::uint64_t>(reader.integer(object, "skip_markers").value_or(0));
    if (object["skip_reasons"].get_array().get(markers) == simdjson::SUCCESS) {
        for (auto marker : markers) {
            std::string_view text;
            if (marker.get_string().get(text) == simdjson::SUCCESS)
                step.skip_reasons.emplace_back(text);
        }
    }
    return step;
}

Annotation read_annotation(Reader& reader, simdjson::dom::element object) {
    Annotation note;
    note.path = reader.text(object, "path");
    note.start_line = static_cast<int>(reader.integer(object, "start_line").value_or(1));
    note.end_line = static_cast<int>(reader.integer(object, "end_line").value_or(note.start_line));
    if (auto column = reader.integer(object, "start_column"))
        note.start_column = static_cast<int>(*column);
    if (auto column = reader.integer(object, "end_column"))
        note.end_column = static_cast<int>(*column);
    note.title = reader.text(object, "title");
    auto level = parse_annotation_level(reader.text(object, "level"));
    if (!level) reader.fail("level");
    note.level = level.value_or(AnnotationLevel::failure);
    note.message = reader.text(object, "message");
    return note;
}

}  // namespace

std::string_view to_string(JobStatus status) {
    return status == JobStatus::completed ? "completed" : "in_progress";
}

std::string_view to_string(Conclusion conclusion) {
    for (const auto& [name, value] : k_conclusions) {
        if (value == conclusion) return name;
    }
    return "failure";
}

std::string_view to_string(AnnotationLevel level) {
    for (const auto& [name, value] : k_levels) {
        if (value == level) return name;
    }
    return "failure";
}

std::optional<JobStatus> parse_job_status(std::string_view text) {
    if (text == "in_progress") return JobStatus::in_progress;
    if (text == "completed") return JobStatus::completed;
    return std::nullopt;
}

std::optional<Conclusion> parse_conclusion(std::string_view text) {
    return lookup(k_conclusions, text);
}

std::optional<AnnotationLevel> parse_annotation_level(std::string_view text) {
    return lookup(k_levels, text);
}

common::Expected<void> validate(const JobReport& report) {
    auto missing = [](const char* field) {
        return common::fail(ErrorKind::invalid_input,
                            std::string("job report: `") + field + "` is empty");
    };
    if (report.workflow.empty()) return missing("workflow");
    if (report.job.empty()) return missing("job");
    if (report.job_key.empty()) return missing("job_key");
    if (report.sha.empty()) return missing("sha");
    if (report.status == JobStatus::completed && !report.conclusion) {
        return common::fail(ErrorKind::invalid_input,
                            "job report: completed without a `conclusion`");
    }
    return {};
}

std::string to_json(const JobReport& report) {
    ordered_json steps = ordered_json::array();
    for (const auto& step : report.steps) steps.push_back(step_json(step));
    ordered_json notes = ordered_json::array();
    for (const auto& note : report.annotations) notes.push_back(annotation_json(note));
    auto optional_time = [](const auto& when) {
        return when ? ordered_json(epoch_ms(*when)) : ordered_json();
    };
    ordered_json out = {
        {"workflow", report.workflow},
        {"workflow_path", report.workflow_path},
        {"job", report.job},
        {"job_key", report.job_key},
        {"sha", report.sha},
        {"status", to_string(report.status)},
        {"conclusion",
         report.conclusion ? ordered_json(to_string(*report.conclusion)) : ordered_json()},
        {"exit_code", report.exit_code ? ordered_json(*report.exit_code) : ordered_json()},
        {"failing_step", report.failing_step},
        {"log_tail", report.log_tail},
        {"started_at_ms", optional_time(report.started_at)},
        {"completed_at_ms", optional_time(report.completed_at)},
        {"steps", steps},
        {"annotations", notes}};
    // Invalid UTF-8 (raw process output) is replaced rather than thrown on.
    return out.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

common::Expected<JobReport> job_report_from_json(std::string_view json) {
    simdjson::dom::parser parser;
    simdjson::dom::element root;
    if (auto error = parser.parse(json.data(), json.size()).get(root); error) {
        return common::fail(ErrorKind::invalid_input,
                            std::string("job report: not JSON: ") + simdjson::error_message(error));
    }
    Reader reader;
    JobReport report;
    report.workflow = reader.text(root, "workflow");
    report.workflow_path = reader.text(root, "workflow_path");
    report.job = reader.text(root, "job");
    report.job_key = reader.text(root, "job_key");
    report.sha = reader.text(root, "sha");
    auto status = parse_job_status(reader.text(root, "status"));
    if (!status) reader.fail("status");
    report.status = status.value_or(JobStatus::in_progress);
    std::string_view conclusion;
    if (root["conclusion"].get_string().get(conclusion) == simdjson::SUCCESS) {
        report.conclusion = parse_conclusion(conclusion);
        if (!report.conclusion) reader.fail("conclusion");
    }
    if (auto code = reader.integer(root, "exit_code")) report.exit_code = static_cast<int>(*code);
    report.failing_step = reader.text(root, "failing_step");
    report.log_tail = reader.text(root, "log_tail");
    using std::chrono::milliseconds;
    using std::chrono::system_clock;
    if (auto ms = reader.integer(root, "started_at_ms"))
        report.started_at = system_clock::time_point(milliseconds(*ms));
    if (auto ms = reader.integer(root, "completed_at_ms"))
        report.completed_at = system_clock::time_point(milliseconds(*ms));
    simdjson::dom::array items;
    if (root["steps"].get_array().get(items) == simdjson::SUCCESS) {
        for (auto item : items) report.steps.push_back(read_step(reader, item));
    }
    if (root["annotations"].get_array().get(items) == simdjson::SUCCESS) {
        for (auto item : items) report.annotations.push_back(read_annotation(reader, item));
    }
    if (!reader.error.empty())
        return common::fail(ErrorKind::invalid_input, "job report: " + reader.error);
    return report;
}

std::string format_github_time(std::chrono::system_clock::time_point when) {
    const std::time_t seconds = std::chrono::system_clock::to_time_t(when);
    std::tm parts{};
    ::gmtime_r(&seconds, &parts);
    char buffer[32];
    std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%SZ", &parts);
    return buffer;
}

std::optional<std::chrono::system_clock::time_point> parse_github_time(std::string_view text) {
    std::tm parts{};
    const std::string copy(text);
    const char* end = ::strptime(copy.c_str(), "%Y-%m-%dT%H:%M:%S", &parts);
    if (end == nullptr) return std::nullopt;
    std::string_view zone(end);
    if (!zone.empty() && zone.front() == '.') {  // fractional seconds: ignored
        zone.remove_prefix(1);
        while (!zone.empty() && std::isdigit(static_cast<unsigned char>(zone.front()))) {
            zone.remove_prefix(1);
        }
    }
    long offset = 0;
    if (zone.size() == 6 && (zone[0] == '+' || zone[0] == '-') && zone[3] == ':' &&
        all_digits(zone.substr(1, 2)) && all_digits(zone.substr(4, 2))) {
        const auto two_digits = [](std::string_view d) { return (d[0] - '0') * 10 + (d[1] - '0'); };
        offset = (two_digits(zone.substr(1, 2)) * 60L + two_digits(zone.substr(4, 2))) * 60L;
        if (zone[0] == '-') offset = -offset;
    } else if (zone != "Z") {
        return std::nullopt;
    }
    // system_clock counts nanoseconds (about 1678..2262): a year outside it, or an offset of a
    // day or more, is no time GitHub writes, and would overflow the conversion below.
    if (parts.tm_year < 70 || parts.tm_year > 2200 - 1900 || offset <= -86400 || offset >= 86400)
        return std::nullopt;
    const time_t utc = ::timegm(&parts);
    if (utc == static_cast<time_t>(-1)) return std::nullopt;
    return std::chrono::system_clock::from_time_t(utc - offset);
}

}  // namespace github
