// The rank layout of a job (common/rank_layout.h) from its spec: pp x dp x tp, a 0 meaning 1.
#ifndef PIPECOORD_JOBPLAN_LAYOUT_H_
#define PIPECOORD_JOBPLAN_LAYOUT_H_

#include "common/rank_layout.h"
#include "proto/job.pb.h"

namespace pipecoord::jobplan {

inline RankLayout LayoutOf(const v1::JobSpec& spec) {
  return RankLayout::OfDegrees(spec.pp(), spec.dp(), spec.tp());
}

}  // namespace pipecoord::jobplan

#endif  // PIPECOORD_JOBPLAN_LAYOUT_H_
