// What to tell a user whose JobSpec has a key protobuf's JSON parser does not know. The parser
// says "(model) hiden: Cannot find field."; this names the object as the user wrote it and the
// closest valid names: `spec.model: unknown field "hiden": did you mean "hidden"? (ModelSpec's
// fields: layers, hidden, heads, ...)`. Pure: a descriptor and the parser's message in.
#ifndef PIPECOORD_CLI_SPEC_FIELD_HINT_H_
#define PIPECOORD_CLI_SPEC_FIELD_HINT_H_

#include <google/protobuf/descriptor.h>

#include <optional>
#include <string>
#include <string_view>

namespace pipecoord::cli {

// The message for the parser's `message` about a document of type `root` (named `root_name` in
// messages), or nullopt when it is not an unknown-field error (the caller keeps the parser's).
// Suggestions: the fields (JSON names) within an edit distance of a third of the key's length
// (at least 1, case ignored), closest first, three at most.
std::optional<std::string> UnknownFieldMessage(const google::protobuf::Descriptor& root, std::string_view root_name,
                                               std::string_view message);

// Levenshtein distance, ASCII case ignored.
int EditDistance(std::string_view a, std::string_view b);

}  // namespace pipecoord::cli

#endif  // PIPECOORD_CLI_SPEC_FIELD_HINT_H_
