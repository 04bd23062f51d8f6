// agent/job_executor: a job's steps as exec requests to its sandbox's broker
// (BrokerStepExecutor): results, value-free evidence, refusals that never fall back to the
// host, and a CancelToken that stops a step mid-way. A real broker process serves each test.
#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

#include "agent/cli/job_executor.hpp"
#include "agent/store/job_store.hpp"
#include "jobs/run/step_runner.hpp"
#include "sandbox/access/safe_access.hpp"
#include "sandbox/process/cancel.hpp"
#include "sandbox/process/run.hpp"
#include "tests/helpers/broker_process.hpp"
#include "tests/support/processes.hpp"
#include "tests/support/temp_dir.hpp"

using namespace std::chrono_literals;

namespace {

// A broker serving one job's identity (expiring in 10 minutes), the job's queue record, and
// an executor bound to both.
struct BrokeredJob {
    std::filesystem::path dir = tests::make_temp_dir("executor");
    std::string identity = "octo/repo@0123/7/1/gate";
    tests::BrokerProcess broker{dir, identity, agent::system_now_ms() + 600'000};
    std::unique_ptr<agent::JobQueue> queue = open_queue(dir);
    std::int64_t job = submit(*queue);
    agent::BrokerStepExecutor executor{broker.socket(), identity, queue.get(), job};

    static std::unique_ptr<agent::JobQueue> open_queue(const std::filesystem::path& dir) {
        auto queue = agent::open_sqlite_queue(dir / "q.db");
        REQUIRE(queue);
        return std::move(*queue);
    }
    static std::int64_t submit(agent::JobQueue& queue) {
        agent::JobSpec spec;
        spec.key = {"octo/repo", "0123456789abcdef0123456789abcdef01234567", "", 1};
        return queue.submit(spec)->job.id;
    }
};

// What run_step needs for a step the job runner sends to the broker: a bash step in the
// sandbox root, RUNNER_TEMP inside it (as the agent arranges), the sandbox off (the broker's
// own is the wrap).
struct BrokeredStep {
    jobs::Masker masker;
    jobs::MemoryLog log;
    jobs::JobState state;
    jobs::StepContext context;
    jobs::StepSpec spec;

    BrokeredStep(const std::filesystem::path& dir, jobs::StepExecutor& executor) {
        context.label = {"build", "step"};
        context.policy.mode = sandbox::SandboxMode::off;
        context.temp_dir = dir / "root" / "temp";
        context.masker = &masker;
        context.log = &log;
        context.host = sandbox::current_environment();
        context.executor = &executor;
        spec.shell = "bash";
        spec.working_directory = dir / "root";
    }
};

}  // namespace

TEST_CASE("a job's steps through its broker: run_step with the BrokerStepExecutor") {
    BrokeredJob fixture;
    auto& [dir, identity, broker, queue, job, executor] = fixture;

    BrokeredStep step(dir, executor);
    auto& [masker, log, state, context, spec] = step;
    spec.env = {{"STEP_SECRET", "v4lue-never-recorded"}};
    spec.script =
        "echo \"ran in $(pwd) as $$\"; echo \"answer=42\" >> \"$GITHUB_OUTPUT\"; "
        "echo \"$STEP_SECRET\" > /dev/null; echo oops >&2; exit 3";
    auto result = jobs::run_step(spec, context, state);
    CHECK(result.outcome == jobs::Outcome::failure);
    CHECK(result.exit_code == 3);
    const auto* answer = jobs::find_named(result.outputs, "answer");
    REQUIRE(answer != nullptr);
    CHECK(*answer == "42");
    CHECK(log.joined().find("output:ran in " + (dir / "root").string()) != std::string::npos);
    CHECK(log.joined().find("output:oops") != std::string::npos);
    // The evidence: one value-free event per exec.
    auto events = *queue->events(job);
    REQUIRE(events.size() == 1);
    CHECK(events[0].kind == "step");
    CHECK(events[0].body_json.find(R"("exit":3)") != std::string::npos);
    CHECK(events[0].body_json.find("v4lue") == std::string::npos);
    CHECK(events[0].body_json.find("answer") == std::string::npos);

    // A wrong identity: refused, nothing runs (on the host either).
    agent::BrokerStepExecutor impostor(broker.socket(), "octo/repo@0123/8/1/gate", queue.get(),
                                       job);
    context.executor = &impostor;
    spec.script = "touch '" + (dir / "root" / "ran").string() + "'";
    auto refused = jobs::run_step(spec, context, state);
    CHECK(refused.outcome == jobs::Outcome::failure);
    CHECK(refused.error.find("refused the step (identity)") != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(dir / "root" / "ran"));
    // No broker at all: an error, never a fallback to the host.
    agent::BrokerStepExecutor gone(dir / "nowhere.sock", identity);
    context.executor = &gone;
    auto unreachable = jobs::run_step(spec, context, state);
    CHECK(unreachable.outcome == jobs::Outcome::failure);
    CHECK(unreachable.error.find("unreachable") != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(dir / "root" / "ran"));
    events = *queue->events(job);
    REQUIRE(events.size() == 2);
    CHECK(events[1].body_json.find(R"("refusal":"identity")") != std::string::npos);
}

TEST_CASE(
    "an agent job's step that swaps RUNNER_TEMP or plants links gets nothing written or read "
    "through them") {
    BrokeredJob fixture;
    auto& [dir, identity, broker, queue, job, executor] = fixture;
    const auto host = tests::make_temp_dir("host");
    tests::write_file(host / "api-token", "AGENT-API-TOKEN-20\n");
    std::filesystem::create_directory(host / "profile.d");

    BrokeredStep step(dir, executor);
    auto& [masker, log, state, context, spec] = step;
    auto root = sandbox::SafeDir::open_trusted(dir / "root", "the job's root");  // before any step
    REQUIRE(root);
    context.temp_root = &*root;
    spec.env = {
        {"RUNNER_TEMP", context.temp_dir.string()}};  // the job runner's github environment sets it
    spec.script = "ln -sf " + (host / "api-token").string() +
                  " \"$GITHUB_ENV\"; rm \"$GITHUB_OUTPUT\"; "
                  "mkfifo \"$GITHUB_OUTPUT\"";
    auto planted = jobs::run_step(spec, context, state);
    CHECK(planted.outcome == jobs::Outcome::failure);
    CHECK(planted.error.find("$GITHUB_ENV is not a regular file") != std::string::npos);
    CHECK(planted.error.find("$GITHUB_OUTPUT is not a regular file") != std::string::npos);
    CHECK(log.joined().find("AGENT-API-TOKEN-20") == std::string::npos);
    CHECK(jobs::find_named(state.env, "API_TOKEN") == nullptr);

    spec.script = "mv \"$RUNNER_TEMP\" \"$RUNNER_TEMP.moved\" && ln -s " +
                  (host / "profile.d").string() + " \"$RUNNER_TEMP\"";
    CHECK(jobs::run_step(spec, context, state).outcome == jobs::Outcome::success);
    spec.script = "echo the next step";
    auto next = jobs::run_step(spec, context, state);
    CHECK(next.outcome == jobs::Outcome::failure);
    CHECK(next.error == "$RUNNER_TEMP is not a directory");
    CHECK(std::filesystem::is_empty(host / "profile.d"));  // no script, no file-command files
}

TEST_CASE("the BrokerStepExecutor stops a step mid-way when its CancelToken fires") {
    BrokeredJob fixture;
    auto& [dir, identity, broker, queue, job, executor] = fixture;
    auto token = sandbox::CancelToken::create();
    REQUIRE(token);
    const auto marker = tests::unique_marker();
    sandbox::RunRequest request;
    request.argv = sandbox::shell_argv("trap '' TERM; touch started; echo before; exec -a " +
                                       marker + " sleep 600");
    request.cwd = dir / "root";
    request.timeout = 600s;  // a cancel that does not work hangs the test
    request.kill_grace = 200ms;
    request.cancel = &*token;
    std::thread canceller([&] {
        while (!std::filesystem::exists(dir / "root" / "started") ||
               tests::processes_with(marker).empty())
            std::this_thread::sleep_for(10ms);
        token->cancel();
    });
    auto result = executor.run(request);
    canceller.join();
    REQUIRE(result.error);
    CHECK(result.error->kind == sandbox::RunErrorKind::cancelled);
    CHECK(result.out.head == "before\n");
    CHECK(tests::processes_with(marker).empty());
    auto events = *queue->events(job);
    REQUIRE(events.size() == 1);
    CHECK(events[0].body_json.find(R"("error":"cancelled")") != std::string::npos);
    // A token that fired before the step: nothing runs.
    request.argv = sandbox::shell_argv("touch ran");
    CHECK(executor.run(request).error->kind == sandbox::RunErrorKind::cancelled);
    CHECK_FALSE(std::filesystem::exists(dir / "root" / "ran"));
}

TEST_CASE("a job sandbox asked for egress refuses: it has no proxy of a step's own") {
    const auto dir = tests::make_temp_dir("executor");
    const agent::JobSandboxEnvironment box{dir / "sock", "octo/repo@0123/7/1/gate", dir};
    sandbox::Policy asked;
    asked.egress = {*sandbox::parse_egress_rule("crates.io")};
    const auto executor = agent::broker_executor(box, &asked);
    REQUIRE_FALSE(executor);
    CHECK(executor.error().message ==
          "--network allowlist: the job sandbox has no egress proxy (each step needs a wrap of "
          "its own): no step runs");
    asked.egress.clear();
    CHECK(agent::broker_executor(box, &asked));  // as before: the posture asked is had
}
