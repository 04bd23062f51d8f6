#include "jobs/actions/action_resolve.hpp"

#include <algorithm>

#include "jobs/expr/value.hpp"
#include "jobs/workflow/action_model.hpp"
#include "jobs/workflow/workflow_call.hpp"

namespace jobs {
namespace {

constexpr int k_max_depth = 9;  // composite nesting and workflow calls, as the runner bounds them

}  // namespace

BuiltinAction builtin_action(std::string_view uses) {
    const std::string_view name = uses.substr(0, uses.find('@'));
    if (equals_ignore_case(name, "actions/checkout")) return BuiltinAction::checkout;
    if (equals_ignore_case(name, "step-security/harden-runner")) return BuiltinAction::wrap_does_it;
    if (equals_ignore_case(name, "actions/cache")) return BuiltinAction::cache;
    if (equals_ignore_case(name, "actions/cache/restore")) return BuiltinAction::cache_restore;
    if (equals_ignore_case(name, "actions/cache/save")) return BuiltinAction::cache_save;
    if (equals_ignore_case(name, "actions/upload-artifact")) return BuiltinAction::upload_artifact;
    if (equals_ignore_case(name, "actions/download-artifact"))
        return BuiltinAction::download_artifact;
    return BuiltinAction::none;
}

bool is_builtin_action(std::string_view uses) {
    return builtin_action(uses) != BuiltinAction::none;
}

ActionResolver::ActionResolver(ActionStore store, ActionSource source, ResolveOptions options)
    : m_store(std::move(store)), m_source(std::move(source)), m_options(std::move(options)) {}

void ActionResolver::resolve_workflows(const std::vector<Workflow>& workflows,
                                       const std::filesystem::path& repository) {
    std::lock_guard guard(m_mutex);
    // Local reusable workflows are walked too (each file once, calls bounded in depth).
    std::vector<std::pair<Workflow, int>> pending;
    std::vector<std::string> seen;
    auto walk = [&](const Workflow& workflow, int depth) {
        for (const auto& job : workflow.jobs) {
            if (!job.calls_workflow()) {
                resolve_steps(job.steps, 0);
                continue;
            }
            if (depth >= k_max_depth || !job.uses->value.starts_with("./")) continue;
            if (std::ranges::find(seen, job.uses->value) != seen.end()) continue;
            seen.push_back(job.uses->value);
            if (auto called = load_called_workflow(repository, job))
                pending.emplace_back(std::move(*called), depth + 1);
        }
    };
    for (const auto& workflow : workflows) walk(workflow, 0);
    while (!pending.empty()) {
        auto [workflow, depth] = std::move(pending.back());
        pending.pop_back();
        walk(workflow, depth);
    }
}

void ActionResolver::resolve_steps(const std::vector<Step>& steps, int depth) {
    for (const auto& step : steps) {
        if (!step.parallel.empty())
            resolve_steps(step.parallel, depth);  // a parallel: block's steps
        if (!step.uses || !is_remote_uses(step.uses->value) || is_builtin_action(step.uses->value))
            continue;
        (void)resolve_locked(step.uses->value, depth);
    }
}

LockedAction ActionResolver::get(std::string_view uses) {
    std::lock_guard guard(m_mutex);
    return resolve_locked(uses, 0);
}

std::vector<LockedAction> ActionResolver::lock() const {
    std::lock_guard guard(m_mutex);
    return m_entries;
}

std::filesystem::path ActionResolver::trees_root() const {
    std::lock_guard guard(m_mutex);
    return m_store_lock ? m_store.trees_root() : std::filesystem::path();
}

const LockedAction& ActionResolver::resolve_locked(std::string_view uses, int depth) {
    auto known = std::ranges::find_if(
        m_entries, [&](const LockedAction& entry) { return entry.uses == uses; });
    if (known != m_entries.end()) return *known;
    LockedAction entry = resolve_entry(uses);
    m_entries.push_back(std::move(entry));
    const std::size_t index = m_entries.size() - 1;
    // A composite action's own remote actions, resolved now too (its tree is read-only).
    if (m_entries[index].error.empty() && depth < k_max_depth) {
        auto action = load_action(m_entries[index].tree, m_entries[index].directory);
        if (action && action->kind == ActionKind::composite)
            resolve_steps(action->steps, depth + 1);
    }
    return m_entries[index];
}

std::string ActionResolver::miss_message(const ActionRef& ref, const std::string& why) const {
    return "the action '" + ref.uses() + "' is not in the action cache " +
           m_store.dirs().archives.string() + " (" + why + "): fill it with `" +
           m_options.fill_command + "`";
}

LockedAction ActionResolver::resolve_entry(std::string_view uses) {
    LockedAction entry;
    entry.uses = std::string(uses);
    auto parsed = parse_action_ref(uses);
    if (!parsed) {
        entry.error = parsed.error().message;
        return entry;
    }
    entry.ref = *parsed;
    const ActionRef& ref = entry.ref;
    std::string sha;
    if (is_full_sha(ref.ref))
        sha = ref.ref;
    else if (m_options.refresh == PinRefresh::cached_first)
        sha = m_store.pinned(ref).value_or("");
    if (sha.empty() || !m_store.has_archive(ref, sha)) {
        if (!m_source.configured()) {
            entry.error =
                miss_message(ref, sha.empty() ? "no pin for '" + ref.ref + "' and no action source"
                                              : "no archive of " + sha + " and no action source");
            return entry;
        }
        auto fetched = m_source.fetch(ref, m_store);
        if (!fetched) {
            entry.error = fetched.error().kind == common::ErrorKind::invalid_input
                              ? "the action '" + ref.uses() + "': " + fetched.error().message
                              : miss_message(ref, m_source.describe() + " cannot serve it: " +
                                                      fetched.error().message);
            return entry;
        }
        sha = *fetched;
        if (!is_full_sha(ref.ref))
            (void)m_store.pin(ref, sha);  // a read-only pre-filled cache keeps no pins
    }
    entry.sha = sha;
    if (!m_store_lock) {
        auto held = m_store.lock_shared();
        if (!held) {
            entry.error = "the action '" + ref.uses() + "': " + held.error().message;
            return entry;
        }
        m_store_lock.emplace(std::move(*held));
        // A physical path: the wrap binds the trees at their own path and refuses symlinks.
        std::error_code ec;
        auto work = std::filesystem::canonical(m_store.dirs().work, ec);
        if (!ec) m_store = ActionStore({m_store.dirs().archives, std::move(work)});
    }
    auto tree = m_store.tree(ref, sha);
    if (!tree) {
        entry.error = "the action '" + ref.uses() + "' at " + sha + ": " + tree.error().message;
        return entry;
    }
    entry.tree = *tree;
    entry.directory = ref.path.empty() ? *tree : *tree / ref.path;
    return entry;
}

}  // namespace jobs
