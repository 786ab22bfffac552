#include "worker/transport/transport.h"

namespace pipecoord::worker {

std::string ToString(const MessageTag& tag) {
  return "{channel " + std::to_string(tag.channel) + ", stage " + std::to_string(tag.stage) +
         ", mb " + std::to_string(tag.mb) + ", step " + std::to_string(tag.step) + "}";
}

}  // namespace pipecoord::worker
