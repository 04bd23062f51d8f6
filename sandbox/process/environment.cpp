// The child's environment: a fixed allowlist of the host's variables plus what the request
// names. Nothing else of the agent's environment (tokens, SSH agents, proxies) reaches it.
#include <unistd.h>

#include <algorithm>
#include <array>
#include <string_view>

#include "sandbox/process/run.hpp"

extern char** environ;

namespace sandbox {
namespace {

// Locale, terminal and time zone: what a build needs to behave as on a developer's machine.
constexpr std::array<std::string_view, 10> k_allowed = {
    "PATH",      "LANG",     "LANGUAGE",          "TERM",     "TZ",
    "COLORTERM", "NO_COLOR", "SOURCE_DATE_EPOCH", "TERMINFO", "LOCPATH",
};

bool allowed(std::string_view name) {
    if (name.starts_with("LC_")) return true;
    return std::find(k_allowed.begin(), k_allowed.end(), name) != k_allowed.end();
}

void set_var(Environment& env, std::string_view name, std::string_view value) {
    auto it =
        std::find_if(env.begin(), env.end(), [&](const auto& kv) { return kv.first == name; });
    if (it != env.end()) {
        it->second = value;
    } else {
        env.emplace_back(name, value);
    }
}

const std::string* find_var(const Environment& env, std::string_view name) {
    for (const auto& [key, value] : env)
        if (key == name) return &value;
    return nullptr;
}

}  // namespace

Environment child_environment(const Environment& host, const std::vector<std::string>& pass,
                              const Environment& set) {
    Environment env;
    for (const auto& [name, value] : host)
        if (allowed(name)) set_var(env, name, value);
    for (const auto& name : pass)
        if (const std::string* value = find_var(host, name)) set_var(env, name, *value);
    for (const auto& [name, value] : set) set_var(env, name, value);
    return env;
}

Environment current_environment() {
    Environment env;
    for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
        std::string_view text(*entry);
        const std::size_t eq = text.find('=');
        if (eq == std::string_view::npos || eq == 0) continue;
        set_var(env, text.substr(0, eq), text.substr(eq + 1));
    }
    return env;
}

}  // namespace sandbox
