// The job queue (agent/store/job_store.hpp) against both backends: every test runs on SQLite and on
// a real PostgreSQL 15 the binary starts itself (tests/support/postgres.hpp), each on a
// database of its own.
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "agent/store/job_store.hpp"
#include "common/fd.hpp"
#include "tests/support/postgres.hpp"
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

// Where a test's queue lives: a SQLite file in its temp dir, or a fresh PostgreSQL database.
struct Store {
    agent::QueueBackend backend = agent::QueueBackend::sqlite;
    std::filesystem::path path;  // SQLite
    std::string url;             // PostgreSQL
    std::string database;

    // A connection of its own to the queue (as another thread, process or agent has).
    common::Expected<std::unique_ptr<agent::JobQueue>> try_open(agent::Clock clock = {}) const {
        if (backend == agent::QueueBackend::sqlite)
            return agent::open_sqlite_queue(path,
                                            {10s, clock ? std::move(clock) : agent::system_now_ms});
        agent::PostgresOptions options;
        options.url = url;
        options.clock = std::move(clock);
        return agent::open_postgres_queue(options);
    }
    std::unique_ptr<agent::JobQueue> open(agent::Clock clock = {}) const {
        auto queue = try_open(std::move(clock));
        if (!queue) FAIL(queue.error().message);
        return std::move(*queue);
    }
};

const char* name_of(agent::QueueBackend backend) {
    return backend == agent::QueueBackend::sqlite ? "sqlite" : "postgresql";
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

// Each test case runs once per backend: `store` is this run's.
#define FOR_EACH_BACKEND(store)                                                                   \
    const auto backend_ = GENERATE(agent::QueueBackend::sqlite, agent::QueueBackend::postgresql); \
    INFO("backend: " << name_of(backend_));                                                       \
    Store store;                                                                                  \
    store.backend = backend_;                                                                     \
    store.path = tests::make_temp_dir("jobs") / "q.db";                                           \
    if (backend_ == agent::QueueBackend::postgresql) {                                            \
        REQUIRE_POSTGRES(server_);                                                                \
        store.database = server_->fresh_database();                                               \
        store.url = server_->url(store.database);                                                 \
    }

TEST_CASE("submit deduplicates on repository, SHA, workflow job and attempt") {
    FOR_EACH_BACKEND(store);
    auto queue = store.open();
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
    if (store.backend == agent::QueueBackend::sqlite) {
        CHECK(std::filesystem::status(store.path).permissions() ==
              (std::filesystem::perms::owner_read | std::filesystem::perms::owner_write));
        CHECK(queue->describe() == "sqlite " + store.path.string());
    } else {
        CHECK(queue->describe().starts_with("postgresql sandgate@"));
    }
}

TEST_CASE("two connections submitting the same key at once queue one job") {
    // Two agents polling one repository, or receiving the same webhook, at the same moment.
    FOR_EACH_BACKEND(store);
    auto setup = store.open();
    constexpr int k_keys = 40;
    std::vector<agent::SubmitOutcome> a(k_keys), b(k_keys);
    std::atomic<bool> go{false};
    std::atomic<int> errors{0};
    auto submitter = [&](std::vector<agent::SubmitOutcome>& out) {
        auto queue = store.try_open();
        if (!queue) {
            ++errors;
            return;
        }
        while (!go) std::this_thread::yield();
        for (int i = 0; i < k_keys; ++i) {
            auto submitted = (*queue)->submit(spec("same" + std::to_string(i)));
            if (!submitted) {
                ++errors;
                continue;
            }
            out[static_cast<std::size_t>(i)] = submitted->outcome;
        }
    };
    std::thread first(submitter, std::ref(a));
    std::thread second(submitter, std::ref(b));
    go = true;
    first.join();
    second.join();
    CHECK(errors == 0);
    for (int i = 0; i < k_keys; ++i) {
        INFO("key " << i);
        const auto& x = a[static_cast<std::size_t>(i)];
        const auto& y = b[static_cast<std::size_t>(i)];
        CHECK(((x == agent::SubmitOutcome::created) != (y == agent::SubmitOutcome::created)));
    }
    CHECK(*setup->count(agent::JobState::queued) == k_keys);
}

TEST_CASE("claim hands out the oldest job, at most N per owner, under a lease") {
    FOR_EACH_BACKEND(store);
    std::int64_t now = 1'000'000;
    auto queue = store.open([&] { return now; });
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

    REQUIRE(
        queue->complete((*a)->id, "agent-a", agent::JobState::failed, "exit 1", R"({"exit":1})"));
    auto done = *queue->get((*a)->id);
    CHECK(done->state == agent::JobState::failed);
    CHECK(done->result_json == R"({"exit":1})");
    CHECK(done->lease_owner.empty());
    CHECK_FALSE(queue->complete((*a)->id, "agent-a", agent::JobState::succeeded, "", "{}"));
    CHECK_FALSE(queue->complete((*b)->id, "agent-b", agent::JobState::succeeded, "", "{}"));
    CHECK(queue->complete((*b)->id, "agent-a", agent::JobState::running, "", "{}").error().kind ==
          common::ErrorKind::invalid_input);
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
    FOR_EACH_BACKEND(store);
    auto queue = store.open();
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
    CHECK(queue->cancel(4242, "x").error().kind == common::ErrorKind::invalid_input);

    REQUIRE(queue->submit(spec("d1", "a/x")));
    REQUIRE(queue->submit(spec("d1", "a/y")));
    REQUIRE(queue->submit(spec("d2", "a/x")));
    auto touched = queue->cancel_matching("octo/repo", "d1", "merge group destroyed");
    REQUIRE(touched);
    CHECK(touched->size() == 2);
    CHECK(*queue->count(agent::JobState::queued) == 1);
}

TEST_CASE("expired leases are re-queued or concluded, each with a report when concluded") {
    FOR_EACH_BACKEND(store);
    std::int64_t now = 5'000'000;
    auto queue = store.open([&] { return now; });
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
    FOR_EACH_BACKEND(store);
    auto queue = store.open();
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
    FOR_EACH_BACKEND(store);
    {
        auto queue = store.open();
        REQUIRE(queue->submit(spec("v1")));
    }
    {
        auto queue = store.open();
        CHECK(*queue->count(agent::JobState::queued) == 1);
    }
    if (store.backend == agent::QueueBackend::sqlite) {
        sqlite3* raw = nullptr;
        REQUIRE(sqlite3_open(store.path.c_str(), &raw) == SQLITE_OK);
        REQUIRE(sqlite3_exec(raw, "PRAGMA user_version = 99", nullptr, nullptr, nullptr) ==
                SQLITE_OK);
        sqlite3_close(raw);
    } else {
        auto* server = tests::postgres();
        auto db = server->connect(store.database);
        tests::PostgresServer::exec(db, "INSERT INTO sandgate.migrations (version) VALUES (99)");
    }
    auto refused = store.try_open();
    REQUIRE_FALSE(refused);
    CHECK(refused.error().kind == common::ErrorKind::permanent);
    CHECK(refused.error().message.find("newer") != std::string::npos);
}

TEST_CASE("postgresql: agents starting at once migrate the schema once, under its lock") {
    REQUIRE_POSTGRES(server);
    const auto database = server->fresh_database();
    const auto url = server->url(database);
    std::atomic<int> failures{0};
    std::vector<std::thread> agents;
    for (int i = 0; i < 4; ++i)
        agents.emplace_back([&] {
            agent::PostgresOptions options;
            options.url = url;
            if (!agent::open_postgres_queue(options)) ++failures;
        });
    for (auto& thread : agents) thread.join();
    CHECK(failures == 0);
    auto db = server->connect(database);
    auto versions = db.exec("SELECT count(*), max(version) FROM sandgate.migrations");
    REQUIRE(versions);
    CHECK(versions->integer(0, 0) == versions->integer(0, 1));  // each version applied once
}

TEST_CASE("two threads with their own connections never claim the same job") {
    FOR_EACH_BACKEND(store);
    auto setup = store.open();
    constexpr int k_jobs = 120;
    for (int i = 0; i < k_jobs; ++i) REQUIRE(setup->submit(spec("t" + std::to_string(i))));
    std::vector<std::int64_t> ran_a, ran_b, ran_c;
    auto claimer = [&](std::vector<std::int64_t>& ran, const char* owner) {
        auto q = store.try_open();
        if (q) ran = drain(**q, owner);
    };
    std::thread first(claimer, std::ref(ran_a), "a");
    std::thread second(claimer, std::ref(ran_b), "b");
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
    FOR_EACH_BACKEND(store);
    auto setup = store.open();
    constexpr int k_jobs = 120;
    for (int i = 0; i < k_jobs; ++i) REQUIRE(setup->submit(spec("p" + std::to_string(i))));
    std::vector<pid_t> children;
    for (int c = 0; c < 2; ++c) {
        const pid_t pid = ::fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
            int status = 0;
            try {
                auto q = store.try_open();
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
    FOR_EACH_BACKEND(store);
    auto setup = store.open();
    auto id = setup->submit(spec("k1"))->job.id;
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    common::Fd read_end(fds[0]), write_end(fds[1]);
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        auto q = store.try_open();
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

    auto restarted = store.open();  // the agent "crashy" comes back with the same id
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

TEST_CASE(
    "reports: per job in order; a conclusion never overtakes its start; an overtaken "
    "start is dropped") {
    FOR_EACH_BACKEND(store);
    std::int64_t now = 7'000'000;
    auto queue = store.open([&] { return now; });
    const auto first = queue->submit(spec("r1"))->job.id;
    const auto second = queue->submit(spec("r2"))->job.id;
    REQUIRE(*queue->claim("agent-a", 60s, 2));
    REQUIRE(*queue->claim("agent-a", 60s, 2));
    REQUIRE(queue->add_report(first, "start", "{}"));
    REQUIRE(queue->add_report(second, "start", "{}"));
    CHECK(*queue->owed_reports(std::string_view("agent-a")) == 2);  // the lease holder's
    CHECK(*queue->owed_reports(std::string_view("agent-b")) == 0);

    // A sender takes the first start; while it is in flight the job ends: its conclusion
    // waits behind the start.
    auto claimed = queue->claim_reports(1, 30s);
    REQUIRE(claimed);
    REQUIRE(claimed->size() == 1);
    CHECK((*claimed)[0].job_id == first);
    REQUIRE(queue->complete(first, "agent-a", agent::JobState::succeeded, "", "{}"));
    auto due = queue->due_reports(10);
    REQUIRE(due->size() == 1);  // the second job's start only
    CHECK((*due)[0].job_id == second);
    CHECK(queue->claim_reports(10, 30s)->size() == 1);  // second's start; first's conclusion waits
    CHECK(queue->claim_reports(10, 30s)->empty());      // both in flight
    // The first start fails (backing off for a minute): it is overtaken by its conclusion,
    // which is due now, and the start is never sent.
    REQUIRE(queue->report_failed((*claimed)[0].id, 60s));
    due = queue->due_reports(10);
    REQUIRE(due->size() == 1);
    CHECK((*due)[0].job_id == first);
    CHECK((*due)[0].kind == "conclude");
    auto conclusion = queue->claim_reports(10, 30s);
    REQUIRE(conclusion->size() == 1);
    CHECK((*conclusion)[0].kind == "conclude");
    REQUIRE(queue->report_delivered((*conclusion)[0].id));
    now += 120'000;  // long after the start's retry time: it was dropped, nothing is left
    auto left = queue->claim_reports(10, 30s);
    REQUIRE(left);
    for (const auto& report : *left) CHECK(report.job_id != first);
    CHECK(*queue->owed_reports(std::nullopt) == 1);  // the second job's start, whose lease ended

    // A start that ends before its start was ever tried: only the conclusion goes out.
    const auto third = queue->submit(spec("r3"))->job.id;
    REQUIRE(*queue->claim("agent-b", 60s, 2));
    REQUIRE(queue->add_report(third, "start", "{}"));
    REQUIRE(queue->complete(third, "agent-b", agent::JobState::failed, "exit 1", "{}"));
    auto only = queue->claim_reports(10, 30s);
    REQUIRE(only);
    std::vector<std::string> kinds;
    for (const auto& report : *only)
        if (report.job_id == third) kinds.push_back(report.kind);
    CHECK(kinds == std::vector<std::string>{"conclude"});
}

TEST_CASE(
    "reports: a claimed report is nobody else's until its lease ends; a deferral counts "
    "no attempt") {
    FOR_EACH_BACKEND(store);
    std::int64_t now = 9'000'000;
    auto queue = store.open([&] { return now; });
    auto other = store.open([&] { return now; });  // another agent's connection
    const auto id = queue->submit(spec("l1"))->job.id;
    REQUIRE(queue->add_report(id, "start", "{}"));
    auto mine = queue->claim_reports(5, 10s);
    REQUIRE(mine->size() == 1);
    CHECK(other->claim_reports(5, 10s)->empty());
    CHECK(other->due_reports(5)->empty());
    now += 11'000;  // the first sender died: the report is due again
    auto theirs = other->claim_reports(5, 10s);
    REQUIRE(theirs->size() == 1);
    CHECK((*theirs)[0].id == (*mine)[0].id);
    REQUIRE(other->report_deferred((*theirs)[0].id, 30s));  // a rate limit said 30 s
    CHECK(queue->due_reports(5)->empty());
    now += 31'000;
    auto again = queue->claim_reports(5, 10s);
    REQUIRE(again->size() == 1);
    CHECK((*again)[0].attempts == 0);
    REQUIRE(queue->report_failed((*again)[0].id, 1s));
    now += 2'000;
    CHECK(queue->due_reports(5)->front().attempts == 1);
}

TEST_CASE("reports: senders on several connections never take the same report") {
    FOR_EACH_BACKEND(store);
    auto setup = store.open();
    constexpr int k_jobs = 60;
    for (int i = 0; i < k_jobs; ++i) {
        const auto id = setup->submit(spec("s" + std::to_string(i)))->job.id;
        REQUIRE(setup->add_report(id, "conclude", R"({"state":"succeeded","reason":""})"));
    }
    std::vector<std::int64_t> sent_a, sent_b;
    auto sender = [&](std::vector<std::int64_t>& sent) {
        auto queue = store.try_open();
        if (!queue) return;
        while (true) {
            auto batch = (*queue)->claim_reports(3, 60s);
            if (!batch || batch->empty()) return;
            for (const auto& report : *batch) {
                sent.push_back(report.id);
                (void)(*queue)->report_delivered(report.id);
            }
        }
    };
    std::thread first(sender, std::ref(sent_a));
    std::thread second(sender, std::ref(sent_b));
    first.join();
    second.join();
    std::multiset<std::int64_t> all(sent_a.begin(), sent_a.end());
    all.insert(sent_b.begin(), sent_b.end());
    CHECK(all.size() == k_jobs);
    CHECK(std::set<std::int64_t>(all.begin(), all.end()).size() == k_jobs);
    CHECK(*setup->owed_reports(std::nullopt) == 0);
}

TEST_CASE(
    "postgresql: a subscriber hears what changed: a job queued or re-queued, a cancel asked "
    "for; and once after its connection came back") {
    REQUIRE_POSTGRES(server);
    const auto database = server->fresh_database();
    agent::PostgresOptions options;
    options.url = server->url(database);
    auto queue = agent::open_postgres_queue(options);
    REQUIRE(queue);
    std::mutex mutex;
    std::condition_variable changed;
    std::vector<agent::QueueChange> heard;
    auto subscription = (*queue)->subscribe([&](agent::QueueChange change) {
        std::lock_guard lock(mutex);
        heard.push_back(change);
        changed.notify_all();
    });
    REQUIRE(subscription);
    REQUIRE(*subscription != nullptr);
    // Waits for the next change heard; nullopt after a few seconds of silence.
    std::size_t taken = 0;
    auto next = [&]() -> std::optional<agent::QueueChange> {
        std::unique_lock lock(mutex);
        if (!changed.wait_for(lock, 10s, [&] { return heard.size() > taken; })) return std::nullopt;
        return heard[taken++];
    };
    CHECK(next() ==
          agent::QueueChange::unknown);  // listening: anything may have been missed before

    auto other = agent::open_postgres_queue(options);  // another agent's connection
    REQUIRE(other);
    const auto id = (*other)->submit(spec("n1"))->job.id;
    CHECK(next() == agent::QueueChange::queued);
    REQUIRE((*other)->submit(spec("n1"))->outcome ==
            agent::SubmitOutcome::duplicate);  // nothing new: silent
    REQUIRE(*(*other)->claim("a", 60s, 1));
    CHECK(*(*other)->cancel(id, "by hand") == agent::CancelOutcome::requested);
    CHECK(next() == agent::QueueChange::cancel_requested);
    REQUIRE((*other)->submit(spec("n2")));
    CHECK(next() == agent::QueueChange::queued);
    auto held = (*other)->claim("b", 60s, 1);
    REQUIRE(*held);
    REQUIRE((*other)->recover_owner("b", agent::OnLostLease::requeue, 3));
    CHECK(next() == agent::QueueChange::queued);  // re-queued for another agent

    // The listener's connection cut by the server: it reconnects (after pg::Session's backoff)
    // and says once that something may have been missed.
    auto admin = server->connect(database);
    auto cut = admin.exec(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 "
        "AND query LIKE 'LISTEN%'",
        {database});
    REQUIRE(cut);
    REQUIRE(cut->rows() == 1);
    CHECK(next() == agent::QueueChange::unknown);
    REQUIRE((*other)->submit(spec("n3")));
    CHECK(next() == agent::QueueChange::queued);
    std::lock_guard lock(mutex);
    CHECK(heard.size() == taken);  // nothing twice
}

TEST_CASE("sqlite: no notifications; its one agent polls its own file") {
    auto queue = agent::open_sqlite_queue(tests::make_temp_dir("jobs") / "q.db",
                                          {10s, agent::system_now_ms});
    REQUIRE(queue);
    auto subscription = (*queue)->subscribe([](agent::QueueChange) {});
    REQUIRE(subscription);
    CHECK(*subscription == nullptr);
}
