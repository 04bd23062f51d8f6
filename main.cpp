// `sandgate`: the launcher (exec in-process, everything else in sandgate-full).
#include "agent/launcher.hpp"

int main(int argc, char** argv) { return agent::launcher_main(argc, argv); }
