// MaxAddTree: a segment tree over doubles with range add and "last index above a value", each
// O(log n). The V building block's squeeze uses it for a rank's live activations per slot, to
// find at once how early a forward can move without raising the rank's peak.
#ifndef PIPECOORD_SCHEDULES_MAX_ADD_TREE_H_
#define PIPECOORD_SCHEDULES_MAX_ADD_TREE_H_

#include <algorithm>
#include <vector>

namespace pipecoord::schedules {

class MaxAddTree {
 public:
  explicit MaxAddTree(const std::vector<double>& values) : n_(static_cast<int>(values.size())) {
    size_ = 1;
    while (size_ < std::max(n_, 1)) size_ *= 2;
    max_.assign(2 * size_, kLowest);
    add_.assign(2 * size_, 0.0);
    for (int i = 0; i < n_; ++i) max_[size_ + i] = values[i];
    for (int k = size_ - 1; k >= 1; --k) max_[k] = std::max(max_[2 * k], max_[2 * k + 1]);
  }

  // Adds d to every value in [lo, hi).
  void Add(int lo, int hi, double d) { Add(1, 0, size_, lo, hi, d); }

  // The largest index in [lo, hi) whose value is > x, or -1 if none is.
  int LastAbove(int lo, int hi, double x) const { return LastAbove(1, 0, size_, lo, hi, x, 0.0); }

 private:
  static constexpr double kLowest = -1e300;  // padding beyond n: never above anything

  void Add(int k, int kl, int kr, int lo, int hi, double d) {
    if (hi <= kl || kr <= lo) return;
    if (lo <= kl && kr <= hi) {
      max_[k] += d;
      add_[k] += d;
      return;
    }
    const int mid = (kl + kr) / 2;
    Add(2 * k, kl, mid, lo, hi, d);
    Add(2 * k + 1, mid, kr, lo, hi, d);
    max_[k] = add_[k] + std::max(max_[2 * k], max_[2 * k + 1]);
  }

  // `above` is what the ancestors of node k add to its values.
  int LastAbove(int k, int kl, int kr, int lo, int hi, double x, double above) const {
    if (hi <= kl || kr <= lo || max_[k] + above <= x) return -1;
    if (kr - kl == 1) return kl;
    const int mid = (kl + kr) / 2;
    const double below = above + add_[k];
    int right = LastAbove(2 * k + 1, mid, kr, lo, hi, x, below);
    return right >= 0 ? right : LastAbove(2 * k, kl, mid, lo, hi, x, below);
  }

  int n_;
  int size_;
  std::vector<double> max_;  // max of the subtree, its own and its descendants' adds included
  std::vector<double> add_;  // added to the whole subtree, not yet pushed below
};

}  // namespace pipecoord::schedules

#endif  // PIPECOORD_SCHEDULES_MAX_ADD_TREE_H_
