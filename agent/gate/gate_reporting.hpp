#pragma once
// Reporting a gate's results to GitHub from the command line: the flags shared by
// `sandgate gate` and `sandgate report`, building a github::Reporter from them, and the
// mapping from a `sandgate run --report` document (the jobs/ run report, as JSON) to
// github::JobReport, one per job (the jobs of called workflows flattened).
//
// Credentials never come from argv: --token-file F, or the App flags (--app-id, --app-key
// FILE, --installation-id), or else the environment (SANDGATE_GITHUB_TOKEN, then
// GITHUB_TOKEN).

#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agent/cli/cli11.hpp"
#include "common/error.hpp"
#include "github/check_runs.hpp"
#include "github/job_report.hpp"
#include "jobs/run/log.hpp"
#include "jobs/run/masker.hpp"
#include "jobs/run/run_context.hpp"
#include "jobs/run/run_report.hpp"

namespace agent {

// Exit codes of commands that report to GitHub.
inline constexpr int k_exit_reported = 0;
inline constexpr int k_exit_report_usage = 2;
inline constexpr int k_exit_report_journaled = 3;  // kept in the journal: sent later
inline constexpr int k_exit_report_refused = 4;    // GitHub refused it (401/403/404/422)

inline constexpr const char* k_token_variables[] = {"SANDGATE_GITHUB_TOKEN", "GITHUB_TOKEN"};

struct GitHubFlags {
    std::string repo;  // --github-repo OWNER/NAME; empty: no reporting
    std::string api_url = "https://api.github.com";
    std::string token_file;
    std::string app_id;
    std::string app_key;
    std::string installation_id;
    std::string check_name = "{workflow} / {job}";
    std::string details_url;
    std::string report_as = "checks";
    std::string state_dir;  // empty: default_state_dir()
};

// Whether add_github_options registers --state-dir (a command with its own state directory,
// such as `sandgate gate`, fills GitHubFlags::state_dir itself).
enum class StateDirOption { add, omit };

// Registers --github-repo, --api-url, --token-file, --app-id, --app-key (alias
// --app-key-file), --installation-id, --check-name, --details-url, --report-as and
// --state-dir on `app`.
void add_github_options(CLI::App& app, GitHubFlags& flags,
                        StateDirOption state_dir = StateDirOption::add);

// Checks the flags (exactly one credential source, a valid repo, URL and template) and builds
// the reporter with its journal under the state directory. invalid_input naming the flag.
// `client` is what the HTTP client starts from (its retry policy and timeouts default to
// github's named constants; tests pass a shorter policy); its api_url is the flags'.
common::Expected<github::Reporter> make_reporter(const GitHubFlags& flags,
                                                 github::ClientOptions client = {});

// The tokens for git fetches of the gated repository when the flags name a GitHub App: an
// installation token source of its own (not the reporter's), asked for the --github-repo
// repository alone with contents:read (github::git_read_scope), which mints again whenever
// the cached token has less than github::k_token_refresh_margin left or a remote refused it.
// One token is minted here, so that a bad installation fails the gate before anything runs.
// nullptr without the App flags. Errors as make_reporter for the flags; the exchange's errors
// name the installation, never a token.
common::Expected<std::shared_ptr<common::TokenProvider>> git_token_source(
    const GitHubFlags& flags, github::ClientOptions client = {});

// Where the reporting commands write: one line per job on `out`, errors on `err`, each error
// line prefixed with `who` ("sandgate report").
struct ReportOutput {
    std::FILE* out = stdout;
    std::FILE* err = stderr;
    std::string_view who = "sandgate";
};

// Sends what the journal still holds. k_exit_reported, k_exit_report_journaled (some kept for
// later) or k_exit_report_refused (GitHub dropped some for good).
int replay_journal(github::Reporter& reporter, const ReportOutput& output);

// Concludes each job's run ("NAME: CONCLUSION (reported)" or "(kept in the journal for
// later)"). Returns the worst of k_exit_reported, k_exit_report_journaled and
// k_exit_report_refused.
int deliver_reports(github::Reporter& reporter, const std::vector<github::JobReport>& jobs,
                    const ReportOutput& output);

// A gate that refuses the commit before any job runs (its workflows are invalid, or none runs
// on the event) still shows on it: one completed `failure` run, "sandgate gate / workflows"
// (key "sandgate#workflows"), whose text is `message`. As deliver_reports().
int report_gate_refusal(github::Reporter& reporter, std::string_view sha,
                        std::string_view workflows_path, std::string_view message,
                        const ReportOutput& output);

// The stable key of one job (external_id and journal key): "<workflow file name>#<job id>",
// plus " <matrix as compact JSON>" for a matrix leg (`matrix_json` empty: none).
std::string job_key(std::string_view workflow_file, std::string_view job_id,
                    std::string_view matrix_json);

// Maps a run report document to one JobReport per job, all completed, on commit `sha`.
// Job keys are "<workflow file>#<job id>" plus the matrix leg as compact JSON.
// invalid_input naming the field on a malformed document.
common::Expected<std::vector<github::JobReport>> job_reports_from_run_report(std::string_view json,
                                                                             std::string_view sha);

inline constexpr std::size_t k_log_tail_bytes = 64 * 1024;

// A LogSink that passes every event on to `inner` and keeps the last k_log_tail_bytes of each
// step's output lines (already masked by the runner), keyed by the masked job and step
// names: the check run's text shows the failing step's tail. Thread-safe.
class TailLog final : public jobs::LogSink {
public:
    // `inner` and `masker` must outlive the log.
    TailLog(jobs::LogSink& inner, const jobs::Masker& masker) : m_inner(inner), m_masker(masker) {}
    void output(const jobs::StepLabel& label, std::string_view line) override;
    void debug(const jobs::StepLabel& label, std::string_view line) override {
        m_inner.debug(label, line);
    }
    void group_start(const jobs::StepLabel& label, std::string_view title) override {
        m_inner.group_start(label, title);
    }
    void group_end(const jobs::StepLabel& label) override { m_inner.group_end(label); }
    void annotation(const jobs::StepLabel& label, const jobs::Annotation& note) override {
        m_inner.annotation(label, note);
    }
    void status(const jobs::StepLabel& label, jobs::StatusKind kind,
                std::string_view text) override {
        m_inner.status(label, kind, text);
    }
    // The kept tail of (job, step), "" when none.
    std::string tail(const std::string& job, const std::string& step) const;

private:
    jobs::LogSink& m_inner;
    const jobs::Masker& m_masker;
    mutable std::mutex m_mutex;
    std::map<std::pair<std::string, std::string>, std::string> m_tails;
};

// The check runs of one `sandgate gate`. As the runner's JobObserver it creates a job's run
// in_progress when the job starts (for the jobs of the gate's own workflows; those of a
// called workflow get theirs when they end), keyed as job_reports_from_run_report keys it, so
// that finish() concludes the same run. Failures to report go to the journal (and a line on
// `err`); they never change the gate's verdict. Thread-safe.
class GateReporter final : public jobs::JobObserver {
public:
    // `masker` and the workflows must outlive the reporter.
    GateReporter(github::Reporter reporter, std::string sha, const jobs::Masker& masker,
                 std::vector<const jobs::Workflow*> top_level, ReportOutput output);

    void job_started(const jobs::Workflow& workflow, const jobs::JobReport& job) override;

    // Sends what an earlier gate left in the journal (runs of a gate that died are concluded
    // as cancelled). As replay_journal().
    int replay();

    // Concludes every job of the finished run, with the failing step's output tail from
    // `tails` when given. As deliver_reports().
    int finish(const jobs::RunReport& report, const TailLog* tails = nullptr);

    // The gate is being stopped: concludes as `cancelled` (text `why`) the run of every job
    // that started and has not been finished. As deliver_reports().
    int cancel_open(std::string_view why);

private:
    github::Reporter m_reporter;
    std::string m_sha;
    const jobs::Masker& m_masker;
    std::vector<const jobs::Workflow*> m_top_level;
    ReportOutput m_output;
    std::mutex m_mutex;
    std::map<std::string, github::JobReport> m_open;  // started, not finished; by job key
};

}  // namespace agent
