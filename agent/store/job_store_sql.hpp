#pragma once
// Internal to the queue's backends (agent/store/job_store.cpp, agent/store/job_store_pg.cpp): the
// SQL both speak alike, so the order rule of reports (agent/store/job_store.hpp) is written once.

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "agent/store/job_store.hpp"

namespace agent::queue_sql {

// The body of the `conclude` report queued with a terminal state.
inline std::string conclude_body(JobState state, std::string_view reason) {
    nlohmann::ordered_json body;
    body["state"] = to_string(state);
    body["reason"] = reason;
    return body.dump();
}

// True for report `r` (a table alias) when it is a start that a conclusion of the same job
// follows and no sender holds it at `now` (an SQL expression): it will never be sent.
inline std::string obsolete_start(std::string_view r, std::string_view now) {
    const std::string a(r);
    return "(" + a + ".kind = 'start' AND " + a + ".claimed_until <= " + std::string(now) +
           " AND EXISTS (SELECT 1 FROM reports c WHERE c.job_id = " + a + ".job_id AND c.id > " +
           a + ".id AND c.kind = 'conclude'))";
}

// The condition on report `r` that makes it due at `now`: its time has come, no sender holds
// it, it is not obsolete, and every earlier report of its job is gone (or obsolete).
inline std::string due_report(std::string_view now) {
    const std::string at(now);
    return "r.next_attempt <= " + at + " AND r.claimed_until <= " + at + " AND NOT " +
           obsolete_start("r", at) +
           " AND NOT EXISTS (SELECT 1 FROM reports e WHERE e.job_id = r.job_id AND e.id < r.id AND "
           "NOT " +
           obsolete_start("e", at) + ")";
}

}  // namespace agent::queue_sql
