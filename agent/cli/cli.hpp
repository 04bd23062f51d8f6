#pragma once
// sandgate's command line: `sandgate COMMAND [ARGS...]`. Each command parses its own
// arguments (CLI11) and owns its usage exit code, because those differ by command (exec: 125,
// run: 2, ...). Library code never exits; only these functions return exit statuses.

namespace agent {

int main(int argc, char** argv);

}  // namespace agent
