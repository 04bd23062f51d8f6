#pragma once
// Polling GitHub for merge-gate work, for agents that receive no webhooks (or to catch what a
// lost delivery missed). For each configured repository, one round asks for
//   - the merge-queue branches: GET /repos/{o}/{r}/git/matching-refs/heads/gh-readonly-queue/
//     (the git refs API) -> a `merge_group` job on each branch's head SHA, ref
//     refs/heads/gh-readonly-queue/...;
//   - the open pull requests: GET /repos/{o}/{r}/pulls?state=open&per_page=100, every page ->
//     a `pull_request` job on head.sha, ref refs/pull/N/head (only those carrying the label
//     when one is configured).
// Jobs get the same key a webhook gives (repository, SHA, "" = every job of the event,
// attempt 1), so the queue deduplicates what both sources report.
//
// Every request is conditional: If-None-Match with the ETag of the last 200 for that URL. A
// 304 costs no rate limit and queues nothing (a page's cached `next` link is still followed).
// An ETag is kept only once everything its answer listed was submitted, so a failure half-way
// is retried in full. A merge-queue branch seen by the previous answer and gone from this one
// means its group was merged or destroyed: its unfinished jobs are cancelled.
// Retries and rate limits (retry-after, x-ratelimit-reset) are github::HttpClient's.
//
// The ETags, `next` links and merge-queue heads of the last round live in a PollState
// (agent/daemon/poll_state.hpp): in the queue's SQLite file when the agent polls from a fresh
// process each round, in memory otherwise. A state that cannot be read or written fails the
// repository's round (named in PollStats::errors), never silently drops the condition.
//
// A repository is polled only on its turn (PollState::take_turn): in a pool, the agent that
// holds its advisory lock, once per PollerOptions::interval; the others skip it (PollStats::
// skipped).
//
// Not thread-safe: one thread polls. The queue and a borrowed state must outlive the poller.

#include <chrono>
#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agent/daemon/poll_state.hpp"
#include "agent/store/job_store.hpp"
#include "github/http_client.hpp"

namespace agent {

inline constexpr int k_poll_max_pages = 20;

struct PollerOptions {
    std::vector<std::string> repositories;  // owner/name
    std::optional<std::string> pr_label;    // only pull requests with this label
    // A pool polls each repository at most once per interval (PollState::take_turn).
    std::chrono::milliseconds interval{0};
};

struct PollStats {
    std::size_t requests = 0;
    std::size_t not_modified = 0;     // answered 304
    std::size_t submitted = 0;        // new jobs
    std::size_t duplicates = 0;       // already queued (by a webhook or an earlier round)
    std::size_t cancelled = 0;        // jobs of merge-queue branches that disappeared
    std::size_t skipped = 0;          // repositories another agent of the pool polled
    std::vector<std::string> errors;  // one line per repository that could not be polled
};

class Poller {
public:
    // Remembers between rounds in memory (as long as this object lives).
    Poller(github::HttpClient client, JobQueue& queue, PollerOptions options);
    // Remembers in `state` (borrowed).
    Poller(github::HttpClient client, JobQueue& queue, PollState& state, PollerOptions options);

    // One round over every repository. A repository that fails (bad answer, GitHub refusing,
    // the queue failing) is named in PollStats::errors; the others are still polled.
    PollStats poll_once();

private:
    common::Expected<void> poll_queue_branches(const std::string& repository, PollStats& stats);
    common::Expected<void> poll_pulls(const std::string& repository, PollStats& stats);
    // GETs `path` conditionally on `known`'s ETag (m_state's page for it); nullopt on 304
    // (`known` then says where `next` is).
    common::Expected<std::optional<github::Response>> fetch(const std::string& path,
                                                            const std::optional<PolledPage>& known,
                                                            PollStats& stats);
    common::Expected<void> submit(const JobSpec& spec, PollStats& stats);

    github::HttpClient m_client;
    JobQueue& m_queue;
    PollerOptions m_options;
    std::unique_ptr<MemoryPollState> m_own_state;  // when no state was lent
    PollState* m_state;
};

// The path part of a Link header's rel="next" URL when it lies under `api_url`.
std::optional<std::string> next_link(const github::Response& response, const std::string& api_url);

}  // namespace agent
