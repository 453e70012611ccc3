#include "study/claims.h"

#include <fmt/core.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

namespace normlab::study {

double mean(const std::vector<double>& v) {
  if (v.empty()) return NAN;
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

// Σ(x − x̄)(y − y₀) / Σ(x − x̄)²: y measured from its first value, which leaves the slope as it is and makes an effect
// that does not move (every y equal) have slope 0 exactly, not the rounding of uncentred sums.
double least_squares_slope(const std::vector<double>& x, const std::vector<double>& y) {
  if (x.empty()) return NAN;
  const double mx = std::accumulate(x.begin(), x.end(), 0.0) / static_cast<double>(x.size());
  double sxx = 0, sxy = 0;
  for (size_t i = 0; i < x.size(); ++i) sxx += (x[i] - mx) * (x[i] - mx), sxy += (x[i] - mx) * (y[i] - y.front());
  return sxx > 0 ? sxy / sxx : NAN;
}

std::string num(double v) {
  if (std::isnan(v)) return "n/a";
  if (std::isinf(v)) return v > 0 ? "∞" : "−∞";
  return std::abs(v) >= 0.01 || v == 0 ? fmt::format("{:.3f}", v) : fmt::format("{:.3g}", v);
}

bool SeedValues::complete() const {
  return !values.empty() && std::none_of(values.begin(), values.end(), [](double v) { return std::isnan(v); });
}

double SeedValues::mean() const { return complete() ? study::mean(values) : NAN; }

double SeedValues::sd() const {
  if (!complete() || std::any_of(values.begin(), values.end(), [](double v) { return std::isinf(v); })) return NAN;
  if (n() == 1) return 0;
  const double m = mean();
  double ss = 0;
  for (double v : values) ss += (v - m) * (v - m);
  return std::sqrt(ss / static_cast<double>(n() - 1));
}

std::string SeedValues::show() const {
  if (values.empty()) return "n/a (no seeds)";
  if (!complete()) {
    std::vector<int> missing;
    for (size_t i = 0; i < n(); ++i)
      if (std::isnan(values[i])) missing.push_back(seeds[i]);
    return fmt::format("n/a (seed{} {} missing)", missing.size() > 1 ? "s" : "", fmt::join(missing, ", "));
  }
  if (n() == 1) return fmt::format("{} (1 seed)", num(values[0]));
  const double s = sd();
  return fmt::format("{} ± {} ({} seeds)", num(mean()), std::isnan(s) ? "n/a" : num(s), n());
}

namespace {

// The regularized incomplete beta function I_x(a, b) by its continued fraction (modified Lentz's method),
// used on the side of x where it converges fast: I_x(a, b) = 1 − I_{1−x}(b, a).
double incomplete_beta(double x, double a, double b) {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  if (x > (a + 1) / (a + b + 2)) return 1 - incomplete_beta(1 - x, b, a);
  const double front =
      std::exp(std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) + b * std::log1p(-x)) / a;
  constexpr double tiny = 1e-300;
  double f = 1, c = 1, d = 0;
  for (int i = 0; i <= 400; ++i) {
    const int m = i / 2;
    double numerator;
    if (i == 0) numerator = 1;
    else if (i % 2 == 0) numerator = m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m));
    else numerator = -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1));
    d = 1 + numerator * d;
    d = std::abs(d) < tiny ? tiny : d;
    d = 1 / d;
    c = 1 + numerator / c;
    c = std::abs(c) < tiny ? tiny : c;
    const double step = c * d;
    f *= step;
    if (std::abs(1 - step) < 1e-15) break;
  }
  return front * (f - 1);
}

// P(T ≤ t) for Student's t with `dof` degrees of freedom.
double student_t_cdf(double t, int dof) {
  const double nu = dof;
  const double tail = 0.5 * incomplete_beta(nu / (nu + t * t), nu / 2, 0.5);
  return t >= 0 ? 1 - tail : tail;
}

}  // namespace

double student_t_quantile(double p, int dof) {
  if (!(p > 0 && p < 1) || dof < 1) throw std::invalid_argument("student_t_quantile: p in (0, 1), dof >= 1");
  if (p < 0.5) return -student_t_quantile(1 - p, dof);
  double lo = 0, hi = 1;
  while (student_t_cdf(hi, dof) < p) hi *= 2;
  for (int i = 0; i < 200 && hi - lo > 1e-12 * hi; ++i) {
    const double mid = (lo + hi) / 2;
    (student_t_cdf(mid, dof) < p ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

std::vector<int> SeedSchedule::look_sizes(int cap) {
  std::vector<int> sizes;
  for (int n = std::min(kStart, cap); n < cap; n += kStep) sizes.push_back(n);
  sizes.push_back(cap);
  return sizes;
}

SeedSchedule SeedSchedule::automatic(int cap) { return {static_cast<int>(look_sizes(cap).size())}; }

std::string SeedSchedule::describe() const {
  const std::string level = fmt::format("{:g}%", 100 * confidence());
  if (looks == 1) return level;
  return fmt::format("{} (Bonferroni over {} planned looks: {:g}% for all of them together)", level, looks,
                     100 * (1 - kFamilyAlpha));
}

std::string SubClaim::threshold() const {
  const std::string counted = test == Test::sign ? " in more seeds (exact sign test)" : "";
  switch (side) {
    case Side::above:
      return "> " + num(lo) + counted;
    case Side::below:
      return "< " + num(hi) + counted;
    case Side::within:
      break;
  }
  return fmt::format("in ({}, {})", num(lo), num(hi));
}

std::string SubClaim::interval() const {
  if (!cannot_decide.empty() || !values.complete()) return "n/a";
  if (test == Test::sign) {
    const Counts n = counts();
    return fmt::format("{} on the claimed side, {} on the other, {} alike; p = {} (α {:.3g})", n.claimed, n.reverse,
                       n.ties, num(p_value), 1 - confidence);
  }
  if (std::isnan(interval_lo)) return values.n() < 2 ? "n/a (1 seed: no interval)" : "n/a (an infinite value)";
  return fmt::format("[{}, {}] ({:g}%)", num(interval_lo), num(interval_hi), 100 * confidence);
}

std::string SubClaim::outcome() const {
  switch (truth) {
    case Truth::holds:
      return "holds";
    case Truth::fails:
      return "fails";
    case Truth::unclear:
      if (test == Test::sign) return fmt::format("unclear: p = {} is not below α {:.3g}", num(p_value), 1 - confidence);
      return std::isnan(interval_lo) ? "unclear: no interval" : "unclear: the interval reaches across " + threshold();
    case Truth::undecided:
      break;
  }
  if (!cannot_decide.empty()) return "cannot decide: " + cannot_decide;
  return "cannot decide: " + values.show();
}

namespace {

SubClaim make_claim(std::string id, std::string statement, std::string statistic, SeedValues values,
                    SubClaim::Side side, double lo, double hi) {
  SubClaim c;
  c.id = std::move(id), c.statement = std::move(statement), c.statistic = std::move(statistic);
  c.values = std::move(values), c.side = side, c.lo = lo, c.hi = hi;
  return c;
}

}  // namespace

SubClaim claim_above(std::string id, std::string statement, std::string statistic, SeedValues values, double t) {
  return make_claim(std::move(id), std::move(statement), std::move(statistic), std::move(values), SubClaim::Side::above,
                    t, t);
}
SubClaim claim_below(std::string id, std::string statement, std::string statistic, SeedValues values, double t) {
  return make_claim(std::move(id), std::move(statement), std::move(statistic), std::move(values), SubClaim::Side::below,
                    t, t);
}
SubClaim claim_within(std::string id, std::string statement, std::string statistic, SeedValues values, double lo,
                      double hi) {
  return make_claim(std::move(id), std::move(statement), std::move(statistic), std::move(values),
                    SubClaim::Side::within, lo, hi);
}

SubClaim& cannot_decide_unless(SubClaim& claim, bool decidable, std::string why) {
  if (!decidable) claim.cannot_decide = std::move(why);
  return claim;
}

SubClaim::Counts SubClaim::counts() const {
  Counts n;
  const double t = side == Side::below ? hi : lo;
  const bool up = side != Side::below;  // the claimed side of the threshold
  for (double v : values.values) {
    if (v == t) ++n.ties;
    else ((v > t) == up ? n.claimed : n.reverse) += 1;
  }
  return n;
}

double sign_test_p(int claimed, int reverse) {
  const int m = claimed + reverse, k = std::max(claimed, reverse);
  if (m == 0) return 1;
  double tail = 0;  // P(Bin(m, ½) ≥ k), summed in logs
  for (int i = k; i <= m; ++i)
    tail += std::exp(std::lgamma(m + 1.0) - std::lgamma(i + 1.0) - std::lgamma(m - i + 1.0) - m * std::log(2.0));
  return std::min(1.0, 2 * tail);
}

namespace {

bool decidable(const SubClaim& c) { return c.cannot_decide.empty() && c.values.complete(); }

// How far the mean lies from the threshold, positive on the side the interval must clear to decide either way: the
// claimed side's distance when the mean is there, the other side's otherwise.
double distance_to_threshold(const SubClaim& c) {
  const double m = c.values.mean();
  switch (c.side) {
    case SubClaim::Side::above:
      return std::abs(m - c.lo);
    case SubClaim::Side::below:
      return std::abs(c.hi - m);
    case SubClaim::Side::within:
      break;
  }
  return m > c.lo && m < c.hi ? std::min(m - c.lo, c.hi - m) : std::max(c.lo - m, m - c.hi);
}

// The t interval at confidence 1 − α, and the truth it gives.
void decide_by_interval(SubClaim& c, double alpha) {
  const auto& v = c.values.values;
  if (std::all_of(v.begin(), v.end(), [&](double x) { return x == v.front(); }) && v.size() > 1) {
    c.interval_lo = c.interval_hi = v.front();  // no spread (possibly every seed infinite): a point
  } else if (v.size() > 1 && std::isfinite(c.values.sd())) {
    const double half = student_t_quantile(1 - alpha / 2, static_cast<int>(v.size()) - 1) * c.values.sd() /
                        std::sqrt(static_cast<double>(v.size()));
    c.interval_lo = c.values.mean() - half, c.interval_hi = c.values.mean() + half;
  }
  if (std::isnan(c.interval_lo)) {
    c.truth = Truth::unclear;
    return;
  }
  const double lo = c.interval_lo, hi = c.interval_hi;
  switch (c.side) {
    case SubClaim::Side::above:
      c.truth = lo > c.lo ? Truth::holds : hi < c.lo ? Truth::fails : Truth::unclear;
      break;
    case SubClaim::Side::below:
      c.truth = hi < c.hi ? Truth::holds : lo > c.hi ? Truth::fails : Truth::unclear;
      break;
    case SubClaim::Side::within:
      c.truth = lo > c.lo && hi < c.hi ? Truth::holds : hi < c.lo || lo > c.hi ? Truth::fails : Truth::unclear;
      break;
  }
}

void decide_by_sign(SubClaim& c, double alpha) {
  const SubClaim::Counts n = c.counts();
  c.truth = c.p_value >= alpha || n.claimed == n.reverse ? Truth::unclear
            : n.claimed > n.reverse                      ? Truth::holds
                                                         : Truth::fails;
}

// The truth the same rule would give to the control at init (whether the claim already holds before training).
Truth truth_at_init(const SubClaim& c, double alpha) {
  if (c.at_init.values.empty()) return Truth::undecided;
  SubClaim control = c;
  control.values = c.at_init, control.at_init = {};
  decide(control, alpha);
  return control.truth;
}

}  // namespace

double p_value(const SubClaim& c) {
  if (!decidable(c)) return 1;
  if (c.test == SubClaim::Test::sign) {
    const SubClaim::Counts n = c.counts();
    return sign_test_p(n.claimed, n.reverse);
  }
  const double d = distance_to_threshold(c), sd = c.values.sd();
  const int n = static_cast<int>(c.values.n());
  if (n < 2 || std::isnan(d) || std::isnan(sd)) return 1;
  if (sd == 0) return d > 0 ? 0 : 1;
  const double t = d / (sd / std::sqrt(static_cast<double>(n)));
  return d > 0 ? 2 * (1 - student_t_cdf(t, n - 1)) : 1;
}

void decide(SubClaim& c, double alpha) {
  c.confidence = 1 - alpha;
  c.interval_lo = c.interval_hi = NAN;
  c.p_value = decidable(c) ? p_value(c) : NAN;
  c.init_truth = truth_at_init(c, alpha);
  if (!decidable(c)) {
    c.truth = Truth::undecided;
    return;
  }
  if (c.test == SubClaim::Test::sign) return decide_by_sign(c, alpha);
  decide_by_interval(c, alpha);
}

void decide_family(std::vector<SubClaim>& claims, const SeedSchedule& schedule) {
  std::vector<SubClaim*> tested;
  for (SubClaim& c : claims) {
    if (decidable(c)) tested.push_back(&c);
    else decide(c, schedule.alpha());
  }
  for (SubClaim* c : tested) c->p_value = p_value(*c);  // once each, for the ordering
  std::stable_sort(tested.begin(), tested.end(),
                   [](const SubClaim* a, const SubClaim* b) { return a->p_value < b->p_value; });
  double level = schedule.alpha();
  bool stopped = false;
  for (size_t j = 0; j < tested.size(); ++j) {
    if (!stopped) level = schedule.alpha() / static_cast<double>(tested.size() - j);
    decide(*tested[j], level);
    stopped = stopped || tested[j]->truth == Truth::unclear;
    if (stopped && tested[j]->truth != Truth::unclear) tested[j]->truth = Truth::unclear;  // a tie with the stop
  }
}

std::string combine_verdicts(const std::vector<SubClaim>& claims) {
  size_t holding = 0, failing = 0, open = 0;
  for (const SubClaim& c : claims) {
    // A missing number (a run failed, a record is absent) is for a rerun to mend; a sub-claim its runs cannot
    // decide (a model that did not train, a grid without the value it needs) is a result, like an unclear one.
    if (c.truth == Truth::undecided && c.cannot_decide.empty()) return "incomplete";
    holding += c.truth == Truth::holds, failing += c.truth == Truth::fails;
    open += c.truth == Truth::unclear || c.truth == Truth::undecided;
  }
  if (claims.empty()) return "incomplete";
  if (holding == claims.size()) return "reproduced";
  if (failing == claims.size()) return "not reproduced";
  return open > 0 ? "inconclusive" : "partly reproduced";
}

std::string ids_where(const std::vector<SubClaim>& claims, Truth truth) {
  std::vector<std::string> ids;
  for (const SubClaim& c : claims)
    if (c.truth == truth) ids.push_back(c.id);
  return fmt::format("{}", fmt::join(ids, ", "));
}

std::string seed_rule_text(const SeedSchedule& schedule) {
  return fmt::format(
      "Each sub-claim is one number per seed (a comparison of two arms: their difference or ratio formed seed by "
      "seed, since the arms of a seed share its init and data order). Its interval is mean ± t · sd/√n over the n "
      "seeds; a train-or-stall sub-claim is a count instead, tested by the exact two-sided sign test on the seeds "
      "whose arms differ. Each look decides at {} confidence for the whole family: Holm's step-down spreads it over "
      "the sub-claims (ordered by p-value, the j-th of k at α/(k − j), until one is not decided), so each interval "
      "has its own confidence. "
      "It holds when the interval lies wholly past its threshold on the claimed side (a count: p below its α, more "
      "seeds on the claimed side), fails when it lies wholly on the other side, and is unclear otherwise (one seed "
      "gives no interval). Reproduced: every sub-claim holds; partly reproduced: every sub-claim decided, some "
      "fail; not reproduced: every one fails; inconclusive: some sub-claim unclear, or one its runs cannot decide "
      "(a model that did not train, a grid without the value it needs); incomplete: a run failed or a number is "
      "missing.",
      schedule.describe());
}

}  // namespace normlab::study
