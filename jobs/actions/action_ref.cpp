#include "jobs/actions/action_ref.hpp"

#include <algorithm>
#include <cctype>

namespace jobs {
namespace {

bool valid_name(std::string_view name) {
    if (name.empty() || name == "." || name == ".." || name.size() > 100) return false;
    return std::ranges::all_of(name, [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '_' || c == '.';
    });
}

bool valid_path(std::string_view path) {
    std::size_t start = 0;
    while (start <= path.size()) {
        const auto slash = path.find('/', start);
        const auto part = path.substr(
            start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
        if (part.empty() || part == "." || part == "..") return false;
        if (std::ranges::any_of(part, [](char c) {
                return std::iscntrl(static_cast<unsigned char>(c)) != 0 || c == '\\';
            }))
            return false;
        if (slash == std::string_view::npos) break;
        start = slash + 1;
    }
    return true;
}

bool valid_ref(std::string_view ref) {
    if (ref.empty() || ref.size() > 255 || ref.front() == '-' || ref.front() == '/' ||
        ref.find("..") != std::string_view::npos)
        return false;
    return std::ranges::none_of(ref, [](char c) {
        return std::isspace(static_cast<unsigned char>(c)) != 0 ||
               std::iscntrl(static_cast<unsigned char>(c)) != 0 || c == '~' || c == '^' ||
               c == ':' || c == '\\';
    });
}

}  // namespace

std::string ActionRef::uses() const {
    return repository() + (path.empty() ? "" : "/" + path) + "@" + ref;
}

bool is_remote_uses(std::string_view uses) {
    if (uses.starts_with("./") || uses == "." || uses.starts_with("docker://")) return false;
    return uses.find('@') != std::string_view::npos && uses.find("${{") == std::string_view::npos;
}

bool is_full_sha(std::string_view text) {
    return text.size() == 40 && std::ranges::all_of(text, [](char c) {
               return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
           });
}

common::Expected<ActionRef> parse_action_ref(std::string_view uses) {
    auto bad = [&](std::string_view why) {
        return common::fail(
            common::ErrorKind::invalid_input,
            "'" + std::string(uses) +
                "' is not a valid action reference (OWNER/REPO[/PATH]@REF): " + std::string(why));
    };
    const auto at = uses.rfind('@');
    if (at == std::string_view::npos) return bad("no @REF");
    ActionRef out;
    out.ref = std::string(uses.substr(at + 1));
    if (!valid_ref(out.ref)) return bad("bad ref");
    const auto name = uses.substr(0, at);
    const auto first = name.find('/');
    if (first == std::string_view::npos) return bad("no /REPO");
    out.owner = std::string(name.substr(0, first));
    const auto second = name.find('/', first + 1);
    out.repo = std::string(name.substr(
        first + 1, second == std::string_view::npos ? std::string_view::npos : second - first - 1));
    if (second != std::string_view::npos) {
        out.path = std::string(name.substr(second + 1));
        if (!valid_path(out.path)) return bad("bad path");
    }
    if (!valid_name(out.owner)) return bad("bad owner");
    if (!valid_name(out.repo)) return bad("bad repository name");
    return out;
}

const LockedAction* ActionLock::find(std::string_view uses) const {
    auto it = std::ranges::find_if(entries,
                                   [&](const LockedAction& entry) { return entry.uses == uses; });
    return it == entries.end() ? nullptr : &*it;
}

}  // namespace jobs
