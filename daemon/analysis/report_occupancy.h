#ifndef GPUCTL_DAEMON_ANALYSIS_REPORT_OCCUPANCY_H_
#define GPUCTL_DAEMON_ANALYSIS_REPORT_OCCUPANCY_H_

#include <cstddef>
#include <string>
#include <vector>

#include "daemon/analysis/analyze.h"
#include "nlohmann/json.hpp"

// Diagnosis 8's part of the three reports (report.h).
namespace gpuctl::analysis {

// "SM EFFICIENCY AND OCCUPANCY" with one row per GPU of every report whose
// kernels carry launch args; empty when none does.
std::string RenderOccupancyText(const std::vector<TraceReport>& reports, size_t columns);

// `<section id="occupancy">`: per report a table of its GPUs
// (`table.occupancy-devices`) and of its top kernels
// (`table.occupancy-kernels`); nothing when no kernel carries launch args.
void AppendHtmlOccupancy(std::string* out, const std::vector<TraceReport>& reports);

// A trace's "occupancy" object (docs/analyze.md).
nlohmann::json OccupancyJson(const OccupancyStats& stats);

}  // namespace gpuctl::analysis

#endif  // GPUCTL_DAEMON_ANALYSIS_REPORT_OCCUPANCY_H_
