#include "study/statistics.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "probe/records.h"
#include "study/kit.h"

namespace normlab::study {

namespace {

// ---- Reading the arguments (check_arguments has filled every default) --------------------------------------------

std::string text(const Json& args, const char* name) { return args.at(name).get<std::string>(); }
int integer(const Json& args, const char* name) { return args.at(name).get<int>(); }
double real(const Json& args, const char* name) { return args.at(name).get<double>(); }

// Entry `index` of v, counted from the end when negative (-1: the last); NaN when there is none.
double entry(const std::vector<double>& v, int index) {
  const long long n = static_cast<long long>(v.size()), i = index < 0 ? n + index : index;
  return i >= 0 && i < n ? v[static_cast<size_t>(i)] : NAN;
}

std::string index_text(int index) {
  return index == -1 ? std::string("the last entry")
         : index < 0 ? fmt::format("the entry {} from the end", -index)
                     : fmt::format("entry {}", index);
}

// ---- Training outcomes --------------------------------------------------------------------------------------------

double final_train_loss(const RunOutcome* run, const Json&) { return final_loss_or_unigram(run); }
double final_val_loss(const RunOutcome* run, const Json&) { return val_loss_or_unigram(run); }
double above_trained_line(const RunOutcome* run, const Json&) { return loss_above_trained_line(run); }

// 1 for a run that did not learn (stalled or diverged), 0 for one that did or still does (trained, slow).
double stalled(const RunOutcome* run, const Json&) {
  switch (train_result(run).outcome) {
    case Outcome::trained:
    case Outcome::slow:
      return 0;
    case Outcome::stalled:
    case Outcome::diverged:
      return 1;
    case Outcome::failed:
    case Outcome::missing:
      return NAN;
  }
  return NAN;
}

// 1 for a run that did not learn within its budget (slow, stalled or diverged: above the trained line), 0 for one
// that trained.
double not_trained(const RunOutcome* run, const Json&) {
  const Outcome outcome = train_result(run).outcome;
  if (outcome == Outcome::failed || outcome == Outcome::missing) return NAN;
  return outcome == Outcome::trained ? 0 : 1;
}

// The first logged step at which the mean of three consecutive training-loss logs is below the trained line: the
// updates a run needs to reach the target (Xiong Fig. 5(a) compares these at each placement's own lr). A run that
// never reaches it in its budget, or diverges, counts as one step past the budget, so that two such runs tie.
double steps_to_trained_line(const RunOutcome* run, const Json&) {
  const TrainResult result = train_result(run);
  if (result.outcome == Outcome::failed || result.outcome == Outcome::missing) return NAN;
  const double past_budget = number(run->config["train"], "steps") + 1;
  if (result.outcome == Outcome::diverged) return past_budget;
  const TrainCurve curve = read_train_curve(run->dir / "run");
  const double line = result.unigram - train::kStallMargin;
  for (size_t i = 2; i < curve.loss.size() && i < curve.step.size(); ++i)
    if ((curve.loss[i - 2] + curve.loss[i - 1] + curve.loss[i]) / 3 < line) return curve.step[i];
  return past_budget;
}

// Training tokens (steps × batch × sequence length) ÷ the training's wall time.
double tokens_per_second(const RunOutcome* run, const Json&) {
  if (!run) return NAN;
  const Json& train = run->config["train"];
  return number(train, "steps") * number(train, "batch_size") * number(train, "seq_len") / train_result(run).seconds;
}

std::string final_train_loss_text(const Json&) {
  return "final training loss (mean of the last 3 logs; a diverged run counts as the unigram entropy)";
}
std::string final_val_loss_text(const Json&) {
  return "final validation loss (a diverged run counts as the unigram entropy)";
}
std::string above_trained_line_text(const Json&) {
  return fmt::format("final training loss above the trained line (unigram entropy − {:g} nats)", train::kStallMargin);
}
std::string stalled_text(const Json&) { return "stalled or diverged (1) or not (0), by the stall rule"; }
std::string not_trained_text(const Json&) { return "did not train (1: slow, stalled or diverged) or trained (0)"; }
std::string steps_to_trained_line_text(const Json&) {
  return fmt::format(
      "steps until the training loss (mean of 3 logs) is below the trained line (unigram entropy − {:g} "
      "nats; never: the budget + 1)",
      train::kStallMargin);
}
std::string tokens_per_second_text(const Json&) { return "training tokens per second"; }

// ---- An analysis of a finished probe run (analysis.jsonl) ----------------------------------------------------------

// The column's value at the row of one layer's tensor: layer counted from 0, or from the top when negative (-1: the
// last layer of the stack the probes report).
double analysis_value(const RunOutcome* run, const Json& args) {
  if (!run) return NAN;
  const Json result = run_analysis(run, text(args, "analysis"));
  const int layers = run->config["model"]["n_layers"].get<int>(), layer = integer(args, "layer");
  const std::string want = layer_tensor(run, layer < 0 ? layers + layer : layer, text(args, "tensor"));
  const Json& names = result.is_object() && result.contains(probe::field::name) ? result[probe::field::name] : Json();
  const std::vector<double> values = numbers(result, text(args, "column"));
  for (size_t i = 0; i < names.size() && i < values.size(); ++i)
    if (names[i] == want) return values[i];
  return NAN;
}

std::string analysis_text(const Json& args) {
  const int layer = integer(args, "layer");
  return fmt::format("{} {} of layers.{}.{}", text(args, "analysis"), text(args, "column"),
                     layer < 0 ? (layer == -1 ? std::string("L-1") : fmt::format("L{}", layer)) : std::to_string(layer),
                     text(args, "tensor"));
}

// A scalar result of an analysis of the run (e.g. branch-noise's output_change_var), optionally squared (an RMS's
// square is a mean square).
double analysis_number(const RunOutcome* run, const Json& args) {
  if (!run) return NAN;
  const double v = number(run_analysis(run, text(args, "analysis")), text(args, "column"));
  return text(args, "power") == "squared" ? v * v : v;
}

std::string analysis_number_text(const Json& args) {
  return fmt::format("{} {}{}", text(args, "analysis"), text(args, "column"),
                     text(args, "power") == "squared" ? "²" : "");
}

// An analysis's per-layer column (one entry per layer, as angular and layer-drop give) over the first or the second
// half of the stack, or the second half's share of the two halves' sum (NaN where the column is short).
double analysis_halves(const RunOutcome* run, const Json& args) {
  if (!run) return NAN;
  std::vector<double> v = analysis_column(run, text(args, "analysis"), text(args, "column"));
  v.resize(static_cast<size_t>(run->config["model"]["n_layers"].get<int>()), NAN);
  const auto h = static_cast<std::ptrdiff_t>(v.size() / 2);
  const double first = mean({v.begin(), v.begin() + h}), second = mean({v.begin() + h, v.end()});
  const std::string part = text(args, "part");
  return part == "first_half" ? first : part == "second_half" ? second : second / (first + second);
}

std::string analysis_halves_text(const Json& args) {
  const std::string part = text(args, "part");
  return fmt::format("{} {}, {}", text(args, "analysis"), text(args, "column"),
                     part == "first_half"    ? "mean over the first half of the layers"
                     : part == "second_half" ? "mean over the second half of the layers"
                                             : "the second half's share of the two halves' sum");
}

// An analysis's column with one entry per layer input and the stack's output (stream-init's mean_square: entry l
// enters layer l, entry L leaves the stack), NaN where the column is short.
std::vector<double> layer_profile(const RunOutcome* run, const Json& args) {
  std::vector<double> v = analysis_column(run, text(args, "analysis"), text(args, "column"));
  v.resize(static_cast<size_t>(run->config["model"]["n_layers"].get<int>() + 1), NAN);
  return v;
}

// The profile's least-squares slope against l = 0..L (its growth per layer).
double profile_slope(const RunOutcome* run, const Json& args) {
  if (!run) return NAN;
  const std::vector<double> y = layer_profile(run, args);
  std::vector<double> l(y.size());
  for (size_t i = 0; i < l.size(); ++i) l[i] = static_cast<double>(i);
  return least_squares_slope(l, y);
}

std::string profile_slope_text(const Json& args) {
  return fmt::format("least-squares slope of {} {} against the layer l = 0..L", text(args, "analysis"),
                     text(args, "column"));
}

// How far inside the band [from + low_per_layer·l, from + high_per_layer·l] the least inside layer l = 1..L lies, as
// a fraction of the band's width: min over l of min(x − lower, upper − x) / (upper − lower). Positive when every
// layer is inside, negative when one is outside, NaN when a layer's number is missing.
double band_margin(const RunOutcome* run, const Json& args) {
  if (!run) return NAN;
  const std::vector<double> x = layer_profile(run, args);
  const double from = real(args, "from"), low = real(args, "low_per_layer"), high = real(args, "high_per_layer");
  double margin = INFINITY;
  for (size_t l = 1; l < x.size(); ++l) {
    const double lower = from + low * static_cast<double>(l), upper = from + high * static_cast<double>(l);
    if (std::isnan(x[l])) return NAN;  // std::min would drop it
    margin = std::min(margin, std::min(x[l] - lower, upper - x[l]) / (upper - lower));
  }
  return margin;
}

std::string band_margin_text(const Json& args) {
  return fmt::format(
      "the least inside layer's distance from {} {} to the nearer bound of [{:g} + {:g}·l, {:g} + {:g}·l], l = 1..L, "
      "as "
      "a fraction of the band's width",
      text(args, "analysis"), text(args, "column"), real(args, "from"), real(args, "low_per_layer"), real(args, "from"),
      real(args, "high_per_layer"));
}

// ---- A training probe (probes.jsonl) --------------------------------------------------------------------------------

// The mean of v over the first or second half of layers 1..L (v holds L + 1 entries: entry 0 enters the first layer).
double half_mean(const std::vector<double>& v, bool second) {
  if (v.size() < 3) return NAN;
  const auto h = static_cast<std::ptrdiff_t>(1 + (v.size() - 1) / 2);
  return second ? mean({v.begin() + h, v.end()}) : mean({v.begin() + 1, v.begin() + h});
}

// A record's column: its entries (a scalar field is one entry), only those whose tensor name contains `names` when
// that is not empty.
std::vector<double> column(const Json& record, const Json& args) {
  const std::string field = text(args, "field"), names = text(args, "names");
  std::vector<double> v = numbers(record, field);
  if (v.empty() && record.is_object() && record.contains(field) && record[field].is_number())
    v = {number(record, field)};
  if (names.empty()) return v;
  std::vector<double> kept;
  const Json& name = record.is_object() && record.contains(probe::field::name) ? record[probe::field::name] : Json();
  for (size_t i = 0; i < v.size() && i < name.size(); ++i)
    if (name[i].is_string() && name[i].get<std::string>().find(names) != std::string::npos) kept.push_back(v[i]);
  return kept;
}

// One record's number: an entry of its column, the largest entry (NaN if any is), the mean of its entries, or a half
// of the layers' mean.
double record_value(const Json& record, const Json& args) {
  const std::string over = text(args, "over");
  const std::vector<double> v = column(record, args);
  if (over == "mean") return v.empty() ? NAN : mean(v);
  if (over == "max")
    return v.empty() || std::any_of(v.begin(), v.end(), [](double x) { return std::isnan(x); })
               ? NAN
               : *std::max_element(v.begin(), v.end());
  if (over == "mean_first_half" || over == "mean_second_half") return half_mean(v, over == "mean_second_half");
  return entry(v, integer(args, "entry"));
}

// The probe records of the first quarter of training (step ≤ train.steps / 4): "early in training".
std::vector<Json> first_quarter(std::vector<Json> records, const RunOutcome* run) {
  const double last_step = number(run->config["train"], "steps") / 4.0;
  std::erase_if(records, [&](const Json& j) { return number(j, probe::field::step) > last_step; });
  return records;
}

// The largest record value among the probes in the first quarter of training: how far the model moves early on. NaN
// if there is none, or if one is NaN.
double largest_early(const std::vector<Json>& records, const RunOutcome* run, const Json& args) {
  double largest = NAN;
  for (const Json& record : first_quarter(records, run)) {
    const double v = record_value(record, args);
    if (std::isnan(v)) return NAN;
    largest = std::isnan(largest) ? v : std::max(largest, v);
  }
  return largest;
}

double probe_value(const RunOutcome* run, const Json& args) {
  if (!run) return NAN;
  const std::vector<Json> records = probe_records(run->dir / "run", text(args, "family"));
  if (records.empty()) return NAN;
  const std::string step = text(args, "step");
  const double value = step == "largest_in_first_quarter"
                           ? largest_early(records, run, args)
                           : record_value(step == "last" ? records.back() : records.front(), args);
  return text(args, "relative_to") == "first_probe" ? value / record_value(records.front(), args) : value;
}

std::string probe_text(const Json& args) {
  const std::string over = text(args, "over");
  const std::string names = text(args, "names");
  const std::string where = over == "at"                ? index_text(integer(args, "entry"))
                            : over == "max"             ? std::string("the largest entry")
                            : over == "mean"            ? std::string("the mean of its entries")
                            : over == "mean_first_half" ? std::string("the mean over the first half of the layers")
                                                        : std::string("the mean over the second half of the layers");
  const std::string step = text(args, "step") == "largest_in_first_quarter"
                               ? std::string("the largest over the probes in the first quarter of training")
                               : text(args, "step") + " probe";
  return fmt::format("{} {}{}, {}, {}{}", text(args, "family"), text(args, "field"),
                     names.empty() ? "" : fmt::format(" of the tensors named *{}*", names), where, step,
                     text(args, "relative_to") == "first_probe" ? " ÷ the same at the first probe" : "");
}

// ---- The first layer against the last, early in training (param probes) -------------------------------------------

double first_over_last_layer(const RunOutcome* run, const Json& args) {
  const std::vector<double> each = early_layer_means(run, text(args, "tensor"), text(args, "field"));
  const double ratio = each.empty() ? NAN : each.front() / each.back();
  return text(args, "form") == "abs_log" ? std::abs(std::log(ratio)) : ratio;
}

std::string first_over_last_layer_text(const Json& args) {
  const std::string ratio = fmt::format(
      "first ÷ last layer {} {}, averaged over the probes of the first quarter of "
      "training",
      text(args, "tensor"), text(args, "field"));
  return text(args, "form") == "abs_log" ? fmt::format("|ln({})|", ratio) : ratio;
}

const StatParam kEntryParam{"entry", ParamType::integer,
                            "which entry of the record's column: from 0, or from the end when negative (-1: the last; "
                            "a stream record has L + 1, entry 0 entering the first layer, entry L the stack's output)",
                            "-1"};

const std::vector<Statistic> kStatistics = {
    {"final_train_loss",
     "the final training loss: the mean of the last 3 logged losses, a diverged run counting as "
     "the corpus's unigram entropy (it learned nothing a table of token frequencies does not)",
     "nats",
     {},
     final_train_loss,
     final_train_loss_text},
    {"final_val_loss",
     "the final validation loss, a diverged run counting as the corpus's unigram entropy",
     "nats",
     {},
     final_val_loss,
     final_val_loss_text},
    {"loss_above_trained_line",
     "the final training loss minus the trained line (the unigram entropy less the stall margin): below 0 the run "
     "learned, a stalled run sits just below the margin, a diverged one at the margin exactly",
     "nats",
     {},
     above_trained_line,
     above_trained_line_text},
    {"stalled_or_diverged",
     "1 for a run that stalled or diverged, 0 for one that trained or is still falling (slow), by the stall rule; "
     "summed over seeds it counts the stalled ones",
     "count",
     {},
     stalled,
     stalled_text},
    {"not_trained",
     "1 for a run that did not learn within its budget (slow, stalled or diverged: its final loss above the trained "
     "line), 0 for one that trained; summed over seeds it counts the runs that did not train",
     "count",
     {},
     not_trained,
     not_trained_text},
    {"steps_to_trained_line",
     "the first logged step at which the training loss, averaged over 3 consecutive logs, is below the trained line "
     "(the unigram entropy less the stall margin): the updates the run needs to learn; a run that never gets there in "
     "its budget, or diverges, counts as the budget + 1",
     "steps",
     {},
     steps_to_trained_line,
     steps_to_trained_line_text},
    {"tokens_per_second",
     "training tokens (steps × batch × sequence length) ÷ the training's wall time (summary.json): compare it only "
     "between runs timed alone on one machine (RunRequest::exclusive)",
     "tokens/s",
     {},
     tokens_per_second,
     tokens_per_second_text},
    {"analysis",
     "a column of an analysis of the run (`normlab probe --analysis`), at the row of one layer's tensor",
     "the column's",
     {{"analysis", ParamType::text, "the analysis, as the run was asked for it (e.g. grad-init)"},
      {"tensor", ParamType::text, "the tensor within the layer, e.g. ffn.fc2.weight"},
      {"column", ParamType::text, "the result column", R"("grad_norm")"},
      {"layer", ParamType::integer, "the layer, from 0, or from the top when negative (-1: the last)", "-1"}},
     analysis_value,
     analysis_text},
    {"first_over_last_layer",
     "a parameter probe column (probes.jsonl, param family) of one tensor in the first layer ÷ the same in the last "
     "layer, each averaged over the probes of the first quarter of training (step ≤ train.steps / 4): as a ratio, or "
     "as |ln(ratio)|, the imbalance whichever way it leans",
     "the ratio",
     {{"tensor", ParamType::text, "the tensor within the layer, e.g. ffn.fc2.weight"},
      {"field", ParamType::text, "the column", R"("grad_norm")"},
      {"form", ParamType::text, "the ratio, or the absolute value of its logarithm", R"("ratio")", "ratio|abs_log"}},
     first_over_last_layer,
     first_over_last_layer_text},
    {"analysis_number",
     "a scalar result of an analysis of the run (`normlab probe --analysis`), such as branch-noise's "
     "output_change_var, or its square",
     "the result's",
     {{"analysis", ParamType::text, "the analysis, as the run was asked for it (e.g. branch-noise)"},
      {"column", ParamType::text, "the scalar result, e.g. output_change_var, output_change_rms"},
      {"power", ParamType::text, "the value, or its square (an RMS squared is a mean square)", R"("value")",
       "value|squared"}},
     analysis_number,
     analysis_number_text},
    {"analysis_halves",
     "a per-layer column of an analysis of the run (`normlab probe --analysis`, e.g. angular or layer-drop) averaged "
     "over the first or the second half of the stack, or the second half's share of the two halves' sum",
     "the column's",
     {{"analysis", ParamType::text, "the analysis, as the run was asked for it (e.g. layer-drop)"},
      {"column", ParamType::text, "the per-layer result column, e.g. delta_loss, angular_distance"},
      {"part", ParamType::text, "which half, or the second half's share", "",
       "first_half|second_half|second_half_share"}},
     analysis_halves,
     analysis_halves_text},
    {"profile_slope",
     "the least-squares slope, against the layer l = 0..L, of an analysis's column with one entry per layer input and "
     "the stack's output (e.g. stream-init's mean_square): its growth per layer",
     "the column's per layer",
     {{"analysis", ParamType::text, "the analysis, as the run was asked for it (e.g. stream-init)"},
      {"column", ParamType::text, "the per-layer-input column, e.g. mean_square"}},
     profile_slope,
     profile_slope_text},
    {"band_margin",
     "how far inside a band that widens linearly with depth, [from + low_per_layer·l, from + high_per_layer·l], the "
     "least inside layer l = 1..L of an analysis's per-layer-input column lies, as a fraction of the band's width: "
     "above 0 when every layer is inside",
     "fraction of the band",
     {{"analysis", ParamType::text, "the analysis, as the run was asked for it (e.g. stream-init)"},
      {"column", ParamType::text, "the per-layer-input column, e.g. mean_square"},
      {"from", ParamType::number, "both bounds at l = 0"},
      {"low_per_layer", ParamType::number, "the lower bound's growth per layer"},
      {"high_per_layer", ParamType::number, "the upper bound's growth per layer (above low_per_layer)"}},
     band_margin,
     band_margin_text},
    {"probe",
     "a column of a training probe record (probes.jsonl, docs/probes.md) at the first or last probe, or its largest "
     "early in training: one entry, the largest, the mean, or the mean over half of the layers, optionally of the "
     "tensors whose names contain a text",
     "the column's",
     {{"family", ParamType::text, "the probe family", "", "stream|branch|norm|param|scalar|loss|update|model_update"},
      {"field", ParamType::text, "the column, e.g. mean_square, max_abs, grad_norm"},
      {"step", ParamType::text,
       "which probe record: the first, the last, or the one with the largest value among the probes up to a quarter "
       "of train.steps",
       R"("last")", "first|last|largest_in_first_quarter"},
      kEntryParam,
      {"over", ParamType::text, "one entry (at), the largest, the mean of the entries, or a half of the layers' mean",
       R"("at")", "at|max|mean|mean_first_half|mean_second_half"},
      {"names", ParamType::text,
       "only the entries whose tensor name (the record's name column) contains this text, e.g. post_norm; empty: all",
       R"("")"},
      {"relative_to", ParamType::text,
       "nothing, or the same number at the first probe (the change over training: a ratio to the model at init)",
       R"("nothing")", "nothing|first_probe"}},
     probe_value,
     probe_text},
};

std::vector<std::string> split_choices(std::string_view choices) {
  std::vector<std::string> out;
  for (size_t at = 0; at <= choices.size() && !choices.empty();) {
    const size_t bar = std::min(choices.find('|', at), choices.size());
    out.emplace_back(choices.substr(at, bar - at));
    at = bar + 1;
  }
  return out;
}

// A parameter type's spelling in messages and in `normlab study statistics`.
std::string_view type_name(ParamType type) {
  switch (type) {
    case ParamType::integer:
      return "whole number";
    case ParamType::number:
      return "number";
    case ParamType::text:
      break;
  }
  return "text";
}

bool has_type(const Json& value, ParamType type) {
  switch (type) {
    case ParamType::integer:
      return value.is_number_integer();
    case ParamType::number:
      return value.is_number();
    case ParamType::text:
      break;
  }
  return value.is_string();
}

void check_value(const StatParam& p, const Json& value, std::string_view where) {
  if (!has_type(value, p.type))
    fail("{}.{}: expected a {} ({}), not {}", where, p.name, type_name(p.type), p.meaning, value.dump());
  const std::vector<std::string> choices = split_choices(p.choices);
  if (!choices.empty() && std::find(choices.begin(), choices.end(), value.get<std::string>()) == choices.end())
    fail("{}.{}: \"{}\" is not one of {}", where, p.name, value.get<std::string>(), fmt::join(choices, ", "));
}

}  // namespace

std::span<const Statistic> all_statistics() { return kStatistics; }

const Statistic& find_statistic(std::string_view name, std::string_view where) {
  std::vector<std::string_view> names;
  for (const Statistic& s : kStatistics) {
    if (s.name == name) return s;
    names.push_back(s.name);
  }
  fail("{}: \"{}\" is not a statistic (known: {}; `normlab study statistics` describes each)", where, name,
       fmt::join(names, ", "));
}

Json check_arguments(const Statistic& statistic, const Json& args, std::string_view where) {
  if (!args.is_null() && !args.is_object())
    fail("{}: expected an object of {}'s parameters, not {}", where, statistic.name, args.dump());
  Json checked = Json::object();
  for (const StatParam& p : statistic.params) {
    if (args.is_object() && args.contains(p.name)) {
      check_value(p, args[std::string(p.name)], where);
      checked[std::string(p.name)] = args[std::string(p.name)];
    } else if (!p.fallback.empty()) {
      checked[std::string(p.name)] = Json::parse(p.fallback);
    } else {
      fail("{}.{}: missing ({} of statistic {})", where, p.name, p.meaning, statistic.name);
    }
  }
  if (args.is_object())
    for (const auto& [key, value] : args.items())
      if (!checked.contains(key)) {
        std::vector<std::string_view> known;
        for (const StatParam& p : statistic.params) known.push_back(p.name);
        fail("{}.{}: statistic {} has no such parameter ({})", where, key, statistic.name,
             known.empty() ? std::string("it takes none") : fmt::format("its parameters: {}", fmt::join(known, ", ")));
      }
  return checked;
}

std::string statistics_help() {
  std::string out = "Statistics a sub-claim can read from a run (claim files: docs/studies.md, \"Your own claim\"):\n";
  for (const Statistic& s : kStatistics) {
    out += fmt::format("\n  {} ({})\n      {}\n", s.name, s.unit, s.meaning);
    for (const StatParam& p : s.params)
      out += fmt::format("      {}: {}, {}{}{}\n", p.name, type_name(p.type), p.meaning,
                         p.choices.empty() ? "" : fmt::format(" ({})", p.choices),
                         p.fallback.empty() ? std::string(", required") : fmt::format(", default {}", p.fallback));
  }
  return out;
}

std::vector<double> early_layer_means(const RunOutcome* run, const std::string& tensor, const std::string& field) {
  if (!run) return {};
  const auto layers = static_cast<size_t>(run->config["model"]["n_layers"].get<int>());
  std::vector<std::string> wanted;  // each layer's tensor name
  for (size_t l = 0; l < layers; ++l) wanted.push_back(layer_tensor(run, static_cast<int>(l), tensor));
  const std::vector<Json> records = first_quarter(probe_records(run->dir / "run", probe::family::param), run);
  std::vector<double> sum(layers, records.empty() ? NAN : 0.0);
  for (const Json& record : records) {
    const std::vector<double> v = numbers(record, field);
    const Json& name = record.is_object() && record.contains(probe::field::name) ? record[probe::field::name] : Json();
    for (size_t l = 0; l < layers; ++l) {
      double found = NAN;
      for (size_t i = 0; i < v.size() && i < name.size(); ++i)
        if (name[i] == wanted[l]) found = v[i];
      sum[l] += found / static_cast<double>(records.size());
    }
  }
  return sum;
}

}  // namespace normlab::study
