// pipectl data: training data on disk. `prepare` turns text into a byte-level token dataset
// (data/byte_dataset_writer.h); `check` opens datasets as a job's workers will and reports
// what they hold or the first rule a file breaks (data/token_dataset.h).
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cli/cli_io.h"
#include "cli/verbs.h"
#include "common/flags.h"
#include "common/json_writer.h"
#include "data/byte_dataset_writer.h"
#include "data/token_dataset.h"
#include "data/token_stats.h"

namespace pipecoord::cli {
namespace {

constexpr const char* kVerb = "data";

// Inputs above this size get progress lines on stderr, one per tenth.
constexpr uint64_t kProgressFromBytes = uint64_t{32} << 20;

void PrintDataHelp(FILE* out) {
  std::fprintf(out,
               "usage: pipectl data prepare TEXT... --out DIR [--val-fraction F] [--format text|json]\n"
               "       pipectl data check PREFIX... [--vocab N] [--entropy] [--format text|json]\n"
               "       (pipectl data SUBCOMMAND --help for its options)\n\n"
               "Training data on disk.\n\n"
               "subcommands:\n"
               "  prepare      text files to a byte-level token dataset (vocabulary 256): train and validation\n"
               "  check        open token datasets (flat or Megatron-LM) and report them, or the rule one breaks\n");
}

std::string Plural(uint64_t n, const char* word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

std::string MiB(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

void SplitJson(JsonWriter& w, const data::WrittenSplit& s) {
  w.BeginObject().Key("bin").String(s.bin_path).Key("sidecar").String(s.sidecar_path);
  w.Key("tokens").Uint(s.tokens).Key("documents").Uint(s.documents).EndObject();
}

int RunPrepare(int argc, char** argv) {
  FlagSet flags("pipectl data prepare TEXT... --out DIR [--tokenizer tokenizer.json] [--val-fraction F] "
                "[--format text|json]",
                "Tokenizes text files byte by byte (each byte is one token id, vocabulary 256; no vocabulary file) "
                "into the flat token format: DIR/train.bin and DIR/val.bin hold the ids as little-endian uint16, "
                "DIR/train.json and DIR/val.json their sidecars (dtype, vocab_size, tokens, document_starts). Each "
                "file is one document, concatenated in the order given; validation is the tail of the text, the "
                "last round(F x bytes) bytes. Inputs over 32 MiB report progress on stderr. With --tokenizer, a "
                "Hugging Face tokenizer.json (BPE, Unigram, WordPiece) does the tokenizing instead, through the "
                "tokenizers package: pipectl runs `$PIPECOORD_PYTHON -m pipecoord.data_prepare` (default python3; "
                "the pipecoord package, python/, and tokenizers must be importable there); the same files, "
                "uint32 ids when the vocabulary passes 65536, validation the last round(F x tokens) tokens.");
  std::string out, format = "text", tokenizer;
  double val_fraction = 0.1;
  flags.String("out", &out, "the folder to write (created if missing; its parent must exist); required");
  flags.String("tokenizer", &tokenizer, "a Hugging Face tokenizer.json to tokenize with (see above); default: bytes");
  flags.Double("val-fraction", &val_fraction, "share of the text held out for validation, in [0, 1); 0 writes no "
                                              "val files; default 0.1");
  flags.Format(&format, {"text", "json"}, "text or json (what was written: paths, tokens, documents); default text");
  std::vector<std::string> inputs;
  if (int rc = ParseFlagsOrExit(flags, argc, argv, "data prepare", &inputs); rc >= 0) return rc;
  if (inputs.empty()) return Fail("data prepare", InvalidArgument("needs at least one TEXT file"));
  if (out.empty()) return Fail("data prepare", InvalidArgument("--out: required (the folder to write)"));
  if (!(val_fraction >= 0 && val_fraction < 1)) {
    return Fail("data prepare", InvalidArgument("--val-fraction: must be in [0, 1), got " + JsonNumber(val_fraction)));
  }

  if (!tokenizer.empty()) {
    // The tokenizers package does it (python/pipecoord/data_prepare.py); its output and exit codes
    // are this command's.
    const char* env = std::getenv("PIPECOORD_PYTHON");
    const std::string python = env != nullptr && *env != '\0' ? env : "python3";
    std::vector<std::string> args = {python, "-m", "pipecoord.data_prepare"};
    args.insert(args.end(), inputs.begin(), inputs.end());
    for (const std::string& a : {std::string("--tokenizer"), tokenizer, std::string("--out"), out,
                                 std::string("--val-fraction"), JsonNumber(val_fraction), std::string("--format"),
                                 format}) {
      args.push_back(a);
    }
    std::vector<char*> argv_exec;
    for (std::string& a : args) argv_exec.push_back(a.data());
    argv_exec.push_back(nullptr);
    std::fflush(nullptr);
    execvp(argv_exec[0], argv_exec.data());
    return Fail("data prepare", FailedPrecondition("--tokenizer: cannot run " + python + " (" + std::strerror(errno) +
                                                   "); set PIPECOORD_PYTHON to a Python with the pipecoord package "
                                                   "and tokenizers (pip install \"./python[data]\")"));
  }

  data::ByteDatasetOptions options;
  options.inputs = inputs;
  options.out_dir = out;
  options.val_fraction = val_fraction;
  int reported_tenths = 0;
  options.progress = [&](uint64_t done, uint64_t total) {
    if (total < kProgressFromBytes) return;
    const int tenths = static_cast<int>(done * 10 / total);
    if (tenths <= reported_tenths) return;
    reported_tenths = tenths;
    std::fprintf(stderr, "pipectl data prepare: %d%% (%s of %s MiB)\n", tenths * 10, MiB(done).c_str(),
                 MiB(total).c_str());
  };
  auto report = data::WriteByteDataset(options);
  if (!report.ok()) return Fail("data prepare", report.status());

  std::string text;
  if (format == "json") {
    JsonWriter w;
    w.BeginObject().Break("\n  ").Key("tokenizer").String("bytes").Key("vocab_size").Int(data::kByteVocabSize);
    w.Key("dtype").String("uint16").Break("\n  ").Key("input_files").Int(report->input_files);
    w.Key("input_bytes").Uint(report->input_bytes).Key("val_fraction").Number(val_fraction);
    w.Break("\n  ").Key("train");
    SplitJson(w, report->train);
    w.Break("\n  ").Key("val");
    if (report->val.bin_path.empty()) {
      w.Null();
    } else {
      SplitJson(w, report->val);
    }
    w.Break("\n").EndObject();
    text = w.Take() + "\n";
  } else {
    auto line = [](const char* name, const data::WrittenSplit& s) {
      return std::string(name) + s.bin_path + " (" + Plural(s.tokens, "token") + ", " + Plural(s.documents, "document") +
             "), " + s.sidecar_path + "\n";
    };
    text = line("train: ", report->train);
    if (!report->val.bin_path.empty()) text += line("val:   ", report->val);
    text += "from " + Plural(static_cast<uint64_t>(report->input_files), "file") + ", " +
            Plural(report->input_bytes, "byte") + "; byte-level tokens (vocabulary 256) as uint16\n";
  }
  return EmitOutput("data prepare", text, "", format);
}

int RunCheck(int argc, char** argv) {
  FlagSet flags("pipectl data check PREFIX... [--vocab N] [--entropy] [--format text|json]",
                "Opens each token dataset as a job's workers would: PREFIX.bin with PREFIX.json (the flat format) or "
                "PREFIX.idx (Megatron-LM's indexed dataset). Checks the layout and every token id, and prints the "
                "format, dtype, tokens, documents and vocabulary, or the first rule a file breaks (exit 2).");
  int vocab = 0;
  bool entropy = false;
  std::string format = "text";
  flags.Int("vocab", &vocab, "the model's vocabulary: every id must be below it; required for Megatron-LM datasets "
                             "(their index records none); default: the flat sidecar's vocab_size");
  flags.Bool("entropy", &entropy, "also the unigram entropy of each dataset's tokens in bits per token (bits per "
                                  "byte for byte-level data): the loss of the best model that ignores context");
  flags.Format(&format, {"text", "json"}, "text or json (an array with one object per dataset); default text");
  std::vector<std::string> prefixes;
  if (int rc = ParseFlagsOrExit(flags, argc, argv, "data check", &prefixes); rc >= 0) return rc;
  if (prefixes.empty()) return Fail("data check", InvalidArgument("needs at least one dataset PREFIX"));
  if (vocab < 0) return Fail("data check", InvalidArgument("--vocab: must be >= 1, got " + std::to_string(vocab)));

  JsonWriter w;
  w.BeginArray();
  std::string text;
  for (const std::string& prefix : prefixes) {
    data::TokenDatasetOptions options;
    options.vocab_size = vocab;
    auto ds = data::TokenDataset::Open(prefix, options);
    if (!ds.ok()) return Fail("data check", ds.status());
    const char* dtype = data::TokenDtypeName(ds->tokens().dtype());
    w.Break("\n  ").BeginObject().Key("prefix").String(prefix).Key("format").String(ds->format_name());
    w.Key("dtype").String(dtype).Key("tokens").Uint(ds->tokens().size());
    w.Key("documents").Uint(ds->document_starts().size()).Key("vocab_size").Int(ds->vocab_size());
    w.Key("bin").String(ds->bin_path()).Key("layout").String(ds->layout_path());
    text += prefix + ": " + ds->format_name() + ", " + dtype + ", " + Plural(ds->tokens().size(), "token") + ", " +
            Plural(ds->document_starts().size(), "document") + ", every id below " + std::to_string(ds->vocab_size());
    if (entropy) {
      const double bits = data::UnigramEntropyBits(ds->tokens(), ds->vocab_size());
      char buf[96];
      std::snprintf(buf, sizeof buf, "; unigram entropy %.4f bits per token", bits);
      text += buf;
      w.Key("unigram_entropy_bits").Number(bits);
    }
    w.EndObject();
    text += "\n";
  }
  w.Break("\n").EndArray();
  return EmitOutput("data check", format == "json" ? w.Take() + "\n" : text, "", format);
}

}  // namespace

int RunData(int argc, char** argv) {
  // Options pipectl moved here from before the verb (--format FORMAT, ...) come first; the
  // subcommand is the first word after them, and they go on to it.
  int i = 0;
  while (i < argc && std::strncmp(argv[i], "--", 2) == 0 && std::strcmp(argv[i], "--help") != 0) {
    i += std::strchr(argv[i], '=') != nullptr ? 1 : 2;
  }
  if (i >= argc || std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
    PrintDataHelp(i >= argc ? stderr : stdout);
    return i >= argc ? kExitUsage : kExitOk;
  }
  const std::string sub = argv[i];
  std::vector<char*> args(argv, argv + i);
  args.insert(args.end(), argv + i + 1, argv + argc);
  if (sub == "prepare") return RunPrepare(static_cast<int>(args.size()), args.data());
  if (sub == "check") return RunCheck(static_cast<int>(args.size()), args.data());
  std::fprintf(stderr, "pipectl %s: unknown subcommand \"%s\" (there: prepare, check)\n\n", kVerb, sub.c_str());
  PrintDataHelp(stderr);
  return kExitUsage;
}

}  // namespace pipecoord::cli
