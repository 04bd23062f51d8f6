#pragma once
// JobReport: what the reporter needs to know about one job, in GitHub's terms. It is the
// github library's own input model: the agent maps the jobs/ run results onto it (github must
// not depend on jobs). Output text in it is already masked by the caller.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.hpp"

namespace github {

enum class JobStatus { in_progress, completed };
enum class Conclusion { success, failure, timed_out, cancelled, skipped };
enum class AnnotationLevel { notice, warning, failure };

std::string_view to_string(JobStatus status);
std::string_view to_string(Conclusion conclusion);
std::string_view to_string(AnnotationLevel level);
std::optional<JobStatus> parse_job_status(std::string_view text);
std::optional<Conclusion> parse_conclusion(std::string_view text);
// Also accepts the workflow-command spellings "error" (failure) and "warn".
std::optional<AnnotationLevel> parse_annotation_level(std::string_view text);

struct StepReport {
    std::string name;
    Conclusion conclusion = Conclusion::success;
    std::optional<int> exit_code;  // unset: never ran, or killed by a signal
    std::chrono::milliseconds duration{0};
    std::uint64_t bytes_out = 0;
    std::uint64_t bytes_err = 0;
    bool stdout_truncated = false;
    bool stderr_truncated = false;
    std::uint64_t skip_markers = 0;         // SKIP-UNDER-WRAP(...) lines seen
    std::vector<std::string> skip_reasons;  // their reasons, when known (may be fewer)
};

struct Annotation {
    std::string path;  // empty: the workflow file (JobReport::workflow_path) is used
    int start_line = 1;
    int end_line = 1;
    std::optional<int> start_column;
    std::optional<int> end_column;
    std::string title;
    AnnotationLevel level = AnnotationLevel::failure;
    std::string message;
};

struct JobReport {
    std::string workflow;       // the workflow's name
    std::string workflow_path;  // e.g. .github/workflows/ci.yml (for file-less annotations)
    std::string job;            // the job's display name (matrix values included)
    std::string job_key;        // stable id of this job in this gate: external_id
    std::string sha;            // the commit checked
    JobStatus status = JobStatus::in_progress;
    std::optional<Conclusion> conclusion;  // set when completed
    std::vector<StepReport> steps;
    std::vector<Annotation> annotations;
    std::optional<int> exit_code;  // the job's (its failing step's) exit code
    std::string failing_step;      // name of the step whose output tail is in log_tail
    std::string log_tail;          // masked tail of the failing step's output
    std::optional<std::chrono::system_clock::time_point> started_at;
    std::optional<std::chrono::system_clock::time_point> completed_at;
};

// Checks what GitHub would refuse or what makes a report meaningless: empty workflow, job,
// job_key or sha; completed without a conclusion. invalid_input naming the field.
common::Expected<void> validate(const JobReport& report);

// Lossless JSON round trip (for the journal). Emitted with nlohmann::ordered_json, parsed with
// simdjson; parse errors name the field.
std::string to_json(const JobReport& report);
common::Expected<JobReport> job_report_from_json(std::string_view json);

// GitHub's timestamps: "2016-07-11T22:14:10Z" (fractions and +hh:mm offsets accepted on parse).
std::optional<std::chrono::system_clock::time_point> parse_github_time(std::string_view text);
std::string format_github_time(std::chrono::system_clock::time_point when);

}  // namespace github
