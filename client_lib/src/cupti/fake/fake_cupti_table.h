// The in-process fake CUPTI (fake_cupti.h) as a CuptiApi table.
#ifndef GPUCTL_CLIENT_LIB_SRC_CUPTI_FAKE_FAKE_CUPTI_TABLE_H_
#define GPUCTL_CLIENT_LIB_SRC_CUPTI_FAKE_FAKE_CUPTI_TABLE_H_

#include "client_lib/src/cupti/cupti_api.h"
#include "client_lib/src/cupti/fake/fake_cupti.h"

namespace gpuctl::client::cupti::testing {

// Every entry points at the fake; path is "fake".
CuptiApi FakeCuptiApi();

}  // namespace gpuctl::client::cupti::testing

#endif  // GPUCTL_CLIENT_LIB_SRC_CUPTI_FAKE_FAKE_CUPTI_TABLE_H_
