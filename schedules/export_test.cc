// Golden-file tests of the exports (JSON, CSV, trace, text grid) and tests of the CSV import.
// On a golden mismatch the actual text is written to $TEST_UNDECLARED_OUTPUTS_DIR under the
// golden's name (bazel-testlogs/schedules/export_test/test.outputs/) for review and copying.
#include <gtest/gtest.h>

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "schedules/comm_pass.h"
#include "schedules/csv_format.h"
#include "schedules/json_format.h"
#include "schedules/registry.h"
#include "schedules/test_util.h"
#include "schedules/text_grid.h"
#include "schedules/trace_format.h"
#include "schedules/validator.h"

namespace pipecoord::schedules {
namespace {

using testing::MustGenerate;
using testing::RankText;

// ---- helpers ------------------------------------------------------------------------------

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

void ExpectGolden(const std::string& name, const std::string& actual) {
  const std::string expected = ReadFile("schedules/testdata/" + name);
  if (expected != actual) {
    if (const char* dir = std::getenv("TEST_UNDECLARED_OUTPUTS_DIR")) {
      std::ofstream(std::string(dir) + "/" + name, std::ios::binary) << actual;
    }
  }
  EXPECT_EQ(expected, actual) << "golden schedules/testdata/" << name << " differs";
}

// A strict RFC 8259 syntax check: true iff `text` is exactly one JSON value (and whitespace).
class JsonChecker {
 public:
  explicit JsonChecker(const std::string& text) : t_(text) {}
  bool Ok() {
    Space();
    if (!Value()) return false;
    Space();
    return i_ == t_.size();
  }

 private:
  void Space() {
    while (i_ < t_.size() && (t_[i_] == ' ' || t_[i_] == '\n' || t_[i_] == '\t' || t_[i_] == '\r')) ++i_;
  }
  bool Eat(char c) {
    Space();
    if (i_ < t_.size() && t_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  bool Word(const char* w) {
    const std::string s(w);
    if (t_.compare(i_, s.size(), s) != 0) return false;
    i_ += s.size();
    return true;
  }
  bool Digits() {
    size_t start = i_;
    while (i_ < t_.size() && std::isdigit(static_cast<unsigned char>(t_[i_]))) ++i_;
    return i_ > start;
  }
  bool Number() {
    if (i_ < t_.size() && t_[i_] == '-') ++i_;
    if (i_ < t_.size() && t_[i_] == '0') {
      ++i_;
    } else if (!Digits()) {
      return false;
    }
    if (i_ < t_.size() && t_[i_] == '.') {
      ++i_;
      if (!Digits()) return false;
    }
    if (i_ < t_.size() && (t_[i_] == 'e' || t_[i_] == 'E')) {
      ++i_;
      if (i_ < t_.size() && (t_[i_] == '+' || t_[i_] == '-')) ++i_;
      if (!Digits()) return false;
    }
    return true;
  }
  bool String() {
    if (i_ >= t_.size() || t_[i_] != '"') return false;
    for (++i_; i_ < t_.size(); ++i_) {
      const unsigned char c = t_[i_];
      if (c == '"') {
        ++i_;
        return true;
      }
      if (c < 0x20) return false;
      if (c == '\\') {
        if (++i_ >= t_.size()) return false;
        if (t_[i_] == 'u') {
          for (int k = 0; k < 4; ++k) {
            if (++i_ >= t_.size() || !std::isxdigit(static_cast<unsigned char>(t_[i_]))) return false;
          }
        } else if (std::string("\"\\/bfnrt").find(t_[i_]) == std::string::npos) {
          return false;
        }
      }
    }
    return false;
  }
  bool Value() {
    Space();
    if (i_ >= t_.size()) return false;
    const char c = t_[i_];
    if (c == '{') {
      ++i_;
      if (Eat('}')) return true;
      do {
        Space();
        if (!String() || !Eat(':') || !Value()) return false;
      } while (Eat(','));
      return Eat('}');
    }
    if (c == '[') {
      ++i_;
      if (Eat(']')) return true;
      do {
        if (!Value()) return false;
      } while (Eat(','));
      return Eat(']');
    }
    if (c == '"') return String();
    if (c == 't') return Word("true");
    if (c == 'f') return Word("false");
    if (c == 'n') return Word("null");
    return Number();
  }

  const std::string& t_;
  size_t i_ = 0;
};

bool IsJson(const std::string& text) { return JsonChecker(text).Ok(); }

Schedule MustBuild(const std::string& name, int pp, int m) {
  auto s = BuildSchedule(name, testing::Spec(pp, m));
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? *s : Schedule{};
}

// A hand-made split backward (ZB-H1-like) schedule, p=2 m=2, with communication.
Schedule SplitBw() {
  Schedule s = MakeSchedule("split-bw", 2, 1, 2, LoopedPlacement(2, 1));
  s.ranks[0] = {{Op::kF, 0, 0}, {Op::kF, 0, 1}, {Op::kB, 0, 0}, {Op::kW, 0, 0}, {Op::kB, 0, 1}, {Op::kW, 0, 1}};
  s.ranks[1] = {{Op::kF, 1, 0}, {Op::kB, 1, 0}, {Op::kF, 1, 1}, {Op::kB, 1, 1}, {Op::kW, 1, 0}, {Op::kW, 1, 1}};
  auto full = AddCommunication(s, CostModel{});
  EXPECT_TRUE(full.ok()) << full.status().ToString();
  EXPECT_TRUE(Validate(*full).ok()) << Validate(*full).ToString();
  return full.ok() ? *full : s;
}

// V placement p=2 (stages 0,1,2,3 on ranks 0,1,1,0), every forward then every backward.
Schedule VShape() {
  Schedule s = MakeSchedule("v-hand", 2, 2, 2, VPlacement(2));
  s.ranks[0] = {{Op::kF, 0, 0}, {Op::kF, 0, 1}, {Op::kF, 3, 0}, {Op::kF, 3, 1},
                {Op::kBW, 3, 0}, {Op::kBW, 3, 1}, {Op::kBW, 0, 0}, {Op::kBW, 0, 1}};
  s.ranks[1] = {{Op::kF, 1, 0}, {Op::kF, 1, 1}, {Op::kF, 2, 0}, {Op::kF, 2, 1},
                {Op::kBW, 2, 0}, {Op::kBW, 2, 1}, {Op::kBW, 1, 0}, {Op::kBW, 1, 1}};
  return s;
}

void ExpectSameSchedule(const Schedule& a, const Schedule& b) {
  EXPECT_EQ(a.pp, b.pp);
  EXPECT_EQ(a.vpp, b.vpp);
  EXPECT_EQ(a.microbatches, b.microbatches);
  EXPECT_EQ(a.stage_to_rank, b.stage_to_rank);
  ASSERT_EQ(a.ranks.size(), b.ranks.size());
  for (size_t r = 0; r < a.ranks.size(); ++r) EXPECT_EQ(RankText(a.ranks[r]), RankText(b.ranks[r])) << "rank " << r;
  EXPECT_EQ(a.ranks, b.ranks);
}

std::string CsvError(const std::string& text) {
  auto s = ParseScheduleCsv(text);
  EXPECT_FALSE(s.ok()) << "accepted: " << text;
  if (s.ok()) return "";
  EXPECT_EQ(s.status().code(), Code::kInvalidArgument);
  return s.status().message();
}

// ---- golden files -------------------------------------------------------------------------

void ExpectGoldens(const std::string& base, const Schedule& s) {
  const Simulation sim = testing::MustSimulate(s, CostModel{});
  const std::string json = ScheduleToJson(s, sim);
  const std::string trace = ScheduleToTrace(s, sim);
  EXPECT_TRUE(IsJson(json)) << json;
  EXPECT_TRUE(IsJson(trace)) << trace;
  ExpectGolden(base + ".json", json);
  ExpectGolden(base + ".csv", ScheduleToCsv(s));
  ExpectGolden(base + ".trace.json", trace);
  ExpectGolden(base + ".txt", ScheduleToTextGrid(s, sim));
}

TEST(ExportGoldenTest, OneFOneBTwoRanksThreeMicrobatches) { ExpectGoldens("1f1b_p2_m3", MustBuild("1f1b", 2, 3)); }
TEST(ExportGoldenTest, FThenBTwoRanksTwoMicrobatches) { ExpectGoldens("fthenb_p2_m2", MustBuild("fthenb", 2, 2)); }
TEST(ExportGoldenTest, HandMadeSplitBackward) { ExpectGoldens("split_bw_p2_m2", SplitBw()); }

TEST(ExportGoldenTest, TextGridFourRanksEightMicrobatches) {
  const Schedule s = MustBuild("1f1b", 4, 8);
  ExpectGolden("1f1b_p4_m8.txt", ScheduleToTextGrid(s, testing::MustSimulate(s, CostModel{})));
}

TEST(ExportGoldenTest, TextGridChunksAndUnevenCosts) {
  CostModel costs;
  costs.b = 2;
  const Schedule s = VShape();
  ExpectGolden("v_hand_p2_b2.txt", ScheduleToTextGrid(s, testing::MustSimulate(s, costs)));
}

// ---- JSON ---------------------------------------------------------------------------------

TEST(JsonFormatTest, NameIsEscapedAndStageLayersOptional) {
  Schedule s = MustBuild("1f1b", 2, 2);
  s.name = "we\"ird\n";
  const Simulation sim = testing::MustSimulate(s, CostModel{});
  const std::string json = ScheduleToJson(s, sim, {3, 5});
  EXPECT_TRUE(IsJson(json));
  EXPECT_NE(json.find("\"schedule\": \"we\\\"ird\\n\""), std::string::npos);
  EXPECT_NE(json.find("\"stage_layers\": [3, 5],"), std::string::npos);
  EXPECT_NE(json.find("\"makespan\": 9,"), std::string::npos);
  EXPECT_EQ(ScheduleToJson(s, sim).find("stage_layers"), std::string::npos);
}

// ---- CSV round trip and dialects ----------------------------------------------------------

TEST(CsvTest, RoundTripWithCommunication) {
  for (const Schedule& s : {MustBuild("1f1b", 2, 3), MustBuild("fthenb", 3, 4), MustBuild("eager-1f1b", 4, 6), SplitBw()}) {
    auto back = ParseScheduleCsv(ScheduleToCsv(s));
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(back->name, "csv");
    ExpectSameSchedule(s, *back);
  }
}

TEST(CsvTest, RoundTripInfersAVPlacement) {
  auto full = AddCommunication(VShape(), CostModel{});
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  for (const Schedule& s : {VShape(), *full}) {
    auto back = ParseScheduleCsv(ScheduleToCsv(s));
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(back->stage_to_rank, VPlacement(2));
    ExpectSameSchedule(s, *back);
  }
}

TEST(CsvTest, ExportUsesPyTorchLetters) {
  Schedule s = MakeSchedule("x", 1, 1, 1, LoopedPlacement(1, 1));
  s.ranks[0] = {{Op::kF, 0, 0}, {Op::kB, 0, 0}, {Op::kW, 0, 0}, {Op::kBW, 0, 0}, {Op::kOpt, 0, -1}};
  EXPECT_EQ(ScheduleToCsv(s), "0F0,0I0,0W0,0B0,0OPT\n");
}

std::string Ops(const std::string& csv) {
  auto s = ParseScheduleCsv(csv);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? RankText(s->ranks[0]) : "";
}

TEST(CsvTest, DialectDetection) {
  // PyTorch: I is the input gradient, B the full backward.
  EXPECT_EQ(Ops("0F0,0I0,0W0"), "0F0 0B0 0W0");
  EXPECT_EQ(Ops("0F0,0B0"), "0F0 0BW0");
  // Ours: W present and no I, so B is the input gradient.
  EXPECT_EQ(Ops("0F0,0B0,0W0"), "0F0 0B0 0W0");
  // Both I and W: PyTorch's dialect, B stays the full backward.
  EXPECT_EQ(Ops("0F0,0F1,0I0,0W0,0B1"), "0F0 0F1 0B0 0W0 0BW1");
  // BW is always the full backward.
  EXPECT_EQ(Ops("0F0,0F1,0BW0,0B1,0W1"), "0F0 0F1 0BW0 0B1 0W1");
}

TEST(CsvTest, PyTorchFileWithIdleCellsQuotesAndCrLf) {
  const std::string text = ReadFile("schedules/testdata/pytorch_zb_p2_m2.csv");
  auto s = ParseScheduleCsv(text);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->pp, 2);
  EXPECT_EQ(s->vpp, 1);
  EXPECT_EQ(s->microbatches, 2);
  EXPECT_EQ(RankText(s->ranks[0]), "0F0 0F1 0B0 0W0 0B1 0W1");
  EXPECT_EQ(RankText(s->ranks[1]), "1F0 1B0 1F1 1B1 1W0 1W1");
  EXPECT_TRUE(Validate(*s).ok()) << Validate(*s).ToString();
  auto crlf = ParseScheduleCsv("\"0F0\" , 0BW0\r\n\r\n\n");
  ASSERT_TRUE(crlf.ok()) << crlf.status().ToString();
  EXPECT_EQ(crlf->pp, 1);
  EXPECT_EQ(RankText(crlf->ranks[0]), "0F0 0BW0");
}

TEST(CsvTest, CommunicationPeersComeFromThePlacement) {
  auto s = ParseScheduleCsv("0F0,0SEND_F0,0RECV_B0,0B0\n1RECV_F0,1F0,1B0,1SEND_B0\n");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(RankText(s->ranks[0]), "0F0 0SEND_F0>1 0RECV_B0<1 0BW0");
  EXPECT_EQ(RankText(s->ranks[1]), "1RECV_F0<0 1F0 1BW0 1SEND_B0>0");
  EXPECT_TRUE(Validate(*s).ok()) << Validate(*s).ToString();
}

// ---- bad CSV ------------------------------------------------------------------------------

TEST(CsvErrorTest, CellsNameRowColumnAndText) {
  EXPECT_EQ(CsvError("0F0,,0X0\n"),
            "csv row 0 (rank 0), column 2 (\"0X0\"): unknown op \"X\" (expected F, I, B, W, BW, "
            "SEND_F, RECV_F, SEND_B, RECV_B, PROBE, OPT, OVERLAP_F_B, UNSHARD, RESHARD or REDUCE_GRAD)");
  EXPECT_EQ(CsvError("0F0\n1F0,F1\n"),
            "csv row 1 (rank 1), column 1 (\"F1\"): expected <stage><op><micro-batch>, e.g. "
            "\"2F0\" or \"1SEND_B3\"");
  EXPECT_EQ(CsvError("0F0,0BW\n"),
            "csv row 0 (rank 0), column 1 (\"0BW\"): expected <stage><op><micro-batch>, e.g. "
            "\"2F0\" or \"1SEND_B3\"");
  EXPECT_EQ(CsvError("0f0\n"),
            "csv row 0 (rank 0), column 0 (\"0f0\"): expected <stage><op><micro-batch>, e.g. "
            "\"2F0\" or \"1SEND_B3\"");
  EXPECT_EQ(CsvError("1000001F0\n"), "csv row 0 (rank 0), column 0 (\"1000001F0\"): stage must be <= 1000000");
  EXPECT_EQ(CsvError("0F99999999\n"), "csv row 0 (rank 0), column 0 (\"0F99999999\"): micro-batch must be <= 1000000");
}

TEST(CsvErrorTest, Placement) {
  EXPECT_EQ(CsvError("0F0,1F0\n1F1\n"),
            "csv row 1 (rank 1), column 0 (\"1F1\"): stage 1 is also in row 0 (column 1, "
            "\"1F0\"); a stage lives on one rank");
  EXPECT_EQ(CsvError("0F0\n2F0\n"),
            "csv: stage 1 appears in no row (the stages are 0..2, from the largest stage index)");
  EXPECT_EQ(CsvError("0F0,2F0\n1F0\n"),
            "csv: row 1 (rank 1) holds 1 stage(s) but row 0 holds 2; every rank must hold the "
            "same number of stages");
  EXPECT_EQ(CsvError("0F0\n\n1F0\n"),
            "csv: row 1 (rank 1) holds 0 stage(s) but row 0 holds 1; every rank must hold the "
            "same number of stages");
}

TEST(CsvErrorTest, CommunicationWithNoPeer) {
  EXPECT_EQ(CsvError("0F0,0SEND_F0\n"),
            "csv row 0 (rank 0), column 1 (\"0SEND_F0\"): SEND_F needs stage 1, but the stages "
            "are 0..0");
  EXPECT_EQ(CsvError("0F0,1F0,1RECV_F0\n"),
            "csv row 0 (rank 0), column 2 (\"1RECV_F0\"): stages 0 and 1 both live on rank 0, "
            "there is nothing to exchange");
}

TEST(CsvErrorTest, EmptyAndAbsurdSizes) {
  EXPECT_EQ(CsvError(""), "csv: no rows; expected one row of actions per rank");
  EXPECT_EQ(CsvError("\n , \n"), "csv: no actions in any row");
  EXPECT_EQ(CsvError(",,\n0F0\n"), "csv: row 1 (rank 1) holds 1 stage(s) but row 0 holds 0; every rank must hold the same number of stages");
  std::string rows;
  for (int r = 0; r < 4097; ++r) rows += std::to_string(r) + "F0\n";
  EXPECT_EQ(CsvError(rows), "csv: more than 4096 rows (one per rank); refusing");
  EXPECT_EQ(CsvError("0F1000000,999999F0\n"),
            "csv: 1000000 stages x 1000001 micro-batches is more than 50000000; refusing");
}

// ---- the csv generator through the registry -----------------------------------------------

TEST(CsvImportTest, BuildAddsCommunicationAndValidates) {
  ScheduleSpec spec = testing::Spec(1, 1);
  spec.csv = ScheduleToCsv(MustGenerate("1f1b", testing::Spec(2, 3)));
  auto s = BuildSchedule("csv", spec);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ExpectSameSchedule(MustBuild("1f1b", 2, 3), *s);
  EXPECT_EQ(s->name, "csv");
}

TEST(CsvImportTest, KeepsTheFilesCommunication) {
  ScheduleSpec spec = testing::Spec(2, 3);
  spec.csv = ScheduleToCsv(MustBuild("1f1b", 2, 3));
  auto s = BuildSchedule("csv", spec);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ExpectSameSchedule(MustBuild("1f1b", 2, 3), *s);
}

TEST(CsvImportTest, Refusals) {
  ScheduleSpec spec = testing::Spec(4, 1);
  spec.csv = "0F0,0BW0\n1F0,1BW0\n";
  EXPECT_EQ(BuildSchedule("csv", spec).status().message(), "pp: 4 given, but the CSV has 2 rows (ranks)");
  spec = testing::Spec(1, 5);
  spec.csv = "0F0,0BW0\n1F0,1BW0\n";
  EXPECT_EQ(BuildSchedule("csv", spec).status().message(),
            "microbatches: 5 given, but the CSV has 1 micro-batches");
  spec = testing::Spec(1, 1);
  EXPECT_EQ(BuildSchedule("csv", spec).status().message(),
            "csv: no CSV text given (the csv schedule reads a file)");
  spec.csv = "0F0,0F1,0BW0\n";
  EXPECT_EQ(BuildSchedule("csv", spec).status().message(),
            "schedule csv is invalid: stage 0 micro-batch 1 has no B or BW");
  spec.csv = "0F0\n0BW0\n";
  EXPECT_EQ(BuildSchedule("csv", spec).status().message(),
            "csv row 1 (rank 1), column 0 (\"0BW0\"): stage 0 is also in row 0 (column 0, "
            "\"0F0\"); a stage lives on one rank");
}

}  // namespace
}  // namespace pipecoord::schedules
