// The fake CUPTI's scenarios: how it misbehaves (a subscriber conflict, no
// device, a failing flush) and the records it delivers for a window.
#ifndef GPUCTL_CLIENT_LIB_SRC_CUPTI_FAKE_FAKE_CUPTI_SCENARIOS_H_
#define GPUCTL_CLIENT_LIB_SRC_CUPTI_FAKE_FAKE_CUPTI_SCENARIOS_H_

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace gpuctl::client::cupti::fake {

// One scenario by name (fake_cupti.h lists them); an unknown name behaves
// as "basic".
struct Scenario {
  std::string name = "basic";
  // multi_device: two devices, a kernel on each and a peer-to-peer copy.
  int devices = 1;
  // flood: 20000 more kernels per window and 7 records dropped per flush.
  bool flood = false;
  // subscriber_conflict: cuptiSubscribe says another subscriber exists.
  bool subscriber_conflict = false;
  // subscribe_unknown: cuptiSubscribe fails as without a driver.
  bool subscribe_unknown = false;
  // no_device: cuptiActivityEnable fails as not initialized.
  bool no_device = false;
  // fail_mid_window: a flush delivers half its records and fails.
  bool fail_mid_window = false;
};

Scenario ScenarioNamed(const std::string& name);

// Records CUPTI itself drops at each flush.
size_t DroppedPerFlush(const Scenario& scenario);

// The scenario's records for a window [t0, t1], of the kinds (CUpti_ActivityKind
// values) enabled at any time in it: inside the window, plus one kernel
// before and one after it and a record of a kind gpuctl does not use.
std::vector<std::string> ScenarioRecords(const Scenario& scenario,
                                         const std::set<int>& kinds_in_window, uint64_t t0,
                                         uint64_t t1);

}  // namespace gpuctl::client::cupti::fake

#endif  // GPUCTL_CLIENT_LIB_SRC_CUPTI_FAKE_FAKE_CUPTI_SCENARIOS_H_
