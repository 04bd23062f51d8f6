// The sandbox's runner tools (sandbox/wrap/shims.hpp): sudo as root of a user namespace of the
// sandbox's own (both ways: sandgate as root, mapping to its --sandbox-user, and sandgate
// unprivileged), apt-get/apt against the machine's dpkg status, python beside python3.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>
#include <vector>

#include "sandbox/process/run.hpp"
#include "sandbox/wrap/shims.hpp"
#include "tests/support/public_dir.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/wrap_detect.hpp"
#include "tests/support/wrap_spawn.hpp"

namespace {

#define K_NESTED "the wrap refuses the nested bwrap a test would start"

sandbox::RunResult run_unwrapped(const std::filesystem::path& cwd, std::vector<std::string> argv) {
    sandbox::RunRequest request = tests::request_in(cwd, std::move(argv));
    request.policy.mode = sandbox::SandboxMode::off;
    request.timeout = std::chrono::seconds(60);
    return sandbox::run(request);
}

// `script` run by sh inside the default wrap, in `cwd`.
sandbox::RunResult wrapped(const std::filesystem::path& cwd, const std::string& script) {
    sandbox::RunRequest request = tests::request_in(cwd, {"/bin/sh", "-c", script});
    request.timeout = std::chrono::seconds(60);
    auto result = sandbox::run(request);
    UNSCOPED_INFO("stdout: " << result.out.head << "\nstderr: " << result.err.head);
    if (result.error) UNSCOPED_INFO("error: " << result.error->message);
    return result;
}

std::size_t lines_of(const std::string& text) {
    std::size_t count = 0;
    for (char c : text) count += c == '\n' ? 1 : 0;
    return count;
}

// A package this machine has, as dpkg says (the shim reads the same status).
bool installed(const std::string& package) {
    const auto result = run_unwrapped("/", {"dpkg-query", "-W", "-f=${db:Status-Abbrev}", package});
    return result.exit_status() == 0 && result.out.head.starts_with("ii");
}

}  // namespace

TEST_CASE("sudo runs a command as root of the sandbox's own user namespace, never as host root") {
    SKIP_UNDER_WRAP(K_NESTED);
    const tests::PublicDir dir("shims");
    const auto binary = dir.path / "sandgate";
    std::filesystem::copy_file(SANDGATE_BINARY, binary);  // uid 65534 may not reach the build tree
    const auto work = dir.path / "work";
    std::filesystem::create_directory(work);
    std::filesystem::permissions(work, std::filesystem::perms::all);
    const std::string script =
        "id -u; sudo id -u; sudo -E -n -H -u root -- sh -c 'touch rootfile; stat -c %u rootfile'; "
        "sudo -u nobody true; echo refused=$?; sudo -u root id -u; sudo FOO=bar sh -c 'echo $FOO'";
    // The host uid the sandbox maps: the --sandbox-user (65534 by default) as root, else ours.
    const auto check = [&](std::vector<std::string> prefix, uid_t host_uid) {
        std::vector<std::string> argv = std::move(prefix);
        argv.insert(argv.end(), {binary.string(), "exec", "--cwd", work.string(), "--", "/bin/sh",
                                 "-c", script});
        const auto result = run_unwrapped(work, argv);
        INFO("stdout: " << result.out.head << "\nstderr: " << result.err.head);
        CHECK(result.exit_status() == 0);
        CHECK(result.out.head == "1000\n0\n0\nrefused=1\n0\nbar\n");
        // One line for the refusal, naming the user.
        CHECK(result.err.head.find("sudo: -u nobody: the sandbox has only root") !=
              std::string::npos);
        std::size_t sudo_lines = 0;
        for (std::size_t at = 0; (at = result.err.head.find("sudo:", at)) != std::string::npos;
             ++at)
            ++sudo_lines;
        CHECK(sudo_lines == 1);
        struct stat st {};
        REQUIRE(::stat((work / "rootfile").c_str(), &st) == 0);
        CHECK(st.st_uid == host_uid);
        CHECK(st.st_uid != 0);
        std::filesystem::remove(work / "rootfile");
    };
    if (::geteuid() == 0) {
        SECTION("sandgate as root: the sandbox's host uid is --sandbox-user's (65534)") {
            check({}, 65534);
        }
        SECTION("sandgate unprivileged: the sandbox's host uid is sandgate's own") {
            check({"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"}, 65534);
        }
    } else {
        check({}, ::geteuid());  // this process is the unprivileged way
    }
}

TEST_CASE(
    "apt-get install: the machine's packages succeed with one line, missing ones fail with 100") {
    SKIP_UNDER_WRAP(K_NESTED);
    const auto dir = tests::make_temp_dir("shims-apt");
    REQUIRE(installed("coreutils"));
    REQUIRE(installed("dpkg"));
    REQUIRE_FALSE(installed("sandgate-no-such-package"));

    auto present =
        wrapped(dir, "sudo apt-get install -y -q --no-install-recommends coreutils dpkg=1.0");
    CHECK(present.exit_status() == 0);
    CHECK(present.out.head ==
          "apt-get install: already installed on this machine: coreutils dpkg\n");
    CHECK(present.err.head.empty());

    auto apt = wrapped(dir, "apt install -y coreutils");
    CHECK(apt.exit_status() == 0);
    CHECK(lines_of(apt.out.head) == 1);

    auto missing = wrapped(dir, "sudo apt-get install -y coreutils sandgate-no-such-package");
    CHECK(missing.exit_status() == 100);
    CHECK(missing.out.head.empty());
    CHECK(lines_of(missing.err.head) == 1);
    CHECK(missing.err.head.find("sandgate-no-such-package") != std::string::npos);
    CHECK(missing.err.head.find("coreutils") == std::string::npos);
    CHECK(missing.err.head.find("administrator") != std::string::npos);

    auto update = wrapped(dir, "sudo apt-get -qq update");
    CHECK(update.exit_status() == 0);
    CHECK(lines_of(update.out.head) == 1);

    auto remove = wrapped(dir, "sudo apt-get remove -y coreutils");
    CHECK(remove.exit_status() == 100);
    CHECK(lines_of(remove.err.head) == 1);
}

TEST_CASE("python exists in the wrap where python3 does") {
    SKIP_UNDER_WRAP(K_NESTED);
    const auto dir = tests::make_temp_dir("shims-python");
    const auto host = run_unwrapped(dir, {"python3", "--version"});
    REQUIRE(host.exit_status() == 0);
    REQUIRE(host.out.head.starts_with("Python 3."));
    auto inside = wrapped(dir, "python --version; command -v python");
    CHECK(inside.exit_status() == 0);
    CHECK(inside.out.head == host.out.head + std::string(sandbox::k_shim_dir) + "/python\n");
    // A program of the wrap's own is found as the payload itself, not only from a shell.
    auto request = tests::request_in(dir, {"python", "-c", "print(6 * 7)"});
    request.timeout = std::chrono::seconds(60);
    const auto direct = sandbox::run(request);
    CHECK(direct.exit_status() == 0);
    CHECK(direct.out.head == "42\n");
}

TEST_CASE("the shims go on PATH before its first system directory") {
    const std::string shim(sandbox::k_shim_dir);
    const auto path_of = [](sandbox::Environment env) {
        sandbox::prepend_shim_path(env);
        for (const auto& [key, value] : env)
            if (key == "PATH") return value;
        return std::string("(none)");
    };
    CHECK(path_of({{"PATH", "/usr/local/bin:/usr/bin:/bin"}}) ==
          shim + ":/usr/local/bin:/usr/bin:/bin");
    CHECK(path_of({{"PATH", "/__e:/opt/x/bin:/usr/bin:/bin"}}) ==
          "/__e:/opt/x/bin:" + shim + ":/usr/bin:/bin");
    CHECK(path_of({{"PATH", "/opt/only"}}) == "/opt/only:" + shim);
    CHECK(path_of({{"PATH", ""}}) == shim);
    CHECK(path_of({{"HOME", "/h"}}) == shim + ":/usr/local/bin:/usr/bin:/bin");
}

TEST_CASE("the shims cannot be replaced by a step, not even under sudo") {
    SKIP_UNDER_WRAP(K_NESTED);
    const auto dir = tests::make_temp_dir("shims-ro");
    const std::string shim = std::string(sandbox::k_shim_dir);
    const std::string attempt =
        "for target in " + shim + "/sudo " + shim + "/apt-get " + shim +
        "/new; do if (echo x > $target) 2>/dev/null; then echo wrote $target; "
        "else echo refused; fi; done";
    auto result = wrapped(dir, attempt + "; sudo sh -c '" + attempt + "'");
    CHECK(result.out.head == "refused\nrefused\nrefused\nrefused\nrefused\nrefused\n");
}
