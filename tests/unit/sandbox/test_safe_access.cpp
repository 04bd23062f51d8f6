// sandbox/safe_access: the one way the trusted side reaches a tree a step can write. Each
// refusal is tried for real (a planted symlink, a FIFO, a 1 TiB sparse file, a swapped
// directory), and one invariant: nothing else in the files that handle step-writable trees
// opens such paths directly.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "sandbox/access/safe_access.hpp"
#include "sandbox/process/cancel.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/wrap_detect.hpp"

namespace {

namespace fs = std::filesystem;
using sandbox::SafeDir;

SafeDir open_root(const fs::path& dir) {
    auto root = SafeDir::open_trusted(dir, "the tree");
    REQUIRE(root);
    return std::move(*root);
}

const sandbox::ReadLimits k_small{1024, std::nullopt, -1};

std::string refusal(const common::Expected<std::string>& result) {
    REQUIRE_FALSE(result);
    return result.error().message;
}

}  // namespace

TEST_CASE("openat2 is there on this kernel (Linux 5.6+): the module never falls back") {
    CHECK(sandbox::openat2_available());
}

TEST_CASE(
    "a regular file beneath is read; links, FIFOs, directories and huge files are refused unread") {
    const auto dir = tests::make_temp_dir("safe");
    tests::write_file(dir / "secret", "API_TOKEN=hunter2\n");
    tests::write_file(dir / "tree/ok.txt", "hello\n");
    const auto root = open_root(dir / "tree");
    CHECK(root.read_file("ok.txt", k_small, "ok.txt").value() == "hello\n");

    fs::create_symlink(dir / "secret", dir / "tree/link");
    CHECK(refusal(root.read_file("link", k_small, "$GITHUB_ENV")) ==
          "$GITHUB_ENV is not a regular file");
    fs::create_symlink("/proc/self/environ", dir / "tree/environ");
    CHECK(refusal(root.read_file("environ", k_small, "$GITHUB_OUTPUT")) ==
          "$GITHUB_OUTPUT is not a regular file");
    // A link in a middle component, an absolute path, a ".." out.
    fs::create_directory_symlink(dir, dir / "tree/up");
    CHECK(refusal(root.read_file("up/secret", k_small, "up/secret")) ==
          "up/secret is not a regular file");
    CHECK_FALSE(root.read_file((dir / "secret").string(), k_small, "abs"));
    CHECK_FALSE(root.read_file("../secret", k_small, "dotdot"));

    REQUIRE(::mkfifo((dir / "tree/fifo").c_str(), 0600) == 0);
    const auto started = std::chrono::steady_clock::now();
    CHECK(refusal(root.read_file("fifo", k_small, "fifo")) == "fifo is not a regular file");
    CHECK(std::chrono::steady_clock::now() - started <
          std::chrono::seconds(2));  // no writer: no hang

    fs::create_directory(dir / "tree/sub");
    CHECK(refusal(root.read_file("sub", k_small, "sub")) == "sub is not a regular file");

    { std::ofstream sparse(dir / "tree/sparse", std::ios::binary); }
    fs::resize_file(dir / "tree/sparse", std::uintmax_t(1) << 40);
    CHECK(refusal(root.read_file("sparse", k_small, "sparse")) ==
          "sparse is larger than 1024 bytes");

    CHECK(refusal(root.read_file("missing", k_small, "missing")) == "missing does not exist");
    auto absent = root.read_file_if_present("missing", k_small, "missing");
    REQUIRE(absent);
    CHECK_FALSE(*absent);
    // Never the content, never the host path.
    for (const auto* name : {"link", "environ", "up/secret"}) {
        auto result = root.read_file(name, k_small, name);
        REQUIRE_FALSE(result);
        CHECK(result.error().message.find("hunter2") == std::string::npos);
        CHECK(result.error().message.find(dir.string()) == std::string::npos);
    }
}

TEST_CASE("the trusted root itself must not be a link") {
    const auto dir = tests::make_temp_dir("safe");
    fs::create_directory(dir / "real");
    fs::create_directory_symlink(dir / "real", dir / "alias");
    CHECK(SafeDir::open_trusted(dir / "real", "real"));
    auto refused = SafeDir::open_trusted(dir / "alias", "$RUNNER_TEMP");
    REQUIRE_FALSE(refused);
    CHECK(refused.error().message == "$RUNNER_TEMP is not a directory");
}

TEST_CASE("files are created fresh through the dirfd, never through a planted link") {
    const auto dir = tests::make_temp_dir("safe");
    fs::create_directory(dir / "tree");
    tests::write_file(dir / "host-file", "original\n");
    const auto root = open_root(dir / "tree");
    REQUIRE(root.create_file("new", "content", {}, "new"));
    CHECK(tests::read_file(dir / "tree/new") == "content");
    auto again = root.create_file("new", "other", {}, "new");
    REQUIRE_FALSE(again);
    CHECK(again.error().message == "new exists already");

    fs::create_symlink(dir / "host-file", dir / "tree/planted");
    CHECK_FALSE(root.create_file("planted", "overwritten", {}, "planted"));
    CHECK(root.create_file_once("planted", "overwritten", {}, "planted").value() == false);
    CHECK(tests::read_file(dir / "host-file") == "original\n");

    // make_dirs refuses a link in place of a directory, and creates what is missing.
    fs::create_directory(dir / "host-dir");
    fs::create_directory_symlink(dir / "host-dir", dir / "tree/init.d");
    auto through = root.make_dirs("init.d/deeper", {}, ".gradle/init.d");
    REQUIRE_FALSE(through);
    CHECK(through.error().message == ".gradle/init.d is not a directory");
    CHECK(fs::is_empty(dir / "host-dir"));
    auto made = root.make_dirs("a/b/c", {0700, std::nullopt}, "a/b/c");
    REQUIRE(made);
    CHECK(fs::is_directory(dir / "tree/a/b/c"));
    CHECK(made->path() == dir / "tree/a/b/c");
    REQUIRE(made->create_file("f", "x", {}, "f"));
    CHECK(tests::read_file(dir / "tree/a/b/c/f") == "x");
}

TEST_CASE("replace_file renames over a planted link instead of writing through it") {
    const auto dir = tests::make_temp_dir("safe");
    fs::create_directory(dir / "tree");
    tests::write_file(dir / "host-file", "original\n");
    fs::create_symlink(dir / "host-file", dir / "tree/response.json");
    const auto root = open_root(dir / "tree");
    REQUIRE(root.replace_file("response.json", "{}", {}, "the response file"));
    CHECK(fs::is_regular_file(fs::symlink_status(dir / "tree/response.json")));
    CHECK(tests::read_file(dir / "tree/response.json") == "{}");
    CHECK(tests::read_file(dir / "host-file") == "original\n");
    CHECK(std::distance(fs::directory_iterator(dir / "tree"), fs::directory_iterator()) == 1);
}

TEST_CASE("the walk reports links and special files without following them, within its limits") {
    const auto dir = tests::make_temp_dir("safe");
    tests::write_file(dir / "outside/secret.txt", "s");
    tests::write_file(dir / "tree/a.txt", "a");
    tests::write_file(dir / "tree/sub/b.txt", "b");
    fs::create_directory_symlink(dir / "outside", dir / "tree/escape");
    fs::create_symlink(dir / "outside/secret.txt", dir / "tree/file-link");
    REQUIRE(::mkfifo((dir / "tree/sub/fifo").c_str(), 0600) == 0);
    const auto root = open_root(dir / "tree");
    std::set<std::string> regular, links, other, dirs;
    REQUIRE(root.walk([&](const sandbox::WalkEntry& entry) {
        switch (entry.kind) {
            case sandbox::EntryKind::regular:
                regular.insert(entry.relative);
                break;
            case sandbox::EntryKind::symlink:
                links.insert(entry.relative);
                break;
            case sandbox::EntryKind::directory:
                dirs.insert(entry.relative);
                break;
            case sandbox::EntryKind::other:
                other.insert(entry.relative);
                break;
        }
        return sandbox::WalkStep::descend;
    }));
    CHECK(regular == std::set<std::string>{"a.txt", "sub/b.txt"});
    CHECK(links == std::set<std::string>{"escape", "file-link"});
    CHECK(dirs == std::set<std::string>{"sub"});
    CHECK(other == std::set<std::string>{"sub/fifo"});

    auto token = sandbox::CancelToken::create();
    REQUIRE(token);
    token->cancel();
    for (int i = 0; i < 200; ++i) tests::write_file(dir / "tree/many" / std::to_string(i), "");
    auto cancelled = root.walk([](const sandbox::WalkEntry&) { return sandbox::WalkStep::descend; },
                               {0, std::nullopt, token->fd()});
    REQUIRE_FALSE(cancelled);
    CHECK(cancelled.error().kind == common::ErrorKind::timeout);
    auto late = root.walk([](const sandbox::WalkEntry&) { return sandbox::WalkStep::descend; },
                          {0, std::chrono::steady_clock::now(), -1});
    REQUIRE_FALSE(late);
    CHECK(late.error().kind == common::ErrorKind::timeout);
}

TEST_CASE("removal unlinks links as entries and empties closed directories") {
    const auto dir = tests::make_temp_dir("safe");
    tests::write_file(dir / "outside/keep.txt", "keep");
    tests::write_file(dir / "tree/victim/deep/x", "x");
    fs::create_directory_symlink(dir / "outside", dir / "tree/victim/escape");
    fs::permissions(dir / "tree/victim/deep", fs::perms::none);
    const auto root = open_root(dir / "tree");
    REQUIRE(root.remove("victim", "victim"));
    CHECK_FALSE(fs::exists(fs::symlink_status(dir / "tree/victim")));
    CHECK(tests::read_file(dir / "outside/keep.txt") == "keep");
    CHECK(root.remove("victim", "victim"));  // gone already: success
    fs::create_directory_symlink(dir / "outside", dir / "tree/link");
    REQUIRE(root.remove("link", "link"));
    CHECK(fs::exists(dir / "outside/keep.txt"));
}

TEST_CASE("copy_tree copies files and links as they are and refuses to overwrite") {
    const auto dir = tests::make_temp_dir("safe");
    tests::write_file(dir / "from/registry/index/a", "A");
    fs::create_symlink("../elsewhere", dir / "from/registry/link");
    fs::permissions(dir / "from/registry/index/a", fs::perms::owner_all);
    fs::create_directory(dir / "to");
    const auto from = open_root(dir / "from");
    const auto to = open_root(dir / "to");
    REQUIRE(sandbox::copy_tree(from, to, std::nullopt));
    CHECK(tests::read_file(dir / "to/registry/index/a") == "A");
    CHECK((fs::status(dir / "to/registry/index/a").permissions() & fs::perms::owner_exec) !=
          fs::perms::none);
    CHECK(fs::read_symlink(dir / "to/registry/link") == "../elsewhere");
    CHECK_FALSE(sandbox::copy_tree(from, to, std::nullopt));
}

TEST_CASE("chown_tree gives a tree away without touching what its links point at (needs root)") {
    SKIP_UNDER_WRAP("chown to another uid needs root; the wrap's suite is not root");
    INFO("this test needs root (CAP_CHOWN): CI and the development machines run the suite as root");
    REQUIRE(::geteuid() == 0);
    const auto dir = tests::make_temp_dir("safe");
    tests::write_file(dir / "outside/host.txt", "h");
    tests::write_file(dir / "tree/own/f", "f");
    tests::write_file(dir / "tree/private/config", "c");
    fs::create_symlink(dir / "outside/host.txt", dir / "tree/own/link");
    const auto root = open_root(dir / "tree");
    REQUIRE(root.chown_tree({65534, 65534}, {"private"}));
    struct stat st {};
    REQUIRE(::stat((dir / "tree/own/f").c_str(), &st) == 0);
    CHECK(st.st_uid == 65534);
    REQUIRE(::lstat((dir / "tree/own/link").c_str(), &st) == 0);
    CHECK(st.st_uid == 65534);
    REQUIRE(::stat((dir / "outside/host.txt").c_str(), &st) == 0);
    CHECK(st.st_uid == 0);
    REQUIRE(::stat((dir / "tree/private/config").c_str(), &st) == 0);
    CHECK(st.st_uid == 0);
}

// The invariant: in the files that handle step-writable trees, nothing opens, lists, copies,
// moves or removes a path except through sandbox/safe_access. A line that reaches a path only
// the trusted side controls says so with a `// trusted path: <why>` comment on it or just
// above it; there should be few.
TEST_CASE(
    "nothing but the safe-access module opens paths in the files that handle step-writable trees") {
    const fs::path source(SANDGATE_SOURCE_DIR);
    // The files that touch a worktree, scratch, HOME, RUNNER_TEMP, file-command or matcher
    // files, hashFiles' inputs, reports or a hook's response; and every file that uses the
    // module (it handles such a tree by its own account).
    std::set<std::string> files = {"jobs/run/file_commands.cpp",
                                   "jobs/run/step_runner.cpp",
                                   "jobs/run/shell.cpp",
                                   "jobs/workflow/workflow_matchers.cpp",
                                   "jobs/run/workflow_commands.cpp",
                                   "jobs/expr/expr_hashfiles.cpp",
                                   "jobs/git/git_remove.cpp",
                                   "jobs/run/job_runner.cpp",
                                   "jobs/git/checkout.cpp",
                                   "sandbox/wrap/offline.cpp",
                                   "sandbox/wrap/bwrap_layout.cpp",
                                   "sandbox/wrap/wrap_bwrap.cpp",
                                   "sandbox/broker/broker.cpp",
                                   "sandbox/wrap/container.cpp",
                                   "agent/cli/run_setup.cpp",
                                   "agent/sandboxes/sandbox_dirs.cpp",
                                   "agent/sandboxes/sandbox_manager.cpp",
                                   "agent/sandboxes/sandbox_manager_reap.cpp",
                                   "agent/hook/runner_hook.cpp",
                                   "agent/hook/runner_hook_run.cpp",
                                   "agent/gate/cmd_gate.cpp",
                                   "agent/cli/cmd_run.cpp",
                                   "agent/cli/job_executor.cpp",
                                   "agent/daemon/daemon.cpp",
                                   "agent/daemon/daemon_start.cpp",
                                   "jobs/git/git_provider.cpp",
                                   "jobs/run/step_actions.cpp",
                                   "jobs/workflow/action_model.cpp",
                                   "jobs/workflow/workflow_call.cpp"};
    for (const auto* folder : {"sandbox", "jobs", "agent", "github"}) {
        for (const auto& entry : fs::recursive_directory_iterator(source / folder)) {
            if (entry.path().extension() != ".cpp") continue;
            const auto text = tests::read_file(entry.path());
            if (text.find("\"sandbox/access/safe_access.hpp\"") != std::string::npos ||
                text.find("\"sandbox/access/safe_read.hpp\"") != std::string::npos)
                files.insert(entry.path().lexically_relative(source).generic_string());
        }
    }
    files.erase("sandbox/access/safe_access.cpp");  // the module itself
    const std::regex direct(
        R"((::open\(|::openat\(|\bfopen\(|fstream|opendir\(|directory_iterator|\b(filesystem|fs)::(copy|copy_file|remove|remove_all|rename|create_directory|create_directories|file_size|resize_file|permissions|is_regular_file)\b|\bmkdtemp\())");
    std::vector<std::string> offences;
    for (const auto& file : files) {
        INFO(file);
        REQUIRE(fs::exists(source / file));  // a moved file must be named here again
        std::istringstream in(tests::read_file(source / file));
        std::string previous, line;
        for (int number = 1; std::getline(in, line); ++number, previous = line) {
            if (!std::regex_search(line, direct)) continue;
            const auto code = line.substr(0, line.find("//"));
            if (!std::regex_search(code, direct) || code.starts_with("#include")) continue;
            if (line.find("// trusted path:") != std::string::npos ||
                previous.find("// trusted path:") != std::string::npos)
                continue;
            offences.push_back(file + ":" + std::to_string(number) + ": " + line);
        }
    }
    std::string report;
    for (const auto& offence : offences) report += offence + "\n";
    INFO(report);
    CHECK(offences.empty());
}
