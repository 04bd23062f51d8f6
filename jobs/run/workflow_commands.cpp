#include "jobs/run/workflow_commands.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <utility>

#include "common/strings.hpp"
#include "jobs/run/log.hpp"
#include "jobs/workflow/workflow_matchers.hpp"

namespace jobs {
namespace {

using common::trim;

constexpr std::string_view k_key = "::";

constexpr std::array<std::string_view, 15> k_registered = {
    "add-mask", "group", "endgroup",      "error",       "warning",
    "notice",   "debug", "save-state",    "set-output",  "set-env",
    "add-path", "echo",  "stop-commands", "add-matcher", "remove-matcher"};

constexpr std::string_view k_unsecure_message =
    "The `{}` command is disabled. Please upgrade to using Environment Files or opt into "
    "unsecure command execution by setting the `ACTIONS_ALLOW_UNSECURE_COMMANDS` environment "
    "variable to `true`. For more information see: "
    "https://github.blog/changelog/"
    "2020-10-01-github-actions-deprecating-set-env-and-add-path-commands/";

constexpr std::string_view k_deprecated_message =
    "The `{}` command is deprecated and will be disabled soon. Please upgrade to using "
    "Environment Files. For more information see: "
    "https://github.blog/changelog/"
    "2022-10-11-github-actions-deprecating-save-state-and-set-output-commands/";

std::string with_name(std::string_view pattern, std::string_view name) {
    std::string out(pattern);
    out.replace(out.find("{}"), 2, name);
    return out;
}

std::string fold_owner(std::string_view owner) {
    return common::ascii_lowercase(owner);
}

bool is_registered(std::string_view name) {
    return std::any_of(k_registered.begin(), k_registered.end(),
                       [&](std::string_view known) { return common::ascii_iequals(known, name); });
}

std::string replace_all(std::string text, std::string_view from, std::string_view to) {
    for (auto pos = text.find(from); pos != std::string::npos;
         pos = text.find(from, pos + to.size())) {
        text.replace(pos, from.size(), to);
    }
    return text;
}

std::vector<std::string_view> split_nonempty(std::string_view text, char separator) {
    std::vector<std::string_view> parts;
    while (!text.empty()) {
        const auto at = text.find(separator);
        const auto part = text.substr(0, at);
        if (!part.empty()) parts.push_back(part);
        if (at == std::string_view::npos) break;
        text.remove_prefix(at + 1);
    }
    return parts;
}

// int.TryParse: optional surrounding whitespace and sign, decimal digits only.
std::optional<int> parse_int(const std::string* text) {
    if (text == nullptr) return std::nullopt;
    auto value = trim(*text);
    if (!value.empty() && value.front() == '+') value.remove_prefix(1);
    int number = 0;
    const auto* end = value.data() + value.size();
    const auto [ptr, ec] = std::from_chars(value.data(), end, number);
    if (ec != std::errc() || ptr != end || value.empty()) return std::nullopt;
    return number;
}

}  // namespace

std::string_view to_string(AnnotationLevel level) {
    switch (level) {
        case AnnotationLevel::error:
            return "error";
        case AnnotationLevel::warning:
            return "warning";
        case AnnotationLevel::notice:
            return "notice";
    }
    return "error";
}

void set_named(NamedValues& values, std::string_view name, std::string_view value) {
    for (auto& [key, existing] : values) {
        if (key == name) {
            existing = value;
            return;
        }
    }
    values.emplace_back(std::string(name), std::string(value));
}

const std::string* find_named(const NamedValues& values, std::string_view name) {
    for (const auto& [key, value] : values) {
        if (key == name) return &value;
    }
    return nullptr;
}

const std::string* ParsedCommand::property(std::string_view key) const {
    for (const auto& [prop_name, value] : properties) {
        if (common::ascii_iequals(prop_name, key)) return &value;
    }
    return nullptr;
}

std::string unescape_data(std::string_view text) {
    std::string out(text);
    out = replace_all(std::move(out), "%0D", "\r");
    out = replace_all(std::move(out), "%0A", "\n");
    return replace_all(std::move(out), "%25", "%");
}

std::string unescape_property(std::string_view text) {
    std::string out(text);
    out = replace_all(std::move(out), "%0D", "\r");
    out = replace_all(std::move(out), "%0A", "\n");
    out = replace_all(std::move(out), "%3A", ":");
    out = replace_all(std::move(out), "%2C", ",");
    return replace_all(std::move(out), "%25", "%");
}

std::optional<ParsedCommand> parse_command(std::string_view line) {
    const auto start = line.find_first_not_of(common::k_ascii_space);
    if (start == std::string_view::npos) return std::nullopt;
    line.remove_prefix(start);
    if (!line.starts_with(k_key)) return std::nullopt;
    const auto end = line.find(k_key, k_key.size());
    if (end == std::string_view::npos) return std::nullopt;
    const auto info = line.substr(k_key.size(), end - k_key.size());
    const auto space = info.find(' ');
    ParsedCommand command;
    command.name = std::string(info.substr(0, space));
    if (command.name.empty()) return std::nullopt;
    if (space != std::string_view::npos && space > 0) {
        for (const auto property : split_nonempty(trim(info.substr(space + 1)), ',')) {
            const auto equals = property.find('=');
            if (equals == std::string_view::npos || equals == 0) continue;
            const auto value = property.substr(equals + 1);
            if (value.empty()) continue;
            const auto key = property.substr(0, equals);
            auto it = std::find_if(
                command.properties.begin(), command.properties.end(),
                [&](const auto& pair) { return common::ascii_iequals(pair.first, key); });
            if (it != command.properties.end()) {
                it->second = unescape_property(value);
            } else {
                command.properties.emplace_back(std::string(key), unescape_property(value));
            }
        }
    }
    command.data = unescape_data(line.substr(end + k_key.size()));
    return command;
}

std::string unescape_legacy(std::string_view text) {
    std::string out(text);
    out = replace_all(std::move(out), "%3B", ";");
    out = replace_all(std::move(out), "%0D", "\r");
    out = replace_all(std::move(out), "%0A", "\n");
    out = replace_all(std::move(out), "%5D", "]");
    return replace_all(std::move(out), "%25", "%");
}

std::optional<ParsedCommand> parse_legacy_command(std::string_view line) {
    const auto prefix = line.find("##[");
    if (prefix == std::string_view::npos) return std::nullopt;
    const auto bracket = line.find(']', prefix);
    if (bracket == std::string_view::npos) return std::nullopt;
    const auto info = line.substr(prefix + 3, bracket - prefix - 3);
    const auto space = info.find(' ');
    ParsedCommand command;
    command.name = std::string(info.substr(0, space));
    if (command.name.empty()) return std::nullopt;
    if (space != std::string_view::npos && space > 0) {
        for (const auto property : split_nonempty(info.substr(space + 1), ';')) {
            const auto equals = property.find('=');
            if (equals == std::string_view::npos || equals == 0 || equals + 1 == property.size())
                continue;
            set_named(command.properties, property.substr(0, equals),
                      unescape_legacy(property.substr(equals + 1)));
        }
    }
    command.data = unescape_legacy(line.substr(bracket + 1));
    return command;
}

bool parse_bool_true(std::string_view text) {
    return common::ascii_iequals(trim(text), "true");
}

CommandProcessor::CommandProcessor(Masker& masker, LogSink& log, const StepLabel& label,
                                   UnsecureCommands unsecure, Echo echo)
    : m_masker(masker),
      m_log(log),
      m_label(label),
      m_unsecure(unsecure),
      m_echo(echo),
      m_matchers(std::make_unique<MatcherSet>()) {}

CommandProcessor::~CommandProcessor() = default;

void CommandProcessor::set_matchers(std::vector<ProblemMatcher>& job_matchers) {
    m_job_matchers = &job_matchers;
    *m_matchers = MatcherSet(job_matchers);
}

void CommandProcessor::output(std::string_view line) {
    m_log.output(m_label, m_masker.mask(line));
}

void CommandProcessor::process_line(std::string_view line) {
    // ActionCommandManager: the `::` form first, then the legacy `##[` form; a line naming
    // no registered command (or the stop token) is plain output.
    auto known = [this](const std::optional<ParsedCommand>& command) {
        return command && (is_registered(command->name) ||
                           (m_stop_token && common::ascii_iequals(command->name, *m_stop_token)));
    };
    auto command = parse_command(line);
    if (!known(command)) command = parse_legacy_command(line);
    if (!known(command)) {
        if (!m_stop_token && match_problem(line)) return;
        return output(line);
    }
    if (m_stop_token) {
        output(line);
        if (common::ascii_iequals(command->name, *m_stop_token)) {
            m_log.debug(m_label, "Resume processing commands");
            m_stop_token.reset();
        }
        return;
    }
    handle(*command, line);
}

std::string CommandProcessor::relative_to_workspace(const std::string& file) const {
    if (m_workspace.empty()) return file;
    std::string root = m_workspace;
    while (root.size() > 1 && root.back() == '/') root.pop_back();
    if (file.size() > root.size() + 1 && file.starts_with(root) && file[root.size()] == '/') {
        return file.substr(root.size() + 1);
    }
    return file;
}

void CommandProcessor::handle(const ParsedCommand& command, std::string_view raw) {
    const auto name = common::ascii_lowercase(command.name);
    if (name == "stop-commands") return stop_commands(command, raw);
    const bool omit_echo = name == "add-mask" || name == "debug" || name == "error" ||
                           name == "warning" || name == "notice";
    if (m_echo == Echo::on && !omit_echo) output(raw);
    if (name == "add-mask")
        add_mask(command);
    else if (name == "group")
        start_group(command);
    else if (name == "endgroup")
        end_group();
    else if (name == "error")
        issue(command, AnnotationLevel::error);
    else if (name == "warning")
        issue(command, AnnotationLevel::warning);
    else if (name == "notice")
        issue(command, AnnotationLevel::notice);
    else if (name == "debug")
        m_log.debug(m_label, m_masker.mask(command.data));
    else if (name == "echo")
        set_echo(command, raw);
    else if (name == "set-output" || name == "save-state")
        save_value(name, command, raw);
    else if (name == "set-env")
        set_env(command, raw);
    else if (name == "add-path")
        add_path(command, raw);
    else if (name == "add-matcher")
        add_matcher(command, raw);
    else if (name == "remove-matcher")
        remove_matcher(command, raw);
}

// stop-commands is always echoed; its token must not be a command itself.
void CommandProcessor::stop_commands(const ParsedCommand& command, std::string_view raw) {
    output(raw);
    if (command.data.empty() || is_registered(command.data) ||
        common::ascii_iequals(command.data, "pause-logging")) {
        return fail(raw, "Invalid stop-commands token '" + command.data +
                             "': it must not be empty, 'pause-logging' or a workflow command.");
    }
    m_stop_token = command.data;
    m_log.debug(m_label, m_masker.mask("Paused processing commands until '::" + command.data +
                                       "::' is received"));
}

void CommandProcessor::add_mask(const ParsedCommand& command) {
    if (trim(command.data).empty())
        return warn("Can't add secret mask for empty string in ##[add-mask] command.");
    if (m_echo == Echo::on) output("::add-mask::***");
    m_masker.add_secret(command.data);
}

// Groups do not nest in GitHub's log: a new group ends the open one.
void CommandProcessor::start_group(const ParsedCommand& command) {
    end_group();
    m_group_open = true;
    m_log.group_start(m_label, m_masker.mask(command.data));
}

void CommandProcessor::end_group() {
    if (m_group_open) m_log.group_end(m_label);
    m_group_open = false;
}

void CommandProcessor::set_echo(const ParsedCommand& command, std::string_view raw) {
    const auto value = common::ascii_lowercase(trim(command.data));
    if (value == "on") {
        m_echo = Echo::on;
    } else if (value == "off") {
        m_echo = Echo::off;
    } else {
        fail(raw,
             "Invalid echo command value. Possible values can be: 'on', 'off'. Current "
             "value is: '" +
                 command.data + "'.");
    }
}

// set-output and save-state (`name`: the command, lower case): deprecated, still honoured.
void CommandProcessor::save_value(const std::string& name, const ParsedCommand& command,
                                  std::string_view raw) {
    const auto* key = command.property("name");
    if (key == nullptr || key->empty())
        return fail(raw, "Required field 'name' is missing in ##[" + name + "] command.");
    warn(with_name(k_deprecated_message, name));
    set_named(name == "set-output" ? m_effects.outputs : m_effects.state, *key, command.data);
}

// set-env and add-path run only with ACTIONS_ALLOW_UNSECURE_COMMANDS; otherwise they fail
// the step.
bool CommandProcessor::unsecure_allowed(std::string_view name, std::string_view raw) {
    if (m_unsecure == UnsecureCommands::enabled) return true;
    fail(raw, with_name(k_unsecure_message, name));
    return false;
}

void CommandProcessor::set_env(const ParsedCommand& command, std::string_view raw) {
    if (!unsecure_allowed("set-env", raw)) return;
    const auto* key = command.property("name");
    if (key == nullptr || key->empty()) {
        fail(raw, "Required field 'name' is missing in ##[set-env] command.");
    } else if (common::ascii_iequals(*key, "NODE_OPTIONS")) {
        add_annotation({AnnotationLevel::error,
                        "Can't update NODE_OPTIONS environment variable using ::set-env:: command.",
                        {},
                        {},
                        {},
                        {},
                        {},
                        {},
                        {}});
    } else {
        set_named(m_effects.env, *key, command.data);
    }
}

void CommandProcessor::add_path(const ParsedCommand& command, std::string_view raw) {
    if (!unsecure_allowed("add-path", raw)) return;
    if (command.data.empty()) return fail(raw, "Argument cannot be null or empty: path");
    std::erase(m_effects.path, command.data);
    m_effects.path.push_back(command.data);
}

std::filesystem::path CommandProcessor::rooted(const std::string& file) const {
    std::filesystem::path path(file);
    if (path.is_relative() && !m_workspace.empty())
        path = std::filesystem::path(m_workspace) / path;
    return path;
}

// AddMatcherCommandExtension: the file is rooted at the workspace; a bad file fails the step.
void CommandProcessor::add_matcher(const ParsedCommand& command, std::string_view raw) {
    if (command.data.empty()) return warn("File path must be specified.");
    const auto file = rooted(command.data);
    auto matchers = load_problem_matchers(m_workspace, file);
    if (!matchers && !m_action_trees.empty()) {
        if (auto from_tree = load_problem_matchers(m_action_trees, file))
            matchers = std::move(from_tree);
    }
    if (!matchers) return fail(raw, matchers.error().message);
    for (const auto& matcher : *matchers) {
        m_matchers->add(matcher);
        if (m_job_matchers == nullptr) continue;
        std::erase_if(*m_job_matchers, [&](const ProblemMatcher& m) {
            return fold_owner(m.owner) == fold_owner(matcher.owner);
        });
        m_job_matchers->insert(m_job_matchers->begin(), matcher);
        m_log.debug(m_label, "Added matcher '" + matcher.owner + "'");
    }
}

// RemoveMatcherCommandExtension: by owner, or by the owners a file names; not both.
void CommandProcessor::remove_matcher(const ParsedCommand& command, std::string_view raw) {
    const std::string* owner_property = command.property("owner");
    const std::string owner = owner_property ? *owner_property : std::string();
    if (!owner.empty() && !command.data.empty())
        return warn(
            "Either specify an owner name or a file path in ##[remove-matcher] command. Both "
            "values cannot be set.");
    if (owner.empty() && command.data.empty())
        return warn(
            "Either an owner name or a file path must be specified in ##[remove-matcher] command.");
    std::vector<std::string> owners;
    if (!owner.empty()) {
        owners.push_back(owner);
    } else {
        auto matchers = load_problem_matchers(m_workspace, rooted(command.data));
        if (!matchers) return fail(raw, matchers.error().message);
        for (const auto& matcher : *matchers) owners.push_back(matcher.owner);
    }
    for (const auto& name : owners) {
        m_matchers->remove(name);
        if (m_job_matchers != nullptr)
            std::erase_if(*m_job_matchers, [&](const ProblemMatcher& m) {
                return fold_owner(m.owner) == fold_owner(name);
            });
        m_log.debug(m_label, "Removed matcher '" + name + "'");
    }
}

// OutputManager: a match becomes an annotation in place of the line; a dropped match (blank
// message, unknown severity) leaves the line as output.
bool CommandProcessor::match_problem(std::string_view line) {
    if (m_matchers->empty()) return false;
    std::vector<std::string> warnings;
    auto hit = m_matchers->match(line, warnings);
    for (auto& warning : warnings) warn(std::move(warning));
    if (!hit) return false;
    std::string why;
    auto annotation = hit_annotation(*hit, m_workspace, why);
    if (!why.empty()) m_log.debug(m_label, m_masker.mask(why));
    if (!annotation) return false;
    add_annotation(std::move(*annotation));
    return true;
}

void CommandProcessor::issue(const ParsedCommand& command, AnnotationLevel level) {
    Annotation annotation;
    annotation.level = level;
    annotation.message = command.data;
    if (const auto* title = command.property("title")) annotation.title = *title;
    if (const auto* file = command.property("file")) annotation.file = relative_to_workspace(*file);
    annotation.line = parse_int(command.property("line"));
    annotation.end_line = parse_int(command.property("endLine"));
    annotation.column = parse_int(command.property("col"));
    annotation.end_column = parse_int(command.property("endColumn"));
    // IssueCommandExtension.ValidateLinesAndColumns.
    if (annotation.end_line && !annotation.line) annotation.line = annotation.end_line;
    if (annotation.end_column && !annotation.column) annotation.column = annotation.end_column;
    const bool has_column = annotation.column.has_value();
    const bool lines_differ = annotation.end_line && annotation.line != annotation.end_line;
    if ((!annotation.line && has_column) || (lines_differ && has_column)) {
        annotation.column.reset();
        annotation.end_column.reset();
    }
    if (annotation.line && annotation.end_line && *annotation.end_line < *annotation.line) {
        annotation.line.reset();
        annotation.end_line.reset();
    }
    if (annotation.column && annotation.end_column && *annotation.end_column < *annotation.column) {
        annotation.column.reset();
        annotation.end_column.reset();
    }
    add_annotation(std::move(annotation));
}

void CommandProcessor::add_annotation(Annotation annotation) {
    annotation.message = m_masker.mask(annotation.message);
    if (annotation.title) annotation.title = m_masker.mask(*annotation.title);
    if (annotation.file) annotation.file = m_masker.mask(*annotation.file);
    if (annotation.code) annotation.code = m_masker.mask(*annotation.code);
    m_log.annotation(m_label, annotation);
    m_effects.annotations.push_back(std::move(annotation));
}

void CommandProcessor::warn(std::string message) {
    add_annotation({AnnotationLevel::warning, std::move(message), {}, {}, {}, {}, {}, {}, {}});
}

void CommandProcessor::fail(std::string_view raw, std::string message) {
    add_annotation({AnnotationLevel::error,
                    "Unable to process command '" + std::string(raw) + "' successfully.",
                    {},
                    {},
                    {},
                    {},
                    {},
                    {},
                    {}});
    add_annotation({AnnotationLevel::error, message, {}, {}, {}, {}, {}, {}, {}});
    m_effects.failures.push_back(m_masker.mask(message));
}

void CommandProcessor::finish() {
    end_group();
}

}  // namespace jobs
