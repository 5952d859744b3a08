#include "daemon/runtime/daemon_main.h"

int main(int argc, char** argv) { return gpuctl::daemon::RunDaemon(argc, argv); }
