#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <future>
#include <thread>

#include "agent/sandboxes/sandbox_manager.hpp"
#include "agent/store/job_store.hpp"
#include "common/unix_socket.hpp"
#include "sandbox/broker/broker.hpp"
#include "sandbox/process/cancel.hpp"
#include "sandbox/process/run.hpp"
#include "tests/helpers/broker_process.hpp"
#include "tests/support/numbers.hpp"
#include "tests/support/processes.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/wrap_detect.hpp"

using namespace std::chrono_literals;

namespace {

std::int64_t now_ms() {
    return agent::system_now_ms();
}

using tests::BrokerProcess;
using tests::shell;

std::string out_of(const sandbox::BrokerReply& reply) {
    REQUIRE(reply.result);
    return reply.result->out.head;
}

agent::SandboxIdentity identity(std::string job = "build") {
    return {"octo/repo", "0123456789abcdef0123456789abcdef01234567", 42, 1, std::move(job)};
}

}  // namespace

TEST_CASE("broker requests are parsed strictly and name the bad field") {
    auto parsed =
        sandbox::parse_request(R"({"op":"exec","identity":"i","argv":["true"],"shell":"x"})");
    REQUIRE_FALSE(parsed);
    CHECK(parsed.error().message.find("'argv'") != std::string::npos);
    CHECK(sandbox::parse_request(R"({"op":"fly"})").error().message.find("'op'") !=
          std::string::npos);
    CHECK(sandbox::parse_request(R"({"op":"exec","argv":["a"],"env":{"A":1}})")
              .error()
              .message.find("'env'") != std::string::npos);
    CHECK_FALSE(sandbox::parse_request("not json"));
    const std::string big(sandbox::k_max_stdin_bytes + 1, 'x');
    sandbox::BrokerRequest request;
    request.exec.argv = {"cat"};
    request.exec.stdin_text = big;
    auto too_big = sandbox::parse_request(sandbox::encode_request(request));
    REQUIRE_FALSE(too_big);
    CHECK(too_big.error().message.find("'stdin_text'") != std::string::npos);
    CHECK(too_big.error().message.find("xxxx") == std::string::npos);  // never echoed

    request.exec.stdin_text = "hello";
    request.exec.env = {{"A", "1"}, {"B", "2"}};
    request.exec.cwd = "sub";
    request.exec.timeout = 1500ms;
    auto round = sandbox::parse_request(sandbox::encode_request(request));
    REQUIRE(round);
    CHECK(round->exec.argv == std::vector<std::string>{"cat"});
    CHECK(round->exec.env == request.exec.env);
    CHECK(round->exec.timeout == 1500ms);
    CHECK(round->exec.stdin_text == "hello");

    // Every refusal survives the wire, `unavailable` (a broker short of a resource) included.
    for (auto refusal :
         {sandbox::Refusal::busy, sandbox::Refusal::identity, sandbox::Refusal::expired,
          sandbox::Refusal::not_ready, sandbox::Refusal::invalid, sandbox::Refusal::unavailable}) {
        sandbox::BrokerReply refused;
        refused.refusal = refusal;
        refused.message = "no";
        auto parsed_reply = sandbox::parse_reply(sandbox::encode_reply(refused));
        REQUIRE(parsed_reply);
        CHECK(parsed_reply->refusal == refusal);
    }

    for (const std::string& bytes :
         std::vector<std::string>{"", "a", "ab", "abc", "abcd", std::string("\0\xff\x80", 3)})
        CHECK(sandbox::base64_decode(sandbox::base64_encode(bytes)) == bytes);
    CHECK_FALSE(sandbox::base64_decode("a=bc"));
}

TEST_CASE("the broker runs steps in its root and refuses a foreign identity or a cwd outside") {
    auto dir = tests::make_temp_dir("broker");
    // Asked to reap its steps, but not under a pid namespace's init: a step's orphans could
    // outlive a killed broker, so each step keeps its own reaper.
    BrokerProcess broker(dir, "the-job", now_ms() + 600'000, sandbox::StepReaper::broker);
    sandbox::BrokerRequest ping;
    ping.op = sandbox::BrokerOp::ping;
    auto status = sandbox::broker_call(broker.socket(), ping);
    REQUIRE(status);
    REQUIRE(status->status);
    CHECK(status->status->reaper == "per_step");
    auto request = shell("pwd; echo $GREETING; wc -c");
    request.env = {{"GREETING", "hi"}};
    request.cwd = "sub";
    request.stdin_text = "twelve bytes";
    auto reply = broker.exec(request);
    REQUIRE(reply);
    CHECK_FALSE(reply->refusal);
    CHECK(out_of(*reply) == (dir / "root" / "sub").string() + "\nhi\n12\n");
    CHECK(reply->result->exit_code == 0);

    auto foreign = shell("touch " + (dir / "ran").string());
    foreign.identity = "another-job";
    reply = broker.exec(foreign);
    REQUIRE(reply);
    REQUIRE(reply->refusal);
    CHECK(*reply->refusal == sandbox::Refusal::identity);
    CHECK_FALSE(reply->result);

    for (const char* cwd : {"..", "/etc", "sub/../../"}) {
        auto outside = shell("touch " + (dir / "ran").string());
        outside.cwd = cwd;
        reply = broker.exec(outside);
        REQUIRE(reply);
        REQUIRE(reply->refusal);
        CHECK(*reply->refusal == sandbox::Refusal::invalid);
    }
    std::filesystem::create_directory_symlink("/etc", dir / "root" / "escape");
    auto via_link = shell("touch " + (dir / "ran").string());
    via_link.cwd = "escape";
    CHECK(broker.exec(via_link)->refusal == sandbox::Refusal::invalid);
    CHECK_FALSE(std::filesystem::exists(dir / "ran"));  // no refused request ran

    sandbox::BrokerRequest shutdown;
    shutdown.op = sandbox::BrokerOp::shutdown;
    shutdown.exec.identity = "another-job";
    CHECK(sandbox::broker_call(broker.socket(), shutdown)->refusal == sandbox::Refusal::identity);
}

TEST_CASE("a request refused after the broker took it (a bad cwd) leaves it free for the next") {
    auto dir = tests::make_temp_dir("broker");
    BrokerProcess broker(dir, "job", now_ms() + 600'000);
    for (const char* cwd : {"..", "/etc", "sub/../../"}) {
        auto bad = shell("echo never");
        bad.cwd = cwd;
        auto reply = broker.exec(bad);
        REQUIRE(reply);
        REQUIRE(reply->refusal);
        CHECK(*reply->refusal == sandbox::Refusal::invalid);
        auto next = broker.exec(shell("echo served"));  // not refused as busy
        REQUIRE(next);
        INFO(next->message);  // "busy": the flag was given back after the refusal went out
        CHECK_FALSE(next->refusal);
        CHECK(out_of(*next) == "served\n");
    }
}

TEST_CASE("the broker refuses a concurrent command and anything after expiry") {
    auto dir = tests::make_temp_dir("broker");
    BrokerProcess broker(dir, "job", now_ms() + 600'000);
    const auto flag = dir / "root" / "started";
    auto slow = std::async(std::launch::async,
                           [&] { return broker.exec(shell("touch started; sleep 2; echo done")); });
    while (!std::filesystem::exists(flag)) std::this_thread::sleep_for(5ms);
    auto second = broker.exec(shell("touch " + (dir / "second").string()));
    REQUIRE(second);
    REQUIRE(second->refusal);
    CHECK(*second->refusal == sandbox::Refusal::busy);
    CHECK_FALSE(std::filesystem::exists(dir / "second"));
    auto first = slow.get();
    REQUIRE(first);
    CHECK(out_of(*first) == "done\n");
    CHECK(out_of(*broker.exec(shell("echo free again"))) == "free again\n");

    auto dir2 = tests::make_temp_dir("broker");
    BrokerProcess expired(dir2, "job", now_ms() - 1);
    auto reply = expired.exec(shell("touch " + (dir2 / "ran").string()));
    REQUIRE(reply);
    REQUIRE(reply->refusal);
    CHECK(*reply->refusal == sandbox::Refusal::expired);
    CHECK_FALSE(std::filesystem::exists(dir2 / "ran"));
}

TEST_CASE("a shutdown stops the step still running, answers it cancelled and ends the broker") {
    auto dir = tests::make_temp_dir("broker");
    BrokerProcess broker(dir, "job", now_ms() + 600'000);
    const auto marker = tests::unique_marker();
    auto running = std::async(std::launch::async, [&] {
        return broker.exec(shell("bash -c 'exec -a " + marker + " sleep 300' & wait"));
    });
    sandbox::BrokerRequest ping;
    ping.op = sandbox::BrokerOp::ping;
    for (;;) {  // until the step runs (a hang, not a timing assertion)
        auto status = sandbox::broker_call(broker.socket(), ping);
        if (status && status->status && status->status->busy) break;
        std::this_thread::sleep_for(10ms);
    }
    sandbox::BrokerRequest shutdown;
    shutdown.op = sandbox::BrokerOp::shutdown;
    shutdown.exec.identity = "job";
    auto stopped = sandbox::broker_call(broker.socket(), shutdown);
    REQUIRE(stopped);
    CHECK_FALSE(stopped->refusal);
    auto reply = running.get();  // would wait out the sleep if the step were not stopped
    REQUIRE(reply);
    REQUIRE(reply->result);
    REQUIRE(reply->result->error);
    CHECK(reply->result->error->kind == sandbox::RunErrorKind::cancelled);
    CHECK(tests::processes_with(marker).empty());
    CHECK(broker.wait_exit() == 0);
}

TEST_CASE(
    "a client that hangs up mid-step cancels it: TERM, KILL after the grace, answered cancelled") {
    auto dir = tests::make_temp_dir("broker");
    BrokerProcess broker(dir, "job", now_ms() + 600'000);
    const auto marker = tests::unique_marker();
    auto token = sandbox::CancelToken::create();
    REQUIRE(token);
    // Every process of the step ignores SIGTERM: only the SIGKILL after the grace ends it. The
    // step would otherwise run for 600 s: a cancel that does not work hangs the test.
    auto request =
        shell("trap '' TERM; bash -c 'exec -a " + marker + " sleep 600' & touch started; wait");
    request.identity = "job";
    request.timeout = 600s;
    request.kill_grace = 200ms;
    std::thread canceller([&] {
        while (!std::filesystem::exists(dir / "root" / "started") ||
               tests::processes_with(marker).empty())
            std::this_thread::sleep_for(10ms);
        token->cancel();
    });
    auto reply = sandbox::broker_call(broker.socket(), {sandbox::BrokerOp::exec, request},
                                      std::nullopt, nullptr, &*token);
    canceller.join();
    REQUIRE(reply);
    REQUIRE(reply->result);
    REQUIRE(reply->result->error);
    CHECK(reply->result->error->kind == sandbox::RunErrorKind::cancelled);
    CHECK(reply->result->signal == SIGKILL);  // the TERM was ignored: the grace ran out
    CHECK(reply->result->exit_status() == sandbox::k_cancelled_exit_status);
    CHECK(tests::processes_with(marker).empty());
    CHECK(out_of(*broker.exec(shell("echo free again"))) == "free again\n");
}

namespace {

// Keeps the output frames of a streamed exec; fires `token` once the first line has come.
class LiveOutput final : public sandbox::OutputObserver {
public:
    explicit LiveOutput(const sandbox::CancelToken* token = nullptr) : m_token(token) {}
    void on_output(sandbox::Stream stream, std::string_view chunk) override {
        (stream == sandbox::Stream::out ? out : err).append(chunk);
        ++frames;
        if (m_token != nullptr && out.find('\n') != std::string::npos) m_token->cancel();
    }
    std::string out, err;
    int frames = 0;

private:
    const sandbox::CancelToken* m_token;
};

}  // namespace

TEST_CASE("a streamed exec sends the output as it is written, then the reply with its copy") {
    auto dir = tests::make_temp_dir("broker");
    BrokerProcess broker(dir, "job", now_ms() + 600'000);
    sandbox::BrokerRequest request{sandbox::BrokerOp::exec,
                                   shell("echo one; echo oops >&2; printf '\\0\\377'; echo two")};
    request.exec.identity = "job";
    request.exec.output_frames = sandbox::OutputFrames::live;
    auto parsed = sandbox::parse_request(sandbox::encode_request(request));
    REQUIRE(parsed);
    CHECK(parsed->exec.output_frames == sandbox::OutputFrames::live);
    CHECK(sandbox::parse_request(R"({"op":"exec","argv":["a"],"stream":1})")
              .error()
              .message.find("'stream'") != std::string::npos);
    LiveOutput live;
    auto reply =
        sandbox::broker_call(broker.socket(), request, std::nullopt, nullptr, nullptr, &live);
    REQUIRE(reply);
    REQUIRE(reply->result);
    CHECK(live.out == std::string("one\n\0\377two\n", 10));
    CHECK(live.err == "oops\n");
    CHECK(live.frames >= 2);
    CHECK(reply->result->out.head == live.out);  // the reply keeps its captured copy
    // Unasked, no frame comes: the reply is the first frame.
    LiveOutput unasked;
    request.exec.output_frames = sandbox::OutputFrames::none;
    REQUIRE(
        sandbox::broker_call(broker.socket(), request, std::nullopt, nullptr, nullptr, &unasked));
    CHECK(unasked.frames == 0);
}

TEST_CASE("a streamed step is cancelled by its client mid-output, and the reply still comes") {
    auto dir = tests::make_temp_dir("broker");
    BrokerProcess broker(dir, "job", now_ms() + 600'000);
    auto token = sandbox::CancelToken::create();
    REQUIRE(token);
    // The first line arrives while the step sleeps: the cancel it fires must stop a step that
    // would otherwise run for 600 s.
    sandbox::BrokerRequest request{sandbox::BrokerOp::exec, shell("echo first; exec sleep 600")};
    request.exec.identity = "job";
    request.exec.timeout = 600s;
    request.exec.kill_grace = 200ms;
    request.exec.output_frames = sandbox::OutputFrames::live;
    LiveOutput live(&*token);
    auto reply =
        sandbox::broker_call(broker.socket(), request, std::nullopt, nullptr, &*token, &live);
    REQUIRE(reply);
    REQUIRE(reply->result);
    REQUIRE(reply->result->error);
    CHECK(reply->result->error->kind == sandbox::RunErrorKind::cancelled);
    CHECK(live.out == "first\n");
}

TEST_CASE("a client that dies mid-step (its connection closed) leaves no step running") {
    auto dir = tests::make_temp_dir("broker");
    BrokerProcess broker(dir, "job", now_ms() + 600'000);
    const auto marker = tests::unique_marker();
    sandbox::BrokerRequest request{sandbox::BrokerOp::exec,
                                   shell("touch started; exec -a " + marker + " sleep 600")};
    request.exec.identity = "job";
    request.exec.timeout = 600s;
    {
        auto connection = common::connect_unix(broker.socket());
        REQUIRE(connection);
        REQUIRE(common::write_frame(connection->get(), sandbox::encode_request(request)));
        while (!std::filesystem::exists(dir / "root" / "started") ||
               tests::processes_with(marker).empty())
            std::this_thread::sleep_for(10ms);
    }  // closed without reading the reply
    sandbox::BrokerRequest ping;
    ping.op = sandbox::BrokerOp::ping;
    for (;;) {  // until the broker is free (a hang, not a timing assertion, if it never is)
        auto status = sandbox::broker_call(broker.socket(), ping);
        REQUIRE(status);
        REQUIRE(status->status);
        if (!status->status->busy) break;
        std::this_thread::sleep_for(10ms);
    }
    CHECK(tests::processes_with(marker).empty());
    CHECK(out_of(*broker.exec(shell("echo next"))) == "next\n");
}

TEST_CASE("the broker's socket is owner-only and refuses a shared directory") {
    auto dir = tests::make_temp_dir("broker");
    BrokerProcess broker(dir, "job", now_ms() + 600'000);
    struct stat info {};
    REQUIRE(::stat(broker.socket().c_str(), &info) == 0);
    CHECK((info.st_mode & 0777) == 0600);
    std::filesystem::create_directories(dir / "open");
    ::chmod((dir / "open").c_str(), 0755);
    auto listener = common::listen_unix(dir / "open" / "s.sock");
    REQUIRE_FALSE(listener);
    CHECK(listener.error().kind == common::ErrorKind::invalid_input);
}

TEST_CASE("the manager: lifecycle, refusals, value-free evidence, idempotent teardown") {
    auto dir = tests::make_temp_dir("manager");
    auto queue = agent::open_sqlite_queue(dir / "q.db");
    REQUIRE(queue);
    agent::JobSpec spec;
    spec.key = {"octo/repo", "0123456789abcdef0123456789abcdef01234567", "ci/build", 1};
    const auto job = (*queue)->submit(spec)->job.id;
    agent::SandboxManager manager({dir / "state", SANDGATE_BINARY, queue->get(), 30s});
    agent::SandboxOptions options;
    options.policy.mode = sandbox::SandboxMode::off;  // the wrap has its own test below
    options.job = job;
    options.env_names = {"SECRET_TOKEN"};
    auto box = manager.create(identity(), options);
    REQUIRE(box);
    CHECK(box->state == agent::SandboxState::ready);
    CHECK((*(*queue)->get(job))->policy_json.find("SECRET_TOKEN") != std::string::npos);
    CHECK_FALSE(manager.create(identity(), options));  // one sandbox per identity

    auto request = shell("echo $SECRET_TOKEN | wc -c; wc -c");
    request.env = {{"SECRET_TOKEN", "s3cr3t-env-value"}};
    request.stdin_text = "s3cr3t-stdin-text";
    auto reply = manager.exec(box->id, identity(), request);
    REQUIRE(reply);
    CHECK(out_of(*reply) == "17\n17\n");

    auto wrong = manager.exec(box->id, identity("test"), shell("true"));
    REQUIRE(wrong);
    CHECK(wrong->refusal == sandbox::Refusal::identity);

    auto slow = std::async(std::launch::async,
                           [&] { return manager.exec(box->id, identity(), shell("sleep 2")); });
    while (manager.get(box->id)->state != agent::SandboxState::active)
        std::this_thread::sleep_for(1ms);
    auto busy = manager.exec(box->id, identity(), shell("true"));
    REQUIRE(busy);
    CHECK(busy->refusal == sandbox::Refusal::busy);
    REQUIRE(slow.get());

    auto events = (*queue)->events(job);
    REQUIRE(events);
    REQUIRE(events->size() == 4);
    CHECK((*events)[0].body_json.find("\"out_bytes\":6") != std::string::npos);
    CHECK((*events)[1].body_json.find("\"refused\":\"identity\"") != std::string::npos);
    CHECK((*events)[2].body_json.find("\"refused\":\"busy\"") != std::string::npos);

    const auto root = box->root;
    REQUIRE(std::filesystem::exists(root));
    REQUIRE(manager.destroy(box->id));
    CHECK_FALSE(std::filesystem::exists(root));
    REQUIRE(manager.destroy(box->id));  // idempotent
    CHECK(manager.alive() == 0);
    auto gone = manager.exec(box->id, identity(), shell("true"));
    CHECK_FALSE(gone);  // no sandbox: an error, and nothing ran on the host

    queue->reset();  // close the database, then look for the secrets in its bytes
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
        if (!entry.is_regular_file()) continue;
        const auto bytes = tests::read_file(entry.path());
        CHECK(bytes.find("s3cr3t-stdin") == std::string::npos);
        CHECK(bytes.find("s3cr3t-env") == std::string::npos);
    }
}

TEST_CASE("the manager refuses an expired sandbox and reaps it") {
    auto dir = tests::make_temp_dir("manager");
    agent::SandboxManager manager({dir / "state", SANDGATE_BINARY, nullptr, 30s});
    agent::SandboxOptions options;
    options.policy.mode = sandbox::SandboxMode::off;
    options.ttl = 1s;
    auto box = manager.create(identity(), options);
    REQUIRE(box);
    while (agent::system_now_ms() < box->expires_at_ms) std::this_thread::sleep_for(50ms);
    auto reply = manager.exec(box->id, identity(), shell("true"));
    REQUIRE(reply);
    CHECK(reply->refusal == sandbox::Refusal::expired);
    CHECK(manager.reap_expired() == 1);
    CHECK(manager.alive() == 0);
    CHECK_FALSE(std::filesystem::exists(dir / "state" / "sandboxes" / box->id));
}

TEST_CASE("stale sandboxes of a previous life are reaped with their brokers") {
    auto dir = tests::make_temp_dir("manager");
    const auto stale = dir / "state" / "sandboxes" / "sb-stale";
    {
        BrokerProcess orphan(stale, "old", now_ms() + 600'000);
        tests::write_file(stale / "meta.json", R"({"owner_pid":999999999})");
        agent::SandboxManager manager({dir / "state", SANDGATE_BINARY, nullptr, 30s});
        CHECK(manager.reap_stale() == 1);
        CHECK_FALSE(std::filesystem::exists(stale));
        sandbox::BrokerRequest ping;
        ping.op = sandbox::BrokerOp::ping;
        CHECK_FALSE(sandbox::broker_call(orphan.socket(), ping));  // killed, socket gone
    }
}

TEST_CASE("under bwrap, the steps of a job share one set of namespaces") {
    SKIP_UNDER_WRAP("a nested bwrap cannot start inside the wrap");
    auto dir = tests::make_temp_dir("manager");
    agent::SandboxManager manager({dir / "state", SANDGATE_BINARY, nullptr, 60s});
    agent::SandboxOptions options;  // the default: bwrap, network none
    auto box = manager.create(identity(), options);
    REQUIRE(box);
    auto first = manager.exec(box->id, identity(),
                              shell("echo carried > /tmp/mark; readlink /proc/self/ns/pid "
                                    "/proc/self/ns/mnt /proc/self/ns/net"));
    REQUIRE(first);
    REQUIRE(first->result);
    CHECK(first->result->exit_code == 0);
    CHECK(first->result->sandbox_json.find("off") != std::string::npos);  // run in mode off inside
    // A decoded result's posture is that text, never the default object of a local run.
    CHECK(first->result->sandbox.is_null());
    CHECK(sandbox::posture_text(*first->result) == first->result->sandbox_json);
    auto second = manager.exec(box->id, identity(),
                               shell("cat /tmp/mark; readlink /proc/self/ns/pid "
                                     "/proc/self/ns/mnt /proc/self/ns/net"));
    REQUIRE(second);
    CHECK(out_of(*second) == "carried\n" + out_of(*first));
    // ... and they are not the host's.
    std::error_code ec;
    const auto host_ns = std::filesystem::read_symlink("/proc/self/ns/mnt", ec).string();
    CHECK(out_of(*first).find(host_ns) == std::string::npos);
    const bool leaked =
        std::filesystem::exists("/tmp/mark") && tests::read_file("/tmp/mark") == "carried\n";
    CHECK_FALSE(leaked);
    REQUIRE(manager.destroy(box->id));
}

TEST_CASE("under bwrap, the broker reaps its steps itself and no orphan outlives its step") {
    SKIP_UNDER_WRAP("a nested bwrap cannot start inside the wrap");
    auto dir = tests::make_temp_dir("manager");
    agent::SandboxManager manager({dir / "state", SANDGATE_BINARY, nullptr, 60s});
    auto box = manager.create(identity(), {});  // bwrap, network none
    REQUIRE(box);
    sandbox::BrokerRequest ping;
    ping.op = sandbox::BrokerOp::ping;
    auto status = sandbox::broker_call(box->socket, ping);
    REQUIRE(status);
    REQUIRE(status->status);
    CHECK(status->status->reaper == "broker");  // pid 2 under bwrap's init: its own subreaper

    const auto marker = tests::unique_marker();
    // A daemon (setsid, stdio closed) and a double-forked orphan: both come back to the broker.
    auto daemons = manager.exec(box->id, identity(),
                                shell("setsid bash -c 'exec -a " + marker +
                                      "-a sleep 300' </dev/null >/dev/null 2>&1 & "
                                      "( bash -c 'exec -a " +
                                      marker +
                                      "-b sleep 300' </dev/null >/dev/null 2>&1 & ); "
                                      "echo started"));
    REQUIRE(daemons);
    REQUIRE(daemons->result);
    CHECK(daemons->result->exit_code == 0);
    CHECK(out_of(*daemons) == "started\n");
    CHECK(tests::processes_with(marker).empty());

    // A step that times out takes its whole tree along.
    auto slow = shell("bash -c 'exec -a " + marker + "-c sleep 300' & wait");
    slow.timeout = 1s;
    auto timed_out = manager.exec(box->id, identity(), slow);
    REQUIRE(timed_out);
    REQUIRE(timed_out->result);
    CHECK(timed_out->result->timed_out);
    CHECK(tests::processes_with(marker).empty());
    // ... and the next step runs as usual.
    auto next = manager.exec(box->id, identity(), shell("echo again"));
    REQUIRE(next);
    CHECK(out_of(*next) == "again\n");
    REQUIRE(manager.destroy(box->id));
}

TEST_CASE("Reaper::caller: the calling subreaper kills and reaps every orphan of a run") {
    // In a process of its own: the subreaper attribute is process-wide and permanent.
    const auto marker = tests::unique_marker();
    const pid_t pid = ::fork();
    if (pid == 0) {
        if (!sandbox::make_caller_subreaper()) ::_exit(10);
        sandbox::RunRequest request;
        request.argv = {"bash", "-c",
                        "setsid bash -c 'exec -a " + marker +
                            " sleep 300' </dev/null >/dev/null 2>&1 & echo $!"};
        request.env = sandbox::child_environment(sandbox::current_environment(), {}, {});
        request.policy.mode = sandbox::SandboxMode::off;
        request.cgroup = sandbox::CgroupUse::never;
        request.reaper = sandbox::Reaper::caller;
        auto result = sandbox::run(request);
        if (result.exit_code != 0 || result.tree_kill != sandbox::TreeKill::subreaper) ::_exit(11);
        // Killed and reaped (a zombie would still answer kill 0), and no child is left.
        const pid_t orphan = tests::to_number<pid_t>(result.out.head).value_or(-1);
        if (orphan <= 0) ::_exit(13);
        if (::kill(orphan, 0) == 0 || errno != ESRCH) ::_exit(12);
        if (::waitpid(-1, nullptr, WNOHANG | __WALL) != -1 || errno != ECHILD) ::_exit(13);
        request.argv = {"bash", "-c", "bash -c 'exec -a " + marker + " sleep 300' & wait"};
        request.timeout = 1s;
        result = sandbox::run(request);
        if (!result.timed_out) ::_exit(14);
        if (!tests::processes_with(marker).empty()) ::_exit(15);
        ::_exit(0);
    }
    REQUIRE(pid > 0);
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);  // else the number says which check failed
    CHECK(tests::processes_with(marker).empty());
}
