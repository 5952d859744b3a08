#include "daemon/analysis/report_occupancy.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "daemon/analysis/html_writer.h"
#include "daemon/analysis/units.h"

namespace gpuctl::analysis {
namespace {

std::string PctOrDash(double pct) {
  return pct >= 0 ? absl::StrFormat("%.1f%%", pct) : std::string("-");
}

nlohmann::json PctJson(double pct) {
  return pct >= 0 ? nlohmann::json(std::round(pct * 100) / 100) : nlohmann::json(nullptr);
}

bool HasLaunchArgs(const TraceReport& r) { return !r.occupancy.devices.empty(); }

}  // namespace

std::string RenderOccupancyText(const std::vector<TraceReport>& reports, size_t columns) {
  if (std::none_of(reports.begin(), reports.end(), HasLaunchArgs)) return "";
  std::string out = absl::StrFormat(
      "\nSM EFFICIENCY AND OCCUPANCY (kernels with launch args)\n"
      "%5s %4s %8s %9s %7s %9s  %s\n",
      "RANK", "GPU", "KERNELS", "TIME", "SM EFF", "OCCUPANCY", "TOP KERNEL (OCCUPANCY)");
  const size_t fixed = 49;
  const size_t name_width = columns > fixed + 12 ? columns - fixed - 8 : 12;
  for (const TraceReport& r : reports) {
    std::string top = "-";
    for (const KernelOccupancy& k : r.occupancy.kernels_by_time) {
      if (k.communication) continue;
      top =
          k.name.size() > name_width ? absl::StrCat(k.name.substr(0, name_width - 1), "~") : k.name;
      absl::StrAppend(&top, " (", PctOrDash(k.occupancy_pct), ")");
      break;
    }
    for (const DeviceOccupancy& d : r.occupancy.devices) {
      absl::StrAppend(
          &out, absl::StrFormat("%5s %4d %8d %9s %7s %9s  %s\n",
                                r.info.rank >= 0 ? absl::StrCat(r.info.rank) : "-", d.device,
                                d.kernels, FormatNs(d.kernel_ns), PctOrDash(d.sm_efficiency_pct),
                                PctOrDash(d.occupancy_pct), top));
    }
  }
  return out;
}

void AppendHtmlOccupancy(std::string* out, const std::vector<TraceReport>& reports) {
  if (std::none_of(reports.begin(), reports.end(), HasLaunchArgs)) return;
  absl::StrAppend(out,
                  "<section id=\"occupancy\"><h2>SM efficiency and occupancy</h2>\n<p "
                  "class=\"note\">From the kernels' launch args: SM efficiency is the time "
                  "with min(blocks per SM, 1) of the SMs busy over the kernels' busy time; "
                  "occupancy the estimated achieved occupancy, weighted by duration.</p>\n");
  for (const TraceReport& r : reports) {
    if (!HasLaunchArgs(r)) continue;
    const std::string attrs = absl::StrCat(" data-rank=\"", r.info.rank, "\" data-file=\"",
                                           html::Escape(r.info.path), "\"");
    absl::StrAppend(out, "<h3>", html::Escape(html::TraceLabel(r)),
                    "</h3>\n<table class=\"occupancy-devices\"", attrs,
                    "><thead><tr><th>GPU</th><th>kernels</th><th>time</th><th>busy</th>"
                    "<th>SM efficiency</th><th>occupancy</th></tr></thead><tbody>\n");
    for (const DeviceOccupancy& d : r.occupancy.devices) {
      absl::StrAppend(out, "<tr><td>", d.device, "</td><td>", d.kernels, "</td><td data-ns=\"",
                      d.kernel_ns, "\">", FormatNs(d.kernel_ns), "</td><td data-ns=\"", d.busy_ns,
                      "\">", FormatNs(d.busy_ns), "</td><td class=\"sm-efficiency\">",
                      PctOrDash(d.sm_efficiency_pct), "</td><td class=\"occupancy\">",
                      PctOrDash(d.occupancy_pct), "</td></tr>\n");
    }
    absl::StrAppend(out, "</tbody></table>\n<table class=\"occupancy-kernels\"", attrs,
                    "><thead><tr><th class=\"name\">kernel</th><th>count</th><th>total</th>"
                    "<th>SM efficiency</th><th>occupancy</th><th>grid</th><th>block</th>"
                    "<th>registers</th></tr></thead><tbody>\n");
    const size_t rows = std::min(kTopOps, r.occupancy.kernels_by_time.size());
    for (size_t i = 0; i < rows; ++i) {
      const KernelOccupancy& k = r.occupancy.kernels_by_time[i];
      absl::StrAppend(out, "<tr><td class=\"name\">", html::Escape(k.name), "</td><td>", k.count,
                      "</td><td data-ns=\"", k.total_ns, "\">", FormatNs(k.total_ns), "</td><td>",
                      PctOrDash(k.sm_efficiency_pct), "</td><td>", PctOrDash(k.occupancy_pct),
                      "</td><td>", k.longest.grid_blocks, "</td><td>", k.longest.block_threads,
                      "</td><td>", k.longest.registers_per_thread, "</td></tr>\n");
    }
    absl::StrAppend(out, "</tbody></table>\n");
  }
  absl::StrAppend(out, "</section>\n");
}

nlohmann::json OccupancyJson(const OccupancyStats& stats) {
  nlohmann::json devices = nlohmann::json::array();
  for (const DeviceOccupancy& d : stats.devices) {
    devices.push_back(nlohmann::json{{"device", d.device},
                                     {"kernels", d.kernels},
                                     {"kernel_ns", d.kernel_ns},
                                     {"busy_ns", d.busy_ns},
                                     {"sm_efficiency_pct", PctJson(d.sm_efficiency_pct)},
                                     {"occupancy_pct", PctJson(d.occupancy_pct)}});
  }
  nlohmann::json kernels = nlohmann::json::array();
  const size_t rows = std::min(kTopOps, stats.kernels_by_time.size());
  for (size_t i = 0; i < rows; ++i) {
    const KernelOccupancy& k = stats.kernels_by_time[i];
    const KernelLaunch& l = k.longest;
    kernels.push_back(nlohmann::json{
        {"name", k.name},
        {"communication", k.communication},
        {"count", k.count},
        {"total_ns", k.total_ns},
        {"sm_efficiency_pct", PctJson(k.sm_efficiency_pct)},
        {"occupancy_pct", PctJson(k.occupancy_pct)},
        {"sm_idle_ns", k.sm_idle_ns},
        {"longest", nlohmann::json{{"blocks_per_sm", PctJson(l.blocks_per_sm)},
                                   {"grid_blocks", l.grid_blocks},
                                   {"block_threads", l.block_threads},
                                   {"registers_per_thread", l.registers_per_thread},
                                   {"shared_memory_bytes", l.shared_memory_bytes}}}});
  }
  return nlohmann::json{{"kernels", stats.kernels},
                        {"kernels_without_args", stats.kernels_without_args},
                        {"devices", std::move(devices)},
                        {"top_kernels", std::move(kernels)}};
}

}  // namespace gpuctl::analysis
