#include "agent/cli.hpp"

int main(int argc, char** argv) { return agent::main(argc, argv); }
