#include "jobs/workflow/workflow_events.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "jobs/workflow/merge_queue.hpp"

namespace jobs {
namespace {

// One element of a filter pattern: a literal byte, a [class], `*` (anything but '/') or `**`
// (anything), with the quantifier of a following `?` (zero or one) or `+` (one or more).
struct PatternToken {
    enum class Kind { literal, klass, star, globstar } kind = Kind::literal;
    char literal = 0;
    std::string klass;  // [..]: the bytes it admits, ranges expanded
    bool negated_class = false;
    enum class Count { one, optional, one_or_more } count = Count::one;
};

std::string expand_class(std::string_view body) {
    std::string out;
    for (std::size_t i = 0; i < body.size(); ++i) {
        if (i + 2 < body.size() && body[i + 1] == '-') {
            for (int c = static_cast<unsigned char>(body[i]);
                 c <= static_cast<unsigned char>(body[i + 2]); ++c)
                out.push_back(static_cast<char>(c));
            i += 2;
        } else {
            out.push_back(body[i]);
        }
    }
    return out;
}

// GitHub's filter pattern cheat sheet: `*`, `**`, `?` and `+` after a character or class,
// `[abc]`/`[a-z]`, `\` escaping the next character. An unclosed `[` is a literal.
std::vector<PatternToken> tokenize(std::string_view pattern) {
    std::vector<PatternToken> tokens;
    for (std::size_t i = 0; i < pattern.size(); ++i) {
        const char c = pattern[i];
        PatternToken token;
        if (c == '*') {
            const bool double_star = i + 1 < pattern.size() && pattern[i + 1] == '*';
            token.kind = double_star ? PatternToken::Kind::globstar : PatternToken::Kind::star;
            if (double_star) ++i;
        } else if ((c == '?' || c == '+') && !tokens.empty() &&
                   (tokens.back().kind == PatternToken::Kind::literal ||
                    tokens.back().kind == PatternToken::Kind::klass) &&
                   tokens.back().count == PatternToken::Count::one) {
            tokens.back().count =
                c == '?' ? PatternToken::Count::optional : PatternToken::Count::one_or_more;
            continue;
        } else if (c == '[' && pattern.find(']', i + 1) != std::string_view::npos) {
            const std::size_t close = pattern.find(']', i + 1);
            std::string_view body = pattern.substr(i + 1, close - i - 1);
            token.kind = PatternToken::Kind::klass;
            token.negated_class = body.starts_with('!') || body.starts_with('^');
            token.klass = expand_class(token.negated_class ? body.substr(1) : body);
            i = close;
        } else if (c == '\\' && i + 1 < pattern.size()) {
            token.literal = pattern[++i];
        } else {
            token.literal = c;
        }
        tokens.push_back(std::move(token));
    }
    return tokens;
}

bool admits_byte(const PatternToken& token, char c) {
    if (token.kind == PatternToken::Kind::literal) return token.literal == c;
    const bool listed = token.klass.find(c) != std::string::npos;
    return token.negated_class ? !listed && c != '/' : listed;
}

bool match_from(const std::vector<PatternToken>& tokens, std::size_t t, std::string_view text) {
    if (t == tokens.size()) return text.empty();
    const PatternToken& token = tokens[t];
    if (token.kind == PatternToken::Kind::star || token.kind == PatternToken::Kind::globstar) {
        // `**/` also matches no directory at all: `**/*-post.md` matches my-post.md.
        const bool slash_next =
            t + 1 < tokens.size() && tokens[t + 1].kind == PatternToken::Kind::literal &&
            tokens[t + 1].literal == '/' && tokens[t + 1].count == PatternToken::Count::one;
        if (token.kind == PatternToken::Kind::globstar && slash_next &&
            match_from(tokens, t + 2, text))
            return true;
        for (std::size_t i = 0; i <= text.size(); ++i) {
            if (match_from(tokens, t + 1, text.substr(i))) return true;
            if (i < text.size() && text[i] == '/' && token.kind == PatternToken::Kind::star)
                return false;
        }
        return false;
    }
    switch (token.count) {
        case PatternToken::Count::one:
            return !text.empty() && admits_byte(token, text[0]) &&
                   match_from(tokens, t + 1, text.substr(1));
        case PatternToken::Count::optional:
            return match_from(tokens, t + 1, text) ||
                   (!text.empty() && admits_byte(token, text[0]) &&
                    match_from(tokens, t + 1, text.substr(1)));
        case PatternToken::Count::one_or_more:
            for (std::size_t n = 0; n < text.size() && admits_byte(token, text[n]); ++n)
                if (match_from(tokens, t + 1, text.substr(n + 1))) return true;
            return false;
    }
    return false;
}

}  // namespace

std::string merge_queue_base_ref(std::string_view head_ref) {
    return parse_merge_queue_ref(head_ref).base_ref;
}

bool glob_match(std::string_view pattern, std::string_view text) {
    return match_from(tokenize(pattern), 0, text);
}

namespace {

std::vector<const YamlNode*> pattern_list(const YamlNode& list) {
    std::vector<const YamlNode*> out;
    if (list.is_scalar()) out.push_back(&list);
    for (const auto& item : list.items) out.push_back(&item);
    return out;
}

// `include` (branches/tags): the last pattern that matches decides, `!pattern` excluding; so
// [main, 'releases/**', '!releases/**-alpha'] admits releases/1 but not releases/1-alpha.
// `exclude` (branches-ignore/tags-ignore): any match excludes. The same for paths/paths-ignore
// applied to one file. An empty name is no list.
bool filter_admits(const YamlNode& filters, std::string_view include, std::string_view exclude,
                   std::string_view value) {
    if (const YamlNode* list = include.empty() ? nullptr : filters.find(include)) {
        bool admitted = false;
        for (const YamlNode* item : pattern_list(*list)) {
            const std::string_view text = item->text;
            const bool negative = text.starts_with('!');
            if (glob_match(negative ? text.substr(1) : text, value)) admitted = !negative;
        }
        return admitted;
    }
    if (const YamlNode* list = exclude.empty() ? nullptr : filters.find(exclude)) {
        for (const YamlNode* item : pattern_list(*list))
            if (glob_match(item->text, value)) return false;
    }
    return true;
}

// The ref a trigger's branches/tags filters test: the base branch for pull requests and merge
// queues, the pushed ref otherwise.
std::string filtered_ref(std::string_view event_name, const Value& payload) {
    const auto text_at = [](const Value* value, std::string_view key) -> std::string {
        const Value* field = value ? value->get(key) : nullptr;
        return field && field->is_string() ? field->as_string() : std::string();
    };
    if (event_name.starts_with("pull_request")) {
        const Value* pr = payload.get("pull_request");
        const std::string base = text_at(pr ? pr->get("base") : nullptr, "ref");
        return base.empty() ? base : "refs/heads/" + base;
    }
    if (event_name == "merge_group") {
        const Value* group = payload.get("merge_group");
        const std::string base = text_at(group, "base_ref");
        return base.empty() ? merge_queue_base_ref(text_at(group, "head_ref")) : base;
    }
    return text_at(&payload, "ref");
}

}  // namespace

bool has_paths_filter(const Workflow& workflow, std::string_view event_name) {
    const EventTrigger* trigger = workflow.on.find(event_name);
    return trigger != nullptr && trigger->filters.is_mapping() &&
           (trigger->filters.find("paths") || trigger->filters.find("paths-ignore"));
}

bool paths_filter_admits(const YamlNode& filters, std::span<const std::string> changed) {
    if (!filters.is_mapping()) return true;
    const YamlNode* paths = filters.find("paths");
    const YamlNode* ignore = filters.find("paths-ignore");
    if (paths == nullptr && ignore == nullptr) return true;
    for (const std::string& path : changed) {
        // `paths` and `paths-ignore` together: GitHub's parser accepts them (its docs advise
        // against it); `paths` decides then, as `branches` does over `branches-ignore`.
        if (paths != nullptr ? filter_admits(filters, "paths", "", path)
                             : filter_admits(filters, "", "paths-ignore", path))
            return true;
    }
    return false;
}

bool event_matches(const Workflow& workflow, std::string_view event_name, const Value& payload,
                   const ChangedFiles* changed) {
    const EventTrigger* trigger = workflow.on.find(event_name);
    if (trigger == nullptr) return false;
    const YamlNode& filters = trigger->filters;
    if (!filters.is_mapping()) return true;
    if (const YamlNode* types = filters.find("types")) {
        if (const Value* action = payload.get("action"); action && action->is_string()) {
            const bool listed = types->is_scalar()
                                    ? types->text == action->as_string()
                                    : std::ranges::any_of(types->items, [&](const YamlNode& t) {
                                          return t.text == action->as_string();
                                      });
            if (!listed) return false;
        }
    }
    const std::string ref = filtered_ref(event_name, payload);
    const bool branch_filter = filters.find("branches") || filters.find("branches-ignore");
    const bool tag_filter = filters.find("tags") || filters.find("tags-ignore");
    // A trigger that filters only tags does not run for a branch, and the other way round.
    if (ref.starts_with("refs/tags/"))  // paths filters are not evaluated for tag pushes
        return (tag_filter || !branch_filter) &&
               filter_admits(filters, "tags", "tags-ignore", ref.substr(10));
    if (ref.starts_with("refs/heads/") &&
        !((branch_filter || !tag_filter) &&
          filter_admits(filters, "branches", "branches-ignore", ref.substr(11))))
        return false;
    return changed == nullptr || paths_filter_admits(filters, changed->paths);
}

}  // namespace jobs
