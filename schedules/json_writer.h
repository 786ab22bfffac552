// The two JSON primitives every export needs, written carefully once: strings and numbers.
// The exports compose objects and arrays from these by hand, so their layout stays readable
// and byte-for-byte deterministic.
#ifndef PIPECOORD_SCHEDULES_JSON_WRITER_H_
#define PIPECOORD_SCHEDULES_JSON_WRITER_H_

#include <string>
#include <string_view>
#include <vector>

namespace pipecoord::schedules {

// `s` as a quoted JSON string: escapes '"', '\\' and every control character (\n, \t, ...,
// \u00XX); other bytes pass through unchanged (UTF-8 stays UTF-8).
std::string JsonString(std::string_view s);

// The shortest decimal text that reads back as exactly `v` ("9", "0.16666666666666663",
// "1e+20"); "null" for NaN and infinities, which JSON cannot express.
std::string JsonNumber(double v);

// "[1, 2, 3]" with JsonNumber for each element.
std::string JsonNumberArray(const std::vector<double>& values);
std::string JsonIntArray(const std::vector<int>& values);

}  // namespace pipecoord::schedules

#endif  // PIPECOORD_SCHEDULES_JSON_WRITER_H_
