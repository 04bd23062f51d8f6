// The act corpus (../shared/corpora/act): each case of cases.json runs from a fresh copy of
// testdata/ as `sandgate run EVENT -W DIR/`, with its event.json when present, and must
// succeed, or fail with the expected error. Cases that test act's own defaults get the flags
// that set them (ACT=true, the actor nektos/act, an origin remote under nektos/).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cctype>
#include <cstdio>
#include <string>
#include <vector>

#include "jobs/expr/value.hpp"
#include "tests/support/run_helpers.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/wrap_detect.hpp"

namespace {

const std::filesystem::path k_corpus = std::filesystem::path(SANDGATE_SHARED_DIR) / "corpora/act";

std::string lower(std::string text) {
    std::ranges::transform(text, text.begin(),
                           [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return text;
}

// A writable copy of testdata/ (the corpus is read-only).
std::filesystem::path copy_testdata() {
    // ../shared is read-only (directories r-x): copy entry by entry, making each directory
    // writable before filling it, since without CAP_DAC_OVERRIDE (inside the wrap) a copied
    // r-x directory could not be filled.
    namespace fs = std::filesystem;
    const auto dir = tests::make_temp_dir("act") / "testdata";
    const auto source = k_corpus / "testdata";
    fs::create_directory(dir);
    for (const auto& entry : fs::recursive_directory_iterator(source)) {
        const auto target = dir / fs::relative(entry.path(), source);
        if (entry.is_symlink()) {
            fs::copy_symlink(entry.path(), target);
        } else if (entry.is_directory()) {
            fs::create_directory(target);
        } else {
            fs::copy_file(entry.path(), target);
            fs::permissions(target, fs::perms::owner_write, fs::perm_options::add);
        }
    }
    return dir;
}

// act derives github.repository from the checkout's origin remote.
void make_act_checkout(const std::filesystem::path& dir) {
    const std::string command =
        "cd " + tests::shell_quote(dir.string()) +
        " && git init -q && git remote add origin https://github.com/nektos/act.git";
    REQUIRE(std::system(command.c_str()) == 0);
}

std::vector<std::string> case_flags(const std::string& name, const std::filesystem::path& dir) {
    if (name == "if-env-act") return {"--env", "ACT=true"};
    if (name == "runs-on") return {"--actor", "nektos/act"};
    if (name == "input-from-cli") return {"--input", "SOME_INPUT=input"};
    if (name == "matrix-with-user-inclusions")
        return {"--matrix", "node:8", "--matrix", "node:8.x", "--matrix", "os:ubuntu-18.04"};
    // act's runner test passes this secret to the caller (TestRunEvent, uses-workflow).
    if (name == "uses-workflow") return {"-s", "secret=keep_it_private"};
    if (name == "secrets")
        return {"--secret-file", "secrets/.secrets", "--env-file", "secrets/.env"};
    if (name == "issue-1195") make_act_checkout(dir);
    return {};
}

// Through the wrap, except the cases whose steps must work in the host's /tmp and /root
// (the wrap never exposes those), and inside the suite's own wrap run, where a nested
// bubblewrap is not available: there the runner is exercised without one.
std::string sandbox_for(const std::string& name) {
    if (name == "defaults-run" || name == "workdir" || tests::under_wrap()) return "off";
    return "bwrap";
}

std::string string_of(const jobs::Value& item, std::string_view key) {
    const jobs::Value* value = item.get(key);
    return value == nullptr || value->is_null() ? std::string() : value->to_display_string();
}

}  // namespace

TEST_CASE("every case of the act corpus runs as act expects") {
    auto cases = jobs::parse_json(tests::read_file(k_corpus / "cases.json"));
    REQUIRE(cases.has_value());
    REQUIRE(cases->as_array().size() >= 30);
    for (const auto& item : cases->as_array()) {
        const std::string name = string_of(item, "dir");
        const std::string event = string_of(item, "event");
        const std::string expect_error = string_of(item, "expect_error");
        if (name == "workdir" && tests::under_wrap()) {
            // Its steps run in the host's /root, which the wrap never shows.
            std::printf("SKIP-UNDER-WRAP(act case workdir needs the host's /root)\n");
            continue;
        }
        DYNAMIC_SECTION(name) {
            const auto dir = copy_testdata();
            std::vector<std::string> args = {"run",      event,       "-W",
                                             name + "/", "--sandbox", sandbox_for(name)};
            if (std::filesystem::exists(dir / name / "event.json")) {
                args.push_back("-e");
                args.push_back(name + "/event.json");
            }
            for (auto& flag : case_flags(name, dir)) args.push_back(flag);
            const auto ran = tests::run_sandgate(dir, args);
            INFO(name << "\n" << ran.output);
            if (expect_error.empty()) {
                CHECK(ran.exit_code == 0);
            } else {
                CHECK(ran.exit_code == 1);
                CHECK(lower(ran.output).find(lower(expect_error)) != std::string::npos);
            }
        }
    }
}
