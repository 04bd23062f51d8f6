#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>

#include "jobs/run/file_commands.hpp"
#include "tests/support/temp_dir.hpp"

using namespace jobs;

namespace {
NamedValues parse_ok(std::string_view text) {
    auto parsed = parse_key_value_text(text, "GITHUB_OUTPUT");
    INFO(text);
    REQUIRE(parsed.has_value());
    return *parsed;
}
std::string parse_error(std::string_view text) {
    auto parsed = parse_key_value_text(text, "GITHUB_ENV");
    REQUIRE_FALSE(parsed.has_value());
    CHECK(parsed.error().kind == common::ErrorKind::invalid_input);
    return parsed.error().message;
}
}  // namespace

TEST_CASE("NAME=value lines split at the first '=' and skip empty lines") {
    const auto values = parse_ok("A=1\n\nB=x=y\nC=\n A =spaced\nA=2");
    REQUIRE(values.size() == 4);
    CHECK(values[0] == std::pair<std::string, std::string>{"A", "2"});  // later wins, first place
    CHECK(values[1].second == "x=y");
    CHECK(values[2].second.empty());
    CHECK(values[3].first == " A ");
}

TEST_CASE("heredocs take every line up to the exact delimiter") {
    const auto values =
        parse_ok("M<<EOF\nline 1\n\nline 3\nEOF\nN<<EOF\nEOF\nK=v<<x\nH<<a=b\nv\na=b\n");
    REQUIRE(values.size() == 4);
    CHECK(values[0].second == "line 1\n\nline 3");
    CHECK(values[1].second.empty());
    CHECK(values[2] == std::pair<std::string, std::string>{"K", "v<<x"});  // '=' came first
    CHECK(values[3] == std::pair<std::string, std::string>{"H", "v"});     // '<<' came first
    // A delimiter line with trailing space is not the delimiter.
    const auto spaced = parse_ok("M<<EOF\nEOF \nEOF\n");
    CHECK(spaced[0].second == "EOF ");
    // The delimiter may be the last line without a newline.
    CHECK(parse_ok("M<<END\nx\nEND")[0].second == "x");
}

TEST_CASE("CRLF line endings are line endings") {
    const auto values = parse_ok("A=1\r\nM<<EOF\r\none\r\ntwo\r\nEOF\r\n");
    REQUIRE(values.size() == 2);
    CHECK(values[0].second == "1");
    CHECK(values[1].second == "one\r\ntwo");
}

TEST_CASE("malformed files give errors naming the file and line") {
    CHECK(parse_error("A=1\njunk line\n") == "GITHUB_ENV:2: Invalid format 'junk line'");
    CHECK(parse_error("=value\n") ==
          "GITHUB_ENV:1: Invalid format '=value'. Name must not be empty");
    CHECK(parse_error("A=1\n<<EOF\nx\nEOF\n").starts_with("GITHUB_ENV:2: Invalid format '<<EOF'"));
    CHECK(parse_error("NAME<<\n").starts_with("GITHUB_ENV:1: Invalid format"));
    CHECK(parse_error("A=1\nM<<EOF\nnever closed\n") ==
          "GITHUB_ENV:2: Invalid value. Matching delimiter not found 'EOF'");
    CHECK(parse_error("M<<EOF\nvalue") ==
          "GITHUB_ENV:2: Invalid value. EOF marker missing new line.");
}

TEST_CASE("path files list one directory per non-empty line") {
    CHECK(parse_path_text("/a\n\n/b\r\n/c") == std::vector<std::string>{"/a", "/b", "/c"});
}

TEST_CASE("PathPrepends puts the newest entry first and moves re-added ones") {
    PathPrepends path;
    path.add("/one");
    path.add("/two");
    path.add("/one");
    CHECK(path.apply("/usr/bin:/bin") == "/one:/two:/usr/bin:/bin");
    CHECK(PathPrepends().apply("/usr/bin") == "/usr/bin");
}

namespace {

sandbox::SafeDir trusted(const std::filesystem::path& dir) {
    auto opened = sandbox::SafeDir::open_trusted(dir, "the temp root");
    REQUIRE(opened);
    return std::move(*opened);
}

}  // namespace

TEST_CASE("the five files are created empty, read back and removed") {
    const auto root = tests::make_temp_dir("filecmd");
    auto files = FileCommandFiles::create(trusted(root), "nested/dir", {});
    REQUIRE(files.has_value());
    const auto& paths = files->paths();
    for (const auto& file : {paths.env, paths.output, paths.path, paths.state, paths.summary}) {
        CHECK(file.parent_path() == root / "nested/dir");
        CHECK(std::filesystem::is_regular_file(file));
        CHECK(std::filesystem::file_size(file) == 0);
    }
    const auto env = file_command_environment(paths);
    REQUIRE(env.size() == 5);
    CHECK(env[0].first == "GITHUB_ENV");
    CHECK(env[4].second == paths.summary.string());

    tests::write_file(paths.env, "FOO=bar\nNODE_OPTIONS=--inspect\n");
    tests::write_file(paths.output, "o<<X\nmulti\nline\nX\n");
    tests::write_file(paths.path, "/opt/tool/bin\n");
    tests::write_file(paths.state, "s=1\n");
    tests::write_file(paths.summary, "# Title\n");
    const auto results = files->read();
    CHECK(results.failures.empty());
    CHECK(results.env == NamedValues{{"FOO", "bar"}});
    CHECK(results.outputs == NamedValues{{"o", "multi\nline"}});
    CHECK(results.state == NamedValues{{"s", "1"}});
    CHECK(results.path == std::vector<std::string>{"/opt/tool/bin"});
    CHECK(results.summary == "# Title\n");
    REQUIRE(results.annotations.size() == 1);
    CHECK(results.annotations[0].message.find("NODE_OPTIONS") != std::string::npos);

    files->remove();
    CHECK_FALSE(std::filesystem::exists(paths.env));
    CHECK_FALSE(std::filesystem::exists(paths.summary));
}

TEST_CASE("a bad file contributes nothing and fails; an oversized summary is dropped") {
    const auto dir = tests::make_temp_dir("filecmd");
    auto files = FileCommandFiles::create(trusted(dir), ".", {});
    REQUIRE(files.has_value());
    tests::write_file(files->paths().output, "good=1\nbad line\n");
    tests::write_file(files->paths().summary, std::string(k_max_summary_bytes + 1, 'x'));
    const auto results = files->read();
    CHECK(results.outputs.empty());
    REQUIRE(results.failures.size() == 1);
    CHECK(results.failures[0] == "GITHUB_OUTPUT:2: Invalid format 'bad line'");
    CHECK(results.summary.empty());
    bool summary_error = false;
    for (const auto& annotation : results.annotations) {
        if (annotation.message.starts_with("$GITHUB_STEP_SUMMARY upload aborted, supports content "
                                           "up to a size of 1024k, got 1024k")) {
            summary_error = true;
        }
    }
    CHECK(summary_error);
    // Exactly at the limit is accepted.
    auto again = FileCommandFiles::create(trusted(dir), ".", {});
    REQUIRE(again.has_value());
    tests::write_file(again->paths().summary, std::string(k_max_summary_bytes, 'y'));
    CHECK(again->read().summary.size() == k_max_summary_bytes);
}

TEST_CASE("missing files count as empty") {
    const auto dir = tests::make_temp_dir("filecmd");
    auto files = FileCommandFiles::create(trusted(dir), ".", {});
    REQUIRE(files.has_value());
    for (const auto& file : {files->paths().env, files->paths().summary})
        std::filesystem::remove(file);
    const auto results = files->read();
    CHECK(results.failures.empty());
    CHECK(results.env.empty());
    CHECK(results.summary.empty());
}

TEST_CASE(
    "a planted symlink, FIFO, directory or sparse file in a file's place fails the step unread") {
    const auto dir = tests::make_temp_dir("filecmd");
    tests::write_file(dir / "host-secret", "API_TOKEN=hunter2\n");
    auto files = FileCommandFiles::create(trusted(dir), "cmds", {});
    REQUIRE(files.has_value());
    const auto& paths = files->paths();
    std::filesystem::remove(paths.env);
    std::filesystem::create_symlink(dir / "host-secret", paths.env);
    std::filesystem::remove(paths.output);
    REQUIRE(::mkfifo(paths.output.c_str(), 0600) == 0);
    std::filesystem::remove(paths.state);
    std::filesystem::create_directory(paths.state);
    { std::ofstream sparse(paths.path, std::ios::binary); }
    std::filesystem::resize_file(paths.path, std::uintmax_t(1) << 40);  // 1 TiB, no blocks
    std::filesystem::remove(paths.summary);
    std::filesystem::create_symlink("/proc/self/environ", paths.summary);
    const auto results = files->read();  // returns at once: nothing is opened that could block
    CHECK(results.env.empty());
    CHECK(results.path.empty());
    CHECK(results.summary.empty());
    const std::vector<std::string> expected = {
        "$GITHUB_ENV is not a regular file", "$GITHUB_OUTPUT is not a regular file",
        "$GITHUB_STATE is not a regular file", "$GITHUB_PATH is larger than 16777216 bytes",
        "$GITHUB_STEP_SUMMARY is not a regular file"};
    CHECK(results.failures == expected);
    for (const auto& annotation : results.annotations)
        CHECK(annotation.message.find("hunter2") == std::string::npos);
}

TEST_CASE("a file-command directory swapped for a link after creation changes nothing") {
    const auto dir = tests::make_temp_dir("filecmd");
    std::filesystem::create_directory(dir / "elsewhere");
    auto files = FileCommandFiles::create(trusted(dir), "cmds", {});
    REQUIRE(files.has_value());
    tests::write_file(files->paths().env, "A=1\n");
    std::filesystem::rename(dir / "cmds", dir / "moved");
    std::filesystem::create_directory_symlink(dir / "elsewhere", dir / "cmds");
    const auto results = files->read();  // through the fd: the directory it created
    CHECK(results.env == NamedValues{{"A", "1"}});
    files->remove();
    CHECK(std::filesystem::is_empty(dir / "moved"));
    CHECK(std::filesystem::is_empty(dir / "elsewhere"));
    // A link where the directory should be is refused, not followed.
    auto refused = FileCommandFiles::create(trusted(dir), "cmds", {});
    REQUIRE_FALSE(refused);
    CHECK(refused.error().message == "the file-command directory is not a directory");
    CHECK(std::filesystem::is_empty(dir / "elsewhere"));
}
