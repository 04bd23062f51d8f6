// The bwrap arm's plan (sandbox/wrap/wrap_bwrap.cpp, with the mounts and offline layouts it uses),
// checked on its output and by running it under the real bwrap. The limits' own tests are in
// test_limits.cpp, the mount helpers' in test_mounts.cpp.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "sandbox/process/limits.hpp"
#include "sandbox/process/run.hpp"
#include "sandbox/process/spawn.hpp"
#include "sandbox/wrap/mounts.hpp"
#include "sandbox/wrap/probe.hpp"
#include "sandbox/wrap/shims.hpp"
#include "sandbox/wrap/wrap_bwrap.hpp"
#include "tests/support/processes.hpp"
#include "tests/support/read_fd.hpp"
#include "tests/support/run_helpers.hpp"
#include "tests/support/scoped_env.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/wrap_detect.hpp"
#include "tests/support/wrap_spawn.hpp"

namespace {

std::vector<std::string> options_of(const sandbox::WrapPlan& plan) {
    auto options = sandbox::read_bwrap_options(plan);
    REQUIRE(options);
    return *options;
}

bool has_sequence(const std::vector<std::string>& args, std::vector<std::string> wanted) {
    return std::search(args.begin(), args.end(), wanted.begin(), wanted.end()) != args.end();
}

tests::Spawned run_plan(const sandbox::RunRequest& request) {
    auto plan = sandbox::plan_wrap(request);
    REQUIRE(plan);
    return tests::spawn_plan(*plan);
}

using tests::request_in;
using tests::ScopedEnv;

}  // namespace

TEST_CASE(
    "the plan starts bwrap with a clean environment, its options on fd 3 and -- before the "
    "payload") {
    SKIP_UNDER_WRAP("nested user namespaces are disabled inside the wrap, so no plan can be made");
    const auto dir = tests::make_temp_dir("wrap");
    auto plan = sandbox::plan_wrap(request_in(dir, {"--bind", "/", "/"}));
    REQUIRE(plan);
    REQUIRE(plan->argv.size() >= 4);
    // bwrap itself is spawned (limits are set by the process core); the payload follows "--".
    // --hostname alone outside the options: the mark that they are complete (see below).
    CHECK(plan->argv[1] == "--hostname");
    CHECK(plan->argv[2] == "sandgate");
    CHECK(std::find(plan->argv.begin(), plan->argv.end(), "--disable-userns") == plan->argv.end());
    auto dashdash = std::find(plan->argv.begin(), plan->argv.end(), "--args");
    REQUIRE(dashdash != plan->argv.end());
    CHECK(*(dashdash + 1) == "3");
    CHECK(*(dashdash + 2) == "--");
    CHECK(std::vector<std::string>(dashdash + 3, plan->argv.end()) != std::vector<std::string>{});
    CHECK(plan->env.empty());
    CHECK(plan->inherited_fds.size() >= 3);
    CHECK(plan->tree_kill == sandbox::TreeKill::pidns);
    const auto options = options_of(*plan);
    for (const char* flag :
         {"--unshare-user", "--unshare-ipc", "--unshare-pid", "--unshare-net",
          "--unshare-cgroup-try", "--die-with-parent", "--new-session", "--clearenv"})
        CHECK(std::find(options.begin(), options.end(), flag) != options.end());
    // --unshare-uts last and only there (no --unshare-all): bwrap refuses --hostname without it.
    CHECK(options.back() == "--unshare-uts");
    CHECK(std::count(options.begin(), options.end(), "--unshare-uts") == 1);
    CHECK(std::find(options.begin(), options.end(), "--unshare-all") == options.end());
    CHECK(std::find(options.begin(), options.end(), "--hostname") == options.end());
    CHECK(has_sequence(options, {"--cap-drop", "ALL"}));
    CHECK(has_sequence(options, {"--seccomp", "4"}));
    CHECK(has_sequence(options, {"--uid", "1000", "--gid", "1000"}));
    CHECK(has_sequence(options, {"--remount-ro", "/"}));
    // The working directory bound at its own path; as root its source is the portal's entry
    // (the sandbox's unprivileged host identity may not reach it itself).
    bool cwd_bound = false;
    for (std::size_t i = 0; i + 2 < options.size(); ++i)
        cwd_bound = cwd_bound ||
                    (options[i] == "--bind" && options[i + 2] == dir.string() &&
                     (options[i + 1] == dir.string() ||
                      (::geteuid() == 0 && options[i + 1].starts_with("/tmp/.sandgate-portal/"))));
    CHECK(cwd_bound);
    CHECK(std::find(options.begin(), options.end(), "--share-net") == options.end());
    // The runner tools first on PATH (sandbox/wrap/shims.hpp).
    CHECK(has_sequence(
        options,
        {"--setenv", "PATH", std::string(sandbox::k_shim_dir) + ":/usr/local/bin:/usr/bin:/bin"}));
    // Never /run, the host /tmp or the real HOME.
    const std::string real_home = std::getenv("HOME") ? std::getenv("HOME") : "/root";
    for (std::size_t i = 0; i + 1 < options.size(); ++i) {
        CHECK_FALSE(options[i].starts_with("/run"));
        CHECK_FALSE(options[i].starts_with("/var/run"));
        if (options[i] == "--bind" || options[i] == "--ro-bind") {
            CHECK(options[i + 1] != "/tmp");
            CHECK(options[i + 1] != real_home);
        }
    }
    CHECK(has_sequence(options, {"--tmpfs", "/tmp"}));
    CHECK(plan->description["mode"] == "bwrap");
}

TEST_CASE(
    "the files handed to bwrap are sealed memfds or read-only host files, each run reading its own "
    "offset") {
    SKIP_UNDER_WRAP("nested user namespaces are disabled inside the wrap, so no plan can be made");
    const auto dir = tests::make_temp_dir("wrap");
    auto first = sandbox::plan_wrap(request_in(dir, {"true"}));
    auto second = sandbox::plan_wrap(request_in(dir, {"true"}));
    REQUIRE(first);
    REQUIRE(second);
    REQUIRE(first->inherited_fds.size() == second->inherited_fds.size());
    REQUIRE(first->inherited_fds.size() > 5);
    // fd 3 is the options (per run), fd 4 the seccomp program, 5... the files. The last two
    // are pipes (write ends): bwrap's status, then the payload reporter's (payload_status.hpp).
    REQUIRE(first->status);
    REQUIRE(first->payload_status);
    const auto count = first->inherited_fds.size();
    for (auto [fd, read_end] :
         {std::pair{first->inherited_fds[count - 2].get(), first->status.get()},
          std::pair{first->inherited_fds[count - 1].get(), first->payload_status.get()}}) {
        struct stat pipe_st {};
        REQUIRE(::fstat(fd, &pipe_st) == 0);
        CHECK(S_ISFIFO(pipe_st.st_mode));
        CHECK(::write(fd, "{}", 2) == 2);
        char echo[8] = {};
        CHECK(::read(read_end, echo, sizeof echo) == 2);
    }
    for (std::size_t i = 0; i + 2 < first->inherited_fds.size(); ++i) {
        if (i == 0) continue;
        INFO("fd " << i + 3);
        const int a = first->inherited_fds[i].get();
        const int b = second->inherited_fds[i].get();
        const std::string from_first = tests::read_to_eof(a);
        CHECK_FALSE(from_first.empty());
        CHECK(tests::read_to_eof(b) ==
              from_first);                // the first read to EOF did not move the second
        CHECK(::write(a, "x", 1) == -1);  // read-only
        // Generated contents are memfds sealed against every writer; host files are the
        // root-owned files themselves, opened read-only.
        struct stat st {};
        REQUIRE(::fstat(a, &st) == 0);
        if (::fcntl(a, F_GET_SEALS) < 0)
            CHECK((st.st_uid == 0 && (st.st_mode & 022) == 0));
        else
            CHECK((::fcntl(a, F_GET_SEALS) & F_SEAL_WRITE) != 0);
    }
    const auto options = options_of(*first);
    CHECK(has_sequence(options, {"--file", "5"}));
}

TEST_CASE(
    "a machine that refuses user namespaces gets sandbox_unavailable and what to do; nothing "
    "runs") {
    // No skip: here the wrap works and bwrap's own `exit 1` must stay the payload's; inside
    // the dogfood wrap (nested user namespaces disabled) bwrap refuses to start, and the run
    // says why (the probes run after that failure, not before every run).
    const auto dir = tests::make_temp_dir("wrap");
    // Inside the dogfood wrap TMPDIR lies in its private scratch, which a nested wrap refuses
    // as a working directory: there the build directory (our cwd) serves.
    const auto cwd =
        sandbox::refuse_private_scratch(dir, "--cwd") ? dir : std::filesystem::current_path();
    auto request = request_in(cwd, {"/bin/sh", "-c", "echo ran; exit 1"});
    const auto result = sandbox::run(request);
    INFO(result.err.head);
    if (sandbox::check_user_namespaces()) {
        CHECK_FALSE(result.error);
        CHECK(result.exit_code == 1);  // the payload's exit 1, not a wrapper failure
        CHECK(result.out.head == "ran\n");
        CHECK(result.sandbox["mode"] == "bwrap");
    } else {
        REQUIRE(result.error);
        CHECK(result.error->kind == sandbox::RunErrorKind::sandbox_unavailable);
        CHECK(result.error->message.find("user namespaces are refused") != std::string::npos);
        CHECK(result.error->message.find("--sandbox off") != std::string::npos);  // what to do
        CHECK(result.exit_status() == 125);
        CHECK_FALSE(result.exit_code);
        CHECK(result.out.bytes == 0);
    }
}

TEST_CASE(
    "a bwrap that fails before the payload is a sandbox failure, never the payload's exit 1") {
    // A stand-in bwrap first on PATH fails the way bwrap does when a bind source vanished:
    // a message on stderr, exit 1, no {"exit-code"} on its status channel.
    const auto dir = tests::make_temp_dir("wrap");
    const auto bin = dir / "bin";
    std::filesystem::create_directories(bin);
    {
        std::ofstream script(bin / "bwrap");
        script << "#!/bin/sh\necho 'bwrap: Can'\\''t find source path /gone: No such file or "
                  "directory' >&2\nexit 1\n";
    }
    std::filesystem::permissions(bin / "bwrap", std::filesystem::perms::owner_all);
    const char* old_path = std::getenv("PATH");
    tests::ScopedEnv path("PATH", bin.string() + ":" + (old_path ? old_path : "/usr/bin:/bin"));
    const auto cwd =
        sandbox::refuse_private_scratch(dir, "--cwd") ? dir : std::filesystem::current_path();
    const auto result = sandbox::run(request_in(cwd, {"/bin/sh", "-c", "echo ran; exit 1"}));
    INFO(result.err.head);
    REQUIRE(result.error);
    CHECK(result.error->kind == sandbox::RunErrorKind::sandbox_unavailable);
    if (sandbox::check_user_namespaces())
        CHECK(result.error->message.find("bwrap could not build the sandbox") != std::string::npos);
    CHECK(result.exit_status() == 125);
    CHECK_FALSE(result.exit_code);
    CHECK(result.out.bytes == 0);
    CHECK(result.err.head.find("find source path") != std::string::npos);  // bwrap's own word
}

TEST_CASE("an option-looking payload is a command, never a bwrap option") {
    SKIP_UNDER_WRAP("nested bwrap cannot mount a new /proc");
    const auto dir = tests::make_temp_dir("wrap");
    auto result = run_plan(request_in(dir, {"--bind", "/", "/", "sh"}));
    CHECK(result.status == 127);
    CHECK(result.err.find("--bind") != std::string::npos);
}

TEST_CASE("exit statuses: the child's code, 128+signal, 127 not found, 126 not executable") {
    SKIP_UNDER_WRAP("nested bwrap cannot mount a new /proc");
    const auto dir = tests::make_temp_dir("wrap");
    CHECK(run_plan(request_in(dir, {"sh", "-c", "exit 7"})).status == 7);
    CHECK(run_plan(request_in(dir, {"sh", "-c", "kill -USR1 $$"})).status == 128 + SIGUSR1);
    auto missing = run_plan(request_in(dir, {"no-such-program-sandgate"}));
    CHECK(missing.status == 127);
    CHECK(missing.err.find("no-such-program-sandgate") != std::string::npos);
    tests::write_file(dir / "script.sh", "#!/bin/sh\necho hi\n");
    CHECK(run_plan(request_in(dir, {"./script.sh"})).status == 126);
    ::chmod((dir / "script.sh").c_str(), 0755);
    auto ran = run_plan(request_in(dir, {"./script.sh"}));
    CHECK(ran.status == 0);
    CHECK(ran.out == "hi\n");
    // A program that exists on the host but not inside the wrap is not found.
    CHECK(run_plan(request_in(dir, {"/root/.bashrc"})).status == 127);
}

TEST_CASE("a payload that dies of a signal reports the signal under the wrap, as without it") {
    SKIP_UNDER_WRAP("nested bwrap cannot mount a new /proc");
    const auto dir = tests::make_temp_dir("wrap");
    // The reporter (sandbox/wrap/payload_status.hpp) tells a signal from an exit code of 128+N.
    auto killed = sandbox::run(request_in(dir, {"sh", "-c", "kill -USR1 $$"}));
    INFO(killed.err.head);
    REQUIRE_FALSE(killed.error);
    CHECK_FALSE(killed.exit_code);
    REQUIRE(killed.signal);
    CHECK(*killed.signal == SIGUSR1);
    CHECK(killed.exit_status() == 128 + SIGUSR1);
    auto segv = sandbox::run(request_in(dir, {"sh", "-c", "kill -SEGV $$"}));
    REQUIRE(segv.signal);
    CHECK(*segv.signal == SIGSEGV);
    // An exit code that looks like a signal stays an exit code.
    auto exited = sandbox::run(request_in(dir, {"sh", "-c", "exit 138"}));
    REQUIRE(exited.exit_code);
    CHECK(*exited.exit_code == 138);
    CHECK_FALSE(exited.signal);
    // The same through the command line: "signal": N in the JSON, exit 128+N.
    const auto cli = tests::run_sandgate(
        dir, {"exec", "--sandbox", "bwrap", "--json", "--", "sh", "-c", "kill -TERM $$"});
    INFO(cli.output);
    CHECK(cli.exit_code == 128 + SIGTERM);
    CHECK((cli.output.find("\"signal\":15") != std::string::npos ||
           cli.output.find("\"signal\": 15") != std::string::npos));
    // The reporter is the payload's parent.
    auto parent = sandbox::run(request_in(dir, {"sh", "-c", "cat /proc/$PPID/comm"}));
    CHECK(parent.out.head.find(".sandgate-stat") != std::string::npos);
}

TEST_CASE("a bind destination through a symlink is refused before anything runs") {
    SKIP_UNDER_WRAP("nested user namespaces are disabled inside the wrap, so no plan can be made");
    const auto dir = tests::make_temp_dir("wrap");
    std::filesystem::create_directories(dir / "real");
    std::filesystem::create_symlink("/etc", dir / "link");
    auto request = request_in(dir, {"true"});
    request.policy.writable = {dir / "link"};
    auto plan = sandbox::plan_wrap(request);
    REQUIRE_FALSE(plan);
    CHECK(plan.error().kind == common::ErrorKind::invalid_input);
    CHECK(plan.error().message.find("symlink") != std::string::npos);
    request.policy.writable = {dir / "link" / "ssl"};
    CHECK_FALSE(sandbox::plan_wrap(request));
    auto in_link = request_in(dir / "link", {"true"});
    CHECK_FALSE(sandbox::plan_wrap(in_link));
    request.policy.writable = {dir / "real"};
    CHECK(sandbox::plan_wrap(request));
}

TEST_CASE(
    "a working directory in the private scratch is refused, even where it exists on the host") {
    SKIP_UNDER_WRAP("nested user namespaces are disabled inside the wrap, so no plan can be made");
    const auto dir = tests::make_temp_dir("wrap");
    const std::filesystem::path root(sandbox::k_private_scratch);
    const bool made_root = std::filesystem::create_directory(root);
    const auto inside = root / dir.filename();
    std::filesystem::create_directory(inside);
    const std::string flag = (dir / "ran").string();
    const auto result = sandbox::run(request_in(inside, {"/bin/sh", "-c", "touch " + flag}));
    const auto plan = sandbox::plan_wrap(request_in(inside / "sub" / "..", {"true"}));
    std::filesystem::remove(inside);
    if (made_root) std::filesystem::remove(root);
    REQUIRE(result.error);
    CHECK(result.error->kind == sandbox::RunErrorKind::invalid_request);
    CHECK(result.error->message.starts_with("--cwd " + inside.string() + ": "));
    CHECK(result.error->message.find("private scratch") != std::string::npos);
    CHECK(result.exit_status() == 125);
    CHECK_FALSE(std::filesystem::exists(flag));
    REQUIRE_FALSE(plan);  // normalised before the check
    CHECK(plan.error().kind == common::ErrorKind::invalid_input);
    // Elsewhere under /tmp nothing changes: the scratch's name only is reserved.
    CHECK(sandbox::refuse_private_scratch("/tmp/sandgate-runner", "--cwd"));
    CHECK(sandbox::refuse_private_scratch(dir, "--cwd"));
    CHECK_FALSE(sandbox::refuse_private_scratch("/tmp/./sandgate-run/", "--cwd"));
}

TEST_CASE("the worktree, HOME and TMPDIR are writable; the rest is read-only; --read-only holds") {
    SKIP_UNDER_WRAP("nested bwrap cannot mount a new /proc");
    const auto dir = tests::make_temp_dir("wrap");
    const auto ro = tests::make_temp_dir("wrap-ro");
    tests::write_file(ro / "file", "x");
    // Readable by anyone: as root the sandbox is an unprivileged host uid, which root's 0700
    // temp dir would shut out (test_seams.cpp checks that it does).
    std::filesystem::permissions(
        ro, std::filesystem::perms::owner_all | std::filesystem::perms::group_read |
                std::filesystem::perms::group_exec | std::filesystem::perms::others_read |
                std::filesystem::perms::others_exec);
    auto request =
        request_in(dir, {"sh", "-c",
                         "echo a > worktree-file && echo b > \"$HOME/h\" && "
                         "echo c > \"$TMPDIR/t\" && echo d > /tmp/private && "
                         "! touch /usr/x 2>/dev/null && ! touch /etc/x 2>/dev/null && "
                         "! touch \"$1/file\" 2>/dev/null && ! touch /newfile 2>/dev/null && "
                         "cat \"$1/file\" && echo ok",
                         "sh", ro.string()});
    request.policy.read_only = {ro};
    auto result = run_plan(request);
    CHECK(result.status == 0);
    CHECK(result.out == "xok\n");
    CHECK(tests::read_file(dir / "worktree-file") == "a\n");
    CHECK(tests::read_file(ro / "file") == "x");
}

TEST_CASE("the per-run scratch is the wrap's own tmpfs: nothing on the host, fresh each run") {
    SKIP_UNDER_WRAP("nested bwrap cannot mount a new /proc");
    const auto dir = tests::make_temp_dir("wrap");
    const std::string script =
        "test -e $HOME/d && echo stale; mkdir -p $HOME/d $XDG_CACHE_HOME $CARGO_HOME && "
        "chmod 500 $HOME/d && echo t > $TMPDIR/t && stat -f -c %T $HOME $TMPDIR && "
        "stat -c %a:%u $HOME/.. $HOME && grep -c offline $HOME/.m2/settings.xml && "
        "echo changed >> $HOME/.m2/settings.xml && echo $HOME";
    auto plan = sandbox::plan_wrap(request_in(dir, {"sh", "-c", script}));
    REQUIRE(plan);
    CHECK(plan->description["scratch_in"] == "tmpfs");
    CHECK(plan->description["scratch_kept"] == false);
    const auto options = options_of(*plan);
    CHECK(std::find(options.begin(), options.end(), "--bind") != options.end());
    auto first = tests::spawn_plan(*plan);
    INFO(first.err);
    CHECK(first.status == 0);
    CHECK(first.out == "tmpfs\ntmpfs\n700:1000\n700:1000\n1\n/tmp/sandgate-run/home\n");
    CHECK_FALSE(std::filesystem::exists("/tmp/sandgate-run/home/d"));
    // The next run starts from an empty scratch: nothing of the first survived it.
    auto second = run_plan(request_in(dir, {"sh", "-c", script}));
    CHECK(second.status == 0);
    CHECK(second.out.find("stale") == std::string::npos);
}

TEST_CASE(
    "with a toolchain cache the per-run scratch is on the host and removed after; --scratch is "
    "kept") {
    SKIP_UNDER_WRAP("nested bwrap cannot mount a new /proc");
    const auto dir = tests::make_temp_dir("wrap");
    const auto cache = tests::make_temp_dir("wrap-cache");
    std::filesystem::path home;
    {
        auto request =
            request_in(dir, {"sh", "-c", "mkdir -p $HOME/d && chmod 500 $HOME/d && echo $HOME"});
        request.policy.toolchain_cache = cache;
        auto plan = sandbox::plan_wrap(request);
        REQUIRE(plan);
        CHECK(plan->description["scratch_in"] == "host");
        auto result = tests::spawn_plan(*plan);
        home = result.out.substr(0, result.out.size() - 1);
        CHECK(std::filesystem::exists(home / "d"));
    }
    CHECK_FALSE(std::filesystem::exists(home));
    const auto kept = tests::make_temp_dir("wrap-scratch");
    auto request = request_in(dir, {"sh", "-c", "echo kept > $HOME/f"});
    request.policy.scratch = kept;
    { CHECK(run_plan(request).status == 0); }
    CHECK(tests::read_file(kept / "home/f") == "kept\n");
}

TEST_CASE("--hide masks files and directories; the agent's state dir is always masked") {
    SKIP_UNDER_WRAP("nested bwrap cannot mount a new /proc");
    const auto dir = tests::make_temp_dir("wrap");
    tests::write_file(dir / "secret.txt", "CANARY-HIDE-FILE");
    tests::write_file(dir / "secrets/key", "CANARY-HIDE-DIR");
    tests::write_file(dir / "state/sandgate/token", "CANARY-STATE");
    ScopedEnv state("XDG_STATE_HOME", (dir / "state").string());
    auto request = request_in(
        dir,
        {"sh", "-c",
         "cat secret.txt secrets/key state/sandgate/token; ls secrets state/sandgate; echo end"});
    request.policy.hide = {dir / "secret.txt", dir / "secrets", dir / "absent"};
    auto result = run_plan(request);
    CHECK(result.out.find("CANARY") == std::string::npos);
    CHECK(result.out.find("end") != std::string::npos);
    CHECK(tests::read_file(dir / "secret.txt") == "CANARY-HIDE-FILE");
}

TEST_CASE("--network host shares the network and shows resolv.conf; none does not") {
    SKIP_UNDER_WRAP("nested user namespaces are disabled inside the wrap, so no plan can be made");
    const auto dir = tests::make_temp_dir("wrap");
    auto request = request_in(dir, {"true"});
    request.policy.network = sandbox::NetworkMode::host;
    auto plan = sandbox::plan_wrap(request);
    REQUIRE(plan);
    const auto options = options_of(*plan);
    CHECK(std::find(options.begin(), options.end(), "--unshare-net") == options.end());
    CHECK(std::find(options.begin(), options.end(), "CARGO_NET_OFFLINE") == options.end());
    request.policy.network = sandbox::NetworkMode::none;
    auto none = sandbox::plan_wrap(request);
    REQUIRE(none);
    const auto none_options = options_of(*none);
    CHECK(std::find(none_options.begin(), none_options.end(), "/etc/resolv.conf") ==
          none_options.end());
    CHECK(has_sequence(none_options, {"--setenv", "CARGO_NET_OFFLINE", "true"}));
    request.policy.offline = sandbox::Offline::off;
    auto online = sandbox::plan_wrap(request);
    REQUIRE(online);
    const auto online_options = options_of(*online);
    CHECK(std::find(online_options.begin(), online_options.end(), "CARGO_NET_OFFLINE") ==
          online_options.end());
}

TEST_CASE("the payload's environment is the request's plus the wrap's; none of the agent's") {
    SKIP_UNDER_WRAP("nested bwrap cannot mount a new /proc");
    const auto dir = tests::make_temp_dir("wrap");
    ScopedEnv secret("SANDGATE_TEST_AGENT_SECRET", "CANARY-AGENT-ENV");
    auto request = request_in(dir, {"sh", "-c", "env; cat /proc/1/environ /proc/1/cmdline"});
    request.env.emplace_back("STEP_VAR", "step-value");
    request.env.emplace_back("HOME", "/root");
    auto result = run_plan(request);
    CHECK(result.status == 0);
    CHECK(result.out.find("CANARY-AGENT-ENV") == std::string::npos);
    CHECK(result.out.find("STEP_VAR=step-value") != std::string::npos);
    CHECK(result.out.find("HOME=/root") == std::string::npos);
    CHECK(result.out.find("step-value\0", 0) != std::string::npos);
}

TEST_CASE("a warm toolchain cache seeds a per-run home by allowlist and stays read-only") {
    SKIP_UNDER_WRAP("nested bwrap cannot mount a new /proc");
    const auto dir = tests::make_temp_dir("wrap");
    const auto cache = tests::make_temp_dir("wrap-cache");
    tests::write_file(cache / "cargo/registry/index/entry", "index");
    tests::write_file(cache / "cargo/credentials.toml", "CANARY-CARGO-TOKEN");
    tests::write_file(cache / "cargo/config.toml", "[registry]\ntoken = \"CANARY-CONFIG-TOKEN\"\n");
    tests::write_file(cache / "pip/wheelhouse/pkg-1.0-py3-none-any.whl", "wheel");
    auto request =
        request_in(dir, {"sh", "-c",
                         "cat $CARGO_HOME/registry/index/entry; echo; "
                         "cat $CARGO_HOME/credentials.toml $CARGO_HOME/config.toml 2>/dev/null; "
                         "echo poison > $CARGO_HOME/registry/index/entry; "
                         "echo poison > \"$1/cargo/registry/index/entry\" 2>/dev/null || echo ro; "
                         "echo $PIP_FIND_LINKS; grep -c offline $HOME/.m2/settings.xml",
                         "sh", cache.string()});
    request.policy.toolchain_cache = cache;
    auto result = run_plan(request);
    CHECK(result.out.find("index\n") == 0);
    CHECK(result.out.find("CANARY") == std::string::npos);
    CHECK(result.out.find("ro\n") != std::string::npos);
    CHECK(result.out.find((cache / "pip/wheelhouse").string()) != std::string::npos);
    CHECK(tests::read_file(cache / "cargo/registry/index/entry") == "index");
}

TEST_CASE("no bwrap on PATH fails closed with what to do") {
    const auto empty = tests::make_temp_dir("wrap-path");
    ScopedEnv path("PATH", empty.string());
    auto plan = sandbox::plan_wrap(request_in(empty, {"true"}));
    REQUIRE_FALSE(plan);
    CHECK(plan.error().kind == common::ErrorKind::unavailable);
    CHECK(plan.error().message.find("bubblewrap") != std::string::npos);
    CHECK(plan.error().message.find("--sandbox off") != std::string::npos);
}

TEST_CASE("the host's /tmp, /run, HOME and the root are never bound, whatever the flags say") {
    SKIP_UNDER_WRAP("nested user namespaces are disabled inside the wrap, so no plan can be made");
    const auto dir = tests::make_temp_dir("wrap");
    for (const char* cwd : {"/tmp", "/", "/run"}) {
        auto plan = sandbox::plan_wrap(request_in(cwd, {"true"}));
        REQUIRE_FALSE(plan);
        CHECK(plan.error().kind == common::ErrorKind::invalid_input);
    }
    ScopedEnv home("HOME", dir.string());
    CHECK_FALSE(sandbox::plan_wrap(request_in(dir, {"true"})));
    auto request = request_in(dir / "..", {"true"});
    CHECK_FALSE(sandbox::plan_wrap(request));
    const auto other = tests::make_temp_dir("wrap");
    auto ro = request_in(other, {"true"});
    ro.policy.read_only = {"/"};
    CHECK_FALSE(sandbox::plan_wrap(ro));
    ro.policy.read_only = {};
    ro.policy.writable = {"/var/tmp"};
    CHECK_FALSE(sandbox::plan_wrap(ro));
}

TEST_CASE(
    "an egress allowlist: the container arm, --network host and --sandbox off refuse it, naming "
    "the flag; nothing runs") {
    const auto dir = tests::make_temp_dir("wrap");
    const auto marker = dir / "ran";
    auto request = request_in(dir, {"touch", marker.string()});
    request.policy.egress = {{"crates.io", 443}, {"*.example.org", 8080}};
    auto host = request;
    host.policy.network = sandbox::NetworkMode::host;  // the host's network is not a filter
    auto widened = sandbox::plan_wrap(host);
    REQUIRE_FALSE(widened);
    CHECK(widened.error().kind == common::ErrorKind::invalid_input);
    CHECK(widened.error().message.starts_with("--allow-egress crates.io:443"));
    CHECK(sandbox::run(host).exit_status() == 125);

    auto container = request;
    container.policy.mode = sandbox::SandboxMode::container;
    container.policy.image = "debian:12";
    auto refused = sandbox::plan_wrap(container);
    REQUIRE_FALSE(refused);
    CHECK(refused.error().kind == common::ErrorKind::unavailable);
    CHECK(refused.error().message.find("container") != std::string::npos);
    auto result = sandbox::run(container);
    REQUIRE(result.error);
    CHECK(result.error->kind == sandbox::RunErrorKind::sandbox_unavailable);
    CHECK(result.exit_status() == 125);

    auto off = request;
    off.policy.mode = sandbox::SandboxMode::off;
    auto unwrapped = sandbox::run(off);
    REQUIRE(unwrapped.error);
    CHECK(unwrapped.error->kind == sandbox::RunErrorKind::invalid_request);
    CHECK(unwrapped.error->message.find("--allow-egress crates.io:443") != std::string::npos);
    CHECK(unwrapped.exit_status() == 125);
    CHECK_FALSE(std::filesystem::exists(marker));
}

TEST_CASE("sandbox::run under the wrap returns only once every process of the sandbox is gone") {
    SKIP_UNDER_WRAP("nested user namespaces are disabled inside the wrap, so no sandbox starts");
    // The daemon closed its stdio, so the pipes' EOF says nothing about it; bwrap's pid 1 leaves
    // only after it, and the run waits for that pid 1 (the test process adopts nothing).
    const auto dir = tests::make_temp_dir("wrap");
    const std::string name = tests::unique_process_name();
    const auto result =
        sandbox::run(request_in(dir, {"python3", "-c", tests::k_slow_dying_daemon, name}));
    const auto left = tests::processes_named(name);  // before anything else, right after the return
    CHECK(result.exit_status() == 0);
    CHECK(left.empty());
}
