#include "jobs/run/run_report.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "common/fd.hpp"
#include "sandbox/process/result_json.hpp"

namespace jobs {
namespace {

using nlohmann::ordered_json;

ordered_json annotations_json(const std::vector<Annotation>& annotations, const Masker& masker) {
    ordered_json out = ordered_json::array();
    for (const auto& a : annotations) {
        ordered_json item;
        item["level"] = std::string(to_string(a.level));
        item["message"] = masker.mask(a.message);
        if (a.title) item["title"] = masker.mask(*a.title);
        if (a.file) item["file"] = *a.file;
        if (a.line) item["line"] = *a.line;
        if (a.end_line) item["end_line"] = *a.end_line;
        if (a.column) item["col"] = *a.column;
        if (a.end_column) item["end_col"] = *a.end_column;
        if (a.code) item["code"] = masker.mask(*a.code);
        out.push_back(std::move(item));
    }
    return out;
}

ordered_json outputs_json(const NamedValues& outputs, const Masker& masker) {
    ordered_json out = ordered_json::object();
    for (const auto& [name, value] : outputs) out[name] = masker.mask(value);
    return out;
}

// The names are the step's own requests: a secret spelt into one is hidden like any other.
ordered_json egress_json(sandbox::EgressReport egress, const Masker& masker) {
    for (auto& connection : egress.connections) {
        connection.host = masker.mask(connection.host);
        connection.reason = masker.mask(connection.reason);
    }
    return sandbox::to_json(egress);
}

ordered_json step_json(const StepReport& step, const Masker& masker) {
    ordered_json out;
    out["id"] = step.id;
    out["name"] = masker.mask(step.name);
    out["stage"] = std::string(to_string(step.stage));
    out["outcome"] = std::string(to_string(step.outcome));
    out["conclusion"] = std::string(to_string(step.conclusion));
    out["exit_code"] = step.exit_code ? ordered_json(*step.exit_code) : ordered_json();
    out["duration_ms"] = step.duration.count();
    out["stdout_bytes"] = step.stdout_bytes;
    out["stderr_bytes"] = step.stderr_bytes;
    out["truncated"] = step.truncated;
    out["timed_out"] = step.timed_out;
    out["skip_markers"] = step.skip_markers;
    out["outputs"] = outputs_json(step.outputs, masker);
    out["annotations"] = annotations_json(step.annotations, masker);
    if (!step.summary.empty()) out["summary"] = masker.mask(step.summary);
    if (!step.message.empty()) out["message"] = masker.mask(step.message);
    if (step.egress) out["egress"] = egress_json(*step.egress, masker);
    if (!step.steps.empty()) {
        out["steps"] = ordered_json::array();
        for (const auto& inner : step.steps) out["steps"].push_back(step_json(inner, masker));
    }
    return out;
}

ordered_json job_json(const JobReport& job, const Masker& masker) {
    ordered_json out;
    out["id"] = job.id;
    out["name"] = masker.mask(job.name);
    if (!job.matrix.is_null()) out["matrix"] = to_ordered_json(job.matrix);
    out["outcome"] = std::string(to_string(job.outcome));
    out["conclusion"] = std::string(to_string(job.conclusion));
    out["duration_ms"] = job.duration.count();
    out["outputs"] = outputs_json(job.outputs, masker);
    out["annotations"] = annotations_json(job.annotations, masker);
    if (!job.message.empty()) out["message"] = masker.mask(job.message);
    if (!job.workflow_call.empty()) out["workflow_call"] = job.workflow_call;
    out["steps"] = ordered_json::array();
    for (const auto& step : job.steps) out["steps"].push_back(step_json(step, masker));
    if (!job.jobs.empty()) {
        out["jobs"] = ordered_json::array();
        for (const auto& inner : job.jobs) out["jobs"].push_back(job_json(inner, masker));
    }
    return out;
}

// A step's reason for failing, and the innermost failed step of a composite action.
std::string step_reason(const StepReport& step) {
    for (const auto& inner : step.steps) {
        if (inner.conclusion == Outcome::failure)
            return "step '" + inner.name + "': " + step_reason(inner);
    }
    std::string reason = step.timed_out          ? "timed out"
                         : !step.message.empty() ? step.message
                         : step.exit_code        ? "exited with " + std::to_string(*step.exit_code)
                                                 : "failed";
    const auto error = std::ranges::find_if(step.annotations, [&](const Annotation& a) {
        return a.level == AnnotationLevel::error && a.message != step.message;
    });
    if (reason.ends_with('.')) reason.pop_back();
    if (error != step.annotations.end()) reason += " (error: " + error->message + ")";
    return reason;
}

// One line of at most k_reason_limit bytes: the first line of `text`, "..." when cut.
constexpr std::size_t k_reason_limit = 300;
std::string one_line(std::string text) {
    bool cut = false;
    if (const auto newline = text.find_first_of("\r\n"); newline != std::string::npos) {
        text.resize(newline);
        cut = true;
    }
    if (text.size() > k_reason_limit) {
        text.resize(k_reason_limit);
        cut = true;
    }
    return cut ? text + "..." : text;
}

}  // namespace

std::string failure_reason(const JobReport& job) {
    if (job.conclusion != Outcome::failure) return "";
    for (const auto& step : job.steps) {
        if (step.conclusion == Outcome::failure)
            return one_line("step '" + step.name + "': " + step_reason(step));
    }
    for (const auto& inner : job.jobs) {
        if (inner.conclusion == Outcome::failure)
            return one_line("job '" + inner.name + "': " + failure_reason(inner));
    }
    return one_line(job.message.empty() ? "failed" : job.message);
}

std::string_view to_string(StepStage stage) {
    switch (stage) {
        case StepStage::pre:
            return "pre";
        case StepStage::main:
            return "main";
        case StepStage::post:
            return "post";
    }
    return "main";
}

nlohmann::ordered_json to_json(const RunReport& report, const Masker& masker) {
    ordered_json out;
    out["event"] = report.event;
    out["exit_code"] = report.exit_code;
    out["duration_ms"] = report.duration.count();
    out["workflows"] = ordered_json::array();
    for (const auto& workflow : report.workflows) {
        ordered_json w;
        w["file"] = workflow.file;
        w["name"] = masker.mask(workflow.name);
        w["conclusion"] = std::string(to_string(workflow.conclusion));
        w["jobs"] = ordered_json::array();
        for (const auto& job : workflow.jobs) w["jobs"].push_back(job_json(job, masker));
        out["workflows"].push_back(std::move(w));
    }
    if (!report.actions.empty()) {
        out["actions"] = ordered_json::array();
        for (const auto& action : report.actions) {
            ordered_json a;
            a["uses"] = action.uses;
            if (!action.ref.owner.empty()) {
                a["repository"] = action.ref.repository();
                a["path"] = action.ref.path;
                a["ref"] = action.ref.ref;
            }
            if (action.error.empty())
                a["sha"] = action.sha;
            else
                a["error"] = masker.mask(action.error);
            out["actions"].push_back(std::move(a));
        }
    }
    return out;
}

common::Expected<void> write_report(const std::filesystem::path& path, const RunReport& report,
                                    const Masker& masker) {
    const std::string text =
        to_json(report, masker).dump(2, ' ', false, ordered_json::error_handler_t::replace) + "\n";
    std::string temp = path.string() + ".tmp-XXXXXX";
    common::Fd fd(::mkstemp(temp.data()));
    if (!fd)
        return common::fail(common::ErrorKind::permanent,
                            common::errno_message("--report " + path.string()));
    std::string_view rest = text;
    while (!rest.empty()) {
        const ssize_t n = ::write(fd.get(), rest.data(), rest.size());
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            const std::string message = common::errno_message("writing " + temp);
            ::unlink(temp.c_str());
            return common::fail(common::ErrorKind::permanent, message);
        }
        rest.remove_prefix(static_cast<std::size_t>(n));
    }
    ::fchmod(fd.get(), 0644);
    if (::fsync(fd.get()) != 0 || ::rename(temp.c_str(), path.c_str()) != 0) {
        const std::string message = common::errno_message("--report " + path.string());
        ::unlink(temp.c_str());
        return common::fail(common::ErrorKind::permanent, message);
    }
    return {};
}

}  // namespace jobs
