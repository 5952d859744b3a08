#ifndef GPUCTL_DAEMON_ANALYSIS_FINDING_H_
#define GPUCTL_DAEMON_ANALYSIS_FINDING_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace gpuctl::analysis {

// The thresholds of the diagnoses (docs/analyze.md defines each; the CLI
// has one flag per field). Shares are fractions, 0-1.
struct AnalyzeOptions {
  // A kernel shorter than this is small (launch-bound diagnosis).
  int64_t small_kernel_ns = 10'000;
  // The launch-bound finding needs this share of kernels to be small ...
  double small_kernel_share = 0.5;
  // ... and at least this many kernels in the trace.
  uint64_t min_kernels = 100;
  // An idle gap whose next op was launched before the gap began is launch
  // overhead when it is at most this long, else "other".
  int64_t launch_gap_ns = 20'000;
  // No finding is reported whose recoverable time is under this share of
  // its process's GPU span (first to last GPU activity).
  double min_share = 0.01;
  // Exposed communication (not overlapped by compute) above this share of
  // the GPU span is a finding.
  double exposed_comm_share = 0.2;
  // A copy direction whose bandwidth is under this share of the link's is
  // a finding; link_gbps 0 (unknown) turns the check off.
  double link_gbps = 0;
  double copy_bandwidth_share = 0.5;
  // A device whose allocated memory peaks at this share of its size or
  // more is a finding (device memory diagnosis).
  double memory_peak_share = 0.9;
  // Across the ranks of one trace: a rank is a straggler when its median
  // step time (or collective arrival lateness) exceeds the ranks' median by
  // more than straggler_mad times the median absolute deviation and by at
  // least straggler_share of the median step time.
  double straggler_mad = 3;
  double straggler_share = 0.05;
  // NCCL time spent waiting for slower ranks above this share of a rank's
  // matched NCCL time is a finding.
  double comm_wait_share = 0.25;
  // Compute kernels whose duration-weighted estimated occupancy is under
  // this share are a finding (low_occupancy).
  double occupancy_share = 0.25;
  // A stream with this many launched, unfinished ops at a launch is a
  // finding: CUDA's per-stream queue holds about 1024.
  int64_t launch_queue_limit = 1000;
};

// An interval on a trace's `ts` axis (ns); empty when end <= start.
struct TimeSpan {
  int64_t start_ns = 0, end_ns = 0;
  bool empty() const { return end_ns <= start_ns; }
};

// One diagnosis's conclusion about one process.
struct Finding {
  std::string id;     // stable, e.g. "host_bound_idle"; docs/analyze.md lists them
  std::string trace;  // the file it is about
  int64_t rank = -1;
  bool data_quality = false;    // about the input itself, listed first
  bool low_confidence = false;  // the input is incomplete (data-quality findings)
  // What fixing it could give back, ns of GPU (or, for host stalls, host)
  // time; the ranking key. 0 for data-quality findings.
  int64_t recoverable_ns = 0;
  std::string title;   // one line: what was found
  std::string advice;  // one line: what to do, with the numbers
  // The evidence: name (its unit as a suffix: _ns, _pct, _gbps, _bytes, or a
  // count) and value, in the order written.
  std::vector<std::pair<std::string, double>> numbers;
  // Where to look in the trace: its largest single instance (the longest
  // gap, call or copy); empty when the finding is a total with no one
  // instance to show (launch-bound, slow copies, data quality).
  TimeSpan at;
};

}  // namespace gpuctl::analysis

#endif  // GPUCTL_DAEMON_ANALYSIS_FINDING_H_
