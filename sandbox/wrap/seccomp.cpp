#include "sandbox/wrap/seccomp.hpp"

#include "sandbox/wrap/seccomp_policy.hpp"
#include "sandbox/wrap/wrap_files.hpp"

namespace sandbox {

Expected<Fd> seccomp_filter_fd() {
    // The program is the same for every run and every process: compiled at build time.
    const std::string_view program = generated_seccomp_program();
    if (program.empty())
        return fail(ErrorKind::unavailable, "the build carries no seccomp program");
    return content_fd("sandgate-seccomp", program);
}

}  // namespace sandbox
