// The HTML report (RenderHtml) and the report model it draws from: the busy
// timeline, the top tables and where each finding happened.
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/analysis/analyze.h"
#include "daemon/analysis/html_writer.h"
#include "daemon/analysis/report.h"
#include "daemon/analysis/testing/trace_builder.h"
#include "daemon/analysis/trace_reader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuctl::analysis {
// Named, not anonymous: the unity build puts this file beside the other
// tests of the room, whose helpers have the same names.
namespace html_report_test {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::TraceBuilder;

constexpr int64_t kUs = 1000;
constexpr char kHostile[] = "<script>alert(1)</script>";

TraceReport Analyze(const std::string& json, const std::string& path) {
  absl::StatusOr<TraceModel> model = ReadTraceBytes(json, path);
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return {};
  return AnalyzeModel(*model, AnalyzeOptions{});
}

// Window [0, 1000) µs. K1 (the hostile name) [10, 110); the host is in
// "DataLoader.__next__" until 290 µs and launches K2 at 300; K2 [310, 410).
// A synchronous 1 MB HtoD copy [500, 600) whose call holds the host
// [495, 605), and a cudaDeviceSynchronize [700, 760).
std::string RankTrace(int64_t rank) {
  TraceBuilder b;
  b.Gpuctl({.rank = rank, .window_start_ns = 0, .window_end_ns = 1000 * kUs});
  b.Runtime("cudaLaunchKernel", 0, 5 * kUs, 1);
  b.Kernel(kHostile, 10 * kUs, 100 * kUs, 1);
  b.Range("DataLoader.__next__", 110 * kUs, 180 * kUs);
  b.Runtime("cudaLaunchKernel", 300 * kUs, 5 * kUs, 2);
  b.Kernel("conv", 310 * kUs, 100 * kUs, 2);
  b.Runtime("cudaMemcpy", 495 * kUs, 110 * kUs, 3);
  b.Memcpy("Memcpy HtoD (Pinned -> Device)", 500 * kUs, 100 * kUs, 3, 1'000'000);
  b.Runtime("cudaDeviceSynchronize", 700 * kUs, 60 * kUs, 4);
  b.Step(1, 0, 420 * kUs);
  b.Step(2, 420 * kUs, 580 * kUs);
  return b.Json();
}

size_t Count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) {
    ++n;
  }
  return n;
}

TEST(ReportModelTest, TimelineTopOpsAndWhereFindingsHappened) {
  TraceReport r = Analyze(RankTrace(0), "rank0.json");
  const BusyTimeline& t = r.breakdown.timeline;
  EXPECT_EQ(t.start_ns, 0);
  EXPECT_EQ(t.end_ns, 1000 * kUs);
  EXPECT_EQ(t.bucket_ns, 10 * kUs);
  ASSERT_EQ(t.busy_ns.size(), 100u);
  int64_t busy = 0;
  for (int64_t b : t.busy_ns) busy += b;
  EXPECT_EQ(busy, 300 * kUs);  // two kernels and the copy
  EXPECT_EQ(t.busy_ns[0], 0);
  EXPECT_EQ(t.busy_ns[1], 10 * kUs);
  EXPECT_EQ(t.busy_ns[20], 0);
  EXPECT_EQ(t.busy_ns[55], 10 * kUs);

  ASSERT_EQ(r.top.kernels.size(), 2u);
  EXPECT_EQ(r.top.kernels[0].name, kHostile);  // equal totals: by name
  EXPECT_EQ(r.top.kernels[1].name, "conv");
  EXPECT_EQ(r.top.kernels[1].count, 1u);
  EXPECT_EQ(r.top.kernels[1].total_ns, 100 * kUs);
  ASSERT_EQ(r.top.copies.size(), 1u);
  EXPECT_EQ(r.top.copies[0].bytes, 1'000'000u);
  EXPECT_EQ(r.top.copies[0].total_ns, 100 * kUs);
  ASSERT_EQ(r.sync.by_call.size(), 1u);
  EXPECT_EQ(r.sync.by_call[0].name, "cudaDeviceSynchronize");
  EXPECT_EQ(r.sync.by_call[0].ns, 60 * kUs);

  for (const Finding& f : r.findings) {
    if (f.id == "host_bound_idle") {
      EXPECT_EQ(f.at.start_ns, 110 * kUs);
      EXPECT_EQ(f.at.end_ns, 310 * kUs);
    } else if (f.id == "sync_stalls") {
      EXPECT_EQ(f.at.start_ns, 700 * kUs);
      EXPECT_EQ(f.at.end_ns, 760 * kUs);
    } else if (f.id == "sync_copies") {
      EXPECT_EQ(f.at.start_ns, 495 * kUs);
      EXPECT_EQ(f.at.end_ns, 605 * kUs);
    } else if (f.data_quality) {
      EXPECT_TRUE(f.at.empty()) << f.id;
    }
  }
}

TEST(EscapeTest, MarkupQuotesBadUtf8AndControls) {
  EXPECT_EQ(html::Escape("<a href='x'>&\"</a>"), "&lt;a href=&#39;x&#39;&gt;&amp;&quot;&lt;/a&gt;");
  EXPECT_EQ(html::Escape("5 \xC2\xB5s"), "5 \xC2\xB5s");  // valid UTF-8 kept
  EXPECT_EQ(html::Escape("a\xFF"
                         "b"),
            "a\xEF\xBF\xBD"
            "b");                                                                   // invalid byte
  EXPECT_EQ(html::Escape("\xE2\x82"), "\xEF\xBF\xBD\xEF\xBF\xBD");                  // cut sequence
  EXPECT_EQ(html::Escape("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
  EXPECT_EQ(html::Escape("a\x01\tb\n"), "a\xEF\xBF\xBD\tb\n");
}

class HtmlReportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    reports_ = {Analyze(RankTrace(0), "/traces/node1-rank0.json"),
                Analyze(RankTrace(1), "/traces/node1-rank1.json")};
    findings_ = RankFindings(reports_);
    errors_ = {{"/traces/bad<b>.json", "malformed JSON at byte 3"}};
  }
  std::string Render() const { return RenderHtml(reports_, findings_, errors_, AnalyzeOptions{}); }

  std::vector<TraceReport> reports_;
  std::vector<Finding> findings_;
  std::vector<TraceError> errors_;
};

TEST_F(HtmlReportTest, OnePageWithEverySection) {
  const std::string page = Render();
  EXPECT_TRUE(absl::StartsWith(page, "<!DOCTYPE html>\n"));
  EXPECT_TRUE(absl::EndsWith(page, "</html>\n"));
  EXPECT_THAT(page, HasSubstr("content=\"default-src 'none'; style-src 'unsafe-inline'\""));
  for (const char* id : {"summary", "heatmap", "steps", "top", "findings", "errors", "options"}) {
    EXPECT_THAT(page, HasSubstr(absl::StrCat("<section id=\"", id, "\">"))) << id;
  }
  EXPECT_EQ(Count(page, "<tr class=\"trace-row\""), 2u);
  EXPECT_EQ(Count(page, "<g class=\"heat-row\""), 2u);
  EXPECT_EQ(Count(page, "<rect class=\"heat-cell\""), 200u);
  EXPECT_THAT(page, HasSubstr("One time axis for every row"));
  EXPECT_EQ(Count(page, "<g class=\"step-bar\""), 2u);          // step 1 of each rank
  EXPECT_EQ(Count(page, "<g class=\"step-bar clipped\""), 2u);  // step 2, cut by the window
  EXPECT_THAT(page, HasSubstr("<rect class=\"seg seg-compute\" data-ns=\"200000\""));
  EXPECT_EQ(Count(page, "<li class=\"finding"), findings_.size());
  // Host-bound: [110, 310) before K2 and [410, 500) before the copy.
  EXPECT_THAT(page, HasSubstr("data-id=\"host_bound_idle\" data-rank=\"0\" "
                              "data-recoverable-ns=\"290000\""));
  EXPECT_THAT(page, HasSubstr("select id, ts, dur, name from slice where ts &lt;= 310000 and "
                              "ts + dur &gt;= 110000 order by ts"));
  EXPECT_THAT(page, HasSubstr("<td class=\"name\">cudaDeviceSynchronize</td><td>1</td>"
                              "<td data-ns=\"60000\">60.0 us</td>"));
  EXPECT_THAT(page, HasSubstr("/traces/bad&lt;b&gt;.json"));
}

TEST_F(HtmlReportTest, TraceStringsAreTextNeverMarkup) {
  const std::string page = Render();
  EXPECT_THAT(page, HasSubstr("<td class=\"name\">&lt;script&gt;alert(1)&lt;/script&gt;</td>"));
  EXPECT_THAT(absl::AsciiStrToLower(page), Not(HasSubstr("<script")));
  // Nothing to fetch: no source attributes, no external style or link.
  EXPECT_THAT(page, Not(HasSubstr("src=")));
  EXPECT_THAT(page, Not(HasSubstr("<link")));
  EXPECT_THAT(page, Not(HasSubstr("url(")));
  // The one outside address is Perfetto's, as a link to click.
  size_t links = 0;
  for (size_t at = page.find("href=\""); at != std::string::npos;
       at = page.find("href=\"", at + 1)) {
    const std::string target = page.substr(at + 6, page.find('"', at + 6) - at - 6);
    if (target[0] == '#') continue;
    EXPECT_EQ(target, "https://ui.perfetto.dev/");
    ++links;
  }
  EXPECT_GT(links, 0u);
}

TEST_F(HtmlReportTest, SameInputSameBytes) {
  const std::string first = Render();
  reports_ = {Analyze(RankTrace(0), "/traces/node1-rank0.json"),
              Analyze(RankTrace(1), "/traces/node1-rank1.json")};
  findings_ = RankFindings(reports_);
  EXPECT_EQ(Render(), first);
}

TEST(HtmlReportSizeTest, FollowsTheReportNotTheEvents) {
  auto trace = [](int kernels) {
    TraceBuilder b;
    b.Gpuctl({.window_start_ns = 0, .window_end_ns = 100'000 * kUs});
    for (int i = 0; i < kernels; ++i) b.Kernel("gemm", int64_t{i} * 5 * kUs, 4 * kUs, 1000 + i);
    return b.Json();
  };
  std::vector<TraceReport> small = {Analyze(trace(10), "t.json")};
  std::vector<TraceReport> large = {Analyze(trace(20'000), "t.json")};
  const std::string a = RenderHtml(small, RankFindings(small), {}, AnalyzeOptions{});
  const std::string b = RenderHtml(large, RankFindings(large), {}, AnalyzeOptions{});
  EXPECT_LT(std::labs(static_cast<long>(a.size()) - static_cast<long>(b.size())), 2000L);
}

TEST(HtmlReportAxisTest, AWindowNoEventCouldFillFallsBackToTheGpuSpan) {
  // The window comes from the file: one spanning all of int64 must neither
  // overflow nor squeeze every op into one bucket.
  TraceBuilder b;
  b.Gpuctl(
      {.window_start_ns = -9'000'000'000'000'000'000, .window_end_ns = 9'000'000'000'000'000'000});
  b.Kernel("k", 10 * kUs, 50 * kUs, 1);
  b.Kernel("k", 960 * kUs, 50 * kUs, 2);
  std::vector<TraceReport> reports = {Analyze(b.Json(), "wide.json")};
  const BusyTimeline& t = reports[0].breakdown.timeline;
  EXPECT_EQ(t.start_ns, 10 * kUs);
  EXPECT_EQ(t.end_ns, 1010 * kUs);
  EXPECT_EQ(t.bucket_ns, 10 * kUs);
  const std::string page = RenderHtml(reports, RankFindings(reports), {}, AnalyzeOptions{});
  EXPECT_EQ(Count(page, "<rect class=\"heat-cell\""), 100u);
  EXPECT_THAT(page, Not(HasSubstr("after the capture window opened")));
}

TEST(HtmlReportAxisTest, WindowsThatDoNotOverlapGetOneAxisEach) {
  TraceBuilder early, late;
  early.Gpuctl({.rank = 0, .window_start_ns = 0, .window_end_ns = 100 * kUs});
  early.Kernel("k", 10 * kUs, 50 * kUs, 1);
  late.Gpuctl({.rank = 1, .window_start_ns = 500 * kUs, .window_end_ns = 600 * kUs});
  late.Kernel("k", 510 * kUs, 50 * kUs, 1);
  std::vector<TraceReport> reports = {Analyze(early.Json(), "a.json"),
                                      Analyze(late.Json(), "b.json")};
  const std::string page = RenderHtml(reports, {}, {}, AnalyzeOptions{});
  EXPECT_THAT(page, HasSubstr("each row spans its own window"));
  EXPECT_THAT(page, HasSubstr("id=\"no-findings\""));
  // Both rows start at the plot's left edge.
  EXPECT_EQ(Count(page, "<rect class=\"heat-cell\" x=\"150.00\""), 2u);
}

}  // namespace html_report_test
}  // namespace gpuctl::analysis
