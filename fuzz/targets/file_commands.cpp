// The file commands a step writes (GITHUB_OUTPUT, GITHUB_ENV, GITHUB_STATE and GITHUB_PATH).
#include "jobs/run/file_commands.hpp"

#include "fuzz/fuzz_target.hpp"

SANDGATE_FUZZ_TARGET(file_commands) {
    const std::string_view input = fuzz::text(data, size);
    auto values = jobs::parse_key_value_text(input, "GITHUB_OUTPUT");
    if (!values) fuzz::check_one_line(values.error().message);
    (void)jobs::parse_path_text(input);
    return 0;
}
