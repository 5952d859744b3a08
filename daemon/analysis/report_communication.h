#ifndef GPUCTL_DAEMON_ANALYSIS_REPORT_COMMUNICATION_H_
#define GPUCTL_DAEMON_ANALYSIS_REPORT_COMMUNICATION_H_

#include <cstddef>
#include <string>
#include <vector>

#include "daemon/analysis/analyze.h"
#include "nlohmann/json.hpp"

// Diagnosis 7's part of the three reports (report.h): per group of ranks
// compared by AnalyzeRanks, one table of the ranks' communication.
namespace gpuctl::analysis {

// "COMMUNICATION ACROSS RANKS" and one row per rank, for every group among
// `reports`; empty when no reports were compared.
std::string RenderRanksText(const std::vector<TraceReport>& reports, size_t columns);

// `<section id="ranks">` with a table (`table.ranks`) per group; nothing
// when no reports were compared.
void AppendHtmlRanks(std::string* out, const std::vector<TraceReport>& reports);

// A trace's "communication" object (docs/analyze.md).
nlohmann::json CommunicationJson(const CommunicationReport& c);

}  // namespace gpuctl::analysis

#endif  // GPUCTL_DAEMON_ANALYSIS_REPORT_COMMUNICATION_H_
