#include <catch2/catch.hpp>

#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "agent/job_store.hpp"
#include "sandbox/fd.hpp"
#include "tests/support/temp_dir.hpp"

using namespace std::chrono_literals;

namespace {

agent::JobSpec spec(std::string sha, std::string job = "ci.yml/build", std::int64_t attempt = 1) {
    agent::JobSpec s;
    s.key = {"octo/repo", std::move(sha), std::move(job), attempt};
    s.ref = "refs/heads/main";
    s.event = "pull_request";
    s.source = "api";
    s.payload_json = R"({"pr":1})";
    return s;
}

std::unique_ptr<agent::JobQueue> open(const std::filesystem::path& path,
                                      agent::Clock clock = agent::system_now_ms) {
    auto queue = agent::open_sqlite_queue(path, {10s, std::move(clock)});
    if (!queue) FAIL(queue.error().message);
    return std::move(*queue);
}

// Claims and completes jobs until none is left; returns the ids it ran.
std::vector<std::int64_t> drain(agent::JobQueue& queue, const std::string& owner) {
    std::vector<std::int64_t> ids;
    while (true) {
        auto job = queue.claim(owner, 60s, 4);
        if (!job) throw std::runtime_error(job.error().message);
        if (!*job) return ids;
        ids.push_back((*job)->id);
        auto ok = queue.complete((*job)->id, owner, agent::JobState::succeeded, "", "{}");
        if (!ok) throw std::runtime_error(ok.error().message);
    }
}

}  // namespace

TEST_CASE("submit deduplicates on repository, SHA, workflow job and attempt") {
    auto dir = tests::make_temp_dir("jobs");
    auto queue = open(agent::default_queue_path(dir));
    auto first = queue->submit(spec("a1"));
    REQUIRE(first);
    CHECK(first->outcome == agent::SubmitOutcome::created);
    auto again = queue->submit(spec("a1"));
    REQUIRE(again);
    CHECK(again->outcome == agent::SubmitOutcome::duplicate);
    CHECK(again->job.id == first->job.id);
    CHECK(queue->submit(spec("a1", "ci.yml/build", 2))->outcome == agent::SubmitOutcome::created);
    CHECK(queue->submit(spec("a1", "ci.yml/test"))->outcome == agent::SubmitOutcome::created);
    CHECK(queue->submit(spec("b2"))->outcome == agent::SubmitOutcome::created);
    CHECK(*queue->count(agent::JobState::queued) == 4);
    auto job = queue->get(first->job.id);
    REQUIRE(job);
    REQUIRE(*job);
    CHECK((*job)->spec.payload_json == R"({"pr":1})");
    CHECK((*job)->spec.key == spec("a1").key);
    agent::JobFilter filter;
    filter.state = agent::JobState::queued;
    filter.sha = "a1";
    CHECK(queue->list(filter)->size() == 3);
    CHECK_FALSE(*queue->get(9999));
    CHECK(std::filesystem::status(agent::default_queue_path(dir)).permissions() ==
          (std::filesystem::perms::owner_read | std::filesystem::perms::owner_write));
}

TEST_CASE("claim hands out the oldest job, at most N per owner, under a lease") {
    auto dir = tests::make_temp_dir("jobs");
    std::int64_t now = 1'000'000;
    auto queue = open(dir / "q.db", [&] { return now; });
    for (const char* sha : {"s1", "s2", "s3"}) REQUIRE(queue->submit(spec(sha)));
    auto a = queue->claim("agent-a", 30s, 2);
    auto b = queue->claim("agent-a", 30s, 2);
    REQUIRE((a && *a && b && *b));
    CHECK((*a)->spec.key.sha == "s1");
    CHECK((*b)->spec.key.sha == "s2");
    CHECK((*a)->lease_owner == "agent-a");
    CHECK((*a)->lease_expires_ms == now + 30000);
    CHECK((*a)->claims == 1);
    auto third = queue->claim("agent-a", 30s, 2);
    REQUIRE(third);
    CHECK_FALSE(*third);  // the limit holds
    auto other = queue->claim("agent-b", 30s, 2);
    REQUIRE((other && *other));
    CHECK((*other)->spec.key.sha == "s3");
    CHECK_FALSE(*queue->claim("agent-b", 30s, 2));  // nothing queued

    now += 10000;
    auto beat = queue->heartbeat((*a)->id, "agent-a", 30s);
    REQUIRE(beat);
    CHECK(beat->lease_expires_ms == now + 30000);
    CHECK_FALSE(beat->cancel_requested);
    CHECK_FALSE(queue->heartbeat((*a)->id, "agent-b", 30s));  // not its lease

    REQUIRE(queue->complete((*a)->id, "agent-a", agent::JobState::failed, "exit 1",
                            R"({"exit":1})"));
    auto done = *queue->get((*a)->id);
    CHECK(done->state == agent::JobState::failed);
    CHECK(done->result_json == R"({"exit":1})");
    CHECK(done->lease_owner.empty());
    CHECK_FALSE(queue->complete((*a)->id, "agent-a", agent::JobState::succeeded, "", "{}"));
    CHECK_FALSE(queue->complete((*b)->id, "agent-b", agent::JobState::succeeded, "", "{}"));
    CHECK(queue->complete((*b)->id, "agent-a", agent::JobState::running, "", "{}").error().kind ==
          sandbox::ErrorKind::invalid_input);
    // The freed slot is usable again; a conclusion report is owed for the completed job.
    CHECK_FALSE(*queue->claim("agent-a", 30s, 2));  // nothing queued, but no error
    auto reports = queue->due_reports(10);
    REQUIRE(reports);
    REQUIRE(reports->size() == 1);
    CHECK((*reports)[0].job_id == (*a)->id);
    CHECK((*reports)[0].kind == "conclude");
    CHECK((*reports)[0].body_json.find("\"failed\"") != std::string::npos);
}

TEST_CASE("cancel: queued now, running on request, finished untouched") {
    auto dir = tests::make_temp_dir("jobs");
    auto queue = open(dir / "q.db");
    auto queued = queue->submit(spec("c1"))->job;
    auto running_id = queue->submit(spec("c2"))->job.id;
    auto running = queue->claim("me", 60s, 1);
    REQUIRE((running && *running));
    CHECK((*running)->id == queued.id);  // FIFO: c1 is claimed first
    CHECK(*queue->cancel(running_id, "api") == agent::CancelOutcome::cancelled);
    CHECK((*queue->get(running_id))->state == agent::JobState::cancelled);
    CHECK(*queue->cancel(queued.id, "merge group destroyed") == agent::CancelOutcome::requested);
    auto beat = queue->heartbeat(queued.id, "me", 60s);
    REQUIRE(beat);
    CHECK(beat->cancel_requested);
    REQUIRE(queue->complete(queued.id, "me", agent::JobState::cancelled, "merge group destroyed",
                            "{}"));
    CHECK(*queue->cancel(queued.id, "again") == agent::CancelOutcome::already_finished);
    CHECK(queue->cancel(4242, "x").error().kind == sandbox::ErrorKind::invalid_input);

    REQUIRE(queue->submit(spec("d1", "a/x")));
    REQUIRE(queue->submit(spec("d1", "a/y")));
    REQUIRE(queue->submit(spec("d2", "a/x")));
    auto touched = queue->cancel_matching("octo/repo", "d1", "merge group destroyed");
    REQUIRE(touched);
    CHECK(touched->size() == 2);
    CHECK(*queue->count(agent::JobState::queued) == 1);
}

TEST_CASE("expired leases are re-queued or concluded, each with a report when concluded") {
    auto dir = tests::make_temp_dir("jobs");
    std::int64_t now = 5'000'000;
    auto queue = open(dir / "q.db", [&] { return now; });
    auto id = queue->submit(spec("e1"))->job.id;
    REQUIRE(*queue->claim("dead-agent", 10s, 1));
    CHECK(queue->recover_expired(agent::OnLostLease::requeue, 2)->empty());  // not yet
    now += 11000;
    auto recovered = queue->recover_expired(agent::OnLostLease::requeue, 2);
    REQUIRE(recovered);
    REQUIRE(recovered->size() == 1);
    CHECK((*recovered)[0].state == agent::JobState::queued);
    CHECK_FALSE(queue->heartbeat(id, "dead-agent", 10s));  // the old holder lost it
    auto again = queue->claim("new-agent", 10s, 1);
    REQUIRE((again && *again));
    CHECK((*again)->claims == 2);
    now += 11000;
    recovered = queue->recover_expired(agent::OnLostLease::requeue, 2);
    REQUIRE(recovered->size() == 1);
    CHECK((*recovered)[0].state == agent::JobState::failed);  // out of attempts
    auto job = *queue->get(id);
    CHECK(job->state == agent::JobState::failed);
    CHECK(job->reason.find("new-agent") != std::string::npos);
    CHECK(queue->due_reports(10)->size() == 1);

    auto concluded = queue->submit(spec("e2"))->job.id;
    REQUIRE(*queue->claim("x", 1s, 1));
    now += 2000;
    REQUIRE(queue->recover_expired(agent::OnLostLease::conclude, 5)->size() == 1);
    CHECK((*queue->get(concluded))->state == agent::JobState::failed);

    auto cancelled = queue->submit(spec("e3"))->job.id;
    REQUIRE(*queue->claim("y", 1s, 1));
    REQUIRE(*queue->cancel(cancelled, "api") == agent::CancelOutcome::requested);
    now += 2000;
    REQUIRE(queue->recover_expired(agent::OnLostLease::requeue, 5)->size() == 1);
    CHECK((*queue->get(cancelled))->state == agent::JobState::cancelled);

    auto reports = queue->due_reports(10);
    REQUIRE(reports->size() == 3);
    REQUIRE(queue->report_failed((*reports)[0].id, 60s));
    REQUIRE(queue->report_delivered((*reports)[1].id));
    CHECK(queue->due_reports(10)->size() == 1);
    now += 61000;
    auto later = queue->due_reports(10);
    REQUIRE(later->size() == 2);
    CHECK(later->front().attempts == 1);
}

TEST_CASE("policy and value-free evidence are kept on the job's record") {
    auto dir = tests::make_temp_dir("jobs");
    auto queue = open(dir / "q.db");
    auto id = queue->submit(spec("p1"))->job.id;
    REQUIRE(queue->record_policy(id, R"({"network":"none","env":["PATH"]})"));
    REQUIRE(queue->append_event(id, "exec", R"({"exit":0})"));
    REQUIRE(queue->append_event(id, "exec", R"({"exit":1})"));
    CHECK((*queue->get(id))->policy_json == R"({"network":"none","env":["PATH"]})");
    auto events = queue->events(id);
    REQUIRE(events->size() == 2);
    CHECK((*events)[1].body_json == R"({"exit":1})");
    CHECK_FALSE(queue->record_policy(777, "{}"));
}

TEST_CASE("a schema newer than this build is refused, an existing one reopened") {
    auto dir = tests::make_temp_dir("jobs");
    const auto path = dir / "q.db";
    { auto queue = open(path); REQUIRE(queue->submit(spec("v1"))); }
    { auto queue = open(path); CHECK(*queue->count(agent::JobState::queued) == 1); }
    sqlite3* raw = nullptr;
    REQUIRE(sqlite3_open(path.c_str(), &raw) == SQLITE_OK);
    REQUIRE(sqlite3_exec(raw, "PRAGMA user_version = 99", nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(raw);
    auto refused = agent::open_sqlite_queue(path);
    REQUIRE_FALSE(refused);
    CHECK(refused.error().message.find("newer") != std::string::npos);
}

TEST_CASE("two threads with their own connections never claim the same job") {
    auto dir = tests::make_temp_dir("jobs");
    const auto path = dir / "q.db";
    auto setup = open(path);
    constexpr int k_jobs = 120;
    for (int i = 0; i < k_jobs; ++i) REQUIRE(setup->submit(spec("t" + std::to_string(i))));
    std::vector<std::int64_t> ran_a, ran_b, ran_c;
    std::thread first([&] { auto q = open(path); ran_a = drain(*q, "a"); });
    std::thread second([&] { auto q = open(path); ran_b = drain(*q, "b"); });
    ran_c = drain(*setup, "c");  // a third claimer sharing the setup connection
    first.join();
    second.join();
    std::multiset<std::int64_t> all(ran_a.begin(), ran_a.end());
    all.insert(ran_b.begin(), ran_b.end());
    all.insert(ran_c.begin(), ran_c.end());
    CHECK(all.size() == k_jobs);
    CHECK(std::set<std::int64_t>(all.begin(), all.end()).size() == k_jobs);
    CHECK(*setup->count(agent::JobState::succeeded) == k_jobs);
}

TEST_CASE("two processes never claim the same job") {
    auto dir = tests::make_temp_dir("jobs");
    const auto path = dir / "q.db";
    auto setup = open(path);
    constexpr int k_jobs = 120;
    for (int i = 0; i < k_jobs; ++i) REQUIRE(setup->submit(spec("p" + std::to_string(i))));
    std::vector<pid_t> children;
    for (int c = 0; c < 2; ++c) {
        const pid_t pid = ::fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
            int status = 0;
            try {
                auto q = agent::open_sqlite_queue(path);
                if (!q) ::_exit(3);
                drain(**q, "proc-" + std::to_string(c));
            } catch (...) {
                status = 4;
            }
            ::_exit(status);
        }
        children.push_back(pid);
    }
    for (pid_t pid : children) {
        int status = 0;
        REQUIRE(::waitpid(pid, &status, 0) == pid);
        CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
    }
    agent::JobFilter filter;
    filter.state = agent::JobState::succeeded;
    filter.limit = 1000;
    auto done = setup->list(filter);
    REQUIRE(done);
    CHECK(done->size() == k_jobs);  // each completed exactly once: a double claim fails complete
    CHECK(*setup->count(agent::JobState::queued) == 0);
    CHECK(*setup->count(agent::JobState::running) == 0);
}

TEST_CASE("a process killed while holding a lease: its job is recovered on restart") {
    auto dir = tests::make_temp_dir("jobs");
    const auto path = dir / "q.db";
    auto setup = open(path);
    auto id = setup->submit(spec("k1"))->job.id;
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    sandbox::Fd read_end(fds[0]), write_end(fds[1]);
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        auto q = agent::open_sqlite_queue(path);
        if (!q) ::_exit(3);
        auto job = (*q)->claim("crashy", 3600s, 1);
        if (!job || !*job) ::_exit(4);
        const char ok = 'k';
        if (::write(write_end.get(), &ok, 1) != 1) ::_exit(5);
        while (true) ::pause();
    }
    write_end.reset();
    char got = 0;
    REQUIRE(::read(read_end.get(), &got, 1) == 1);
    REQUIRE(::kill(pid, SIGKILL) == 0);
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    CHECK((*setup->get(id))->state == agent::JobState::running);

    auto restarted = open(path);  // the agent "crashy" comes back with the same id
    CHECK(restarted->recover_expired(agent::OnLostLease::requeue, 3)->empty());  // lease valid
    auto recovered = restarted->recover_owner("crashy", agent::OnLostLease::conclude, 3);
    REQUIRE(recovered);
    REQUIRE(recovered->size() == 1);
    CHECK((*recovered)[0].job_id == id);
    auto job = *restarted->get(id);
    CHECK(job->state == agent::JobState::failed);
    CHECK(job->lease_owner.empty());
    auto reports = restarted->due_reports(5);
    REQUIRE(reports->size() == 1);
    CHECK((*reports)[0].kind == "conclude");
}
