#include "agent/gate/gate_reporting.hpp"

#include <simdjson.h>

#include <algorithm>
#include <cstdlib>
#include <set>
#include <tuple>

#include "agent/daemon/agent_config.hpp"
#include "github/auth.hpp"
#include "sandbox/process/run.hpp"

namespace agent {
namespace {

using common::ErrorKind;
using github::Conclusion;
using Element = simdjson::dom::element;

std::string text_of(Element object, const char* field) {
    std::string_view value;
    return object[field].get_string().get(value) == simdjson::SUCCESS ? std::string(value) : "";
}

std::optional<std::int64_t> int_of(Element object, const char* field) {
    std::int64_t value = 0;
    if (object[field].get_int64().get(value) == simdjson::SUCCESS) return value;
    return std::nullopt;
}

// GitHub's conclusions from the runner's outcomes (success, failure, cancelled, skipped).
std::optional<Conclusion> conclusion_of(std::string_view outcome) {
    if (outcome == "success") return Conclusion::success;
    if (outcome == "failure") return Conclusion::failure;
    if (outcome == "cancelled") return Conclusion::cancelled;
    if (outcome == "skipped") return Conclusion::skipped;
    return std::nullopt;
}

void add_annotations(Element owner, std::vector<github::Annotation>& out) {
    simdjson::dom::array items;
    if (owner["annotations"].get_array().get(items) != simdjson::SUCCESS) return;
    for (Element item : items) {
        github::Annotation note;
        note.path = text_of(item, "file");
        note.start_line = static_cast<int>(int_of(item, "line").value_or(1));
        note.end_line = static_cast<int>(int_of(item, "end_line").value_or(note.start_line));
        if (auto col = int_of(item, "col")) note.start_column = static_cast<int>(*col);
        if (auto col = int_of(item, "end_col")) note.end_column = static_cast<int>(*col);
        note.title = text_of(item, "title");
        note.level = github::parse_annotation_level(text_of(item, "level"))
                         .value_or(github::AnnotationLevel::failure);
        note.message = text_of(item, "message");
        out.push_back(std::move(note));
    }
}

// Steps in order, a composite's inner steps after it with "outer / inner" names.
void add_steps(Element owner, const std::string& prefix, github::JobReport& report,
               std::vector<github::Annotation>& notes) {
    simdjson::dom::array steps;
    if (owner["steps"].get_array().get(steps) != simdjson::SUCCESS) return;
    for (Element item : steps) {
        github::StepReport step;
        step.name = prefix + text_of(item, "name");
        step.conclusion = conclusion_of(text_of(item, "conclusion")).value_or(Conclusion::failure);
        bool timed_out = false;
        if (item["timed_out"].get_bool().get(timed_out) == simdjson::SUCCESS && timed_out) {
            step.conclusion = Conclusion::timed_out;
        }
        if (auto code = int_of(item, "exit_code")) step.exit_code = static_cast<int>(*code);
        step.duration = std::chrono::milliseconds(int_of(item, "duration_ms").value_or(0));
        step.bytes_out = static_cast<std::uint64_t>(int_of(item, "stdout_bytes").value_or(0));
        step.bytes_err = static_cast<std::uint64_t>(int_of(item, "stderr_bytes").value_or(0));
        bool truncated = false;
        if (item["truncated"].get_bool().get(truncated) != simdjson::SUCCESS) truncated = false;
        // The report has one flag; the head kept per stream is sandbox::k_default_output_limit,
        // so a stream longer than that is the one that was cut.
        step.stdout_truncated = truncated && step.bytes_out > sandbox::k_default_output_limit;
        step.stderr_truncated = truncated && step.bytes_err > sandbox::k_default_output_limit;
        if (truncated && !step.stdout_truncated && !step.stderr_truncated) {
            step.stdout_truncated = true;
        }
        step.skip_markers = static_cast<std::uint64_t>(int_of(item, "skip_markers").value_or(0));
        add_annotations(item, notes);
        const bool failed = step.conclusion == Conclusion::failure ||
                            step.conclusion == Conclusion::timed_out ||
                            text_of(item, "outcome") == "failure";
        if (failed && report.failing_step.empty()) {
            report.failing_step = step.name;
            report.exit_code = step.exit_code;
            std::string detail = text_of(item, "message");
            const std::string summary = text_of(item, "summary");
            if (!summary.empty()) detail += (detail.empty() ? "" : "\n\n") + summary;
            report.log_tail = detail;
        }
        const std::string name = step.name;
        report.steps.push_back(std::move(step));
        add_steps(item, name + " / ", report, notes);
    }
}

// Drops annotations repeated at job and step level.
std::vector<github::Annotation> unique(std::vector<github::Annotation> notes) {
    std::set<std::tuple<std::string, int, int, std::string, std::string>> seen;
    std::vector<github::Annotation> out;
    for (auto& note : notes) {
        auto key = std::make_tuple(note.path, note.start_line, note.start_column.value_or(0),
                                   std::string(github::to_string(note.level)), note.message);
        if (seen.insert(key).second) out.push_back(std::move(note));
    }
    return out;
}

void add_jobs(Element owner, const std::string& workflow, const std::string& file,
              const std::string& name_prefix, const std::string& key_prefix, std::string_view sha,
              std::vector<github::JobReport>& out) {
    simdjson::dom::array jobs;
    if (owner["jobs"].get_array().get(jobs) != simdjson::SUCCESS) return;
    for (Element item : jobs) {
        github::JobReport report;
        report.workflow = workflow;
        report.workflow_path = file;
        const std::string display = text_of(item, "name");
        report.job = name_prefix + (display.empty() ? text_of(item, "id") : display);
        Element matrix;
        const bool has_matrix =
            item["matrix"].get(matrix) == simdjson::SUCCESS && !matrix.is_null();
        report.job_key = key_prefix + text_of(item, "id");
        if (has_matrix) report.job_key += " " + simdjson::minify(matrix);
        report.sha = std::string(sha);
        report.status = github::JobStatus::completed;
        report.conclusion =
            conclusion_of(text_of(item, "conclusion")).value_or(Conclusion::failure);
        const auto end = std::chrono::system_clock::now();
        report.completed_at = end;
        report.started_at =
            end - std::chrono::milliseconds(int_of(item, "duration_ms").value_or(0));
        std::vector<github::Annotation> notes;
        add_annotations(item, notes);
        add_steps(item, "", report, notes);
        report.annotations = unique(std::move(notes));
        for (const auto& step : report.steps) {
            if (step.conclusion == Conclusion::timed_out &&
                report.conclusion == Conclusion::failure) {
                report.conclusion = Conclusion::timed_out;
            }
        }
        if (report.log_tail.empty()) report.log_tail = text_of(item, "message");
        if (report.job_key == key_prefix) continue;  // a job without an id: nothing to key on
        // A called workflow (`uses:`) reports its jobs as "caller / callee".
        simdjson::dom::array inner;
        if (item["jobs"].get_array().get(inner) == simdjson::SUCCESS && inner.size() > 0) {
            add_jobs(item, workflow, file, report.job + " / ", report.job_key + "/", sha, out);
            continue;
        }
        out.push_back(std::move(report));
    }
}

}  // namespace

void add_github_options(CLI::App& app, GitHubFlags& flags, StateDirOption state_dir) {
    app.add_option("--github-repo", flags.repo, "report to this repository (OWNER/NAME)");
    app.add_option("--api-url", flags.api_url,
                   "GitHub API base URL (Enterprise Server: https://HOST/api/v3)");
    app.add_option("--token-file", flags.token_file,
                   "file holding the token (else $SANDGATE_GITHUB_TOKEN or $GITHUB_TOKEN)");
    app.add_option("--app-id", flags.app_id, "GitHub App id (with --app-key, --installation-id)");
    app.add_option("--app-key,--app-key-file", flags.app_key, "GitHub App private key (PEM file)");
    app.add_option("--installation-id", flags.installation_id, "GitHub App installation id");
    app.add_option("--check-name", flags.check_name,
                   "check run name template: {workflow} {job} {job_key} {sha} {short_sha}");
    app.add_option("--details-url", flags.details_url, "details_url of the check runs");
    app.add_option("--report-as", flags.report_as, "checks (check runs) or status (statuses)")
        ->check(CLI::IsMember({"checks", "status"}));
    if (state_dir == StateDirOption::omit) return;
    app.add_option("--state-dir", flags.state_dir,
                   "state directory (the report journal lives in github-journal/)");
}

common::Expected<github::Reporter> make_reporter(const GitHubFlags& flags,
                                                 github::ClientOptions options) {
    auto repository = github::Repository::parse(flags.repo);
    if (!repository) return std::unexpected(repository.error());
    const bool app =
        !flags.app_id.empty() || !flags.app_key.empty() || !flags.installation_id.empty();
    if (app && !flags.token_file.empty()) {
        return common::fail(ErrorKind::invalid_input,
                            "--token-file and the App flags (--app-id ...) exclude each other");
    }
    if (app && (flags.app_id.empty() || flags.app_key.empty() || flags.installation_id.empty())) {
        return common::fail(ErrorKind::invalid_input,
                            "--app-id, --app-key and --installation-id go together");
    }
    options.api_url = flags.api_url;
    std::shared_ptr<github::TokenSource> tokens;
    if (app) {
        auto source = SANDGATE_TRY(github::InstallationTokenSource::create(
            options, {flags.app_id, flags.app_key, flags.installation_id}));
        tokens = source;
    } else {
        common::Expected<std::string> token =
            common::fail(ErrorKind::invalid_input,
                         "no GitHub credentials: give --token-file, the App flags, or set "
                         "SANDGATE_GITHUB_TOKEN or GITHUB_TOKEN");
        if (!flags.token_file.empty()) {
            token = github::read_token_file(flags.token_file);
        } else {
            for (const char* variable : k_token_variables) {
                if (const char* value = std::getenv(variable); value && *value) {
                    token = github::read_token_env(variable);
                    break;
                }
            }
        }
        if (!token) return std::unexpected(token.error());
        tokens = std::make_shared<github::StaticToken>(*token);
    }
    auto client = SANDGATE_TRY(github::HttpClient::create(options, tokens));
    github::ReporterOptions reporter;
    reporter.repository = *repository;
    reporter.check_name_template = flags.check_name;
    if (!flags.details_url.empty()) reporter.details_url = flags.details_url;
    reporter.report_as =
        github::parse_report_as(flags.report_as).value_or(github::ReportAs::checks);
    const std::filesystem::path state =
        flags.state_dir.empty() ? default_state_dir() : std::filesystem::path(flags.state_dir);
    reporter.journal_dir = state / "github-journal";
    return github::Reporter::create(std::move(client), std::move(reporter));
}

common::Expected<std::shared_ptr<common::TokenProvider>> git_token_source(
    const GitHubFlags& flags, github::ClientOptions options) {
    if (flags.app_id.empty() || flags.app_key.empty() || flags.installation_id.empty())
        return std::shared_ptr<common::TokenProvider>();
    auto repository = SANDGATE_TRY(github::Repository::parse(flags.repo));
    options.api_url = flags.api_url;
    auto source = SANDGATE_TRY(github::InstallationTokenSource::create(
        options, {flags.app_id, flags.app_key, flags.installation_id},
        github::git_read_scope(repository.name)));
    (void)SANDGATE_TRY((source)->token());
    return std::shared_ptr<common::TokenProvider>(std::move(source));
}

common::Expected<std::vector<github::JobReport>> job_reports_from_run_report(std::string_view json,
                                                                             std::string_view sha) {
    if (sha.empty()) return common::fail(ErrorKind::invalid_input, "--sha is empty");
    simdjson::dom::parser parser;
    Element root;
    if (auto error = parser.parse(json.data(), json.size()).get(root); error) {
        return common::fail(ErrorKind::invalid_input,
                            std::string("run report: not JSON: ") + simdjson::error_message(error));
    }
    simdjson::dom::array workflows;
    if (root["workflows"].get_array().get(workflows) != simdjson::SUCCESS) {
        return common::fail(ErrorKind::invalid_input,
                            "run report: field `workflows` missing or not an array");
    }
    std::vector<github::JobReport> out;
    for (Element workflow : workflows) {
        const std::string file = text_of(workflow, "file");
        std::string name = text_of(workflow, "name");
        const std::string base = std::filesystem::path(file).filename().string();
        if (name.empty()) name = base.empty() ? "workflow" : base;
        add_jobs(workflow, name, file, "", (base.empty() ? name : base) + "#", sha, out);
    }
    for (const auto& report : out) {
        SANDGATE_CHECK(github::validate(report));
    }
    return out;
}

int replay_journal(github::Reporter& reporter, const ReportOutput& output) {
    auto replayed = reporter.replay();
    if (!replayed) {
        std::fprintf(output.err, "%.*s: journal: %s\n", static_cast<int>(output.who.size()),
                     output.who.data(), replayed.error().message.c_str());
        return k_exit_report_journaled;
    }
    if (replayed->sent + replayed->kept + replayed->dropped > 0) {
        std::fprintf(output.out, "journal: %zu sent, %zu kept for later, %zu refused by GitHub\n",
                     replayed->sent, replayed->kept, replayed->dropped);
    }
    if (replayed->dropped > 0) return k_exit_report_refused;
    return replayed->kept > 0 ? k_exit_report_journaled : k_exit_reported;
}

int deliver_reports(github::Reporter& reporter, const std::vector<github::JobReport>& jobs,
                    const ReportOutput& output) {
    int status = k_exit_reported;
    for (const auto& job : jobs) {
        auto delivered = reporter.finish(job);
        const std::string name = job.workflow + " / " + job.job;
        if (!delivered) {
            std::fprintf(output.err, "%.*s: %s: %s\n", static_cast<int>(output.who.size()),
                         output.who.data(), name.c_str(), delivered.error().message.c_str());
            const bool refused = delivered.error().kind == ErrorKind::invalid_input ||
                                 delivered.error().kind == ErrorKind::permanent;
            status = std::max(status, refused ? k_exit_report_refused : k_exit_report_journaled);
            continue;
        }
        const bool sent = *delivered == github::Delivery::sent;
        std::fprintf(output.out, "%s: %s (%s)\n", name.c_str(),
                     std::string(github::to_string(*job.conclusion)).c_str(),
                     sent ? "reported" : "kept in the journal for later");
        if (!sent) status = std::max(status, k_exit_report_journaled);
    }
    std::fflush(output.out);
    return status;
}

int report_gate_refusal(github::Reporter& reporter, std::string_view sha,
                        std::string_view workflows_path, std::string_view message,
                        const ReportOutput& output) {
    github::JobReport report;
    report.workflow = "sandgate gate";
    report.workflow_path = std::string(workflows_path);
    report.job = "workflows";
    report.job_key = "sandgate#workflows";
    report.sha = std::string(sha);
    report.status = github::JobStatus::completed;
    report.conclusion = Conclusion::failure;
    report.log_tail = std::string(message);
    report.completed_at = report.started_at = std::chrono::system_clock::now();
    return deliver_reports(reporter, {report}, output);
}

std::string job_key(std::string_view workflow_file, std::string_view job_id,
                    std::string_view matrix_json) {
    std::string key = std::filesystem::path(workflow_file).filename().string() + "#";
    key += job_id;
    if (!matrix_json.empty()) key += " " + std::string(matrix_json);
    return key;
}

GateReporter::GateReporter(github::Reporter reporter, std::string sha, const jobs::Masker& masker,
                           std::vector<const jobs::Workflow*> top_level, ReportOutput output)
    : m_reporter(std::move(reporter)),
      m_sha(std::move(sha)),
      m_masker(masker),
      m_top_level(std::move(top_level)),
      m_output(output) {}

void GateReporter::job_started(const jobs::Workflow& workflow, const jobs::JobReport& job) {
    if (std::ranges::find(m_top_level, &workflow) == m_top_level.end()) return;
    github::JobReport report;
    report.workflow = m_masker.mask(workflow.display_name());
    report.workflow_path = workflow.file;
    report.job = job.name.empty() ? job.id : job.name;
    // The matrix as the run report will carry it: the same document, minified by simdjson.
    std::string matrix;
    if (!job.matrix.is_null()) {
        const std::string text = jobs::to_json(job.matrix, jobs::JsonStyle::compact);
        simdjson::dom::parser parser;
        Element parsed;
        matrix =
            parser.parse(text).get(parsed) == simdjson::SUCCESS ? simdjson::minify(parsed) : text;
    }
    report.job_key = job_key(workflow.file, job.id, matrix);
    report.sha = m_sha;
    report.status = github::JobStatus::in_progress;
    report.started_at = std::chrono::system_clock::now();
    {
        std::lock_guard lock(m_mutex);
        m_open[report.job_key] = report;
    }
    auto started = m_reporter.start(report);
    if (!started) {
        std::fprintf(m_output.err, "%.*s: reporting the start of %s / %s: %s\n",
                     static_cast<int>(m_output.who.size()), m_output.who.data(),
                     report.workflow.c_str(), report.job.c_str(), started.error().message.c_str());
    } else if (*started == github::Delivery::journaled) {
        std::fprintf(m_output.err, "%.*s: %s / %s: in_progress kept in the journal for later\n",
                     static_cast<int>(m_output.who.size()), m_output.who.data(),
                     report.workflow.c_str(), report.job.c_str());
    }
}

int GateReporter::replay() {
    return replay_journal(m_reporter, m_output);
}

void TailLog::output(const jobs::StepLabel& label, std::string_view line) {
    m_inner.output(label, line);
    std::lock_guard lock(m_mutex);
    std::string& tail = m_tails[{m_masker.mask(label.job), m_masker.mask(label.step)}];
    tail.append(line);
    tail.push_back('\n');
    if (tail.size() > k_log_tail_bytes) tail.erase(0, tail.size() - k_log_tail_bytes);
}

std::string TailLog::tail(const std::string& job, const std::string& step) const {
    std::lock_guard lock(m_mutex);
    const auto found = m_tails.find({job, step});
    return found == m_tails.end() ? "" : found->second;
}

int GateReporter::finish(const jobs::RunReport& report, const TailLog* tails) {
    const std::string json =
        jobs::to_json(report, m_masker)
            .dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
    auto jobs = job_reports_from_run_report(json, m_sha);
    if (!jobs) {
        std::fprintf(m_output.err, "%.*s: the run report: %s\n",
                     static_cast<int>(m_output.who.size()), m_output.who.data(),
                     jobs.error().message.c_str());
        return k_exit_report_refused;
    }
    {
        std::lock_guard lock(m_mutex);
        m_open.clear();
    }
    for (auto& job : *jobs) {
        const std::string tail =
            tails && !job.failing_step.empty() ? tails->tail(job.job, job.failing_step) : "";
        if (!tail.empty()) job.log_tail = job.log_tail.empty() ? tail : tail + "\n" + job.log_tail;
    }
    return deliver_reports(m_reporter, *jobs, m_output);
}

int GateReporter::cancel_open(std::string_view why) {
    std::vector<github::JobReport> open;
    {
        std::lock_guard lock(m_mutex);
        for (auto& [key, report] : m_open) open.push_back(std::move(report));
        m_open.clear();
    }
    for (auto& report : open) {
        report.status = github::JobStatus::completed;
        report.conclusion = Conclusion::cancelled;
        report.completed_at = std::chrono::system_clock::now();
        report.log_tail = std::string(why);
    }
    return deliver_reports(m_reporter, open, m_output);
}

}  // namespace agent
