// github/journal: atomic entries, replace by key, unreadable files set aside, owners.

#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "github/journal.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

github::JournalEntry make_entry(std::string job_key) {
    github::JournalEntry entry;
    entry.api_url = "https://api.github.com";
    entry.owner = "octo";
    entry.repo = "demo";
    entry.check_name = "CI / " + job_key;
    entry.details_url = "https://ci.example/1";
    entry.owner_process = github::ProcessIdentity::self();
    entry.report.workflow = "CI";
    entry.report.job = job_key;
    entry.report.job_key = job_key;
    entry.report.sha = "abc";
    entry.report.log_tail = "tail with \"quotes\" and \xff invalid byte";
    return entry;
}

std::size_t files_in(const std::filesystem::path& dir) {
    std::size_t count = 0;
    for ([[maybe_unused]] const auto& item : std::filesystem::directory_iterator(dir)) ++count;
    return count;
}

}  // namespace

TEST_CASE("entries round-trip, replace by key and come back oldest first") {
    auto dir = tests::make_temp_dir("journal") / "state" / "github-journal";
    auto journal = github::Journal::open(dir);
    REQUIRE(journal.has_value());
    auto first = make_entry("a");
    auto second = make_entry("b");
    second.check_run_id = 4'000'000'123LL;
    second.annotations_sent = 50;
    REQUIRE(journal->put(first).has_value());
    REQUIRE(journal->put(second).has_value());
    first.phase = github::JournalPhase::finishing;
    REQUIRE(journal->put(first).has_value());  // replaces a's entry, now the newest
    auto entries = journal->entries();
    REQUIRE(entries.has_value());
    REQUIRE(entries->size() == 2);
    CHECK((*entries)[0].report.job_key == "b");
    CHECK((*entries)[0].check_run_id == 4'000'000'123LL);
    CHECK((*entries)[0].annotations_sent == 50);
    CHECK((*entries)[0].details_url == "https://ci.example/1");
    CHECK((*entries)[1].phase == github::JournalPhase::finishing);
    CHECK((*entries)[1].report.log_tail == "tail with \"quotes\" and \xef\xbf\xbd invalid byte");
    CHECK(files_in(dir) == 2);  // no temp files left behind

    REQUIRE(journal->remove(first.key()).has_value());
    REQUIRE(journal->remove(first.key()).has_value());  // already gone: fine
    CHECK(journal->entries()->size() == 1);
}

TEST_CASE("an unreadable entry is set aside, not trusted and not deleted") {
    auto dir = tests::make_temp_dir("journal");
    auto journal = github::Journal::open(dir).value();
    REQUIRE(journal.put(make_entry("ok")).has_value());
    tests::write_file(dir / "0000.json", "{\"kind\": \"check_run\", truncated");
    auto entries = journal.entries();
    REQUIRE(entries.has_value());
    CHECK(entries->size() == 1);
    CHECK(std::filesystem::exists(dir / "0000.json.bad"));
}

TEST_CASE("keys separate repositories, kinds and jobs") {
    auto a = make_entry("a");
    auto b = make_entry("a");
    CHECK(a.key() == b.key());
    b.repo = "other";
    CHECK(a.key() != b.key());
    b = make_entry("a");
    b.kind = github::JournalKind::status;
    CHECK(a.key() != b.key());
    CHECK(a.key().size() == 64);
}

TEST_CASE("a process identity tells a dead owner from a live one") {
    CHECK(github::ProcessIdentity::self().alive());
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) ::_exit(0);
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    github::ProcessIdentity dead{static_cast<int>(child), 12345};
    CHECK_FALSE(dead.alive());
    auto reused = github::ProcessIdentity::self();
    reused.start_time += 1;  // same pid, another process start: a reused pid
    CHECK_FALSE(reused.alive());
}
