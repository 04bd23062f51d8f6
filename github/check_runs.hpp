#pragma once
// github::Reporter: one check run per job (or one commit status per job with
// ReportAs::status), created in_progress when the job starts and concluded when it ends.
//
// Contract:
// - The run is named by a template ("{workflow} / {job}" by default), carries external_id =
//   the job key and details_url when configured. Its id is kept and PATCHed; a rerun of the
//   same job key (in this process or another) finds the run with GET
//   commits/{sha}/check-runs?check_name=...&filter=all and updates it: never a second run.
// - finish() sends the conclusion, title, summary, text and the first 50 annotations in one
//   PATCH (so the run is concluded first), then the rest 50 per PATCH (GitHub appends them).
// - With a journal directory, every report is written ahead to the journal and removed once
//   GitHub has all of it; reports that still fail after the client's retries stay there and
//   replay() sends them later. replay() also concludes (as cancelled) the runs of jobs whose
//   process died between start and finish, so no run is left in_progress.
// - Thread-safe: jobs may start and finish concurrently.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "common/error.hpp"
#include "github/http_client.hpp"
#include "github/job_report.hpp"

namespace github {

enum class ReportAs { checks, status };
std::optional<ReportAs> parse_report_as(std::string_view text);

inline constexpr std::string_view k_default_check_name = "{workflow} / {job}";
inline constexpr int k_lookup_page_size = 100;
inline constexpr int k_lookup_max_pages = 10;

struct Repository {
    std::string owner;
    std::string name;
    // "OWNER/NAME"; invalid_input naming --github-repo otherwise.
    static common::Expected<Repository> parse(std::string_view text);
};

struct ReporterOptions {
    Repository repository;
    std::string check_name_template = std::string(k_default_check_name);
    std::optional<std::string> details_url;
    ReportAs report_as = ReportAs::checks;
    std::optional<std::filesystem::path> journal_dir;  // unset: no journal (nothing kept)
};

enum class Delivery { sent, journaled };

struct ReplayResult {
    std::size_t sent = 0;     // delivered and removed from the journal
    std::size_t kept = 0;     // still failing: kept for the next replay
    std::size_t skipped = 0;  // owned by a live job or another repository
    std::size_t dropped = 0;  // rejected by GitHub (422): removed, with an error logged
};

class Reporter {
public:
    // Checks the options (the name template, the journal directory).
    static common::Expected<Reporter> create(HttpClient client, ReporterOptions options);

    // The job started: creates (or reopens) its check run in_progress, or posts a pending
    // status. `sent` when GitHub has it, `journaled` when it was kept for later; an error when
    // the report is invalid or GitHub rejected it for good and there is no journal.
    common::Expected<Delivery> start(const JobReport& report);

    // The job ended (report.status completed, conclusion set): concludes its run.
    common::Expected<Delivery> finish(const JobReport& report);

    // Sends what the journal holds for this repository (see the header comment).
    common::Expected<ReplayResult> replay();

    // The check run id known for this job in this process, if any.
    std::optional<std::int64_t> check_run_id(const JobReport& report) const;

private:
    struct State;
    explicit Reporter(std::shared_ptr<State> state) : m_state(std::move(state)) {}
    std::shared_ptr<State> m_state;
};

}  // namespace github
