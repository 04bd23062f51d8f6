#include "jobs/workflow/workflow_matchers.hpp"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <charconv>
#include <set>
#include <sstream>

#include "common/strings.hpp"
#include "jobs/expr/value.hpp"
#include "sandbox/access/safe_access.hpp"
#include "sandbox/access/safe_read.hpp"

namespace jobs {

// Stands in for the runner's 1 s regex timeout: backtracking past this many steps on one
// line counts as a timeout (catastrophic patterns stop instead of stalling the step's log).
constexpr std::uint32_t k_match_limit = 5'000'000;
constexpr std::uint32_t k_depth_limit = 100'000;

class CompiledRegex {
public:
    static common::Expected<std::shared_ptr<const CompiledRegex>> compile(
        const std::string& pattern) {
        int code = 0;
        PCRE2_SIZE offset = 0;
        pcre2_code* compiled = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()),
                                             pattern.size(), 0, &code, &offset, nullptr);
        if (compiled == nullptr) {
            PCRE2_UCHAR message[256];
            pcre2_get_error_message(code, message, sizeof message);
            return common::fail(common::ErrorKind::invalid_input,
                                "invalid regexp '" + pattern + "' at offset " +
                                    std::to_string(offset) + ": " +
                                    reinterpret_cast<const char*>(message));
        }
        auto regex = std::shared_ptr<CompiledRegex>(new CompiledRegex(compiled));
        pcre2_jit_compile(compiled, PCRE2_JIT_COMPLETE);  // best effort: the interpreter otherwise
        return std::shared_ptr<const CompiledRegex>(std::move(regex));
    }
    ~CompiledRegex() {
        pcre2_match_context_free(m_context);
        pcre2_code_free(m_code);
    }
    CompiledRegex(const CompiledRegex&) = delete;
    CompiledRegex& operator=(const CompiledRegex&) = delete;

    int group_count() const {  // .NET GetGroupNumbers().Length: the captures plus group 0
        std::uint32_t captures = 0;
        pcre2_pattern_info(m_code, PCRE2_INFO_CAPTURECOUNT, &captures);
        return static_cast<int>(captures) + 1;
    }

    enum class Outcome { no_match, match, limit };
    // On a match, `groups` holds every group's text ("" for a group that did not take part,
    // as .NET's Group.Value gives).
    Outcome match(std::string_view subject, std::vector<std::string>& groups) const {
        std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> data(
            pcre2_match_data_create_from_pattern(m_code, nullptr), &pcre2_match_data_free);
        if (!data) return Outcome::no_match;
        const int rc = pcre2_match(m_code, reinterpret_cast<PCRE2_SPTR>(subject.data()),
                                   subject.size(), 0, 0, data.get(), m_context);
        if (rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT ||
            rc == PCRE2_ERROR_HEAPLIMIT)
            return Outcome::limit;
        if (rc < 0) return Outcome::no_match;
        const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data.get());
        const int count = group_count();
        groups.assign(static_cast<std::size_t>(count), std::string());
        for (int i = 0; i < count && i < static_cast<int>(pcre2_get_ovector_count(data.get()));
             ++i) {
            const PCRE2_SIZE begin = ovector[2 * i], end = ovector[2 * i + 1];
            if (begin == PCRE2_UNSET || end < begin) continue;
            groups[static_cast<std::size_t>(i)] = std::string(subject.substr(begin, end - begin));
        }
        return Outcome::match;
    }

private:
    explicit CompiledRegex(pcre2_code* code)
        : m_code(code), m_context(pcre2_match_context_create(nullptr)) {
        if (m_context != nullptr) {
            pcre2_set_match_limit(m_context, k_match_limit);
            pcre2_set_depth_limit(m_context, k_depth_limit);
        }
    }
    pcre2_code* m_code;
    pcre2_match_context* m_context;
};

namespace {

common::Expected<std::optional<int>> group_index(const Value& pattern, std::string_view name) {
    const Value* value = pattern.get(name);
    if (value == nullptr || value->is_null()) return std::optional<int>{};
    const double number = value->is_number() ? value->as_number() : -1.5;
    if (!value->is_number() || number != static_cast<double>(static_cast<int>(number)))
        return common::fail(common::ErrorKind::invalid_input,
                            "The property '" + std::string(name) + "' must be a whole number");
    return std::optional<int>(static_cast<int>(number));
}

// IssuePatternConfig.Validate's per-property check: set once across patterns, within groups.
std::optional<std::string> track(std::string_view name, const std::optional<int>& value, int groups,
                                 std::set<std::string>& seen) {
    if (!value) return std::nullopt;
    if (!seen.insert(std::string(name)).second)
        return "The property '" + std::string(name) + "' is set twice";
    if (*value < 0 || *value >= groups)
        return "The property '" + std::string(name) + "' is set to " + std::to_string(*value) +
               " which is out of range";
    return std::nullopt;
}

// Only the last pattern of a multiline matcher may loop (the runner's rule).
enum class Loop { refused, allowed };

common::Expected<MatcherPattern> parse_pattern(const Value& item, Loop place,
                                               std::set<std::string>& seen) {
    if (!item.is_object())
        return common::fail(common::ErrorKind::invalid_input, "a pattern must be an object");
    MatcherPattern pattern;
    if (const Value* regexp = item.get("regexp"); regexp && regexp->is_string())
        pattern.regexp = regexp->as_string();
    if (const Value* loop = item.get("loop"); loop && loop->is_boolean())
        pattern.loop = loop->as_boolean();
    struct Field {
        std::string_view name;
        std::optional<int>* slot;
    };
    const Field fields[] = {{"file", &pattern.file},         {"line", &pattern.line},
                            {"column", &pattern.column},     {"severity", &pattern.severity},
                            {"code", &pattern.code},         {"message", &pattern.message},
                            {"fromPath", &pattern.from_path}};
    for (const auto& field : fields) {
        auto index = SANDGATE_TRY(group_index(item, field.name));
        *field.slot = index;
    }
    if (pattern.loop && place == Loop::refused)
        return common::fail(common::ErrorKind::invalid_input,
                            "Only the last pattern in a multiline matcher may set 'loop'");
    if (pattern.loop && !pattern.message)
        return common::fail(common::ErrorKind::invalid_input,
                            "The loop pattern must set 'message'");
    pattern.regex = SANDGATE_TRY(CompiledRegex::compile(pattern.regexp));
    const int groups = pattern.regex->group_count();
    for (const auto& field : fields) {
        if (auto problem = track(field.name, *field.slot, groups, seen))
            return common::fail(common::ErrorKind::invalid_input, *problem);
    }
    return pattern;
}

common::Expected<ProblemMatcher> parse_matcher(const Value& item) {
    if (!item.is_object())
        return common::fail(common::ErrorKind::invalid_input, "a matcher must be an object");
    ProblemMatcher matcher;
    if (const Value* owner = item.get("owner"); owner && owner->is_string())
        matcher.owner = owner->as_string();
    if (matcher.owner.empty())
        return common::fail(common::ErrorKind::invalid_input, "Owner must not be empty");
    if (const Value* severity = item.get("severity"); severity && severity->is_string())
        matcher.severity = severity->as_string();
    if (!matcher.severity.empty() && !equals_ignore_case(matcher.severity, "error") &&
        !equals_ignore_case(matcher.severity, "warning"))
        return common::fail(common::ErrorKind::invalid_input,
                            "Matcher '" + matcher.owner +
                                "' contains unexpected default severity '" + matcher.severity +
                                "'");
    const Value* patterns = item.get("pattern");
    if (patterns == nullptr || !patterns->is_array() || patterns->as_array().empty())
        return common::fail(common::ErrorKind::invalid_input,
                            "Matcher '" + matcher.owner + "' does not contain any patterns");
    std::set<std::string> seen;
    const auto& list = patterns->as_array();
    for (std::size_t i = 0; i < list.size(); ++i) {
        const Loop loop = i > 0 && i + 1 == list.size() ? Loop::allowed : Loop::refused;
        auto pattern = parse_pattern(list[i], loop, seen);
        if (!pattern)
            return common::fail(common::ErrorKind::invalid_input,
                                "matcher '" + matcher.owner + "', pattern " + std::to_string(i) +
                                    ": " + pattern.error().message);
        matcher.patterns.push_back(std::move(*pattern));
    }
    if (!seen.contains("message"))
        return common::fail(common::ErrorKind::invalid_input,
                            "At least one pattern must set 'message'");
    return matcher;
}

std::optional<std::string> group_value(const std::vector<std::string>& groups,
                                       const std::optional<int>& index) {
    if (!index || *index < 0 || static_cast<std::size_t>(*index) >= groups.size())
        return std::nullopt;
    return groups[static_cast<std::size_t>(*index)];
}

// IssueMatch's constructor: the running match's values first, then this pattern's groups.
MatcherHit combine(const std::optional<MatcherHit>& running, const MatcherPattern& pattern,
                   const std::vector<std::string>& groups, std::string_view default_severity) {
    MatcherHit hit;
    auto pick = [&](std::optional<std::string> MatcherHit::*field,
                    const std::optional<int>& index) {
        hit.*field = running && (*running).*field ? (*running).*field : group_value(groups, index);
    };
    pick(&MatcherHit::file, pattern.file);
    pick(&MatcherHit::line, pattern.line);
    pick(&MatcherHit::column, pattern.column);
    pick(&MatcherHit::severity, pattern.severity);
    pick(&MatcherHit::code, pattern.code);
    pick(&MatcherHit::message, pattern.message);
    pick(&MatcherHit::from_path, pattern.from_path);
    if ((!hit.severity || hit.severity->empty()) && !default_severity.empty())
        hit.severity = std::string(default_severity);
    return hit;
}

bool blank(const std::optional<std::string>& text) {
    return !text ||
           std::ranges::all_of(*text, [](char c) { return c == ' ' || (c >= '\t' && c <= '\r'); });
}

// int.TryParse with NumberStyles.None: digits only.
std::optional<int> parse_digits(const std::string& text) {
    int value = 0;
    const auto* end = text.data() + text.size();
    auto [ptr, ec] = std::from_chars(text.data(), end, value);
    if (text.empty() || ec != std::errc() || ptr != end || text[0] == '-' || text[0] == '+')
        return std::nullopt;
    return value;
}

// The runner's file rooting: fromPath's directory, then the workspace; kept when it exists
// under the workspace.
std::optional<std::string> repository_file(const MatcherHit& hit,
                                           const std::filesystem::path& workspace,
                                           std::string& why) {
    std::filesystem::path file(*hit.file);
    if (!blank(hit.from_path) && !file.is_absolute()) {
        const auto from_directory = std::filesystem::path(*hit.from_path).parent_path();
        if (!from_directory.empty()) file = from_directory / file;
    }
    if (!file.is_absolute()) file = workspace / file;
    file = file.lexically_normal();
    // Under the workspace first (lexically): nothing outside it is ever looked at.
    const auto relative =
        workspace.empty() ? std::nullopt : sandbox::relative_beneath(workspace, file);
    if (!relative) {
        why = "Dropping file value '" + file.string() + "'. Path is not under the workflow repo.";
        return std::nullopt;
    }
    auto root = sandbox::SafeDir::open_trusted(workspace, "the workspace");
    if (!root || !root->open_file(*relative, "the annotation's file")) {
        why = "Dropping file value '" + file.string() + "'. Path does not exist";
        return std::nullopt;
    }
    return std::filesystem::path(*relative).generic_string();
}

}  // namespace

common::Expected<std::vector<ProblemMatcher>> parse_problem_matchers(std::string_view json,
                                                                     std::string_view source) {
    auto located = [&](const std::string& message) {
        return common::fail(common::ErrorKind::invalid_input, std::string(source) + ": " + message);
    };
    auto document = parse_json(json);
    if (!document) return located(document.error().message);
    if (!document->is_object()) return located("a problem matcher file must be a JSON object");
    std::vector<ProblemMatcher> out;
    const Value* list = document->get("problemMatcher");
    if (list == nullptr || list->is_null()) return out;
    if (!list->is_array()) return located("'problemMatcher' must be an array");
    for (const auto& item : list->as_array()) {
        auto matcher = parse_matcher(item);
        if (!matcher) return located(matcher.error().message);
        const bool duplicate = std::ranges::any_of(out, [&](const ProblemMatcher& m) {
            return equals_ignore_case(m.owner, matcher->owner);
        });
        if (duplicate) return located("Duplicate owner name '" + matcher->owner + "'");
        out.push_back(std::move(*matcher));
    }
    return out;
}

common::Expected<std::vector<ProblemMatcher>> load_problem_matchers(
    const std::filesystem::path& workspace, const std::filesystem::path& file) {
    // One message for every way the file cannot be had (outside the workspace, a link, a FIFO,
    // missing, too large): the answer never tells whether some host path exists.
    const auto unreadable = [&] {
        return common::fail(common::ErrorKind::invalid_input, file.string() + ": cannot be read");
    };
    if (workspace.empty()) return unreadable();
    auto text = sandbox::read_file_beneath(
        workspace, file, {k_max_matcher_file_bytes, std::nullopt, -1}, "matcher file");
    if (!text) return unreadable();
    return parse_problem_matchers(*text, file.string());
}

MatcherSet::MatcherSet(const std::vector<ProblemMatcher>& matchers) {
    for (const auto& matcher : matchers) {
        m_active.push_back(
            Active{matcher, std::vector<std::optional<MatcherHit>>(matcher.patterns.size() - 1)});
    }
}

void MatcherSet::add(const ProblemMatcher& matcher) {
    remove(matcher.owner);
    m_active.insert(
        m_active.begin(),
        Active{matcher, std::vector<std::optional<MatcherHit>>(matcher.patterns.size() - 1)});
}

void MatcherSet::remove(std::string_view owner) {
    std::erase_if(m_active, [&](const Active& active) {
        return equals_ignore_case(active.matcher.owner, owner);
    });
}

// IssueMatcher.Match: the patterns in reverse, so one line cannot advance a match twice.
MatcherSet::Result MatcherSet::match_one(Active& active, std::string_view line, MatcherHit& hit) {
    const auto& patterns = active.matcher.patterns;
    auto& state = active.state;
    std::vector<std::string> groups;
    const std::size_t last = patterns.size() - 1;
    for (std::size_t n = patterns.size(); n-- > 0;) {
        const std::optional<MatcherHit> running = n > 0 ? state[n - 1] : std::nullopt;
        if (n > 0 && !running) continue;
        const auto outcome = patterns[n].regex->match(line, groups);
        if (outcome == CompiledRegex::Outcome::limit) return Result::limit;
        if (outcome == CompiledRegex::Outcome::match) {
            if (n == last) {
                hit = combine(running, patterns[n], groups, active.matcher.severity);
                std::ranges::fill(state, std::nullopt);
                if (patterns[n].loop && n > 0) state[n - 1] = running;
                return Result::match;
            }
            state[n] = combine(running, patterns[n], groups, "");
        } else if (n == last) {
            if (n > 0) state[n - 1].reset();  // the running match is broken
        } else {
            state[n].reset();
        }
    }
    return Result::no_match;
}

std::optional<MatcherHit> MatcherSet::match(std::string_view line,
                                            std::vector<std::string>& warnings) {
    if (m_active.empty()) return std::nullopt;
    const std::string stripped = strip_color_codes(line);
    for (std::size_t i = 0; i < m_active.size();) {
        MatcherHit hit;
        const Result result = match_one(m_active[i], stripped, hit);
        if (result == Result::limit) {
            warnings.push_back(
                "Removing issue matcher '" + m_active[i].matcher.owner +
                "'. Matcher failed: the regular expression exceeded its match limit.");
            m_active.erase(m_active.begin() + static_cast<std::ptrdiff_t>(i));
            continue;
        }
        if (result == Result::match) {
            for (std::size_t j = 0; j < m_active.size(); ++j) {
                if (j != i) std::ranges::fill(m_active[j].state, std::nullopt);
            }
            return hit;
        }
        ++i;
    }
    return std::nullopt;
}

std::optional<Annotation> hit_annotation(const MatcherHit& hit,
                                         const std::filesystem::path& workspace, std::string& why) {
    if (blank(hit.message)) {
        why = "Skipping logging an issue for the matched line because the message is empty.";
        return std::nullopt;
    }
    Annotation annotation;
    if (!hit.severity || hit.severity->empty() || equals_ignore_case(*hit.severity, "error")) {
        annotation.level = AnnotationLevel::error;
    } else if (equals_ignore_case(*hit.severity, "warning")) {
        annotation.level = AnnotationLevel::warning;
    } else {
        why = "Skipped logging an issue for the matched line because the severity '" +
              *hit.severity + "' is not supported.";
        return std::nullopt;
    }
    annotation.message = *hit.message;
    if (hit.line && !hit.line->empty()) annotation.line = parse_digits(*hit.line);
    if (hit.column && !hit.column->empty()) annotation.column = parse_digits(*hit.column);
    if (!blank(hit.code)) annotation.code = std::string(common::trim(*hit.code));
    if (!blank(hit.file)) annotation.file = repository_file(hit, workspace, why);
    return annotation;
}

std::string strip_color_codes(std::string_view line) {
    if (line.find("\x1b[") == std::string_view::npos) return std::string(line);
    std::string out;
    out.reserve(line.size());
    for (std::size_t i = 0; i < line.size(); ++i) {
        if (line[i] == '\x1b' && i + 1 < line.size() && line[i + 1] == '[') {
            std::size_t j = i + 2;
            while (j < line.size() && ((line[j] >= '0' && line[j] <= '9') || line[j] == ';')) ++j;
            if (j < line.size() && line[j] == 'm') {
                i = j;
                continue;
            }
        }
        out.push_back(line[i]);
    }
    return out;
}

}  // namespace jobs
