#include "cli/spec_field_hint.h"

#include <algorithm>
#include <cctype>
#include <utility>
#include <vector>

namespace pipecoord::cli {

int EditDistance(std::string_view a, std::string_view b) {
  std::vector<int> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = static_cast<int>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    int diagonal = row[0];
    row[0] = static_cast<int>(i);
    for (size_t j = 1; j <= b.size(); ++j) {
      const bool same = std::tolower(static_cast<unsigned char>(a[i - 1])) == std::tolower(static_cast<unsigned char>(b[j - 1]));
      const int next = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (same ? 0 : 1)});
      diagonal = row[j];
      row[j] = next;
    }
  }
  return row[b.size()];
}

std::optional<std::string> UnknownFieldMessage(const google::protobuf::Descriptor& root, std::string_view root_name,
                                               std::string_view message) {
  constexpr std::string_view kTail = ": Cannot find field.";
  if (message.size() <= kTail.size() || message.substr(message.size() - kTail.size()) != kTail) return std::nullopt;
  message.remove_suffix(kTail.size());
  std::string_view path;
  if (!message.empty() && message[0] == '(') {
    const size_t close = message.find(") ");
    if (close == std::string_view::npos) return std::nullopt;
    path = message.substr(1, close - 1);
    message.remove_prefix(close + 2);
  }
  const std::string_view key = message;
  // Walk the path ("health", "data.train", "stages[2]") to the object that has the key.
  const google::protobuf::Descriptor* d = &root;
  std::string where(root_name);
  while (!path.empty()) {
    const size_t dot = path.find('.');
    std::string_view segment = path.substr(0, dot);
    path = dot == std::string_view::npos ? std::string_view() : path.substr(dot + 1);
    where += "." + std::string(segment);
    if (const size_t bracket = segment.find('['); bracket != std::string_view::npos) segment = segment.substr(0, bracket);
    const google::protobuf::FieldDescriptor* f = d->FindFieldByName(std::string(segment));
    for (int i = 0; f == nullptr && i < d->field_count(); ++i) {
      if (d->field(i)->json_name() == segment) f = d->field(i);
    }
    if (f == nullptr || f->message_type() == nullptr) return std::nullopt;
    d = f->message_type();
  }
  std::vector<std::pair<int, std::string>> close;
  std::string all;
  const int limit = std::max(1, static_cast<int>(key.size()) / 3);
  for (int i = 0; i < d->field_count(); ++i) {
    const std::string& name = d->field(i)->json_name();
    all += (all.empty() ? "" : ", ") + name;
    const int distance = EditDistance(key, name);
    if (distance <= limit) close.emplace_back(distance, name);
  }
  std::stable_sort(close.begin(), close.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::string out = where + ": unknown field \"" + std::string(key) + "\"";
  for (size_t i = 0; i < close.size() && i < 3; ++i) {
    out += (i == 0 ? ": did you mean \"" : i + 1 == std::min<size_t>(close.size(), 3) ? " or \"" : ", \"") +
           close[i].second + "\"";
  }
  if (!close.empty()) out += "?";
  out += " (" + d->name() + "'s fields: " + all + ")";
  return out;
}

}  // namespace pipecoord::cli
