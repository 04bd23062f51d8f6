// The official runner's container-hook input (agent/hook/runner_hook.hpp).
#include "agent/hook/runner_hook.hpp"

#include "fuzz/fuzz_target.hpp"

SANDGATE_FUZZ_TARGET(runner_hook) {
    auto input = agent::parse_hook_input(fuzz::text(data, size));
    if (!input) fuzz::check_one_line(input.error().message);
    return 0;
}
