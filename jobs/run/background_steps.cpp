// Background steps of a job leg (GitHub's `background: true`, `wait`, `wait-all`, `cancel`,
// `parallel`). A background step runs run_one() on its own thread in a fork of the JobRun
// (job_steps.hpp) and touches nothing of the job's own; the job's thread joins it at a wait
// and applies what it did there: its report (kept at the step's place in the list), steps.<id>
// (outputs, outcome, conclusion), the env and path its file commands set, the problem matchers
// it added or removed, its post steps. Its file commands were read by run_step() through the
// safe seam as a foreground step's are. A failure joins the job at the wait; a step stopped by
// `cancel:` concludes cancelled, which fails nothing.
#include <algorithm>
#include <system_error>

#include "jobs/run/job_steps.hpp"
#include "jobs/workflow/yaml_value.hpp"

namespace jobs::detail {
namespace {

// The directories `after` prepends that `before` did not (or moved to the front since):
// PathPrepends::add only appends or moves an entry to the end, so what `before` held in order
// is a prefix of `after` once the moved entries are skipped.
std::vector<std::string> added_path(const PathPrepends& before, const PathPrepends& after) {
    const auto& old_entries = before.entries();
    const auto& new_entries = after.entries();
    std::size_t i = 0;
    for (std::size_t j = 0; i < new_entries.size() && j < old_entries.size(); ++j) {
        if (new_entries[i] == old_entries[j]) ++i;
    }
    return {new_entries.begin() + static_cast<std::ptrdiff_t>(i), new_entries.end()};
}

bool has_owner(const std::vector<ProblemMatcher>& matchers, const std::string& owner) {
    return std::ranges::any_of(matchers, [&](const ProblemMatcher& m) { return m.owner == owner; });
}

// The owners the step removed go; the ones it added come first (newest first, as add-matcher
// orders them).
void apply_matchers(const std::vector<ProblemMatcher>& before,
                    const std::vector<ProblemMatcher>& after, std::vector<ProblemMatcher>& job) {
    for (const auto& matcher : before) {
        if (!has_owner(after, matcher.owner))
            std::erase_if(job, [&](const ProblemMatcher& m) { return m.owner == matcher.owner; });
    }
    for (auto it = after.rbegin(); it != after.rend(); ++it) {
        if (has_owner(before, it->owner)) continue;
        std::erase_if(job, [&](const ProblemMatcher& m) { return m.owner == it->owner; });
        job.insert(job.begin(), *it);
    }
}

// A background step's thread: it waits for one of the job's slots (a cancel while it waits
// ends it, cancelled, without running), runs the step in its fork, and frees the slot.
void run_in_slot(BackgroundStep& background, const Step& step, const EvalContext& ctx) {
    JobRun& fork = *background.fork;
    while (!fork.m_slots->try_acquire_for(std::chrono::milliseconds(50))) {
        if (!background.cancel->cancelled()) continue;
        background.report.outcome = background.report.conclusion = Outcome::cancelled;
        background.report.message = "cancelled before it started";
        fork.log_finish(background.report);
        return;
    }
    fork.run_one(step, background.scope, ctx, background.report);
    fork.m_slots->release();
}

}  // namespace

BackgroundSteps::BackgroundSteps() = default;
BackgroundSteps::BackgroundSteps(const BackgroundSteps&) {}

BackgroundSteps::~BackgroundSteps() {
    for (auto& item : items) {
        if (!item->thread.joinable()) continue;
        if (item->cancel) item->cancel->cancel();
        item->thread.join();
    }
}

void JobRun::start_background(const Step& step, Scope& scope, const EvalContext& ctx,
                              StepReport report, std::vector<StepReport>& out) {
    auto token = m_leg.cancel != nullptr ? sandbox::CancelToken::create_linked(*m_leg.cancel)
                                         : sandbox::CancelToken::create();
    if (!token) {
        fail_step(report, token.error().message);
        return record(std::move(report), scope, out);
    }
    auto background = std::make_unique<BackgroundStep>();
    background->cancel.emplace(std::move(*token));
    background->id = report.id;
    background->key = fold_case(report.id);
    background->slot = out.size();
    background->before = m_state;
    background->scope = scope;
    StepReport placeholder;
    placeholder.id = report.id;
    placeholder.name = report.name;
    background->report = std::move(report);
    background->fork = std::make_unique<JobRun>(*this);
    background->fork->m_report = JobReport{};
    background->fork->m_posts.clear();
    background->fork->m_step_cancel = &*background->cancel;
    BackgroundStep* raw = background.get();
    try {
        raw->thread = std::thread([raw, &step, ctx] { run_in_slot(*raw, step, ctx); });
    } catch (const std::system_error& error) {  // no thread to be had (the process's limit)
        StepReport refused = std::move(raw->report);
        fail_step(refused, std::string("the background step could not start: ") + error.what());
        return record(std::move(refused), scope, out);
    }
    out.push_back(std::move(placeholder));
    m_background.items.push_back(std::move(background));
}

Outcome JobRun::join_background(BackgroundStep& background, Scope& scope,
                                std::vector<StepReport>& out) {
    if (background.applied) return background.conclusion;
    background.thread.join();
    JobRun& fork = *background.fork;
    for (const auto& [name, value] : fork.m_state.env) {
        const auto* was = find_named(background.before.env, name);
        if (was == nullptr || *was != value) set_env(m_state.env, name, value);
    }
    for (const auto& dir : added_path(background.before.path, fork.m_state.path))
        m_state.path.add(dir);
    apply_matchers(background.before.matchers, fork.m_state.matchers, m_state.matchers);
    for (auto& post : fork.m_posts) m_posts.push_back(std::move(post));
    m_timed_out = m_timed_out || fork.m_timed_out;
    StepReport& report = background.report;
    if (background.cancel_requested && report.outcome == Outcome::cancelled)
        report.message = "cancelled by a cancel: step";
    scope.steps.set(report.id,
                    Value(step_entry(report.outputs, report.outcome, report.conclusion)));
    if (report.conclusion == Outcome::failure) scope.failed = true;
    background.conclusion = report.conclusion;
    out.at(background.slot) = std::move(report);
    background.applied = true;
    background.fork.reset();
    return background.conclusion;
}

std::size_t JobRun::join_all_background(Scope& scope, std::vector<StepReport>& out) {
    std::size_t joined = 0;
    for (auto& item : m_background.items) {
        if (item->applied) continue;
        if (joined++ == 0)
            m_services.log.status(StepLabel{m_label, ""}, StatusKind::start,
                                  "waiting for the background steps still running");
        join_background(*item, scope, out);
    }
    return joined;
}

void JobRun::run_control(const Step& step, Scope& scope, std::vector<StepReport>& out) {
    if (step.kind == StepKind::parallel) {
        const std::size_t first = m_background.items.size();
        for (const auto& inner : step.parallel) run_listed(inner, scope, out);
        for (std::size_t i = first; i < m_background.items.size(); ++i)
            join_background(*m_background.items[i], scope, out);
        return;
    }
    // wait, wait-all and cancel have no `if`: they run whatever came before.
    StepReport report;
    report.id = step.id ? *step.id : "__step_" + std::to_string(step.index + 1);
    const EvalContext ctx = context(scope);
    report.name = step.display_name();
    if (step.name) {
        if (auto name = interpolate_at(step.name->value, step.name->mark, ctx)) report.name = *name;
    }
    report.name = m_services.masker.mask(report.name);
    std::string error;
    const bool may_fail = evaluate_flag(step.continue_on_error, ctx, error);
    if (!error.empty()) {
        fail_step(report, error);
        return record(std::move(report), scope, out);
    }
    m_continue = may_fail ? ContinueOnError::yes : ContinueOnError::no;
    log_start(report);
    const auto started = std::chrono::steady_clock::now();
    std::vector<BackgroundStep*> targets;
    for (auto& item : m_background.items) {
        const bool named = std::ranges::any_of(
            step.targets, [&](const Text& t) { return fold_case(t.value) == item->key; });
        if (step.kind == StepKind::wait_all ? step.wait_all && !item->applied : named)
            targets.push_back(item.get());
    }
    if (step.kind == StepKind::cancel) {
        for (auto* target : targets) {
            if (target->applied) continue;
            target->cancel_requested = true;
            target->cancel->cancel();
        }
    }
    std::string failed;
    for (auto* target : targets) {
        if (join_background(*target, scope, out) == Outcome::failure)
            failed += (failed.empty() ? "'" : ", '") + target->id + "'";
    }
    report.duration = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - started);
    if (failed.empty()) {
        report.outcome = report.conclusion = Outcome::success;
        log_finish(report);
    } else {
        fail_step(report, "the background step " + failed + " failed");
        if (may_fail) report.conclusion = Outcome::success;
    }
    m_continue = ContinueOnError::no;
    record(std::move(report), scope, out);
}

}  // namespace jobs::detail
