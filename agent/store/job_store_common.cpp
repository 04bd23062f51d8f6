// The queue interface's own functions (agent/store/job_store.hpp), shared by both backends.
#include <chrono>

#include "agent/store/job_store.hpp"

namespace agent {

std::string_view to_string(JobState state) {
    switch (state) {
        case JobState::queued:
            return "queued";
        case JobState::running:
            return "running";
        case JobState::succeeded:
            return "succeeded";
        case JobState::failed:
            return "failed";
        case JobState::cancelled:
            return "cancelled";
        case JobState::timed_out:
            return "timed_out";
        case JobState::skipped:
            return "skipped";
    }
    return "failed";
}

std::optional<JobState> parse_job_state(std::string_view text) {
    for (int i = 0; i < k_job_state_count; ++i)
        if (to_string(static_cast<JobState>(i)) == text) return static_cast<JobState>(i);
    return std::nullopt;
}

bool is_terminal(JobState state) {
    return state != JobState::queued && state != JobState::running;
}

std::int64_t system_now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

std::filesystem::path default_queue_path(const std::filesystem::path& state_dir) {
    return state_dir / "agent" / "jobs.sqlite3";
}

}  // namespace agent
