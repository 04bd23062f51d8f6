// action.yml: GitHub's action schema and the runner's rules (jobs/workflow/action_model.hpp).
#include "fuzz/fuzz_target.hpp"
#include "jobs/workflow/action_model.hpp"

SANDGATE_FUZZ_TARGET(action) {
    auto action = jobs::parse_action(fuzz::text(data, size), "action.yml", ".");
    if (!action) fuzz::check_one_line(action.error().message);
    return 0;
}
