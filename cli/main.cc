#include "cli/cli.h"

int main(int argc, char** argv) { return gpuctl::cli::Main(argc, argv); }
