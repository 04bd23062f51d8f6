#pragma once
// What the poller remembers between rounds (agent/daemon/poller.hpp): per request path, the ETag of
// the last 200 and the `next` page it linked; per repository, the merge-queue head SHAs the
// last answer listed. The agent polls from a fresh process each round
// (agent/daemon/github_rounds.hpp), so this lives with the job queue (its SQLite file, or a pool's
// PostgreSQL database, where every agent of the pool shares it): If-None-Match is still sent after
// a restart, and a merge-queue branch that vanished between two rounds (or while the agent was
// down) is still seen gone.
//
// Each call is one transaction; errors come back as values (ErrorKind::transient for lock
// contention past the busy timeout). Not thread-safe: one poller uses it.

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "agent/store/job_store.hpp"

namespace agent {

struct PolledPage {
    std::string etag;
    std::optional<std::string> next;  // the path of the next page (from Link)
};

// A turn to poll one repository (PollState::take_turn): others may poll it again once it is
// destroyed (and the interval passed).
class PollTurn {
public:
    virtual ~PollTurn() = default;
};

class PollState {
public:
    virtual ~PollState() = default;
    // Whether to poll `repository` now. In a pool's shared state (PostgreSQL) at most one
    // agent polls a repository at a time (a session advisory lock decides who, held as long
    // as the turn lives) and at most once per `interval` (the last poll's time is shared);
    // nullptr: not this agent's turn. A state of one agent (memory, SQLite) always gives one:
    // the agent's own schedule decides.
    virtual common::Expected<std::unique_ptr<PollTurn>> take_turn(
        std::string_view repository, std::chrono::milliseconds interval) {
        (void)repository;
        (void)interval;
        return std::make_unique<PollTurn>();
    }
    // nullopt: the path was never answered 200 (or its ETag was dropped).
    virtual common::Expected<std::optional<PolledPage>> page(std::string_view path) = 0;
    virtual common::Expected<void> set_page(std::string_view path, const PolledPage& page) = 0;
    virtual common::Expected<std::set<std::string>> branches(std::string_view repository) = 0;
    // Replaces the repository's set whole.
    virtual common::Expected<void> set_branches(std::string_view repository,
                                                const std::set<std::string>& heads) = 0;
};

// Kept in memory only (a poller that lives as long as its process, and tests).
class MemoryPollState final : public PollState {
public:
    common::Expected<std::optional<PolledPage>> page(std::string_view path) override;
    common::Expected<void> set_page(std::string_view path, const PolledPage& page) override;
    common::Expected<std::set<std::string>> branches(std::string_view repository) override;
    common::Expected<void> set_branches(std::string_view repository,
                                        const std::set<std::string>& heads) override;

private:
    std::map<std::string, PolledPage, std::less<>> m_pages;
    std::map<std::string, std::set<std::string>, std::less<>> m_branches;
};

// The poller's memory in the queue's SQLite file at `path` (its tables poll_pages and
// poll_branches come with the queue's schema: the file is opened, created or migrated, as
// open_sqlite_queue does). Fails like open_sqlite_queue.
common::Expected<std::unique_ptr<PollState>> open_sqlite_poll_state(
    const std::filesystem::path& path, SqliteOptions options = {});

// The queue and the poller's memory (a GitHub round needs both).
struct QueueStore {
    std::unique_ptr<JobQueue> queue;
    std::unique_ptr<PollState> poll_state;
};
using SqliteStore = QueueStore;

// Both on one connection to the file at `path`, opened and migrated once. The connection
// closes with the last of the two; they must not be used from two threads at once. Fails
// like open_sqlite_queue.
common::Expected<SqliteStore> open_sqlite_store(const std::filesystem::path& path,
                                                SqliteOptions options = {});

// Both in a pool's PostgreSQL database (agent/daemon/poll_state_pg.cpp), each on a connection of
// its own, the schema migrated once. Fails like open_postgres_queue.
common::Expected<QueueStore> open_postgres_store(const PostgresOptions& options);

}  // namespace agent
