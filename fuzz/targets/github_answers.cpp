// What GitHub answers (github/*): error bodies, retry headers, timestamps, API URLs, clone
// URLs, merge-queue refs and the job reports a run writes for the reporter. The first byte
// picks the parser, the rest is its input.
#include <chrono>

#include "fuzz/fuzz_target.hpp"
#include "github/http_client.hpp"
#include "github/job_report.hpp"
#include "jobs/git/git_url.hpp"
#include "jobs/workflow/merge_queue.hpp"

SANDGATE_FUZZ_TARGET(github_answers) {
    if (size == 0) return 0;
    const std::string_view input = fuzz::text(data + 1, size - 1);
    switch (data[0] % 7) {
        case 0:
            (void)github::github_error_message(input);
            break;
        case 1: {
            github::Response response;
            response.status = 403;
            const auto split = input.find('\n');
            response.headers.emplace_back("retry-after", std::string(input.substr(0, split)));
            if (split != std::string_view::npos)
                response.headers.emplace_back("x-ratelimit-reset",
                                              std::string(input.substr(split + 1)));
            response.headers.emplace_back("x-ratelimit-remaining", "0");
            (void)github::advise_retry(response, std::chrono::system_clock::now());
            break;
        }
        case 2:
            (void)github::parse_github_time(input);
            break;
        case 3:
            (void)github::normalize_api_url(input);
            break;
        case 4:
            (void)jobs::parse_remote(input);
            break;
        case 5:
            (void)jobs::parse_merge_queue_ref(input);
            break;
        case 6:
            if (auto report = github::job_report_from_json(input)) (void)github::to_json(*report);
            break;
    }
    return 0;
}
