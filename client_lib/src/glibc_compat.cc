// Keeps libgpuctl.so loadable on glibc 2.35 hosts although it is built on a
// newer glibc.
//
// The statically linked libstdc++ drags in std::random_device (through
// std::system_error's string instantiations), which on a glibc >= 2.36
// build host references arc4random@GLIBC_2.36. The library never uses
// random_device; this local definition satisfies the reference without
// raising the glibc requirement. It is hidden by the version script and
// only linked into the shared library.
#include <errno.h>
#include <sys/random.h>

#include <cstdint>

extern "C" __attribute__((visibility("hidden"))) uint32_t arc4random(void) {
  uint32_t value = 0;
  ssize_t n;
  do {
    n = getrandom(&value, sizeof(value), 0);
  } while (n < 0 && errno == EINTR);
  return value;
}
