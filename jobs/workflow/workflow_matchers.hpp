#pragma once
// Problem matchers: `::add-matcher::FILE` / `::remove-matcher owner=NAME::` and the regular
// expressions they carry, applied to a step's output lines to produce annotations, the way
// actions/runner does (src/Runner.Worker/IssueMatcher.cs, OutputManager.cs,
// ActionCommandManager.cs AddMatcherCommandExtension):
//  - a file is `{"problemMatcher": [{"owner", "severity"?, "pattern": [{"regexp", "file",
//    "fromPath", "line", "column", "severity", "code", "message", "loop"}]}]}`; the numbers
//    are capture-group indices. Validation is the runner's (owner required and unique,
//    default severity "", error or warning, at least one pattern, `loop` only on the last
//    pattern of a multi-line matcher and only with `message`, each property set once and
//    within the regexp's groups, some pattern sets `message`);
//  - regexps are compiled with PCRE2 (byte-wise, case-sensitive, as the runner's
//    ECMAScript option is), with a match limit standing in for the runner's 1 s timeout: a
//    matcher that hits it is removed with a warning;
//  - a multi-line matcher carries a running match from pattern to pattern; a `loop` last
//    pattern keeps matching until a line fails it; a match resets every other matcher;
//  - matched lines are stripped of ANSI colour codes first; a match whose message is blank
//    or whose severity is neither error nor warning is dropped (the line stays output);
//  - a file is rooted at fromPath's directory, then at the workspace, and kept only when it
//    exists under the workspace (made relative), as the runner keeps repository files.
// Matchers added by a step stay for the job's later steps (JobState::matchers); each step
// starts with no running multi-line match.

#include <cstddef>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.hpp"
#include "jobs/run/workflow_commands.hpp"

namespace jobs {

class CompiledRegex;  // PCRE2 code, shared read-only between copies of a matcher

struct MatcherPattern {
    std::string regexp;
    std::shared_ptr<const CompiledRegex> regex;
    std::optional<int> file, from_path, line, column, severity, code, message;
    bool loop = false;
};

struct ProblemMatcher {
    std::string owner;
    std::string severity;  // the default: "", "error" or "warning"
    std::vector<MatcherPattern> patterns;
};

// Parses and validates a matcher document; `source` names it in errors (invalid_input,
// "SOURCE: message").
common::Expected<std::vector<ProblemMatcher>> parse_problem_matchers(std::string_view json,
                                                                     std::string_view source);
// Matcher files are at most this large.
inline constexpr std::size_t k_max_matcher_file_bytes = 1024 * 1024;
// Reads and parses FILE, which must be a regular file beneath `workspace` (no links on the
// way, sandbox/access/safe_access.hpp). Every way it cannot be had is the one invalid_input
// "FILE: cannot be read", so the answer never tells whether a host path exists; a file that
// was read and does not parse is the parser's error.
common::Expected<std::vector<ProblemMatcher>> load_problem_matchers(
    const std::filesystem::path& workspace, const std::filesystem::path& file);

// What one match captured (IssueMatch): values as matched, unset when no group gave them.
struct MatcherHit {
    std::optional<std::string> file, from_path, line, column, severity, code, message;
};

// The matchers active for one step, with their running multi-line state. Not thread-safe.
class MatcherSet {
public:
    MatcherSet() = default;
    explicit MatcherSet(const std::vector<ProblemMatcher>& matchers);

    // The runner's OnMatcherChanged: `matcher` goes first, replacing one of the same owner
    // (owners compare case-insensitively).
    void add(const ProblemMatcher& matcher);
    void remove(std::string_view owner);
    bool empty() const { return m_active.empty(); }

    // Matches one output line (colour codes stripped). `warnings` receives the runner's
    // warning when a matcher is removed for exceeding the match limit.
    std::optional<MatcherHit> match(std::string_view line, std::vector<std::string>& warnings);

private:
    struct Active {
        ProblemMatcher matcher;
        std::vector<std::optional<MatcherHit>> state;  // one per pattern but the last
    };
    enum class Result { no_match, match, limit };
    static Result match_one(Active& active, std::string_view line, MatcherHit& hit);
    std::vector<Active> m_active;
};

// The annotation a hit becomes (OutputManager.ConvertToIssue), or nullopt when it is dropped
// (`why` then says why, for the debug log). `workspace` roots relative files.
std::optional<Annotation> hit_annotation(const MatcherHit& hit,
                                         const std::filesystem::path& workspace, std::string& why);

// ANSI SGR colour sequences (ESC [ digits/semicolons m) removed.
std::string strip_color_codes(std::string_view line);

}  // namespace jobs
