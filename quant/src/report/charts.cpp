// The inline SVG charts of report.html.
#include "charts.h"

#include <algorithm>
#include <cmath>

#include "html.h"
#include "report_check.h"

namespace qfx::quant::report {

namespace {

double value_or(const nlohmann::json& j, const char* key, double d) {
  return j.contains(key) && j[key].is_number() ? j[key].get<double>() : d;
}

// The `i`-th number of array `a`, or `d` for an absent or non-number item.
double item_or(const nlohmann::json& a, size_t i, double d) { return i < a.size() && a[i].is_number() ? a[i].get<double>() : d; }

// The most bars a histogram draws, and segments a weight-range chart draws: a
// longer report.json (qfx writes 128 bins) is summed into this many, so the page
// stays small whatever the file holds.
constexpr size_t kMaxBins = 256, kMaxChannels = 512;

const char* kPalette[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf"};

}  // namespace

std::string sqnr_bars(const nlohmann::json& layers) {
  const int row = 18, label_w = 230, bar_w = 560;
  double top = 1;
  for (const auto& l : layers) top = std::max({top, value_or(l, "sqnr_db_fakequant", 0), value_or(l, "sqnr_db_int8", 0)});
  const int h = static_cast<int>(layers.size()) * row + 30;
  std::string s = "<svg class=\"chart\" id=\"sqnr-chart\" width=\"" + std::to_string(label_w + bar_w + 80) + "\" height=\"" +
                  std::to_string(h) + "\" xmlns=\"http://www.w3.org/2000/svg\">";
  int y = 4;
  for (const auto& l : layers) {
    const std::string node = get<std::string>(l, "node", std::string("?"));
    s += "<text x=\"" + std::to_string(label_w - 6) + "\" y=\"" + std::to_string(y + 12) + "\" text-anchor=\"end\">" + esc(shorten(node, 36)) +
         "<title>" + esc(node) + "</title></text>";
    const double fq = value_or(l, "sqnr_db_fakequant", 0);
    const bool has_q = l.contains("sqnr_db_int8");
    const double q = value_or(l, "sqnr_db_int8", 0);
    auto bar = [&](double v, int dy, int hh, const char* cls, const std::string& what) {
      const double w = std::max(0.0, v) / top * bar_w;
      s += "<rect class=\"bar " + std::string(cls) + "\" x=\"" + std::to_string(label_w) + "\" y=\"" + std::to_string(y + dy) +
           "\" width=\"" + num(w, 5) + "\" height=\"" + std::to_string(hh) + "\"><title>" + esc(node) + ": " + what + " " +
           num(v) + " dB</title></rect>";
    };
    bar(fq, 1, has_q ? 7 : 14, "fq", "fake-quant SQNR");
    if (has_q) bar(q, 8, 7, "int8", "int8 SQNR");
    s += "<text x=\"" + num(label_w + std::max(0.0, has_q ? std::max(fq, q) : fq) / top * bar_w + 4, 5) + "\" y=\"" +
         std::to_string(y + 12) + "\" class=\"small\">" + num(has_q ? q : fq, 3) + " dB</text>";
    y += row;
  }
  s += "<text x=\"" + std::to_string(label_w) + "\" y=\"" + std::to_string(y + 16) + "\" class=\"small\">0 dB</text><text x=\"" +
       std::to_string(label_w + bar_w) + "\" y=\"" + std::to_string(y + 16) + "\" text-anchor=\"end\" class=\"small\">" +
       num(top, 3) + " dB</text></svg>";
  return s;
}

std::string histogram_svg(const nlohmann::json& o) {
  const int W = 300, H = 110, pad = 4, plot_h = 80;
  double lo = value_or(o, "min", 0), hi = value_or(o, "max", 1);
  const nlohmann::json clip = get<nlohmann::json>(o, "clip", nlohmann::json::array());
  const double clo = item_or(clip, 0, lo), chi = item_or(clip, 1, hi);
  lo = std::min(lo, clo);
  hi = std::max(hi, chi);
  if (!(hi > lo)) hi = lo + 1;
  auto X = [&](double v) { return pad + (v - lo) / (hi - lo) * (W - 2 * pad); };
  std::string s = "<svg class=\"hist\" width=\"" + std::to_string(W) + "\" height=\"" + std::to_string(H) +
                  "\" xmlns=\"http://www.w3.org/2000/svg\">";
  if (o.contains("hist")) {
    const auto& h = o["hist"];
    const nlohmann::json counts = get<nlohmann::json>(h, "counts", nlohmann::json::array());
    const size_t group = std::max<size_t>(1, (counts.size() + kMaxBins - 1) / kMaxBins);  // bins summed into one bar
    std::vector<double> bars((counts.size() + group - 1) / group, 0.0);
    for (size_t j = 0; j < counts.size(); ++j) bars[j / group] += std::max(0.0, item_or(counts, j, 0.0));
    const double hlo = get<double>(h, "lo", 0.0), w = get<double>(h, "width", 0.0) * static_cast<double>(group);
    double top = 0;
    for (double v : bars) top = std::max(top, v);
    // Square-root heights: the tails a clipping range cuts stay visible beside the peak.
    size_t i = 0;
    for (double v : bars) {
      const double x0 = X(hlo + static_cast<double>(i) * w), x1 = X(hlo + static_cast<double>(i + 1) * w);
      const double bh = top > 0 ? std::sqrt(v / top) * plot_h : 0;
      if (v > 0)
        s += "<rect class=\"hbar\" x=\"" + num(x0, 5) + "\" y=\"" + num(pad + plot_h - bh, 5) + "\" width=\"" +
             num(std::max(0.5, x1 - x0), 4) + "\" height=\"" + num(bh, 5) + "\"/>";
      ++i;
    }
  }
  auto vline = [&](double v, const char* cls, const std::string& what) {
    s += "<line class=\"" + std::string(cls) + "\" x1=\"" + num(X(v), 5) + "\" x2=\"" + num(X(v), 5) + "\" y1=\"" +
         std::to_string(pad) + "\" y2=\"" + std::to_string(pad + plot_h) + "\"><title>" + what + " " + num(v) + "</title></line>";
  };
  vline(value_or(o, "min", lo), "obs", "observed min");
  vline(value_or(o, "max", hi), "obs", "observed max");
  vline(clo, "clip", "clip min");
  vline(chi, "clip", "clip max");
  s += "<text x=\"" + std::to_string(pad) + "\" y=\"" + std::to_string(H - 6) + "\" class=\"small\">" + num(lo) + "</text>";
  s += "<text x=\"" + std::to_string(W - pad) + "\" y=\"" + std::to_string(H - 6) + "\" text-anchor=\"end\" class=\"small\">" +
       num(hi) + "</text></svg>";
  return s;
}

std::string weight_ranges_svg(const nlohmann::json& w) {
  const int W = 300, H = 100, pad = 4;
  const nlohmann::json mn_all = get<nlohmann::json>(w, "min", nlohmann::json::array()),
                       mx_all = get<nlohmann::json>(w, "max", nlohmann::json::array());
  const size_t channels = std::min(mn_all.size(), mx_all.size()), group = std::max<size_t>(1, (channels + kMaxChannels - 1) / kMaxChannels);
  std::vector<double> mn, mx;  // per segment: the channels' range, `group` channels each
  for (size_t c = 0; c < channels; ++c) {
    const double lo = item_or(mn_all, c, 0.0), hi = item_or(mx_all, c, 0.0);
    if (c % group == 0) mn.push_back(lo), mx.push_back(hi);
    mn.back() = std::min(mn.back(), lo);
    mx.back() = std::max(mx.back(), hi);
  }
  const size_t n = mn.size();
  double a = 0;
  for (size_t i = 0; i < n; ++i) a = std::max({a, std::fabs(mn[i]), std::fabs(mx[i])});
  if (!(a > 0) || !std::isfinite(a)) a = 1;
  auto Y = [&](double v) { return H / 2.0 - v / a * (H / 2.0 - pad); };
  std::string s = "<svg class=\"wrange\" width=\"" + std::to_string(W) + "\" height=\"" + std::to_string(H) +
                  "\" xmlns=\"http://www.w3.org/2000/svg\"><line class=\"axis\" x1=\"0\" x2=\"" + std::to_string(W) + "\" y1=\"" +
                  num(Y(0), 5) + "\" y2=\"" + num(Y(0), 5) + "\"/>";
  for (size_t i = 0; i < n; ++i) {
    const double x = pad + (n > 1 ? static_cast<double>(i) / static_cast<double>(n - 1) : 0.5) * (W - 2 * pad);
    const std::string which = group == 1 ? "channel " + std::to_string(i)
                                          : "channels " + std::to_string(i * group) + ".." +
                                                std::to_string(std::min(channels, (i + 1) * group) - 1);
    s += "<line class=\"wch\" x1=\"" + num(x, 5) + "\" x2=\"" + num(x, 5) + "\" y1=\"" + num(Y(mn[i]), 5) + "\" y2=\"" +
         num(Y(mx[i]), 5) + "\"><title>" + which + ": " + num(mn[i]) + " .. " + num(mx[i]) + "</title></line>";
  }
  return s + "<text x=\"" + std::to_string(W - pad) + "\" y=\"12\" text-anchor=\"end\" class=\"small\">&#177;" + num(a) +
         "</text></svg>";
}

std::string line_chart(const std::vector<Series>& series, const std::string& x_label, const std::string& y_label) {
  const int W = 760, H = 240, L = 50, B = 30, T = 10, R = 250;
  double x0 = 1e300, x1 = -1e300, y0 = 1e300, y1 = -1e300;
  for (const auto& s : series)
    for (const auto& p : s.points) {
      x0 = std::min(x0, p.first), x1 = std::max(x1, p.first), y0 = std::min(y0, p.second), y1 = std::max(y1, p.second);
    }
  if (!(x1 > x0)) x1 = x0 + 1;
  if (!(y1 > y0)) y1 = y0 + 1;
  auto X = [&](double v) { return L + (v - x0) / (x1 - x0) * (W - L - R); };
  auto Y = [&](double v) { return T + (1 - (v - y0) / (y1 - y0)) * (H - T - B); };
  std::string s = "<svg class=\"chart lines\" width=\"" + std::to_string(W) + "\" height=\"" + std::to_string(H) +
                  "\" xmlns=\"http://www.w3.org/2000/svg\"><rect class=\"frame\" x=\"" + std::to_string(L) + "\" y=\"" +
                  std::to_string(T) + "\" width=\"" + std::to_string(W - L - R) + "\" height=\"" + std::to_string(H - T - B) +
                  "\"/>";
  s += "<text x=\"" + std::to_string(L - 4) + "\" y=\"" + num(Y(y1) + 4, 4) + "\" text-anchor=\"end\" class=\"small\">" +
       num(y1, 3) + "</text><text x=\"" + std::to_string(L - 4) + "\" y=\"" + num(Y(y0), 4) +
       "\" text-anchor=\"end\" class=\"small\">" + num(y0, 3) + "</text><text x=\"" + std::to_string(L) + "\" y=\"" +
       std::to_string(H - 8) + "\" class=\"small\">" + esc(x_label) + " " + num(x0, 4) + "</text><text x=\"" +
       std::to_string(W - R) + "\" y=\"" + std::to_string(H - 8) + "\" text-anchor=\"end\" class=\"small\">" + num(x1, 5) +
       "</text><text x=\"4\" y=\"" + std::to_string(T + 10) + "\" class=\"small\">" + esc(y_label) + "</text>";
  size_t k = 0;
  for (const auto& ser : series) {
    const std::string colour = kPalette[k % 6];
    std::string pts;
    for (const auto& p : ser.points) pts += num(X(p.first), 5) + "," + num(Y(p.second), 5) + " ";
    if (ser.points.size() == 1)
      s += "<circle cx=\"" + num(X(ser.points[0].first), 5) + "\" cy=\"" + num(Y(ser.points[0].second), 5) +
           "\" r=\"4\" fill=\"" + colour + "\"><title>" + esc(ser.name) + ": " + num(ser.points[0].second) + "</title></circle>";
    else
      s += "<polyline class=\"series\" fill=\"none\" stroke=\"" + colour + "\" stroke-width=\"2\" points=\"" + pts +
           "\"><title>" + esc(ser.name) + "</title></polyline>";
    s += "<text x=\"" + std::to_string(W - R + 8) + "\" y=\"" + std::to_string(T + 14 + 16 * static_cast<int>(k)) + "\" fill=\"" +
         colour + "\">" + esc(ser.name) + "</text>";
    ++k;
  }
  return s + "</svg>";
}

}  // namespace qfx::quant::report
