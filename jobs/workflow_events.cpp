#include "jobs/workflow_events.hpp"

#include <algorithm>
#include <string>

namespace jobs {
namespace {

// GitHub's filter globs: `*` within a path component, `**` across, `?` one character.
bool glob_match(std::string_view pattern, std::string_view text) {
    if (pattern.empty()) return text.empty();
    if (pattern.starts_with("**")) {
        for (std::size_t i = 0; i <= text.size(); ++i) {
            if (glob_match(pattern.substr(2), text.substr(i))) return true;
        }
        return false;
    }
    if (pattern[0] == '*') {
        for (std::size_t i = 0; i <= text.size(); ++i) {
            if (glob_match(pattern.substr(1), text.substr(i))) return true;
            if (i < text.size() && text[i] == '/') return false;
        }
        return false;
    }
    if (text.empty()) return false;
    if (pattern[0] == '?' || pattern[0] == text[0]) return glob_match(pattern.substr(1), text.substr(1));
    return false;
}

bool filter_admits(const YamlNode& filters, std::string_view include, std::string_view exclude,
                   std::string_view value) {
    auto any = [&](const YamlNode* list) {
        if (list == nullptr) return false;
        if (list->is_scalar()) return glob_match(list->text, value);
        return std::ranges::any_of(list->items, [&](const YamlNode& item) { return glob_match(item.text, value); });
    };
    if (const YamlNode* list = filters.find(include)) return any(list);
    if (const YamlNode* list = filters.find(exclude)) return !any(list);
    return true;
}

}  // namespace

bool event_matches(const Workflow& workflow, std::string_view event_name, const Value& payload) {
    const EventTrigger* trigger = workflow.on.find(event_name);
    if (trigger == nullptr) return false;
    const YamlNode& filters = trigger->filters;
    if (!filters.is_mapping()) return true;
    if (const YamlNode* types = filters.find("types")) {
        if (const Value* action = payload.get("action"); action && action->is_string()) {
            const bool listed = types->is_scalar() ? types->text == action->as_string()
                                                   : std::ranges::any_of(types->items, [&](const YamlNode& t) { return t.text == action->as_string(); });
            if (!listed) return false;
        }
    }
    std::string ref;
    if (event_name.starts_with("pull_request")) {
        if (const Value* pr = payload.get("pull_request")) {
            if (const Value* base = pr->get("base")) {
                if (const Value* r = base->get("ref"); r && r->is_string()) ref = "refs/heads/" + r->as_string();
            }
        }
    } else if (const Value* r = payload.get("ref"); r && r->is_string()) {
        ref = r->as_string();
    }
    if (ref.starts_with("refs/heads/")) {
        const bool has_tag_filter = filters.find("tags") || filters.find("tags-ignore");
        const bool has_branch_filter = filters.find("branches") || filters.find("branches-ignore");
        if (!has_branch_filter && has_tag_filter) return false;
        return filter_admits(filters, "branches", "branches-ignore", ref.substr(11));
    }
    if (ref.starts_with("refs/tags/")) {
        const bool has_tag_filter = filters.find("tags") || filters.find("tags-ignore");
        const bool has_branch_filter = filters.find("branches") || filters.find("branches-ignore");
        if (!has_tag_filter && has_branch_filter) return false;
        return filter_admits(filters, "tags", "tags-ignore", ref.substr(10));
    }
    return true;
}

}  // namespace jobs
