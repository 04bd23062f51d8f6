#pragma once
// The report journal: a write-ahead log of check-run and status reports, one JSON file per job
// under STATE_DIR/github-journal/, so that nothing is lost when GitHub cannot be reached.
//
// - A job's entry is written (phase `started`) before its check run is created, rewritten
//   (phase `finishing`) before it is concluded, and removed once GitHub has everything.
// - Entries are replaced atomically (temp file, fsync, rename, fsync of the directory): after a
//   crash a file is either the old entry or the new one, never half of one.
// - An entry whose file cannot be parsed is renamed to *.bad (kept for a human) and skipped.
// - The owner (pid and process start time) is recorded, so that a `started` entry left by a
//   process that is gone can be told apart from a job that is still running elsewhere.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "github/job_report.hpp"

namespace github {

enum class JournalKind { check_run, status };
enum class JournalPhase { started, finishing };

struct ProcessIdentity {
    int pid = 0;
    std::uint64_t start_time = 0;  // /proc/PID/stat field 22 (clock ticks since boot)
    static ProcessIdentity self();
    // True while that very process (not a reused pid) is still running.
    bool alive() const;
};

struct JournalEntry {
    JournalKind kind = JournalKind::check_run;
    JournalPhase phase = JournalPhase::started;
    std::string api_url;
    std::string owner;
    std::string repo;
    std::string check_name;
    std::optional<std::string> details_url;
    std::optional<std::int64_t> check_run_id;
    std::size_t annotations_sent = 0;  // annotations GitHub already has for this report
    ProcessIdentity owner_process;
    std::uint64_t sequence = 0;  // set by put(): replay order
    JobReport report;

    // The file stem: a hash of api_url, owner/repo, kind, sha and job key.
    std::string key() const;
};

class Journal {
public:
    // Creates `directory` (mode 0700) when missing. unavailable when it cannot.
    static common::Expected<Journal> open(std::filesystem::path directory);

    // Writes or atomically replaces the entry for entry.key().
    common::Expected<void> put(JournalEntry entry) const;
    // Removes the entry for `key`; a missing entry is not an error.
    common::Expected<void> remove(const std::string& key) const;
    // Every readable entry, oldest first.
    common::Expected<std::vector<JournalEntry>> entries() const;

    const std::filesystem::path& directory() const { return m_directory; }

private:
    explicit Journal(std::filesystem::path directory) : m_directory(std::move(directory)) {}
    std::filesystem::path m_directory;
};

// The journal's place under a state directory.
// Inline: the agent daemon looks at it without linking the journal (nor OpenSSL).
inline std::filesystem::path journal_directory(const std::filesystem::path& state_dir) {
    return state_dir / "github-journal";
}

}  // namespace github
