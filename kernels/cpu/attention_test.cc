#include "kernels/cpu/attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/attention_reference.h"
#include "kernels/cpu/gradient_check.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/rng.h"

namespace pipecoord::kernels::cpu {
namespace {

using testing::Inner;
using testing::NumericGradient;
using testing::RandomVector;
using testing::RelativeError;
using testing::ReportError;

TEST(AttentionTest, CausalRowsSumToOneAndFirstTokenCopiesItsValue) {
  const AttentionDims d{2, 4, 2, 3};
  const int64_t size = d.batch * d.seq * d.hidden();
  const std::vector<float> q = [&] {
    std::vector<float> v(size);
    Rng(31).FillUniform(v.data(), size, -1, 1);
    return v;
  }();
  std::vector<float> k = q, v = q, probs(d.probs_size()), o(size);
  Rng(32).FillUniform(k.data(), size, -1, 1);
  Rng(33).FillUniform(v.data(), size, -1, 1);
  AttentionForward(q.data(), k.data(), v.data(), probs.data(), o.data(), d);
  for (int64_t row = 0; row < d.batch * d.heads * d.seq; ++row) {
    const int64_t i = row % d.seq;
    double sum = 0;
    for (int64_t j = 0; j < d.seq; ++j) {
      const float p = probs[row * d.seq + j];
      if (j > i) {
        EXPECT_EQ(p, 0.0f);
      }
      sum += p;
    }
    EXPECT_NEAR(sum, 1.0, 1e-6);
  }
  // Token 0 attends only to itself: o_0 = v_0 exactly (probability 1).
  for (int64_t c = 0; c < d.hidden(); ++c) EXPECT_EQ(o[c], v[c]);
}

// The fp32 path (per-head sgemm; softmax and its backward row sums in double, rounded once) against
// the double reference, element by element, within a first-order error bound built from the
// textbook one for a K-term fp32 sum of products (Higham, Accuracy and Stability of Numerical
// Algorithms, 2nd ed., eq. 3.5: |computed - exact| <= gamma_K sum_k |a_k b_k|,
// gamma_K = K u / (1 - K u), u = 2^-24) carried through each step, all terms computed here in
// double (eps = 2^-52 covers the path's own double arithmetic):
//   scores  s_ij = scale q_i . k_j (sgemm): error <= E_i = gamma_{d+2} scale max_j sum_c |q_ic
//   k_jc|
//           (d products, the alpha multiply, scale rounded to float);
//   probs   p_ij = softmax_j(s_ij): a score error of at most E_i moves log p_ij by at most 2 E_i,
//           then one rounding to float: relative error <= theta_i = 2 E_i + u + eps (L_i + i + 3),
//           L_i = max_j (m_i - s_ij) the exponents' range;
//   output  o_ic = sum_j p_ij v_jc (sgemm): error <= (theta_i + gamma_s) sum_j p_ij |v_jc|;
// plus u |reference| for the reference's own rounding to float. Backward, given the same saved
// probabilities: dP_ij = do_i . v_j (sgemm) within gamma_d B_ij (B_ij = sum_c |do_ic v_jc|); the
// row sum r_i = sum_j p_ij dP_ij (double) within R_i = sum_j p_ij gamma_d B_ij;
// dS_ij = p_ij (dP_ij - r_i) (double, rounded once) within
// D_ij = p_ij (gamma_d B_ij + R_i + eps (i + 3) (|dP_ij| + |r_i|)) + u |dS_ij|;
// dq_i = scale sum_j dS_ij k_j (sgemm, scale as alpha) within
// scale (sum_j D_ij |k_jc| + gamma_{s+1} sum_j |dS_ij k_jc|) + 2u |dq| (scale in float, the
// reference's rounding); dk the same with q and the transpose; dv_j = sum_i p_ij do_i within
// gamma_s sum_i p_ij |do_ic| + u |dv|. The test prints the worst error as a fraction of its bound.
struct BoundCheck {
  const char* what;
  double worst = 0;  // max error / bound
  void Expect(double got, double want, double bound, int64_t at) {
    const double err = std::abs(got - want);
    ASSERT_LE(err, bound) << what << " element " << at << ": " << got << " vs " << want;
    if (bound > 0) worst = std::max(worst, err / bound);
  }
  void Print() const { std::printf("%s: worst |error| / bound = %.3g\n", what, worst); }
};

double Gamma(int64_t n) {
  const double u = std::ldexp(1.0, -24);
  return n * u / (1 - n * u);
}

// Past OpenBLAS's register tiles in every dimension, ragged edges, several
// samples and heads.
constexpr AttentionDims kBig{2, 150, 3, 24};

std::vector<float> Uniform(int64_t n, uint64_t seed, float range) {
  std::vector<float> v(static_cast<size_t>(n));
  Rng(seed).FillUniform(v.data(), n, -range, range);
  return v;
}

TEST(AttentionTest, Fp32ForwardWithinItsErrorBoundOfTheReference) {
  const AttentionDims d = kBig;
  const int64_t size = d.batch * d.seq * d.hidden(), s = d.seq, hd = d.head_dim;
  // Scores of a few units, so the softmax is neither flat nor one-hot.
  const std::vector<float> q = Uniform(size, 41, 2), k = Uniform(size, 42, 2),
                           v = Uniform(size, 43, 1);
  std::vector<float> probs(d.probs_size()), o(size), want_probs(d.probs_size()), want_o(size);
  AttentionForward(q.data(), k.data(), v.data(), probs.data(), o.data(), d);
  AttentionForwardReference(q.data(), k.data(), v.data(), want_probs.data(), want_o.data(), d);
  const double u = std::ldexp(1.0, -24), scale = 1.0 / std::sqrt(static_cast<double>(hd));
  BoundCheck check_p{"attention probs (F)"}, check_o{"attention o (F)"};
  for (int64_t b = 0; b < d.batch; ++b) {
    for (int64_t h = 0; h < d.heads; ++h) {
      const int64_t base = b * s * d.hidden() + h * hd;
      const int64_t pbase = (b * d.heads + h) * s * s;
      for (int64_t i = 0; i < s; ++i) {
        std::vector<double> score(i + 1);
        double abs_max = 0, mx = -INFINITY, mn = INFINITY;
        for (int64_t j = 0; j <= i; ++j) {
          double dot = 0, abs = 0;
          for (int64_t c = 0; c < hd; ++c) {
            const double a = q[base + i * d.hidden() + c], bb = k[base + j * d.hidden() + c];
            dot += a * bb;
            abs += std::abs(a * bb);
          }
          score[j] = scale * dot;
          abs_max = std::max(abs_max, abs);
          mx = std::max(mx, score[j]);
          mn = std::min(mn, score[j]);
        }
        const double e = Gamma(hd + 2) * scale * abs_max;
        const double eps = std::ldexp(1.0, -52);
        const double theta = 2 * e + u + eps * (mx - mn + i + 3);
        for (int64_t j = 0; j < s; ++j) {
          const double p = want_probs[pbase + i * s + j];  // + u below: the reference's rounding
          check_p.Expect(probs[pbase + i * s + j], p, (theta + u) * p, pbase + i * s + j);
        }
        for (int64_t c = 0; c < hd; ++c) {
          double w = 0;
          for (int64_t j = 0; j <= i; ++j) {
            w += double{want_probs[pbase + i * s + j]} * std::abs(v[base + j * d.hidden() + c]);
          }
          const int64_t at = base + i * d.hidden() + c;
          check_o.Expect(o[at], want_o[at], (theta + Gamma(s)) * w + u * std::abs(want_o[at]), at);
        }
      }
    }
  }
  check_p.Print();
  check_o.Print();
}

TEST(AttentionTest, Fp32BackwardWithinItsErrorBoundOfTheReference) {
  const AttentionDims d = kBig;
  const int64_t size = d.batch * d.seq * d.hidden(), s = d.seq, hd = d.head_dim;
  const int64_t ld = d.hidden();
  const std::vector<float> q = Uniform(size, 44, 2), k = Uniform(size, 45, 2),
                           v = Uniform(size, 46, 1), dout = Uniform(size, 47, 1);
  std::vector<float> probs(d.probs_size()), o(size);
  AttentionForwardReference(q.data(), k.data(), v.data(), probs.data(), o.data(), d);
  std::vector<float> dq(size), dk(size), dv(size), want_dq(size), want_dk(size), want_dv(size);
  AttentionBackward(dout.data(), q.data(), k.data(), v.data(), probs.data(), dq.data(), dk.data(),
                    dv.data(), d);
  AttentionBackwardReference(dout.data(), q.data(), k.data(), v.data(), probs.data(),
                             want_dq.data(), want_dk.data(), want_dv.data(), d);
  const double u = std::ldexp(1.0, -24), scale = 1.0 / std::sqrt(static_cast<double>(hd));
  BoundCheck check_dq{"attention dq (B)"}, check_dk{"attention dk (B)"},
      check_dv{"attention dv (B)"};
  for (int64_t b = 0; b < d.batch; ++b) {
    for (int64_t h = 0; h < d.heads; ++h) {
      const int64_t base = b * s * ld + h * hd;
      const float* p = probs.data() + (b * d.heads + h) * s * s;
      // dS (exact, in double) and its error bound D, row by row.
      std::vector<double> ds(s * s, 0.0), bound_ds(s * s, 0.0);
      for (int64_t i = 0; i < s; ++i) {
        std::vector<double> dp(i + 1), bnd(i + 1);
        double row = 0, row_bound = 0;
        for (int64_t j = 0; j <= i; ++j) {
          double dot = 0, abs = 0;
          for (int64_t c = 0; c < hd; ++c) {
            const double a = dout[base + i * ld + c], bb = v[base + j * ld + c];
            dot += a * bb;
            abs += std::abs(a * bb);
          }
          dp[j] = dot;
          bnd[j] = Gamma(hd) * abs;
          row += p[i * s + j] * dot;
          row_bound += p[i * s + j] * bnd[j];
        }
        for (int64_t j = 0; j <= i; ++j) {
          ds[i * s + j] = p[i * s + j] * (dp[j] - row);
          const double eps = std::ldexp(1.0, -52);
          bound_ds[i * s + j] = p[i * s + j] * (bnd[j] + row_bound +
                                                eps * (i + 3) * (std::abs(dp[j]) + std::abs(row))) +
                                u * std::abs(ds[i * s + j]);
        }
      }
      for (int64_t r = 0; r < s; ++r) {
        for (int64_t c = 0; c < hd; ++c) {
          double bq = 0, aq = 0, bk = 0, ak = 0, av = 0;
          for (int64_t j = 0; j < s; ++j) {
            // dq row r: sum over j of dS_rj k_j; dk row r: sum over i of dS_ir
            // q_i; dv row r: sum over i of P_ir do_i.
            bq += bound_ds[r * s + j] * std::abs(k[base + j * ld + c]);
            aq += std::abs(ds[r * s + j] * k[base + j * ld + c]);
            bk += bound_ds[j * s + r] * std::abs(q[base + j * ld + c]);
            ak += std::abs(ds[j * s + r] * q[base + j * ld + c]);
            av += p[j * s + r] * std::abs(dout[base + j * ld + c]);
          }
          const int64_t at = base + r * ld + c;
          check_dq.Expect(dq[at], want_dq[at],
                          scale * (bq + Gamma(s + 1) * aq) + 2 * u * std::abs(want_dq[at]), at);
          check_dk.Expect(dk[at], want_dk[at],
                          scale * (bk + Gamma(s + 1) * ak) + 2 * u * std::abs(want_dk[at]), at);
          check_dv.Expect(dv[at], want_dv[at], Gamma(s) * av + u * std::abs(want_dv[at]), at);
        }
      }
    }
  }
  check_dq.Print();
  check_dk.Print();
  check_dv.Print();
}

// Bit-exact checkpoint resume needs the same bits from the same inputs every
// time, whatever the buffers' addresses, at one thread and at several.
TEST(AttentionTest, Fp32PathIsBitExactOnRerunsAtAFixedThreadCount) {
  const AttentionDims d = kBig;
  const int64_t size = d.batch * d.seq * d.hidden();
  const std::vector<float> q = Uniform(size, 48, 2), k = Uniform(size, 49, 2),
                           v = Uniform(size, 50, 1), dout = Uniform(size, 51, 1);
  auto run = [&](int offset) {  // every buffer shifted by `offset` floats
    auto shifted = [&](const std::vector<float>& x) {
      std::vector<float> y(x.size() + offset);
      std::copy(x.begin(), x.end(), y.begin() + offset);
      return y;
    };
    std::vector<float> qs = shifted(q), ks = shifted(k), vs = shifted(v), ds = shifted(dout);
    std::vector<float> probs(d.probs_size() + offset), o(size + offset), dq(size + offset),
        dk(size + offset), dv(size + offset);
    AttentionForward(qs.data() + offset, ks.data() + offset, vs.data() + offset,
                     probs.data() + offset, o.data() + offset, d);
    AttentionBackward(ds.data() + offset, qs.data() + offset, ks.data() + offset,
                      vs.data() + offset, probs.data() + offset, dq.data() + offset,
                      dk.data() + offset, dv.data() + offset, d);
    std::vector<float> out(probs.begin() + offset, probs.end());
    for (const std::vector<float>* t : {&o, &dq, &dk, &dv}) {
      out.insert(out.end(), t->begin() + offset, t->end());
    }
    return out;
  };
  const int before = GemmThreads();
  for (int threads : {1, 2}) {
    SetGemmThreads(threads);
    const std::vector<float> first = run(0);
    for (int offset : {0, 1, 3, 16}) {
      EXPECT_TRUE(run(offset) == first) << threads << " thread(s), offset " << offset;
    }
  }
  SetGemmThreads(before);
}

// Grouped-query attention is multi-head attention on each key/value head repeated for its group
// of query heads (transformers' repeat_kv): o, probs and dq the same bits, dk and dv each group's
// sum of the repeated heads' gradients (fp32: within a few roundings, summed in another order;
// the double reference: within 1e-12). 4 query heads over 2 and over 1 key/value heads, 40
// tokens (two causal blocks).
TEST(AttentionTest, GroupedQueryAttentionIsMultiHeadOnRepeatedKeysAndValues) {
  for (int64_t kv : {2, 1}) {
    SCOPED_TRACE("kv heads " + std::to_string(kv));
    AttentionDims g{2, 40, 4, 8, kv};
    AttentionDims m = g;
    m.kv_heads = 0;
    const int64_t tokens = g.batch * g.seq, hd = g.head_dim, group = g.group();
    const std::vector<float> q = Uniform(tokens * g.hidden(), 61, 2), k = Uniform(tokens * g.kv_hidden(), 62, 2),
                             v = Uniform(tokens * g.kv_hidden(), 63, 1), dout = Uniform(tokens * g.hidden(), 64, 1);
    // Each query head's key/value head, repeated: [tokens, heads, head_dim].
    auto repeat = [&](const std::vector<float>& x) {
      std::vector<float> y(static_cast<size_t>(tokens * g.hidden()));
      for (int64_t t = 0; t < tokens; ++t) {
        for (int64_t h = 0; h < g.heads; ++h) {
          std::copy_n(x.begin() + (t * kv + h / group) * hd, hd, y.begin() + (t * g.heads + h) * hd);
        }
      }
      return y;
    };
    // A repeated head's gradient summed over its group, in head order: [tokens, kv, head_dim].
    auto fold = [&](const std::vector<double>& y) {
      std::vector<double> x(static_cast<size_t>(tokens * g.kv_hidden()), 0.0);
      for (int64_t t = 0; t < tokens; ++t) {
        for (int64_t h = 0; h < g.heads; ++h) {
          for (int64_t c = 0; c < hd; ++c) x[(t * kv + h / group) * hd + c] += y[(t * g.heads + h) * hd + c];
        }
      }
      return x;
    };
    const std::vector<float> kr = repeat(k), vr = repeat(v);
    std::vector<float> pg(g.probs_size()), og(tokens * g.hidden()), pm(m.probs_size()), om(tokens * m.hidden());
    AttentionForward(q.data(), k.data(), v.data(), pg.data(), og.data(), g);
    AttentionForward(q.data(), kr.data(), vr.data(), pm.data(), om.data(), m);
    EXPECT_TRUE(pg == pm && og == om) << "F differs from attention on the repeated heads";
    std::vector<float> dqg(q.size()), dkg(k.size()), dvg(v.size()), dqm(q.size()), dkm(kr.size()), dvm(vr.size());
    AttentionBackward(dout.data(), q.data(), k.data(), v.data(), pg.data(), dqg.data(), dkg.data(), dvg.data(), g);
    AttentionBackward(dout.data(), q.data(), kr.data(), vr.data(), pm.data(), dqm.data(), dkm.data(), dvm.data(), m);
    EXPECT_TRUE(dqg == dqm) << "dq differs";
    for (auto [got, rep] : {std::pair{&dkg, &dkm}, std::pair{&dvg, &dvm}}) {
      const std::vector<double> want = fold(std::vector<double>(rep->begin(), rep->end()));
      const double err = RelativeError(std::vector<double>(got->begin(), got->end()), want);
      EXPECT_LT(err, 1e-6) << "dk or dv against the repeated heads' group sums";
    }
    // The double reference the same way.
    auto wide = [](const std::vector<float>& x) { return std::vector<double>(x.begin(), x.end()); };
    const std::vector<double> qd = wide(q), kd = wide(k), vd = wide(v), dd = wide(dout), krd = wide(kr), vrd = wide(vr);
    std::vector<double> pgd(pg.size()), ogd(og.size()), pmd(pm.size()), omd(om.size());
    AttentionForward(qd.data(), kd.data(), vd.data(), pgd.data(), ogd.data(), g);
    AttentionForward(qd.data(), krd.data(), vrd.data(), pmd.data(), omd.data(), m);
    EXPECT_TRUE(pgd == pmd && ogd == omd);
    std::vector<double> dqgd(q.size()), dkgd(k.size()), dvgd(v.size()), dqmd(q.size()), dkmd(kr.size()), dvmd(vr.size());
    AttentionBackward(dd.data(), qd.data(), kd.data(), vd.data(), pgd.data(), dqgd.data(), dkgd.data(), dvgd.data(), g);
    AttentionBackward(dd.data(), qd.data(), krd.data(), vrd.data(), pmd.data(), dqmd.data(), dkmd.data(), dvmd.data(), m);
    EXPECT_TRUE(dqgd == dqmd);
    EXPECT_LT(RelativeError(dkgd, fold(dkmd)), 1e-12);
    EXPECT_LT(RelativeError(dvgd, fold(dvmd)), 1e-12);
  }
}

TEST(AttentionTest, BackwardMatchesFiniteDifferences) {
  const AttentionDims d{2, 5, 2, 4};
  const int64_t size = d.batch * d.seq * d.hidden();
  std::vector<double> q = RandomVector(size, 34), k = RandomVector(size, 35),
                      v = RandomVector(size, 36);
  const std::vector<double> r = RandomVector(size, 37);
  std::vector<double> probs(d.probs_size()), o(size);
  auto objective = [&] {
    AttentionForward(q.data(), k.data(), v.data(), probs.data(), o.data(), d);
    return Inner(o, r);
  };
  objective();
  std::vector<double> dq(size), dk(size), dv(size);
  AttentionBackward(r.data(), q.data(), k.data(), v.data(), probs.data(), dq.data(), dk.data(),
                    dv.data(), d);
  const double eq = RelativeError(dq, NumericGradient(objective, &q, 1e-6));
  const double ek = RelativeError(dk, NumericGradient(objective, &k, 1e-6));
  const double ev = RelativeError(dv, NumericGradient(objective, &v, 1e-6));
  ReportError("attention dq (B)", eq);
  ReportError("attention dk (B)", ek);
  ReportError("attention dv (B)", ev);
  EXPECT_LT(eq, 1e-7);
  EXPECT_LT(ek, 1e-7);
  EXPECT_LT(ev, 1e-7);
}

// Sliding-window attention (Mistral's): query i sees keys i - w < j <= i. Its probabilities are
// zero outside the window and sum to one inside; each query's output is plain causal attention's
// last row over the w tokens that end at it (the reference on that slice, an independent
// characterization); fp32 against the double reference forward and backward; a window of at
// least the sequence is plain attention bit for bit.
TEST(AttentionTest, SlidingWindowIsCausalAttentionOverTheLastWTokens) {
  const int64_t w = 3;
  AttentionDims d{2, 9, 4, 6, 2};
  d.window = w;
  const int64_t size = d.batch * d.seq * d.hidden(), kv_size = d.batch * d.seq * d.kv_hidden();
  const std::vector<double> q = RandomVector(size, 41), k = RandomVector(kv_size, 42), v = RandomVector(kv_size, 43);
  std::vector<double> probs(d.probs_size()), o(size);
  AttentionForward(q.data(), k.data(), v.data(), probs.data(), o.data(), d);
  for (int64_t row = 0; row < d.batch * d.heads * d.seq; ++row) {
    const int64_t i = row % d.seq;
    double sum = 0;
    for (int64_t j = 0; j < d.seq; ++j) {
      const double p = probs[row * d.seq + j];
      if (j > i || j <= i - w) {
        EXPECT_EQ(p, 0.0) << "row " << i << " key " << j;
      }
      sum += p;
    }
    EXPECT_NEAR(sum, 1.0, 1e-12);
  }
  // Query i of sample b against plain attention over tokens [i - w + 1, i] of that sample.
  for (int64_t b = 0; b < d.batch; ++b) {
    for (int64_t i = 0; i < d.seq; ++i) {
      const int64_t lo = std::max<int64_t>(0, i - w + 1), n = i + 1 - lo;
      AttentionDims slice{1, n, d.heads, d.head_dim, d.kv_heads};
      std::vector<double> sq(n * d.hidden()), sk(n * d.kv_hidden()), sv(n * d.kv_hidden()), sp(slice.probs_size()),
          so(n * d.hidden());
      for (int64_t t = 0; t < n; ++t) {
        std::copy_n(q.data() + (b * d.seq + lo + t) * d.hidden(), d.hidden(), sq.data() + t * d.hidden());
        std::copy_n(k.data() + (b * d.seq + lo + t) * d.kv_hidden(), d.kv_hidden(), sk.data() + t * d.kv_hidden());
        std::copy_n(v.data() + (b * d.seq + lo + t) * d.kv_hidden(), d.kv_hidden(), sv.data() + t * d.kv_hidden());
      }
      AttentionForward(sq.data(), sk.data(), sv.data(), sp.data(), so.data(), slice);
      for (int64_t c = 0; c < d.hidden(); ++c) {
        EXPECT_NEAR(o[(b * d.seq + i) * d.hidden() + c], so[(n - 1) * d.hidden() + c], 1e-12) << b << " " << i;
      }
    }
  }
  // fp32 (the sgemm path) against the reference in float, forward and backward.
  std::vector<float> fq(q.begin(), q.end()), fk(k.begin(), k.end()), fv(v.begin(), v.end());
  const std::vector<float> fr = Uniform(size, 44, 1.0f);
  std::vector<float> fp(d.probs_size()), fo(size), rp(d.probs_size()), ro(size);
  AttentionForward(fq.data(), fk.data(), fv.data(), fp.data(), fo.data(), d);
  AttentionForwardReference(fq.data(), fk.data(), fv.data(), rp.data(), ro.data(), d);
  for (int64_t x = 0; x < size; ++x) EXPECT_NEAR(fo[x], ro[x], 1e-5) << x;
  std::vector<float> dq(size), dk(kv_size), dv(kv_size), rdq(size), rdk(kv_size), rdv(kv_size);
  AttentionBackward(fr.data(), fq.data(), fk.data(), fv.data(), fp.data(), dq.data(), dk.data(), dv.data(), d);
  AttentionBackwardReference(fr.data(), fq.data(), fk.data(), fv.data(), rp.data(), rdq.data(), rdk.data(), rdv.data(), d);
  for (int64_t x = 0; x < size; ++x) EXPECT_NEAR(dq[x], rdq[x], 1e-5) << "dq " << x;
  for (int64_t x = 0; x < kv_size; ++x) {
    EXPECT_NEAR(dk[x], rdk[x], 1e-5) << "dk " << x;
    EXPECT_NEAR(dv[x], rdv[x], 1e-5) << "dv " << x;
  }
  // A window of the whole sequence (or more) is no window.
  AttentionDims wide = d, plain = d;
  wide.window = d.seq;
  plain.window = 0;
  std::vector<float> wo(size), po(size), wp(d.probs_size()), pp(d.probs_size());
  AttentionForward(fq.data(), fk.data(), fv.data(), wp.data(), wo.data(), wide);
  AttentionForward(fq.data(), fk.data(), fv.data(), pp.data(), po.data(), plain);
  EXPECT_EQ(wo, po);
  EXPECT_NE(fo, po);  // and the window of 3 changed the output
}

TEST(AttentionTest, SlidingWindowBackwardMatchesFiniteDifferences) {
  AttentionDims d{2, 6, 2, 4, 1};
  d.window = 2;
  const int64_t size = d.batch * d.seq * d.hidden(), kv_size = d.batch * d.seq * d.kv_hidden();
  std::vector<double> q = RandomVector(size, 45), k = RandomVector(kv_size, 46), v = RandomVector(kv_size, 47);
  const std::vector<double> r = RandomVector(size, 48);
  std::vector<double> probs(d.probs_size()), o(size);
  auto objective = [&] {
    AttentionForward(q.data(), k.data(), v.data(), probs.data(), o.data(), d);
    return Inner(o, r);
  };
  objective();
  std::vector<double> dq(size), dk(kv_size), dv(kv_size);
  AttentionBackward(r.data(), q.data(), k.data(), v.data(), probs.data(), dq.data(), dk.data(), dv.data(), d);
  EXPECT_LT(RelativeError(dq, NumericGradient(objective, &q, 1e-6)), 1e-7);
  EXPECT_LT(RelativeError(dk, NumericGradient(objective, &k, 1e-6)), 1e-7);
  EXPECT_LT(RelativeError(dv, NumericGradient(objective, &v, 1e-6)), 1e-7);
}

}  // namespace
}  // namespace pipecoord::kernels::cpu
