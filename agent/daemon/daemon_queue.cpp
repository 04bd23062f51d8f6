#include "agent/daemon/daemon_queue.hpp"

#include <spdlog/spdlog.h>

namespace agent {

void QueueWrites::note(const common::Error* error, std::string_view what) {
    if (!error) {
        if (m_down) spdlog::info("queue: answering again ({} kept write(s) to retry)", pending());
        m_down = false;
        m_stats.queue_up = true;
        return;
    }
    ++m_stats.queue_errors_total;
    if (error->kind != common::ErrorKind::transient) {
        spdlog::warn("{}: {}", what, error->message);
        return;
    }
    m_stats.queue_up = false;
    if (!m_down)
        spdlog::warn(
            "queue: {}: {}; running jobs go on, nothing new is claimed, job ends are kept "
            "and retried",
            what, error->message);
    else
        spdlog::debug("queue: {}: {}", what, error->message);
    m_down = true;
}

bool QueueWrites::try_complete(std::int64_t id, const End& end) {
    auto ok = m_queue.complete(id, m_owner, end.state, end.reason, end.result_json);
    if (ok) {
        answered();
        ++m_stats.finished_total;
        return true;
    }
    if (ok.error().kind == common::ErrorKind::transient) {
        failed("job " + std::to_string(id) + ": recording its end", ok.error());
        return false;
    }
    // The lease went while we could not reach the queue: the pool recovered the job (its
    // conclusion is queued by the recovery), or an earlier try did land (a COMMIT whose answer
    // was lost).
    answered();
    spdlog::warn("job {}: its end ({}) was not recorded: {}", id, to_string(end.state),
                 ok.error().message);
    return true;
}

bool QueueWrites::try_start(std::int64_t id) {
    auto ok = m_queue.add_report(id, "start", "{}");
    if (ok) {
        answered();
        return true;
    }
    if (ok.error().kind == common::ErrorKind::transient) {
        failed("job " + std::to_string(id) + ": queueing its start report", ok.error());
        return false;
    }
    answered();
    spdlog::warn("job {}: start report not queued: {}", id, ok.error().message);
    return true;
}

void QueueWrites::complete(std::int64_t id, JobState state, std::string reason,
                           std::string result_json) {
    m_starts.erase(id);  // see the header: never a start after the end
    End end{state, std::move(reason), std::move(result_json)};
    if (!try_complete(id, end)) m_ends.insert_or_assign(id, std::move(end));
    update_gauge();
}

void QueueWrites::start_report(std::int64_t id) {
    if (!try_start(id)) m_starts.insert(id);
    update_gauge();
}

bool QueueWrites::retry() {
    if (pending() == 0) return true;
    // Starts first: a job's start report stays before its end (both kept: the end wins, above).
    for (auto it = m_starts.begin(); it != m_starts.end();) {
        if (!try_start(*it)) break;
        it = m_starts.erase(it);
    }
    for (auto it = m_ends.begin(); it != m_ends.end();) {
        if (!try_complete(it->first, it->second)) break;
        spdlog::info("job {}: its end ({}) is recorded", it->first, to_string(it->second.state));
        it = m_ends.erase(it);
    }
    update_gauge();
    return pending() == 0;
}

}  // namespace agent
