// Summaries the scenarios report: percentiles and Jain's fairness index.
#pragma once
#include <algorithm>
#include <vector>

namespace uroce::sim {

// The q-quantile of v (nearest rank below); 0 for no samples.
template <class T>
T percentile(std::vector<T> v, double q) {
  if (v.empty()) return T{};
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(q * double(v.size())))];
}

// (sum x)^2 / (n sum x^2): 1 when all are equal, 1/n when one has everything.
inline double jain_fairness(const std::vector<double>& x) {
  double s = 0, s2 = 0;
  for (double v : x) {
    s += v;
    s2 += v * v;
  }
  return s2 > 0 ? s * s / (double(x.size()) * s2) : 0;
}

}  // namespace uroce::sim
